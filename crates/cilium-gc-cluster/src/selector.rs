//! Kubernetes label selectors (`-l`), parsed once and matched client-side.
//!
//! We match client-side rather than sending `labelSelector` to the server so
//! that every identity is scanned and the report can count the ones the
//! selector filtered out (and `--max-percent` is a share of all of them).

use std::collections::BTreeMap;
use std::fmt;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector: every requirement must hold. Two selectors are
/// equal when their requirements are, however they were spelled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// A selector that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {problem}")]
pub struct SelectorError {
    selector: String,
    problem: String,
}

/// The canonical form, rendered from the parsed requirements (as kubectl's
/// `labels.Selector.String()`): `a==b` prints as `a=b`, spaces go. Parsing
/// it again gives an equal selector.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Requirement::Equals(k, v) => write!(f, "{k}={v}")?,
                Requirement::NotEquals(k, v) => write!(f, "{k}!={v}")?,
                Requirement::In(k, vs) => write!(f, "{k} in ({})", vs.join(","))?,
                Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(","))?,
                Requirement::Exists(k) => write!(f, "{k}")?,
                Requirement::DoesNotExist(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

/// Split on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Selector {
    /// Parse the kubectl `-l` syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
    /// `a notin (x)`, `a`, `!a`, joined by commas.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let err = |problem: &str| SelectorError {
            selector: s.to_owned(),
            problem: problem.to_owned(),
        };
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(Selector::default());
        }
        for term in split_terms(s) {
            let t = term.trim();
            if t.is_empty() {
                return Err(err("empty requirement"));
            }
            let req = if let Some(key) = t.strip_prefix('!') {
                Requirement::DoesNotExist(key.trim().to_owned())
            } else if let Some((k, v)) = t.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once("==") {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once('=') {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = split_set_op(t, " notin ") {
                Requirement::NotIn(k, parse_set(rest).ok_or_else(|| err("bad value set"))?)
            } else if let Some((k, rest)) = split_set_op(t, " in ") {
                Requirement::In(k, parse_set(rest).ok_or_else(|| err("bad value set"))?)
            } else {
                Requirement::Exists(t.to_owned())
            };
            let (key, values): (&str, Vec<&str>) = match &req {
                Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => (k, vec![v.as_str()]),
                Requirement::In(k, vs) | Requirement::NotIn(k, vs) => {
                    (k, vs.iter().map(String::as_str).collect())
                }
                Requirement::Exists(k) | Requirement::DoesNotExist(k) => (k, vec![]),
            };
            if !valid_key(key) {
                return Err(err(&format!("invalid key {key:?}")));
            }
            if let Some(v) = values.iter().find(|v| !valid_value(v)) {
                return Err(err(&format!("invalid value {v:?}")));
            }
            requirements.push(req);
        }
        Ok(Selector { requirements })
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

fn split_set_op(t: &str, op: &str) -> Option<(String, String)> {
    let (k, rest) = t.split_once(op)?;
    Some((k.trim().to_owned(), rest.trim().to_owned()))
}

fn parse_set(s: String) -> Option<Vec<String>> {
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    let vals: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
    (!vals.is_empty()).then_some(vals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn matches_like_kubectl() {
        let l = labels(&[("app", "web"), ("io.kubernetes.pod.namespace", "prod")]);
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web,db)", true),
            ("app notin (web)", false),
            ("tier notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!tier", true),
            ("app=web,io.kubernetes.pod.namespace=prod", true),
            ("app=web,io.kubernetes.pod.namespace=dev", false),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(Selector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn renders_canonically_and_parses_back_equal() {
        let sel = Selector::parse(" a==b , c notin ( x, y ),!d,e in (z),f!=g,h").unwrap();
        assert_eq!(sel.to_string(), "a=b,c notin (x,y),!d,e in (z),f!=g,h");
        assert_eq!(Selector::parse(&sel.to_string()).unwrap(), sel);
        assert_ne!(
            Selector::parse("a=b").unwrap(),
            Selector::parse("a!=b").unwrap()
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["a=b,", "a in x", "a=(b", "=b", "a b"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }
}
