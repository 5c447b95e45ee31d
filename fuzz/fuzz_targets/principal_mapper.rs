//! Any text as `ssl.principal.mapping.rules` and any subject DN: the rules
//! parse or are refused with a message, never a panic; parsed rules map
//! every DN to a name or to none, never panicking; `DEFAULT` (the rules'
//! default) maps a DN to itself, and rules that end in `DEFAULT` always
//! give a name. Any bytes as a client certificate give a subject (RFC 2253,
//! what the rules are applied to) or none.
//!
//! Input: the rules (a part), then the DN; the DN's bytes are also read as
//! a DER certificate.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sediment::security::principal::subject_of;
use sediment::security::principal_mapper::SslPrincipalMapper;

fuzz_target!(|data: &[u8]| {
    let mut f = common::Fields(data);
    let rules = String::from_utf8_lossy(f.part(4096)).into_owned();
    let rest = f.rest();
    let dn = String::from_utf8_lossy(rest).into_owned();
    assert_eq!(SslPrincipalMapper::default().name(&dn).as_deref(), Some(dn.as_str()));
    if let Ok(mapper) = SslPrincipalMapper::from_rules(&rules) {
        let name = mapper.name(&dn);
        let _ = mapper.to_string();
        if rules.trim_end().ends_with(",DEFAULT") || rules.trim() == "DEFAULT" {
            assert!(name.is_some(), "{rules:?} gave {dn:?} no name");
        }
        if let Some(subject) = subject_of(rest) {
            let _ = mapper.name(&subject);
        }
    } else if let Some(subject) = subject_of(rest) {
        let _ = SslPrincipalMapper::default().name(&subject);
    }
});
