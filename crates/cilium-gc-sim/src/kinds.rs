//! The Cilium resources the simulated server serves, and what it reads out
//! of them: written for the simulator alone, so that the ground truth of
//! the tests (which identity an endpoint protects) never shares a bug with
//! the engine's decoding.

use serde_json::Value;

/// Annotation cilium-operator sets on an unused identity.
pub const HEARTBEAT_ANNOTATION: &str = "io.cilium.heartbeat";
/// Label carrying the pod namespace an identity was allocated for.
pub const NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// Cilium's API group.
pub const CILIUM_GROUP: &str = "cilium.io";

/// One of the three Cilium resources the simulator serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `ciliumidentities.cilium.io/v2`, cluster-scoped.
    Identity,
    /// `ciliumendpoints.cilium.io/v2`, namespaced.
    Endpoint,
    /// `ciliumendpointslices.cilium.io/v2alpha1`, cluster-scoped.
    EndpointSlice,
}

impl Kind {
    /// Plural resource name, as in URLs and RBAC rules.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Identity => "ciliumidentities",
            Kind::Endpoint => "ciliumendpoints",
            Kind::EndpointSlice => "ciliumendpointslices",
        }
    }
    /// API version of the served resource.
    pub fn version(self) -> &'static str {
        match self {
            Kind::Identity | Kind::Endpoint => "v2",
            Kind::EndpointSlice => "v2alpha1",
        }
    }
    /// The Kind, as in objects.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::Identity => "CiliumIdentity",
            Kind::Endpoint => "CiliumEndpoint",
            Kind::EndpointSlice => "CiliumEndpointSlice",
        }
    }
    /// Name of the CustomResourceDefinition object.
    pub fn crd_name(self) -> String {
        format!("{}.{}", self.plural(), CILIUM_GROUP)
    }
    /// Collection path across the whole cluster (all namespaces for endpoints).
    pub fn collection_path(self) -> String {
        format!(
            "/apis/{}/{}/{}",
            CILIUM_GROUP,
            self.version(),
            self.plural()
        )
    }
    /// Path of one cluster-scoped object.
    pub fn object_path(self, name: &str) -> String {
        format!("{}/{}", self.collection_path(), name)
    }
}

/// An identity's numeric id from its name: decimal digits only, no sign,
/// no leading zeros (Cilium's `strconv.ParseUint` of a name it wrote).
pub fn parse_id(name: &str) -> Option<u64> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if name.len() > 1 && name.starts_with('0') {
        return None;
    }
    name.parse().ok()
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
        assert_eq!(parse_id("256"), Some(256));
        for bad in ["", "0256", "-1", "1e3", "x"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
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
