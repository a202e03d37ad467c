//! `--redact`: pseudonymise an [`Input`] before it is analysed, so that the
//! diagnosis can leave the company and still be read.
//!
//! Namespaces become `ns-` and six hex digits, label values `v-` and twelve,
//! the server and context `server-`/`context-` and six. Label *keys* stay:
//! they are the churn drivers a reader needs to see. The hash is FNV-1a,
//! unkeyed and stable, so the same name always gives the same token across
//! runs and reports can be compared; the flip side is that someone who can
//! guess a name can confirm it. This is pseudonymisation, not anonymity.
//!
//! Redacting the input (not the output) means every place a name could
//! appear, findings' messages and evidence included, only ever sees the
//! tokens. Values get longer tokens than namespaces because there can be
//! tens of thousands of them (one per Job) and a collision would merge two
//! values and understate a key's cardinality; 48 bits make that negligible.

use std::collections::BTreeMap;

use super::analyze::Input;

/// FNV-1a, 64 bit.
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `prefix-` and the first `digits` hex digits of the hash of `s`.
pub fn token(prefix: &str, s: &str, digits: usize) -> String {
    let hex = format!("{:016x}", fnv1a(s));
    format!("{prefix}-{}", &hex[..digits.min(16)])
}

/// The token for a namespace.
pub fn namespace(ns: &str) -> String {
    token("ns", ns, 6)
}

/// The token for a label value.
pub fn value(v: &str) -> String {
    token("v", v, 12)
}

/// Replace every namespace, label value, the server and the context in
/// `input` with tokens, and say so in `input.redacted`. Identity names
/// (numbers), label keys and field managers stay.
pub fn redact(input: &mut Input) {
    let server = input.server.take();
    let context = input.context.take();
    input.server = server.as_deref().map(|s| token("server", s, 6));
    input.context = context.as_deref().map(|c| token("context", c, 6));
    for r in &mut input.identities {
        let ns = r.identity.namespace.take();
        let hide = |v: &String| {
            if ns.as_ref() == Some(v) {
                namespace(v)
            } else {
                value(v)
            }
        };
        r.identity.labels = hide_values(&r.identity.labels, hide);
        r.security_labels = hide_values(&r.security_labels, hide);
        r.identity.namespace = ns.as_deref().map(namespace);
    }
    // Warnings and malformed-object messages are free text that may quote a
    // server URL or a namespace: keep only what cannot leak.
    let scrub = |s: &String| -> String {
        let mut s = s.clone();
        for secret in server.iter().chain(context.iter()) {
            if !secret.is_empty() {
                s = s.replace(secret.as_str(), "<redacted>");
            }
        }
        s
    };
    input.warnings = input.warnings.iter().map(scrub).collect();
    input.malformed = input.malformed.iter().map(scrub).collect();
    input.redacted = true;
}

fn hide_values(
    m: &BTreeMap<String, String>,
    hide: impl Fn(&String) -> String,
) -> BTreeMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), hide(v))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::analyze::{analyze, IdentityRecord};
    use crate::model::Identity;

    fn record(id: u64, ns: &str, job: &str) -> IdentityRecord {
        IdentityRecord {
            identity: Identity {
                name: id.to_string(),
                uid: "u".into(),
                resource_version: "1".into(),
                created_at: Some("2026-05-01T00:00:00Z".parse().unwrap()),
                labels: BTreeMap::from([("io.kubernetes.pod.namespace".into(), ns.into())]),
                namespace: Some(ns.into()),
                mark: None,
                last_change: None,
            },
            security_labels: BTreeMap::from([
                ("k8s:io.kubernetes.pod.namespace".into(), ns.into()),
                ("k8s:job-name".into(), job.into()),
            ]),
        }
    }

    #[test]
    fn tokens_are_stable_and_shaped() {
        assert_eq!(namespace("team-a"), namespace("team-a"));
        assert_ne!(namespace("team-a"), namespace("team-b"));
        let t = namespace("team-a");
        assert!(t.starts_with("ns-") && t.len() == 9, "{t}");
        assert!(t[3..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(value("x").len(), 2 + 12);
        // FNV-1a test vector: "a" → af63dc4c8601ec8c.
        assert_eq!(token("t", "a", 16), "t-af63dc4c8601ec8c");
    }

    #[test]
    fn nothing_secret_survives_into_the_diagnosis() {
        let mut input = Input {
            identities: (0..12)
                .map(|k| record(1000 + k, "payments-prod", &format!("nightly-report-{k}")))
                .collect(),
            server: Some("https://api.acme.internal:6443".into()),
            context: Some("acme-prod".into()),
            warnings: vec!["cannot reach https://api.acme.internal:6443 twice".into()],
            config: Some(BTreeMap::new()),
            ..Default::default()
        };
        redact(&mut input);
        let d = analyze(&input, "2026-06-01T00:00:00Z".parse().unwrap());
        let json = serde_json::to_string(&d).unwrap();
        for secret in ["payments-prod", "nightly-report", "acme"] {
            assert!(!json.contains(secret), "{secret} leaked: {json}");
        }
        assert!(d.redacted);
        // Keys stay, and the namespace label value matches the namespace token.
        assert!(json.contains("k8s:job-name"));
        let ns = namespace("payments-prod");
        assert_eq!(d.churn.namespaces_by_identities[0].namespace, ns);
        assert_eq!(
            input.identities[0].security_labels["k8s:io.kubernetes.pod.namespace"],
            ns
        );
        // Cardinality survives.
        let job = d
            .churn
            .label_keys
            .iter()
            .find(|k| k.key == "k8s:job-name")
            .unwrap();
        assert_eq!(job.distinct_values, 12);
        assert!(d.cluster.server.as_deref().unwrap().starts_with("server-"));
    }
}
