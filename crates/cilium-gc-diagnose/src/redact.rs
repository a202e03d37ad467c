//! `--redact`: pseudonymise an [`Input`] before it is analysed, so that the
//! diagnosis can leave the company and still be read.
//!
//! Namespaces become `ns-` and sixteen hex digits, label values `v-` and
//! sixteen, the server and context `server-`/`context-` and sixteen. Label
//! *keys* stay: they are the churn drivers a reader needs to see.
//!
//! The hash is HMAC-SHA256 under a random key drawn once per document
//! ([`Redactor::new`]): within one diagnosis the same name always gives the
//! same token, so counts and groupings survive, but nobody can confirm a
//! guessed name by hashing a dictionary (an unkeyed hash allowed exactly
//! that), and two runs cannot be joined. 64 bits make a collision that
//! would merge two namespaces (or two of tens of thousands of values)
//! negligible.
//!
//! Redacting the input (not the output) means every place a name could
//! appear, findings' messages and evidence included, only ever sees the
//! tokens. Free text (warnings, malformed-object messages) goes through
//! `Redactor::text`: the server, the context, every namespace seen (and
//! `--cilium-namespace`) become their tokens, and the user named in an
//! authorization message (`User "alice@corp"`) is dropped.

use std::collections::{BTreeMap, BTreeSet};

use ring::hmac;

use super::input::Input;

/// Hex digits of every token: 64 bits.
pub(crate) const TOKEN_DIGITS: usize = 16;

/// Keyed pseudonyms for one document.
pub struct Redactor {
    key: hmac::Key,
}

impl Redactor {
    /// A redactor with a fresh random key.
    pub fn new() -> Self {
        Redactor::with_key(&rand::random::<[u8; 32]>())
    }

    /// A redactor with a given key (tests).
    pub(crate) fn with_key(key: &[u8]) -> Self {
        Redactor {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
        }
    }

    /// `prefix-` and `TOKEN_DIGITS` hex digits of the keyed hash of `s`.
    pub fn token(&self, prefix: &str, s: &str) -> String {
        let tag = hmac::sign(&self.key, s.as_bytes());
        let hex: String = tag.as_ref()[..TOKEN_DIGITS / 2]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{prefix}-{hex}")
    }

    /// The token for a namespace.
    pub(crate) fn namespace(&self, ns: &str) -> String {
        self.token("ns", ns)
    }

    /// The token for a label value.
    pub(crate) fn value(&self, v: &str) -> String {
        self.token("v", v)
    }
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new()
    }
}

/// Replace every namespace, label value, the server and the context in
/// `input` with tokens, scrub free text, and say so in `input.redacted`.
/// `extra_namespaces` are namespaces named outside the data (the
/// `--cilium-namespace` value). Policy names become `policy-` tokens.
/// Identity names (numbers), label keys and field managers stay. Returns the redactor used, whose key dies with it.
pub fn redact(input: &mut Input, extra_namespaces: &[&str]) -> Redactor {
    let r = Redactor::new();
    redact_with(&r, input, extra_namespaces);
    r
}

/// As [`redact`], with a given redactor.
pub(crate) fn redact_with(r: &Redactor, input: &mut Input, extra_namespaces: &[&str]) {
    let server = input.server.take();
    let context = input.context.take();
    input.server = server.as_deref().map(|s| r.token("server", s));
    input.context = context.as_deref().map(|c| r.token("context", c));
    let mut namespaces: BTreeSet<String> = extra_namespaces
        .iter()
        .map(|s| s.to_string())
        .filter(|s| !s.is_empty())
        .collect();
    for rec in &mut input.identities {
        let ns = rec.identity.namespace.take();
        if let Some(n) = &ns {
            namespaces.insert(n.clone());
        }
        let hide = |v: &String| {
            if ns.as_ref() == Some(v) {
                r.namespace(v)
            } else {
                r.value(v)
            }
        };
        rec.identity.labels = hide_values(&rec.identity.labels, hide);
        rec.security_labels = hide_values(&rec.security_labels, hide);
        rec.identity.namespace = ns.as_deref().map(|n| r.namespace(n));
    }
    if let Some(p) = &mut input.policies {
        for item in &mut p.items {
            if let Some(n) = item.namespace.take() {
                item.namespace = Some(r.namespace(&n));
                namespaces.insert(n);
            }
            item.name = r.token("policy", &item.name);
        }
    }
    let text = FreeText::new(r, server.as_deref(), context.as_deref(), &namespaces);
    if let Some(p) = &mut input.policies {
        p.problems = p.problems.iter().map(|s| text.scrub(s)).collect();
    }
    if let Some(refusals) = &mut input.allocation_refusals {
        for p in &mut refusals.by_pod {
            p.pod = r.token("pod", &p.pod);
            // The line names the pod's labels (its key): keep what it says.
            p.example = format!(
                "{}: {}",
                super::agent_logs::ATTEMPT_FAILED,
                super::agent_logs::NO_MORE_IDS
            );
        }
    }
    input.warnings = input.warnings.iter().map(|s| text.scrub(s)).collect();
    input.malformed = input.malformed.iter().map(|s| text.scrub(s)).collect();
    input.redacted = true;
}

/// Redaction of free text, with what the structured fields hide.
struct FreeText<'a> {
    r: &'a Redactor,
    literals: Vec<(String, String)>,
    namespaces: Option<regex::Regex>,
    user: regex::Regex,
}

impl<'a> FreeText<'a> {
    fn new(
        r: &'a Redactor,
        server: Option<&str>,
        context: Option<&str>,
        namespaces: &BTreeSet<String>,
    ) -> Self {
        let mut literals = Vec::new();
        if let Some(s) = server.filter(|s| !s.is_empty()) {
            literals.push((s.to_owned(), r.token("server", s)));
            // The bare host:port too (transport errors quote it).
            if let Some(host) = s.split("://").nth(1) {
                let host = host.trim_end_matches('/');
                literals.push((host.to_owned(), r.token("server", s)));
            }
        }
        if let Some(c) = context.filter(|c| !c.is_empty()) {
            literals.push((c.to_owned(), r.token("context", c)));
        }
        let mut names: Vec<&String> = namespaces.iter().collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        let namespaces = (!names.is_empty()).then(|| {
            let alt: Vec<String> = names.iter().map(|n| regex::escape(n)).collect();
            regex::Regex::new(&format!("(^|[^a-z0-9-])({})($|[^a-z0-9-])", alt.join("|")))
                .expect("escaped alternation is a valid regex")
        });
        FreeText {
            r,
            literals,
            namespaces,
            user: regex::Regex::new(
                r#"(?i)\b(user|serviceaccount|group|groups)([ =:]+)("[^"]*"|\[[^\]]*\]|\S+)"#,
            )
            .expect("valid regex"),
        }
    }

    fn scrub(&self, s: &str) -> String {
        let mut out = cilium_gc_cluster::secrets::scrub(s);
        for (from, to) in &self.literals {
            out = out.replace(from.as_str(), to);
        }
        out = self.user.replace_all(&out, "$1$2<redacted>").into_owned();
        if let Some(re) = &self.namespaces {
            // Twice: adjacent names share the separator between them.
            for _ in 0..2 {
                out = re
                    .replace_all(&out, |c: &regex::Captures| {
                        format!("{}{}{}", &c[1], self.r.namespace(&c[2]), &c[3])
                    })
                    .into_owned();
            }
        }
        out
    }
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
    use crate::{analyze, IdentityRecord};
    use cilium_gc_cluster::model::Identity;

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
    fn tokens_are_keyed_stable_within_a_document_and_shaped() {
        let r = Redactor::new();
        assert_eq!(r.namespace("team-a"), r.namespace("team-a"));
        assert_ne!(r.namespace("team-a"), r.namespace("team-b"));
        let t = r.namespace("team-a");
        assert!(t.starts_with("ns-") && t.len() == 3 + TOKEN_DIGITS, "{t}");
        assert!(t[3..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(r.value("x").len(), 2 + TOKEN_DIGITS);
        // Another run (another key) gives other tokens: no dictionary.
        assert_ne!(Redactor::new().namespace("team-a"), t);
        // HMAC-SHA256 (RFC 4231 test case 2): key "Jefe".
        let k = Redactor::with_key(b"Jefe");
        assert_eq!(
            k.token("t", "what do ya want for nothing?"),
            "t-5bdcc146bf60754e"
        );
    }

    /// Issue 12: free text is redacted as structured fields are.
    #[test]
    fn free_text_loses_users_namespaces_and_the_cilium_namespace() {
        let mut input = Input {
            identities: vec![record(1000, "payments-prod", "job")],
            warnings: vec![
                r#"cannot read cilium-config in cilium-secret-ns: configmaps "cilium-config" is forbidden: User "alice@corp.example" cannot get resource "configmaps" in API group "" in the namespace "cilium-secret-ns""#.into(),
                "endpoint payments-prod/web-1 odd".into(),
            ],
            ..Default::default()
        };
        let r = Redactor::new();
        redact_with(&r, &mut input, &["cilium-secret-ns"]);
        let all = input.warnings.join("\n");
        for secret in ["alice", "corp.example", "cilium-secret-ns", "payments-prod"] {
            assert!(!all.contains(secret), "{secret} leaked: {all}");
        }
        assert!(all.contains(&r.namespace("cilium-secret-ns")), "{all}");
        assert!(all.contains(&r.namespace("payments-prod")), "{all}");
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
        let r = redact(&mut input, &[]);
        let d = analyze(&input, "2026-06-01T00:00:00Z".parse().unwrap());
        let json = serde_json::to_string(&d).unwrap();
        for secret in ["payments-prod", "nightly-report", "acme"] {
            assert!(!json.contains(secret), "{secret} leaked: {json}");
        }
        assert!(d.redacted);
        // Keys stay, and the namespace label value matches the namespace token.
        assert!(json.contains("k8s:job-name"));
        let ns = r.namespace("payments-prod");
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
