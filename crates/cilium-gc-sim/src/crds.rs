//! The three real Cilium CRDs, embedded byte for byte from
//! `/work/shared/cilium-crds`, served as JSON under
//! `apiextensions.k8s.io/v1`.

use serde_json::{json, Value};

use crate::kinds::Kind;

/// `ciliumidentities.yaml`, verbatim.
pub(crate) const IDENTITIES_YAML: &str = include_str!("crds/ciliumidentities.yaml");
/// `ciliumendpoints.yaml`, verbatim.
pub(crate) const ENDPOINTS_YAML: &str = include_str!("crds/ciliumendpoints.yaml");
/// `ciliumendpointslices.yaml`, verbatim.
pub(crate) const SLICES_YAML: &str = include_str!("crds/ciliumendpointslices.yaml");

/// The YAML of a kind's CRD.
pub(crate) fn yaml(kind: Kind) -> &'static str {
    match kind {
        Kind::Identity => IDENTITIES_YAML,
        Kind::Endpoint => ENDPOINTS_YAML,
        Kind::EndpointSlice => SLICES_YAML,
    }
}

/// The CRD as the server returns it: the YAML as JSON plus server metadata.
pub(crate) fn crd_json(kind: Kind, rv: u64) -> Value {
    let mut v: Value = serde_saphyr::from_str(yaml(kind)).unwrap_or(Value::Null);
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert(
            "uid".into(),
            json!(format!("0c1e0000-0000-4000-8000-00000000000{}", kind as u8)),
        );
        m.insert("resourceVersion".into(), json!(rv.to_string()));
        m.insert("generation".into(), json!(1));
        m.insert("creationTimestamp".into(), json!("2024-01-01T00:00:00Z"));
    }
    v["status"] = json!({
        "acceptedNames": v["spec"]["names"].clone(),
        "conditions": [
            {"type":"NamesAccepted","status":"True","reason":"NoConflicts","message":"no conflicts found","lastTransitionTime":"2024-01-01T00:00:00Z"},
            {"type":"Established","status":"True","reason":"InitialNamesAccepted","message":"the initial names have been accepted","lastTransitionTime":"2024-01-01T00:00:00Z"}
        ],
        "storedVersions": [kind.version()]
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_crds_parse_with_expected_names() {
        for k in [Kind::Identity, Kind::Endpoint, Kind::EndpointSlice] {
            let v = crd_json(k, 1);
            assert_eq!(v["metadata"]["name"], k.crd_name());
            assert_eq!(v["spec"]["names"]["plural"], k.plural());
        }
    }

    #[test]
    fn embedded_crds_equal_the_shared_copies() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/cilium-crds");
        if !dir.exists() {
            return;
        }
        for (file, text) in [
            ("ciliumidentities.yaml", IDENTITIES_YAML),
            ("ciliumendpoints.yaml", ENDPOINTS_YAML),
            ("ciliumendpointslices.yaml", SLICES_YAML),
        ] {
            let shared = std::fs::read_to_string(dir.join(file)).expect(file);
            assert_eq!(shared, text, "{file} differs from ../shared");
        }
    }
}
