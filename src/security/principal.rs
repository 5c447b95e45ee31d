//! The principal of a TLS client: its certificate's subject as Java's
//! `X500Principal.getName()` writes it (RFC 2253), which is what Kafka's
//! `DefaultKafkaPrincipalBuilder` names `User:<DN>` with the DEFAULT
//! `ssl.principal.mapping.rules`, so ACLs written for Kafka match here.
//!
//! RFC 2253 form: the RDNs last to first, joined by `,`; the attributes of a
//! multi-valued RDN joined by `+`; the RFC's keywords (CN, C, L, ST, O, OU,
//! STREET, DC, UID) for their OIDs with the value as a string, escaped
//! (`,+"\<>;` with a backslash, a leading `#` or space and a trailing space
//! too); any other attribute as its dotted OID, `=#` and the hex of the
//! value's DER encoding.

use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::{AttributeTypeAndValue, X509Name};

/// The RFC 2253 keywords Java emits, by OID.
const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The RFC 2253 subject of a DER certificate; `None` when it does not parse
/// (the TLS library accepted it, so this does not happen for a verified chain).
pub fn subject_of(cert_der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(cert_der).ok()?;
    Some(rfc2253(cert.subject()))
}

/// Format a name as Java's `X500Principal.getName()` does.
pub fn rfc2253(name: &X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter_rdn()
        .map(|rdn| rdn.iter().map(attribute).collect::<Vec<_>>().join("+"))
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

fn attribute(atv: &AttributeTypeAndValue<'_>) -> String {
    let oid = atv.attr_type().to_id_string();
    let keyword = KEYWORDS.iter().find(|(o, _)| *o == oid).map(|(_, k)| *k);
    match (keyword, atv.as_str()) {
        (Some(k), Ok(value)) => format!("{k}={}", escape(value)),
        (k, _) => format!("{}=#{}", k.unwrap_or(&oid), hex_der(atv)),
    }
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Hex of the value's DER encoding: its tag, length and content.
fn hex_der(atv: &AttributeTypeAndValue<'_>) -> String {
    let value = atv.attr_value();
    let data: &[u8] = value.data;
    let tag = value.tag().0;
    let class = value.class() as u8;
    let constructed = u8::from(value.header.is_constructed());
    let mut der = Vec::with_capacity(data.len() + 6);
    // Attribute values are low-numbered tags: one identifier byte.
    der.push((class << 6) | (constructed << 5) | (tag.min(30) as u8));
    let len = data.len();
    if len < 0x80 {
        der.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        der.push(0x80 | (bytes.len() - skip) as u8);
        der.extend_from_slice(&bytes[skip..]);
    }
    der.extend_from_slice(data);
    der.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_rfc_2253() {
        assert_eq!(escape("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape("#x "), "\\#x\\ ");
        assert_eq!(escape(" lead"), "\\ lead");
        assert_eq!(escape("q\"<>;\\"), "q\\\"\\<\\>\\;\\\\");
        assert_eq!(escape("plain"), "plain");
    }
}
