//! `--redact` for a fleet report: every context name and server URL (and
//! the server's host) is replaced by a keyed hash wherever it appears in
//! the document, in messages too, so it can be attached to a ticket. One
//! key per document: the same cluster gets the same token throughout.

use serde_json::Value;

use cilium_gc_diagnose::redact::Redactor;
use cilium_gc_documents::fleet::{ClusterEntry, FleetDiagnosis};

/// Names shorter than this are replaced only where a whole string equals
/// them: replacing "a" inside every message would wreck the text.
const MIN_SUBSTRING: usize = 3;

/// Replace contexts and servers in a fleet diagnosis by tokens of one key;
/// set `redacted`. (A fleet report's entries are redacted one by one as
/// they finish, [`redact_entry`], before they are spooled.)
pub(crate) fn redact_diagnosis(doc: &mut FleetDiagnosis) {
    let r = Redactor::new();
    let mut renamed = Vec::new();
    for entry in &mut doc.clusters {
        let context = entry.context.clone();
        redact_entry(&r, entry);
        renamed.push((context, entry.context.clone()));
    }
    if let Some(f) = doc.summary.fullest.as_mut() {
        if let Some((_, token)) = renamed.iter().find(|(c, _)| *c == f.context) {
            f.context = token.clone();
        }
    }
    doc.redacted = true;
}

/// Replace `entry`'s context and server by `r`'s tokens, wherever they
/// appear in it. Each cluster's entry is redacted as it finishes (before
/// it is spooled); `r` is the document's one key, so a cluster has one
/// token throughout, the summary's `fullest` included (it is computed
/// from redacted entries).
pub(crate) fn redact_entry(r: &Redactor, entry: &mut ClusterEntry) {
    let server = entry
        .server
        .clone()
        .or_else(|| entry.report.as_ref()?.cluster.server.clone());
    let context_token = r.token("context", &entry.context);
    let mut pairs = Vec::new();
    if let Some(s) = server {
        let token = r.token("server", &s);
        if let Some(host) = host_of(&s) {
            pairs.push((host.to_owned(), token.clone()));
        }
        pairs.insert(0, (s, token));
    }
    pairs.push((entry.context.clone(), context_token));
    let Ok(mut v) = serde_json::to_value(&*entry) else {
        return;
    };
    replace_in(&mut v, &pairs);
    if let Ok(e) = serde_json::from_value(v) {
        *entry = e;
    }
    // The diagnosis redacted itself with a key of its own: give it the
    // document's tokens for its cluster, so one cluster has one name.
    let (server, context) = (entry.server.clone(), entry.context.clone());
    if let Some(d) = entry.diagnosis.as_mut() {
        d.redacted = true;
        d.cluster.server = server;
        d.cluster.context = Some(context);
    }
}

/// `host[:port]` of a URL.
fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?']).next()?;
    (!host.is_empty()).then_some(host)
}

/// Replace every `(from, to)` in every string of `v` (longest first, so a
/// URL goes before its host).
fn replace_in(v: &mut Value, pairs: &[(String, String)]) {
    match v {
        Value::String(s) => {
            for (from, to) in pairs {
                if from.is_empty() {
                    continue;
                }
                if s == from {
                    *s = to.clone();
                } else if from.len() >= MIN_SUBSTRING && s.contains(from.as_str()) {
                    *s = s.replace(from.as_str(), to);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| replace_in(x, pairs)),
        Value::Object(o) => o.values_mut().for_each(|x| replace_in(x, pairs)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_hosts_and_names_are_replaced_in_every_string() {
        let mut v = serde_json::json!({
            "context": "prod-eu",
            "server": "https://10.0.0.1:6443",
            "errors": [{"message": "cannot reach the API server at https://10.0.0.1:6443: refused (context prod-eu, 10.0.0.1:6443)"}],
            "n": 3,
        });
        let pairs = vec![
            ("https://10.0.0.1:6443".to_owned(), "server-1".to_owned()),
            ("10.0.0.1:6443".to_owned(), "server-1".to_owned()),
            ("prod-eu".to_owned(), "context-1".to_owned()),
        ];
        replace_in(&mut v, &pairs);
        let text = v.to_string();
        assert!(!text.contains("10.0.0.1"), "{text}");
        assert!(!text.contains("prod-eu"), "{text}");
        assert_eq!(v["context"], "context-1");
        assert_eq!(v["server"], "server-1");
        assert_eq!(v["n"], 3);
    }

    #[test]
    fn short_names_only_replace_whole_strings() {
        let mut v = serde_json::json!({"context": "a", "message": "a cluster"});
        replace_in(&mut v, &[("a".to_owned(), "context-1".to_owned())]);
        assert_eq!(v["context"], "context-1");
        assert_eq!(v["message"], "a cluster");
        assert_eq!(host_of("https://h:1/x"), Some("h:1"));
    }
}
