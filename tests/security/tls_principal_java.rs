//! The principal of an mTLS client must be the string Kafka would build, or
//! ACLs written for Kafka would not match: certificates with awkward subjects
//! (characters RFC 2253 escapes, leading and trailing spaces, non-ASCII,
//! DC and UID keywords, attributes Java prints as an OID with the hex of
//! their DER value) are named by `security::principal` exactly as Java's
//! `X500Principal.getName()` names them (tests/java/X500Names.java, run with
//! Kafka 4.1.2's JVM setup).

use crate::broker::{kafka_tool_output, repo_root};
use rcgen::{CertificateParams, DistinguishedName, DnType, DnValue, KeyPair};

fn custom(oid: &[u64]) -> DnType {
    DnType::CustomDnType(oid.to_vec())
}

fn ia5(s: &str) -> DnValue {
    DnValue::Ia5String(s.try_into().unwrap())
}

fn printable(s: &str) -> DnValue {
    DnValue::PrintableString(s.try_into().unwrap())
}

#[test]
fn subjects_are_named_as_java_names_them() {
    let subjects: Vec<Vec<(DnType, DnValue)>> = vec![
        vec![
            (DnType::CountryName, "DE".into()),
            (DnType::OrganizationName, "Acme, Inc.".into()),
            (DnType::CommonName, "alice".into()),
        ],
        vec![
            (DnType::OrganizationalUnitName, "a+b;c<d>e\"f\\g".into()),
            (DnType::CommonName, "#hash ".into()),
        ],
        vec![
            (DnType::StateOrProvinceName, "Bayern".into()),
            (DnType::LocalityName, "Zürich".into()),
            (DnType::CommonName, " lead".into()),
        ],
        vec![
            (custom(&[0, 9, 2342, 19200300, 100, 1, 25]), ia5("example")),
            (custom(&[0, 9, 2342, 19200300, 100, 1, 1]), "u1".into()),
            (DnType::CommonName, "x".into()),
        ],
        vec![
            (custom(&[1, 2, 840, 113549, 1, 9, 1]), ia5("a@b.example")),
            (custom(&[2, 5, 4, 5]), printable("1234")),
            (DnType::CommonName, "svc".into()),
        ],
        vec![
            (custom(&[2, 5, 4, 9]), "Main St 1".into()),
            (custom(&[2, 5, 4, 12]), "boss".into()),
            (DnType::CommonName, printable("y")),
        ],
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut ours = Vec::new();
    for (i, dn) in subjects.into_iter().enumerate() {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        for (t, v) in dn {
            params.distinguished_name.push(t, v);
        }
        let cert = params.self_signed(&KeyPair::generate().unwrap()).unwrap();
        let path = dir.path().join(format!("s{i}.pem"));
        std::fs::write(&path, cert.pem()).unwrap();
        files.push(path.display().to_string());
        ours.push(sediment::security::principal::subject_of(cert.der()).expect("parses"));
    }
    let program = repo_root().join("tests/java/X500Names.java").display().to_string();
    let mut args = vec![program.as_str()];
    args.extend(files.iter().map(String::as_str));
    let (ok, stdout, stderr) = kafka_tool_output(args[0], &args[1..], None);
    assert!(ok, "{stderr}");
    let java: Vec<&str> = stdout.lines().collect();
    assert_eq!(java.len(), ours.len(), "{stdout}");
    for (j, o) in java.iter().zip(&ours) {
        assert_eq!(o, j, "sediment's name (left) differs from Java's (right)");
    }
}
