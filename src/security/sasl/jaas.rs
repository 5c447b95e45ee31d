//! Kafka's JAAS configuration text, as given in `sasl.jaas.config` keys
//! (Kafka's `JaasConfig`):
//!
//! ```text
//! <login module class> <flag> <key>=<value> ... ;   (one or more entries)
//! ```
//!
//! Words are letters, digits and `.` `_` `-` `$`; a value is a word or a
//! double-quoted string in which a backslash takes the next character
//! literally (`\n`, `\t`, `\r` are the control characters); `//` and `/* */`
//! comments are skipped; the flag is `required`, `requisite`, `sufficient` or
//! `optional` in any case. Every entry ends with `;`.
//!
//! The parser returns errors that never quote a value: the text holds
//! passwords.

use std::collections::BTreeMap;

/// One login module entry.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Option values are secrets; show only the keys.
        f.debug_struct("JaasEntry")
            .field("login_module", &self.login_module)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Eq,
    Semi,
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '$')
}

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '=' => out.push(Token::Eq),
            ';' => out.push(Token::Semi),
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                loop {
                    match chars.next() {
                        Some('/') if prev == '*' => break,
                        Some(c) => prev = c,
                        None => return Err("unterminated /* comment".into()),
                    }
                }
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some('r') => s.push('\r'),
                            Some(c) => s.push(c),
                            None => return Err("unterminated quoted value".into()),
                        },
                        Some(c) => s.push(c),
                        None => return Err("unterminated quoted value".into()),
                    }
                }
                out.push(Token::Quoted(s));
            }
            c if is_word(c) => {
                let mut s = String::from(c);
                while let Some(&c) = chars.peek() {
                    if !is_word(c) {
                        break;
                    }
                    s.push(c);
                    chars.next();
                }
                out.push(Token::Word(s));
            }
            other => return Err(format!("unexpected character {other:?}")),
        }
    }
    Ok(out)
}

/// Parse a JAAS configuration into its entries.
///
/// # Errors
/// A message naming what is wrong (never a value).
pub fn parse(text: &str) -> Result<Vec<JaasEntry>, String> {
    let mut toks = tokens(text)?.into_iter().peekable();
    let mut entries = Vec::new();
    while let Some(t) = toks.next() {
        let Token::Word(login_module) = t else {
            return Err("an entry starts with a login module class name".into());
        };
        match toks.next() {
            Some(Token::Word(flag))
                if ["required", "requisite", "sufficient", "optional"]
                    .iter()
                    .any(|f| f.eq_ignore_ascii_case(&flag)) => {}
            _ => {
                return Err(format!(
                    "{login_module}: the control flag (required, requisite, sufficient or optional) is missing"
                ))
            }
        }
        let mut options = BTreeMap::new();
        loop {
            match toks.next() {
                Some(Token::Semi) => break,
                Some(Token::Word(key)) => {
                    if toks.next() != Some(Token::Eq) {
                        return Err(format!("{login_module}: option {key} has no '='"));
                    }
                    let value = match toks.next() {
                        Some(Token::Word(v) | Token::Quoted(v)) => v,
                        _ => return Err(format!("{login_module}: option {key} has no value")),
                    };
                    options.insert(key, value);
                }
                Some(_) => return Err(format!("{login_module}: expected an option name")),
                None => return Err(format!("{login_module}: the entry does not end with ';'")),
            }
        }
        entries.push(JaasEntry { login_module, options });
    }
    if entries.is_empty() {
        return Err("no login module entry".into());
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_plain_form_parses() {
        let text = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="admin-secret"
            user_admin="admin-secret" /* the admin */ user_alice="a \"quoted\" \\ pass;word"
            // trailing comment
            user_bob=plainword;"#;
        let e = parse(text).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].login_module, "org.apache.kafka.common.security.plain.PlainLoginModule");
        assert_eq!(e[0].options["user_alice"], "a \"quoted\" \\ pass;word");
        assert_eq!(e[0].options["user_bob"], "plainword");
        assert_eq!(e[0].options.len(), 5);
        let two = parse("a.B REQUIRED k=\"v\"; c.D optional;").unwrap();
        assert_eq!(two.len(), 2);
        assert!(two[1].options.is_empty());
        assert!(!format!("{e:?}").contains("secret"));
    }

    #[test]
    fn malformed_text_is_refused_without_quoting_values() {
        for bad in [
            "",
            "m.M required user_a=\"secret1\"",
            "m.M user_a=\"secret2\";",
            "m.M required user_a \"secret3\";",
            "m.M required user_a=;",
            "m.M required user_a=\"secret4;",
            "m.M required /* secret5",
            "m.M required user_a=\"x\" # ;",
            "\"secret6\" required;",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(!err.contains("secret"), "{bad}: {err}");
        }
    }
}
