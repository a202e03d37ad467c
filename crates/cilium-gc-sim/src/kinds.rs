//! The Cilium resources the simulated server serves, and what it reads out
//! of them. The kinds, their paths and the id rule are the shared
//! vocabulary (`cilium-gc-kinds`, facts fixed by Cilium, pinned by its
//! tests); reading the ids out of an endpoint object is written here for
//! the simulator alone, so that the ground truth of the tests (which
//! identity an endpoint protects) never shares a bug with the engine's
//! decoding.

use serde_json::Value;

pub use cilium_gc_kinds::{parse_id, Kind, CILIUM_GROUP, HEARTBEAT_ANNOTATION, NAMESPACE_LABEL};

/// `apiVersion` of a kind's objects (`cilium.io/v2`, or `v2alpha1` for
/// slices).
pub(crate) fn api_version(kind: Kind) -> String {
    format!("{CILIUM_GROUP}/{}", kind.version())
}

/// An id as an agent may have written it: a JSON integer, or a string of
/// digits; zero means "no identity yet".
fn id_of(v: &Value) -> Option<u64> {
    let id = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 2f64.powi(53))
                .map(|f| f as u64)
        }),
        Value::String(s) => parse_id(s),
        _ => None,
    }?;
    (id != 0).then_some(id)
}

/// The identities an endpoint object really protects, as the simulated
/// cluster knows it: `status.identity.id` of a CiliumEndpoint, every
/// `endpoints[].id` of a CiliumEndpointSlice; nothing for an identity.
pub fn referenced_ids(kind: Kind, object: &Value) -> Vec<u64> {
    match kind {
        Kind::Identity => Vec::new(),
        Kind::Endpoint => object
            .pointer("/status/identity/id")
            .and_then(id_of)
            .into_iter()
            .collect(),
        Kind::EndpointSlice => object
            .get("endpoints")
            .and_then(Value::as_array)
            .map(|eps| {
                eps.iter()
                    .filter_map(|e| e.get("id").and_then(id_of))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_as_agents_write_them() {
        let cep = |id: Value| json!({"status": {"identity": {"id": id}}});
        assert_eq!(referenced_ids(Kind::Endpoint, &cep(json!(300))), vec![300]);
        assert_eq!(
            referenced_ids(Kind::Endpoint, &cep(json!("300"))),
            vec![300]
        );
        assert!(referenced_ids(Kind::Endpoint, &cep(json!(0))).is_empty());
        assert!(referenced_ids(Kind::Endpoint, &cep(json!("x"))).is_empty());
        assert!(referenced_ids(Kind::Endpoint, &json!({})).is_empty());
        let ces = json!({"endpoints": [{"id": 1}, {"id": "2"}, {"name": "no-id"}]});
        assert_eq!(referenced_ids(Kind::EndpointSlice, &ces), vec![1, 2]);
    }
}
