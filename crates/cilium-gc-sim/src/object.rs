//! Stored objects and the metadata bookkeeping a real apiserver does on
//! every write: resourceVersion, generation, managedFields.
//!
//! Objects are kept pre-serialized ([`StoredObject::bytes`]) so a 150k-object list is
//! a concatenation, and memory stays near the wire size.

use std::sync::Arc;

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Map, Value};

use crate::kinds::Kind;

/// The server clock: real time plus the scenario's offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    offset: SignedDuration,
}

impl Clock {
    /// A clock `offset_secs` ahead of real time (negative: behind).
    pub(crate) fn new(offset_secs: i64) -> Self {
        Clock {
            offset: SignedDuration::from_secs(offset_secs),
        }
    }

    /// Now, on the server clock.
    pub(crate) fn now(&self) -> Timestamp {
        Timestamp::now()
            .checked_add(self.offset)
            .unwrap_or_else(|_| Timestamp::now())
    }
}

/// RFC 3339 with whole seconds, as metadata timestamps are.
pub(crate) fn rfc3339_secs(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

/// One stored object, immutable; a write replaces it.
#[derive(Debug)]
pub(crate) struct StoredObject {
    /// The full JSON, including apiVersion, kind and metadata.resourceVersion.
    pub bytes: Bytes,
    /// `metadata.resourceVersion`.
    pub rv: u64,
    /// `metadata.uid`.
    pub uid: Box<str>,
    /// Identity ids an endpoint or slice references (empty for identities).
    pub ids: Box<[u64]>,
}

impl StoredObject {
    /// Parse the stored JSON back into a value (for writes and metadata views).
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }
}

/// Serialize `v` into an [`StoredObject`], computing the ids it references.
pub(crate) fn seal(kind: Kind, v: &Value, rv: u64) -> Arc<StoredObject> {
    let bytes = serde_json::to_vec(v).unwrap_or_default();
    let uid = v
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .into();
    let ids = referenced_ids(kind, &bytes);
    Arc::new(StoredObject {
        bytes: Bytes::from(bytes),
        rv,
        uid,
        ids,
    })
}

/// Identity ids an endpoint or slice object references: the simulator's own
/// reading ([`crate::kinds::referenced_ids`]), the ground truth of the tests.
fn referenced_ids(kind: Kind, bytes: &[u8]) -> Box<[u64]> {
    if kind == Kind::Identity {
        return Box::new([]);
    }
    serde_json::from_slice::<Value>(bytes)
        .map(|v| crate::kinds::referenced_ids(kind, &v).into())
        .unwrap_or_default()
}

/// Set `metadata.resourceVersion`.
pub(crate) fn set_rv(v: &mut Value, rv: u64) {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// Everything outside `metadata` (plus apiVersion/kind), to decide whether
/// `generation` moves: for CRs it does only when that changes.
fn non_metadata(v: &Value) -> Vec<(&String, &Value)> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "apiVersion" | "kind"))
                .collect()
        })
        .unwrap_or_default()
}

/// The parts of an object a write may change; server-owned metadata
/// (resourceVersion, managedFields, uid, ...) is ignored so an identical
/// write is recognised as a no-op.
fn user_view(v: &Value) -> Value {
    let mut c = v.clone();
    if let Some(m) = c.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "resourceVersion",
            "managedFields",
            "uid",
            "creationTimestamp",
            "generation",
        ] {
            m.remove(k);
        }
        for k in ["labels", "annotations"] {
            if m.get(k)
                .is_some_and(|l| l.as_object().is_some_and(Map::is_empty) || l.is_null())
            {
                m.remove(k);
            }
        }
    }
    c
}

/// Whether `new` differs from `old` in anything a client controls.
pub(crate) fn changed(old: &Value, new: &Value) -> bool {
    user_view(old) != user_view(new)
}

/// Who writes, for managedFields and the ledger.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    /// Field manager name.
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: &'static str,
    /// True for cluster actors (not client requests).
    pub actor: bool,
}

impl Writer {
    /// A client write.
    pub(crate) fn client(manager: impl Into<String>) -> Self {
        Writer {
            manager: manager.into(),
            operation: "Update",
            actor: false,
        }
    }
    /// A cluster actor write.
    pub(crate) fn actor(manager: &str) -> Self {
        Writer {
            manager: manager.to_owned(),
            operation: "Update",
            actor: true,
        }
    }
}

/// `fieldsV1` for the leaves that differ between `old` and `new` (all of
/// `new` when `old` is null), skipping server-owned metadata.
fn fields_v1(old: &Value, new: &Value) -> Value {
    fn walk(old: Option<&Value>, new: &Value, top: bool) -> Option<Value> {
        match new {
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, v) in m {
                    if top && matches!(k.as_str(), "apiVersion" | "kind") {
                        continue;
                    }
                    if k == "metadata" && top {
                        let sub = v.as_object().map(|mm| {
                            mm.iter()
                                .filter(|(k, _)| {
                                    matches!(
                                        k.as_str(),
                                        "labels" | "annotations" | "ownerReferences" | "finalizers"
                                    )
                                })
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect::<Map<_, _>>()
                        });
                        let sub = Value::Object(sub.unwrap_or_default());
                        if let Some(f) = walk(old.and_then(|o| o.get("metadata")), &sub, false) {
                            out.insert("f:metadata".into(), f);
                        }
                        continue;
                    }
                    if let Some(f) = walk(old.and_then(|o| o.get(k)), v, false) {
                        out.insert(format!("f:{k}"), f);
                    }
                }
                (!out.is_empty() || old.is_none()).then_some(Value::Object(out))
            }
            leaf => (old != Some(leaf)).then(|| json!({})),
        }
    }
    let old = (!old.is_null()).then_some(old);
    walk(old, new, true).unwrap_or_else(|| json!({}))
}

/// Most Update entries a real server keeps; older ones merge into
/// `ancient-changes`.
const MAX_UPDATE_ENTRIES: usize = 10;

/// Record a write by `writer` in `new`'s managedFields (copied from `old`).
pub(crate) fn record_manager(
    old: &Value,
    new: &mut Value,
    writer: &Writer,
    now: Timestamp,
    api_version: &str,
) {
    let mut entries: Vec<Value> = old
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let fields = fields_v1(old, new);
    let entry = json!({
        "manager": writer.manager,
        "operation": writer.operation,
        "apiVersion": api_version,
        "time": rfc3339_secs(now),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    });
    let same = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(writer.manager.as_str())
            && e.get("operation").and_then(Value::as_str) == Some(writer.operation)
    };
    match entries.iter().position(same) {
        Some(i) => {
            let mut merged = entry;
            let mut f = entries[i].get("fieldsV1").cloned().unwrap_or(json!({}));
            merge_fields(&mut f, &fields);
            merged["fieldsV1"] = f;
            entries[i] = merged;
        }
        None => entries.push(entry),
    }
    cap_entries(&mut entries, api_version);
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("managedFields".into(), Value::Array(entries));
    }
}

fn merge_fields(into: &mut Value, from: &Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in b {
            merge_fields(a.entry(k.clone()).or_insert(json!({})), v);
        }
    }
}

fn cap_entries(entries: &mut Vec<Value>, api_version: &str) {
    let is_ancient =
        |e: &Value| e.get("manager").and_then(Value::as_str) == Some("ancient-changes");
    while entries.len() > MAX_UPDATE_ENTRIES {
        let Some(i) = entries.iter().position(|e| !is_ancient(e)) else {
            break;
        };
        let oldest = entries.remove(i);
        let ancient = entries.iter().position(is_ancient);
        let f = oldest.get("fieldsV1").cloned().unwrap_or(json!({}));
        match ancient {
            Some(i) => merge_fields(&mut entries[i]["fieldsV1"], &f),
            None => entries.insert(
                0,
                json!({"manager":"ancient-changes","operation":"Update","apiVersion":api_version,
                       "time": oldest.get("time").cloned().unwrap_or(Value::Null),
                       "fieldsType":"FieldsV1","fieldsV1": f}),
            ),
        }
    }
}

/// Finish a write of `new` over `old` (null for a create): keep server-owned
/// metadata, bump generation when the non-metadata part changed, record the
/// manager and set the resourceVersion.
pub(crate) fn stamp_write(
    old: &Value,
    new: &mut Value,
    writer: &Writer,
    now: Timestamp,
    rv: u64,
    api_version: &str,
) {
    let generation = match old.pointer("/metadata/generation").and_then(Value::as_i64) {
        None => 1,
        Some(g) if non_metadata(old) != non_metadata(new) => g + 1,
        Some(g) => g,
    };
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(om) = old.get("metadata") {
            for k in ["uid", "creationTimestamp"] {
                if let Some(v) = om.get(k) {
                    m.insert(k.into(), v.clone());
                }
            }
        }
        m.insert("generation".into(), json!(generation));
    }
    record_manager(old, new, writer, now, api_version);
    set_rv(new, rv);
}

/// A random RFC 4122 v4 UUID from `rng`.
pub(crate) fn uuid(rng: &mut impl rand::Rng) -> String {
    let mut b: [u8; 16] = rng.random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = |r: &[u8]| r.iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!(
        "{}-{}-{}-{}-{}",
        h(&b[0..4]),
        h(&b[4..6]),
        h(&b[6..8]),
        h(&b[8..10]),
        h(&b[10..16])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_change_keeps_generation_and_records_manager() {
        let old = json!({"apiVersion":"cilium.io/v2","kind":"CiliumIdentity",
            "metadata":{"name":"1","uid":"u","generation":1,"resourceVersion":"5"},"security-labels":{"a":"b"}});
        let mut new = old.clone();
        new["metadata"]["annotations"] = json!({"io.cilium.heartbeat":"x"});
        assert!(changed(&old, &new));
        stamp_write(
            &old,
            &mut new,
            &Writer::client("kubectl"),
            Timestamp::UNIX_EPOCH,
            9,
            "cilium.io/v2",
        );
        assert_eq!(new["metadata"]["generation"], 1);
        assert_eq!(new["metadata"]["resourceVersion"], "9");
        let mf = &new["metadata"]["managedFields"][0];
        assert_eq!(mf["manager"], "kubectl");
        assert_eq!(
            mf["fieldsV1"],
            json!({"f:metadata":{"f:annotations":{"f:io.cilium.heartbeat":{}}}})
        );
    }

    #[test]
    fn spec_change_bumps_generation_and_noop_is_detected() {
        let old = json!({"metadata":{"name":"1","generation":3},"security-labels":{"a":"b"}});
        let mut same = old.clone();
        same["metadata"]["resourceVersion"] = json!("77");
        assert!(!changed(&old, &same));
        let mut new = old.clone();
        new["security-labels"]["a"] = json!("c");
        stamp_write(
            &old,
            &mut new,
            &Writer::client("m"),
            Timestamp::UNIX_EPOCH,
            2,
            "v",
        );
        assert_eq!(new["metadata"]["generation"], 4);
    }

    #[test]
    fn uuids_look_like_v4() {
        use rand::SeedableRng;
        let u = uuid(&mut rand_chacha::ChaCha8Rng::seed_from_u64(1));
        assert_eq!(u.len(), 36);
        assert_eq!(
            u.split('-').map(str::len).collect::<Vec<_>>(),
            vec![8, 4, 4, 4, 12]
        );
        assert_eq!(&u[14..15], "4");
    }

    #[test]
    fn managed_fields_are_capped_with_ancient_changes() {
        let mut v = json!({"metadata":{"name":"1"}});
        for i in 0..15 {
            let old = v.clone();
            v["metadata"]["annotations"] = json!({ format!("k{i}"): "v" });
            stamp_write(
                &old,
                &mut v,
                &Writer::client(format!("m{i}")),
                Timestamp::UNIX_EPOCH,
                i,
                "v",
            );
        }
        let mf = v["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 10);
        assert_eq!(mf[0]["manager"], "ancient-changes");
    }
}
