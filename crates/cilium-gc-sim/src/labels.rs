//! Label selectors as the API server evaluates `?labelSelector=` on lists
//! and watches: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a)`, `k`,
//! `!k`, joined by commas. The simulator's own, so a bug in the engine's
//! client-side selector cannot hide behind the same bug here.

use std::collections::BTreeMap;

/// One parsed requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Eq(String),
    Ne(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    Absent,
}

/// A selector term that is not a requirement (the server answers 400).
#[derive(Debug, thiserror::Error)]
#[error("unable to parse requirement {0:?}")]
pub(crate) struct BadRequirement(String);

/// A parsed selector: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Selector(Vec<(String, Op)>);

impl Selector {
    /// Parse, or say why not (the server answers 400 then).
    pub(crate) fn parse(s: &str) -> Result<Self, BadRequirement> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Selector::default());
        }
        let mut depth = 0;
        let mut terms = vec![String::new()];
        for c in s.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    terms.push(String::new());
                    continue;
                }
                _ => {}
            }
            terms.last_mut().expect("never empty").push(c);
        }
        for t in terms.iter().map(|t| t.trim()) {
            reqs.push(requirement(t).ok_or_else(|| BadRequirement(t.to_owned()))?);
        }
        Ok(Selector(reqs))
    }

    /// Whether `labels` satisfy every requirement.
    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|(k, op)| {
            let v = labels.get(k);
            match op {
                Op::Eq(x) => v == Some(x),
                Op::Ne(x) => v != Some(x),
                Op::In(xs) => v.is_some_and(|v| xs.contains(v)),
                Op::NotIn(xs) => v.is_none_or(|v| !xs.contains(v)),
                Op::Exists => v.is_some(),
                Op::Absent => v.is_none(),
            }
        })
    }
}

fn requirement(t: &str) -> Option<(String, Op)> {
    let key_ok = |k: &str| {
        !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    };
    let value_ok = |v: &str| {
        v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    let set = |rest: &str| -> Option<Vec<String>> {
        let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
        let vs: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
        vs.iter().all(|v| value_ok(v)).then_some(vs)
    };
    let (key, op) = if let Some(k) = t.strip_prefix('!') {
        (k.trim(), Op::Absent)
    } else if let Some((k, v)) = t.split_once("!=") {
        (k.trim(), Op::Ne(v.trim().to_owned()))
    } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
        (k.trim(), Op::Eq(v.trim().to_owned()))
    } else if let Some((k, rest)) = t.split_once(" notin ") {
        (k.trim(), Op::NotIn(set(rest)?))
    } else if let Some((k, rest)) = t.split_once(" in ") {
        (k.trim(), Op::In(set(rest)?))
    } else {
        (t, Op::Exists)
    };
    if !key_ok(key) {
        return None;
    }
    if let Op::Eq(v) | Op::Ne(v) = &op {
        if !value_ok(v) {
            return None;
        }
    }
    Some((key.to_owned(), op))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_like_the_api_server() {
        let l: BTreeMap<String, String> = [("app", "web"), ("ns", "prod")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("tier notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!tier", true),
            ("app=web,ns=prod", true),
            ("app=web,ns=dev", false),
            ("", true),
        ] {
            assert_eq!(Selector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
        for bad in ["a=b,", "a in x", "=b", "a b"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }
}
