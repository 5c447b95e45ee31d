//! What a key store reload may change, and how a store file is recognised as
//! changed.
//!
//! Kafka's rule (`SslFactory`, `CertificateEntries.ensureCompatible`): the
//! new server certificate must have the same subject DN as the one served,
//! unless `ssl.allow.dn.changes=true`, and the same set of subject
//! alternative names, unless `ssl.allow.san.changes=true` (both default to
//! false). The DN is compared in its RFC 2253 form (`principal::rfc2253`),
//! the SANs as a set. A trust store change has no such rule.
//!
//! A store file is identified by its modification time, size and SHA-256:
//! a rename over it, a rewrite in place and a `touch` all show, and a read
//! that raced a writer shows again at the next poll. Files are read only up
//! to [`MAX_STORE_BYTES`]; a bigger one is an error, not an allocation.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::time::SystemTime;

use x509_parser::prelude::{FromDer, X509Certificate};

/// The largest key or trust store file read (a PEM chain or CA bundle is a
/// few KiB; a system CA bundle about 200 KiB).
pub const MAX_STORE_BYTES: u64 = 4 << 20;

/// The fields of a served certificate a reload compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertIdentity {
    /// RFC 2253, as Java's `X500Principal.getName()`.
    pub subject: String,
    pub sans: BTreeSet<String>,
    /// Unix seconds.
    pub not_after: i64,
}

/// The identity of a DER certificate.
///
/// # Errors
/// A certificate that does not parse, or a malformed SAN extension.
pub fn identity(cert_der: &[u8]) -> Result<CertIdentity, String> {
    let (_, cert) = X509Certificate::from_der(cert_der).map_err(|e| format!("certificate: {e}"))?;
    let sans = match cert.subject_alternative_name() {
        Ok(Some(ext)) => ext.value.general_names.iter().map(|n| n.to_string()).collect(),
        Ok(None) => BTreeSet::new(),
        Err(e) => return Err(format!("subject alternative names: {e}")),
    };
    Ok(CertIdentity {
        subject: super::principal::rfc2253(cert.subject()),
        sans,
        not_after: cert.validity().not_after.timestamp(),
    })
}

/// Kafka's compatibility rule for a new key store certificate.
///
/// # Errors
/// Which field changed, old and new (public certificate fields only).
pub fn ensure_compatible(
    old: &CertIdentity,
    new: &CertIdentity,
    allow_dn_changes: bool,
    allow_san_changes: bool,
) -> Result<(), String> {
    if !allow_dn_changes && old.subject != new.subject {
        return Err(format!(
            "the subject DN changed from {:?} to {:?} (set ssl.allow.dn.changes=true to allow it)",
            old.subject, new.subject
        ));
    }
    if !allow_san_changes && old.sans != new.sans {
        return Err(format!(
            "the subject alternative names changed from {:?} to {:?} (set ssl.allow.san.changes=true to allow it)",
            old.sans, new.sans
        ));
    }
    Ok(())
}

/// A store file as last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    modified: Option<SystemTime>,
    size: u64,
    sha256: Vec<u8>,
}

/// Stamp the file at `path`.
///
/// # Errors
/// The file cannot be read, or is bigger than [`MAX_STORE_BYTES`].
pub fn stamp(path: &Path) -> std::io::Result<FileStamp> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.len() > MAX_STORE_BYTES {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than the {MAX_STORE_BYTES} a key or trust store may have",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // A writer may grow the file meanwhile: never read past the bound.
    file.take(MAX_STORE_BYTES + 1).read_to_end(&mut bytes)?;
    let sha256 = ring::digest::digest(&ring::digest::SHA256, &bytes).as_ref().to_vec();
    Ok(FileStamp { modified: meta.modified().ok(), size: bytes.len() as u64, sha256 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(subject: &str, sans: &[&str]) -> CertIdentity {
        let sans = sans.iter().map(|s| s.to_string()).collect();
        CertIdentity { subject: subject.into(), sans, not_after: 0 }
    }

    #[test]
    fn dn_and_san_changes_need_their_allow_keys() {
        let old = ident("CN=broker", &["DNSName(localhost)"]);
        let same = ident("CN=broker", &["DNSName(localhost)"]);
        assert!(ensure_compatible(&old, &same, false, false).is_ok());
        let dn = ident("CN=other", &["DNSName(localhost)"]);
        let e = ensure_compatible(&old, &dn, false, false).unwrap_err();
        assert!(e.contains("ssl.allow.dn.changes"), "{e}");
        assert!(ensure_compatible(&old, &dn, true, false).is_ok());
        let san = ident("CN=broker", &["DNSName(localhost)", "IPAddress(127.0.0.1)"]);
        let e = ensure_compatible(&old, &san, true, false).unwrap_err();
        assert!(e.contains("ssl.allow.san.changes"), "{e}");
        assert!(ensure_compatible(&old, &san, false, true).is_ok());
    }

    #[test]
    fn a_stamp_changes_with_the_content_and_refuses_huge_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("store.pem");
        std::fs::write(&p, b"one").unwrap();
        let a = stamp(&p).unwrap();
        assert_eq!(a, stamp(&p).unwrap());
        std::fs::write(&p, b"two").unwrap();
        assert_ne!(a.sha256, stamp(&p).unwrap().sha256);
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(MAX_STORE_BYTES + 1).unwrap();
        assert!(stamp(&p).is_err());
        assert!(stamp(&dir.path().join("missing")).is_err());
    }
}
