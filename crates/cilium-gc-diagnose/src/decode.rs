//! Decoding the identities a diagnosis reads: the whole `security-labels`
//! map, which `scan` drops, and every `managedFields` entry (who wrote the
//! identity and when).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::input::{self, IdentityRecord};
use cilium_gc_cluster::model::{decode_identity, Malformed};

#[derive(Deserialize)]
struct SecurityLabels {
    #[serde(rename = "security-labels", default)]
    security_labels: Option<BTreeMap<String, String>>,
}

/// Decode one CiliumIdentity with its full `security-labels` map: what
/// [`decode_identity`] keeps, plus the labels (which `scan` drops).
pub(crate) fn decode_record(raw: &RawValue) -> Result<IdentityRecord, Malformed> {
    let identity = decode_identity(raw)?;
    // decode_identity already read security-labels as a string map, so this
    // cannot fail where it succeeded; be lenient anyway.
    let security_labels = serde_json::from_str::<SecurityLabels>(raw.get())
        .ok()
        .and_then(|s| s.security_labels)
        .unwrap_or_default();
    Ok(IdentityRecord {
        identity,
        security_labels,
    })
}

#[derive(Deserialize)]
struct ManagedOnly<'a> {
    #[serde(default, borrow)]
    metadata: Option<ManagedMeta<'a>>,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedMeta<'a> {
    #[serde(default, borrow)]
    managed_fields: Vec<ManagedEntry<'a>>,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedEntry<'a> {
    #[serde(default)]
    manager: Option<String>,
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    time: Option<String>,
    #[serde(default, borrow, rename = "fieldsV1")]
    fields: Option<&'a RawValue>,
}

/// Every `managedFields` entry of one identity: who wrote it and when, and
/// which entry set the heartbeat mark (its field set names the annotation).
/// Lenient: an unreadable list is no writes, never a malformed identity.
pub(crate) fn decode_writes(raw: &RawValue) -> Vec<input::Write> {
    let owns = format!("\"f:{}\"", cilium_gc_cluster::model::HEARTBEAT_ANNOTATION);
    serde_json::from_str::<ManagedOnly>(raw.get())
        .ok()
        .and_then(|m| m.metadata)
        .map(|m| m.managed_fields)
        .unwrap_or_default()
        .into_iter()
        .map(|e| input::Write {
            manager: e.manager.unwrap_or_default(),
            operation: e.operation.unwrap_or_default(),
            time: e.time.and_then(|t| t.parse().ok()),
            owns_mark: e.fields.is_some_and(|f| f.get().contains(&owns)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_keep_the_whole_security_label_map() {
        let raw = RawValue::from_string(
            r#"{"metadata":{"name":"1000","uid":"u","resourceVersion":"1"},
                "security-labels":{"k8s:job-name":"j1","k8s:app":"a","k8s:io.kubernetes.pod.namespace":"n"}}"#
                .into(),
        )
        .unwrap();
        let r = decode_record(&raw).unwrap();
        assert_eq!(r.security_labels.len(), 3);
        assert_eq!(r.security_labels["k8s:job-name"], "j1");
        assert_eq!(r.identity.namespace.as_deref(), Some("n"));
        let bad = RawValue::from_string(r#"{"metadata":{"name":"7"}}"#.into()).unwrap();
        assert_eq!(decode_record(&bad).unwrap_err().name.as_deref(), Some("7"));
    }
}
