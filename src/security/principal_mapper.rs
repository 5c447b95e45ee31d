//! `ssl.principal.mapping.rules`: how a client certificate's subject (RFC
//! 2253, `principal`) becomes the principal's name, as Kafka's
//! `SslPrincipalMapper` does it.
//!
//! Rules, comma separated, tried in order; the first that applies names the
//! principal:
//! * `DEFAULT`: the subject unchanged.
//! * `RULE:<pattern>/<replacement>/[L|U]`: when the pattern matches the
//!   whole subject, the name is the subject with every match of the pattern
//!   replaced (`$1`... are its groups; Kafka's rule for a `$N` above the
//!   group count applies: digits are dropped from the right until it names a
//!   group, else it stays literal), then lower- (`L`) or upper-cased (`U`).
//!   `\/` and `\\` escape inside pattern and replacement.
//! * When no rule applies the connection gets no principal: Kafka fails the
//!   authentication, sediment closes the connection.
//!
//! Patterns are Java regular expressions in Kafka; here they are compiled by
//! the `regex` crate, so a pattern using what it lacks (back-references,
//! look-around) is refused when the config is checked, naming the rule.

use std::fmt;

use regex::Regex;

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        /// The pattern anchored at both ends: Java's `Matcher.matches()`.
        whole: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// The parsed rules of one listener.
#[derive(Debug, Clone)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

impl Default for SslPrincipalMapper {
    fn default() -> Self {
        Self { rules: vec![Rule::Default] }
    }
}

impl fmt::Display for SslPrincipalMapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules: Vec<String> = self
            .rules
            .iter()
            .map(|r| match r {
                Rule::Default => "DEFAULT".to_string(),
                Rule::Replace { pattern, .. } => format!("RULE:{}", pattern.as_str()),
            })
            .collect();
        f.write_str(&rules.join(", "))
    }
}

/// Split `text` at unescaped `/` (a backslash escapes the next character,
/// which is kept with its backslash for the regex and unescaped later for
/// the replacement).
fn split_slashes(text: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let last = parts.last_mut().expect("one part");
                last.push('\\');
                if let Some(next) = chars.next() {
                    last.push(next);
                }
            }
            '/' => parts.push(String::new()),
            c => parts.last_mut().expect("one part").push(c),
        }
    }
    parts
}

/// Split the rule list at the commas between rules (a comma inside a
/// `RULE:` pattern or replacement belongs to it: a rule ends after its third
/// unescaped `/` and the optional case letter).
fn split_rules(text: &str) -> Result<Vec<String>, String> {
    let mut rules = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("RULE:") {
            let mut slashes = 0;
            let mut escaped = false;
            let mut end = None;
            for (i, c) in after.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '/' => {
                        slashes += 1;
                        if slashes == 2 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let end = end.ok_or_else(|| format!("Invalid rule: {rest}"))?;
            let mut end = "RULE:".len() + end;
            if rest[end..].starts_with(['L', 'U']) {
                end += 1;
            }
            rules.push(rest[..end].to_string());
            rest = rest[end..].trim_start();
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            rules.push(rest[..end].trim().to_string());
            rest = &rest[end..];
        }
        match rest.strip_prefix(',') {
            Some(r) => rest = r.trim_start(),
            None if rest.is_empty() => {}
            None => return Err(format!("Invalid rule: unmatched substring: `{rest}`")),
        }
    }
    Ok(rules)
}

/// A Java replacement string (`$N`, `\x`) as the `regex` crate writes it.
fn replacement(java: &str, groups: usize) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(next) => out.push(next),
                None => return Err("replacement ends with a backslash".into()),
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    digits.push(d);
                    chars.next();
                }
                if digits.is_empty() {
                    return Err(format!("illegal group reference in {java:?}"));
                }
                // Kafka's rule: $123 with 12 groups is $12 then a literal 3.
                let mut n = digits.clone();
                while n.len() > 1 && n.parse::<usize>().map_or(true, |v| v > groups) {
                    n.pop();
                }
                if n.parse::<usize>().map_or(true, |v| v > groups) || groups == 0 {
                    out.push_str("$$");
                    out.push_str(&digits);
                } else {
                    out.push_str(&format!("${{{n}}}"));
                    out.push_str(&digits[n.len()..]);
                }
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Drop the backslashes that escaped `/` in a pattern (the regex does not need them).
fn unescape_slashes(pattern: &str) -> String {
    pattern.replace("\\/", "/")
}

fn parse_rule(rule: &str) -> Result<Option<Rule>, String> {
    if rule.is_empty() {
        return Ok(None);
    }
    if rule == "DEFAULT" {
        return Ok(Some(Rule::Default));
    }
    let body = rule.strip_prefix("RULE:").ok_or_else(|| format!("Invalid rule: {rule}"))?;
    let parts = split_slashes(body);
    let [pattern, repl, flags] = parts.as_slice() else {
        return Err(format!("Invalid rule: {rule}"));
    };
    let case = match flags.as_str() {
        "" => Case::Keep,
        "L" => Case::Lower,
        "U" => Case::Upper,
        other => return Err(format!("Invalid rule: `{rule}`, unmatched substring: `{other}`")),
    };
    let text = unescape_slashes(pattern);
    let compile = |p: &str| {
        Regex::new(p).map_err(|e| format!("rule {rule:?}: the pattern does not compile: {e}"))
    };
    let (pattern, whole) = (compile(&text)?, compile(&format!("^(?:{text})$"))?);
    let replacement = replacement(repl, pattern.captures_len() - 1)?;
    Ok(Some(Rule::Replace { pattern, whole, replacement, case }))
}

impl SslPrincipalMapper {
    /// Parse `ssl.principal.mapping.rules`.
    ///
    /// # Errors
    /// A rule that does not parse or whose pattern does not compile.
    pub fn from_rules(text: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        for r in split_rules(text)? {
            rules.extend(parse_rule(&r)?);
        }
        Ok(Self { rules })
    }

    /// The principal name of the subject `dn`, or `None` when no rule applies.
    pub fn name(&self, dn: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(dn.to_string()),
            Rule::Replace { pattern, whole, replacement, case } => {
                if !whole.is_match(dn) {
                    return None;
                }
                let name = pattern.replace_all(dn, replacement.as_str()).into_owned();
                Some(match case {
                    Case::Keep => name,
                    Case::Lower => name.to_lowercase(),
                    Case::Upper => name.to_uppercase(),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(rules: &str, dn: &str) -> Option<String> {
        SslPrincipalMapper::from_rules(rules).expect("rules").name(dn)
    }

    #[test]
    fn kafka_documentation_examples() {
        // The examples of Kafka's security documentation and its mapper tests.
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT";
        assert_eq!(
            map(rules, "CN=kafka-server1,OU=ServiceUsers,O=Org,C=US").as_deref(),
            Some("kafka-server1")
        );
        assert_eq!(
            map(rules, "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US")
                .as_deref(),
            Some("duke@javasoft")
        );
        assert_eq!(map(rules, "cn=Duke,o=Sun Microsystems").as_deref(), Some("duke"));
        assert_eq!(map(rules, "O=Sun,L=x").as_deref(), Some("O=Sun,L=x"));
        assert_eq!(
            map("RULE:^CN=(.*?),OU=(.*?)$/$1/U", "CN=alice,OU=eng").as_deref(),
            Some("ALICE")
        );
        // No DEFAULT and nothing matches: no principal.
        assert_eq!(map("RULE:^CN=(.*)$/$1/", "OU=x"), None);
        assert_eq!(map("DEFAULT", "CN=a,O=b").as_deref(), Some("CN=a,O=b"));
        // Java's matches() (the whole subject) decides; replaceAll() then
        // works match by match: lazy groups leave the tail in place.
        assert_eq!(map("RULE:CN=(.*?),OU=(.*?)/$1/", "CN=a,OU=b").as_deref(), Some("ab"));
    }

    #[test]
    fn escapes_commas_and_group_numbers() {
        // An escaped slash in the pattern, a comma inside a rule.
        assert_eq!(
            map(r"RULE:^CN=([^\/]*)\/x,O=(.*)$/$2-$1/", "CN=a/x,O=b").as_deref(),
            Some("b-a")
        );
        // $12 with one group: group 1 then a literal 2; $3 with one group stays literal.
        assert_eq!(map("RULE:^CN=(.*)$/$12/", "CN=a").as_deref(), Some("a2"));
        assert_eq!(map("RULE:^CN=(.*)$/$3x/", "CN=a").as_deref(), Some("$3x"));
        assert_eq!(map(r"RULE:^CN=(.*)$/\$1/", "CN=a").as_deref(), Some("$1"));
        let spaced = SslPrincipalMapper::from_rules(" RULE:^CN=(.*)$/$1/L , DEFAULT ").expect("ok");
        assert_eq!(spaced.name("CN=Bob").as_deref(), Some("bob"));
        assert_eq!(spaced.name("O=x").as_deref(), Some("O=x"));
    }

    #[test]
    fn bad_rules_are_refused() {
        for bad in [
            "RULE:^CN=(.*)$/$1",
            "RULE:^CN=(.*)$/$1/X",
            "NOPE",
            "RULE:(a)\\1/x/",
            "RULE:(?<=a)b/x/",
            "RULE:a/$x/",
        ] {
            assert!(SslPrincipalMapper::from_rules(bad).is_err(), "{bad}");
        }
    }
}
