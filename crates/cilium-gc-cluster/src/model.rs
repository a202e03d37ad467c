//! The few fields of Cilium objects this tool reads, decoded leniently.
//!
//! We never hold whole objects: a CiliumIdentity becomes an [`Identity`]
//! (a few short strings) and an endpoint becomes the identity ids it
//! references. A malformed object does not fail a page: it decodes to a
//! [`Malformed`] record that is reported, and the run goes on. An endpoint
//! (CiliumEndpoint or CiliumEndpointSlice) decodes to a [`UsageObject`](crate::usage::UsageObject).

use std::borrow::Cow;
use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

pub use cilium_gc_kinds::{parse_id, Kind, CILIUM_GROUP, HEARTBEAT_ANNOTATION, NAMESPACE_LABEL};

/// The newest `managedFields` entry: our best guess at who changed an object
/// last (a client program, not a user; audit logs name users).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Field manager, e.g. `cilium-agent`.
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: String,
    /// When that manager last changed a field.
    pub time: Option<Timestamp>,
}

/// What we keep of one CiliumIdentity.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// `metadata.name`: the numeric identity, as a string.
    pub name: String,
    /// `metadata.uid`, for delete preconditions.
    pub uid: String,
    /// `metadata.resourceVersion`, for delete preconditions.
    pub resource_version: String,
    /// `metadata.creationTimestamp`.
    pub created_at: Option<Timestamp>,
    /// `metadata.labels` (the selector of `-l` applies to these).
    pub labels: BTreeMap<String, String>,
    /// Pod namespace the identity was allocated for, when known.
    pub namespace: Option<String>,
    /// Raw value of the `io.cilium.heartbeat` annotation, if present.
    pub mark: Option<String>,
    /// Newest managedFields entry.
    pub last_change: Option<Change>,
}

impl Identity {
    /// The numeric identity, when the name is a number.
    pub fn numeric_id(&self) -> Option<u64> {
        parse_id(&self.name)
    }
}

/// An identity id written as a JSON float: only an integral, non-negative
/// value in range names one (`60021.0` is 60021; `1.5` names nothing).
pub(crate) fn integral_id(f: f64) -> Option<u64> {
    // 2^64 is exactly representable; every smaller integral f64 fits a u64.
    (f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < 18_446_744_073_709_551_616.0)
        .then_some(f as u64)
}

/// An object in a list or watch that we could not decode; reported, skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// Which resource it was.
    pub kind: Kind,
    /// Name, if the metadata was readable.
    pub name: Option<String>,
    /// Namespace, if any and readable.
    pub namespace: Option<String>,
    /// What was wrong.
    pub problem: String,
}

/// A JSON string, borrowed from the input when it has no escapes.
struct CowStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for CowStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = CowStr<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(CowStr(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

impl CowStr<'_> {
    fn into_string(self) -> String {
        self.0.into_owned()
    }
}

/// A JSON object of strings, kept as borrowed pairs in input order: one
/// allocation per map instead of a tree node and two strings per entry.
/// Every value must be a string, as with a `BTreeMap<String, String>`.
struct StrMap<'a>(Vec<(CowStr<'a>, CowStr<'a>)>);

impl<'de: 'a, 'a> Deserialize<'de> for StrMap<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = StrMap<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(entry) = map.next_entry()? {
                    v.push(entry);
                }
                Ok(StrMap(v))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl StrMap<'_> {
    /// The value of `key` (the last one, as a map built from it would keep).
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k.0 == key)
            .map(|(_, v)| &*v.0)
    }
    fn into_btree(self) -> BTreeMap<String, String> {
        self.0
            .into_iter()
            .map(|(k, v)| (k.into_string(), v.into_string()))
            .collect()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireManagedField<'a> {
    #[serde(default, borrow)]
    manager: Option<CowStr<'a>>,
    #[serde(default, borrow)]
    operation: Option<CowStr<'a>>,
    #[serde(default, borrow)]
    time: Option<CowStr<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta<'a> {
    #[serde(default, borrow)]
    name: Option<CowStr<'a>>,
    #[serde(default, borrow)]
    uid: Option<CowStr<'a>>,
    #[serde(default, borrow)]
    resource_version: Option<CowStr<'a>>,
    #[serde(default, borrow)]
    creation_timestamp: Option<CowStr<'a>>,
    #[serde(default, borrow)]
    labels: Option<StrMap<'a>>,
    #[serde(default, borrow)]
    annotations: Option<StrMap<'a>>,
    #[serde(default, borrow)]
    managed_fields: Option<Vec<WireManagedField<'a>>>,
}

#[derive(Deserialize)]
struct WireIdentity<'a> {
    #[serde(borrow)]
    metadata: Option<WireMeta<'a>>,
    #[serde(rename = "security-labels", default, borrow)]
    security_labels: Option<StrMap<'a>>,
}

#[derive(Deserialize)]
struct NameOnly {
    metadata: Option<NameOnlyMeta>,
}
#[derive(Deserialize)]
struct NameOnlyMeta {
    name: Option<serde_json::Value>,
    namespace: Option<serde_json::Value>,
}

/// Best-effort name and namespace of an object that failed to decode.
fn salvage_names(raw: &str) -> (Option<String>, Option<String>) {
    let Ok(n) = serde_json::from_str::<NameOnly>(raw) else {
        return (None, None);
    };
    let Some(m) = n.metadata else {
        return (None, None);
    };
    let s = |v: Option<serde_json::Value>| v.and_then(|v| v.as_str().map(str::to_owned));
    (s(m.name), s(m.namespace))
}

fn parse_time(s: &str) -> Option<Timestamp> {
    s.parse::<Timestamp>().ok()
}

/// Decode one CiliumIdentity from its JSON, labels included. Requires name,
/// uid and resourceVersion (without them it cannot be deleted safely).
pub fn decode_identity(raw: &RawValue) -> Result<Identity, Malformed> {
    decode_identity_with(raw, true)
}

/// [`decode_identity`], keeping `metadata.labels` only when `keep_labels`
/// (only `-l` reads them). Either way every label must be a string, and the
/// namespace label is read.
pub(crate) fn decode_identity_with(
    raw: &RawValue,
    keep_labels: bool,
) -> Result<Identity, Malformed> {
    let text = raw.get();
    let bad = |problem: String| {
        let (name, namespace) = salvage_names(text);
        Malformed {
            kind: Kind::Identity,
            name,
            namespace,
            problem,
        }
    };
    let wire: WireIdentity =
        serde_json::from_str(text).map_err(|e| bad(format!("undecodable object: {e}")))?;
    let meta = wire.metadata.ok_or_else(|| bad("no metadata".into()))?;
    let required = |v: Option<CowStr>, what: &str| {
        v.map(CowStr::into_string)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| bad(format!("no metadata.{what}")))
    };
    let name = required(meta.name, "name")?;
    let uid = required(meta.uid, "uid")?;
    let resource_version = required(meta.resource_version, "resourceVersion")?;
    let security_namespace = format!("k8s:{NAMESPACE_LABEL}");
    let namespace = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(NAMESPACE_LABEL))
        .or_else(|| {
            wire.security_labels
                .as_ref()
                .and_then(|s| s.get(&security_namespace))
        })
        .map(str::to_owned);
    let mark = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(HEARTBEAT_ANNOTATION))
        .map(str::to_owned);
    let last_change = newest_change(meta.managed_fields.unwrap_or_default());
    let labels = match meta.labels {
        Some(l) if keep_labels => l.into_btree(),
        _ => BTreeMap::new(),
    };
    Ok(Identity {
        name,
        uid,
        resource_version,
        created_at: meta
            .creation_timestamp
            .as_ref()
            .and_then(|t| parse_time(&t.0)),
        labels,
        namespace,
        mark,
        last_change,
    })
}

fn newest_change(fields: Vec<WireManagedField>) -> Option<Change> {
    let mut newest: Option<(Option<Timestamp>, WireManagedField)> = None;
    for f in fields {
        let time = f.time.as_ref().and_then(|t| parse_time(&t.0));
        // Ties go to the later entry, as `max_by_key` does.
        if newest.as_ref().is_none_or(|(t, _)| time >= *t) {
            newest = Some((time, f));
        }
    }
    newest.map(|(time, f)| Change {
        manager: f.manager.map(CowStr::into_string).unwrap_or_default(),
        operation: f.operation.map(CowStr::into_string).unwrap_or_default(),
        time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn decodes_a_real_identity() {
        let id = decode_identity(&raw(
            r#"{"apiVersion":"cilium.io/v2","kind":"CiliumIdentity","metadata":{"name":"12345","uid":"u1","resourceVersion":"7",
            "creationTimestamp":"2026-01-01T00:00:00Z","labels":{"io.kubernetes.pod.namespace":"team-a"},
            "annotations":{"io.cilium.heartbeat":"2026-01-02T00:00:00.123456789Z"},
            "managedFields":[{"manager":"cilium-agent","operation":"Update","time":"2026-01-01T00:00:00Z"},
                             {"manager":"cilium-operator-generic","operation":"Update","time":"2026-01-02T00:00:00Z"}]},
            "security-labels":{"k8s:io.kubernetes.pod.namespace":"team-a"}}"#,
        ))
        .unwrap();
        assert_eq!(id.numeric_id(), Some(12345));
        assert_eq!(id.namespace.as_deref(), Some("team-a"));
        assert_eq!(id.mark.as_deref(), Some("2026-01-02T00:00:00.123456789Z"));
        assert_eq!(id.last_change.unwrap().manager, "cilium-operator-generic");
    }

    #[test]
    fn lean_decoding_drops_only_the_labels() {
        let json = r#"{"metadata":{"name":"12345","uid":"u\u0031","resourceVersion":"7",
            "labels":{"io.kubernetes.pod.namespace":"team-a","app":"w\"eb"},
            "annotations":{"other":"x","io.cilium.heartbeat":"2026-01-02T00:00:00Z"},
            "managedFields":[{"manager":"a","time":"2026-01-02T00:00:00Z"},{"manager":"b","time":"2026-01-02T00:00:00Z"},
                             {"manager":"c","operation":"Update","time":"2026-01-01T00:00:00Z"}]}}"#;
        let full = decode_identity(&raw(json)).unwrap();
        assert_eq!(full.uid, "u1", "escaped strings decode");
        assert_eq!(full.labels["app"], "w\"eb");
        assert_eq!(
            full.last_change.as_ref().unwrap().manager,
            "b",
            "ties: the later entry"
        );
        let lean = decode_identity_with(&raw(json), false).unwrap();
        assert!(lean.labels.is_empty());
        assert_eq!(
            Identity {
                labels: full.labels.clone(),
                ..lean
            },
            full
        );
        assert_eq!(full.namespace.as_deref(), Some("team-a"));
        assert_eq!(full.mark.as_deref(), Some("2026-01-02T00:00:00Z"));
        // A non-string label still makes the object malformed.
        let bad = r#"{"metadata":{"name":"9","uid":"u","resourceVersion":"1","labels":{"a":7}}}"#;
        assert!(decode_identity_with(&raw(bad), false).is_err());
    }

    #[test]
    fn namespace_falls_back_to_security_labels() {
        let id = decode_identity(&raw(
            r#"{"metadata":{"name":"300","uid":"u","resourceVersion":"1"},"security-labels":{"k8s:io.kubernetes.pod.namespace":"b"}}"#,
        ))
        .unwrap();
        assert_eq!(id.namespace.as_deref(), Some("b"));
    }

    #[test]
    fn malformed_identities_are_reported_not_fatal() {
        let cases = [
            (r#"{"metadata":{"name":"1","resourceVersion":"1"}}"#, "uid"),
            (r#"{"metadata":{"uid":"u","resourceVersion":"1"}}"#, "name"),
            (r#"{"kind":"CiliumIdentity"}"#, "metadata"),
            (
                r#"{"metadata":{"name":"9","uid":"u","resourceVersion":"1","labels":{"a":7}}}"#,
                "undecodable",
            ),
        ];
        for (json, want) in cases {
            let err = decode_identity(&raw(json)).unwrap_err();
            assert!(err.problem.contains(want), "{json}: {}", err.problem);
        }
        let err = decode_identity(&raw(
            r#"{"metadata":{"name":"9","uid":"u","resourceVersion":"1","labels":{"a":7}}}"#,
        ))
        .unwrap_err();
        assert_eq!(err.name.as_deref(), Some("9"));
    }
}
