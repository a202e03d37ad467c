//! The label keys network policies select on, for `--labels`:
//! a filter that drops a key a policy selects on makes the policy stop
//! selecting those pods (cilium#18878). Read with an optional permission.
//!
//! Only the keys are kept, never the policy: every object that holds
//! `matchLabels` or `matchExpressions` is a label selector, except under
//! `nodeSelector` (host policies select node labels, filtered apart). Keys
//! become identity labels as Cilium writes them: a key without a source, or
//! with `any:`, is a pod label (`k8s:`); a NetworkPolicy's
//! `namespaceSelector` key `team` is `k8s:io.cilium.k8s.namespace.labels.team`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::input::{Policies, PolicySelectors};
use cilium_gc_cluster::cluster::ApiClient;
use cilium_gc_cluster::retry::Class;
use cilium_gc_documents::diagnosis::PolicyKind;

/// The namespace-label prefix of identity labels.
const NAMESPACE_LABELS: &str = "io.cilium.k8s.namespace.labels.";

/// The list path of each kind.
fn path(kind: PolicyKind) -> &'static str {
    match kind {
        PolicyKind::CiliumNetworkPolicy => "/apis/cilium.io/v2/ciliumnetworkpolicies",
        PolicyKind::CiliumClusterwideNetworkPolicy => {
            "/apis/cilium.io/v2/ciliumclusterwidenetworkpolicies"
        }
        PolicyKind::NetworkPolicy => "/apis/networking.k8s.io/v1/networkpolicies",
    }
}

/// The kind of a `kind:` field, when it is one of ours.
pub(crate) fn kind_of(kind: &str) -> Option<PolicyKind> {
    match kind {
        "CiliumNetworkPolicy" => Some(PolicyKind::CiliumNetworkPolicy),
        "CiliumClusterwideNetworkPolicy" => Some(PolicyKind::CiliumClusterwideNetworkPolicy),
        "NetworkPolicy" => Some(PolicyKind::NetworkPolicy),
        _ => None,
    }
}

/// One selector key as an identity label.
fn identity_label(key: &str, namespace_selector: bool) -> String {
    if namespace_selector {
        return format!("k8s:{NAMESPACE_LABELS}{key}");
    }
    match key.split_once(':') {
        Some(("any", k)) => format!("k8s:{k}"),
        Some((source, k)) if !source.contains('.') && !source.contains('/') => {
            format!("{source}:{k}")
        }
        _ => format!("k8s:{key}"),
    }
}

/// Every selector key under `v`; `key` is the field `v` sits in.
fn walk(v: &Value, key: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| walk(x, key, out)),
        Value::Object(m) => {
            if key == "nodeSelector" {
                return;
            }
            let ns = key == "namespaceSelector";
            if let Some(Value::Object(labels)) = m.get("matchLabels") {
                out.extend(labels.keys().map(|k| identity_label(k, ns)));
            }
            if let Some(Value::Array(exprs)) = m.get("matchExpressions") {
                out.extend(
                    exprs
                        .iter()
                        .filter_map(|e| e["key"].as_str())
                        .map(|k| identity_label(k, ns)),
                );
            }
            for (k, x) in m {
                if k != "matchLabels" && k != "matchExpressions" {
                    walk(x, k, out);
                }
            }
        }
        _ => {}
    }
}

/// The selector keys of one policy object (its `spec` and `specs`).
pub(crate) fn selectors(kind: PolicyKind, object: &Value) -> PolicySelectors {
    let mut keys = BTreeSet::new();
    for field in ["spec", "specs"] {
        walk(&object[field], field, &mut keys);
    }
    let meta = &object["metadata"];
    PolicySelectors {
        kind,
        namespace: meta["namespace"].as_str().map(str::to_owned),
        name: meta["name"].as_str().unwrap_or_default().to_owned(),
        keys: keys.into_iter().collect(),
    }
}

/// Every CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy and
/// NetworkPolicy in the cluster, as selector keys. A kind that cannot be
/// read is a problem, never a failure: the permission is optional.
pub(crate) async fn fetch(api: &ApiClient) -> Policies {
    let mut p = Policies::default();
    for kind in [
        PolicyKind::CiliumNetworkPolicy,
        PolicyKind::CiliumClusterwideNetworkPolicy,
        PolicyKind::NetworkPolicy,
    ] {
        let a = api.get(path(kind), crate::settings::MAX_RETRIES).await;
        match a.class {
            Class::Success => {
                let list = a.json::<Value>().unwrap_or_default();
                p.items.extend(
                    list["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|o| selectors(kind, o)),
                );
            }
            Class::Forbidden => p.problems.push(format!(
                "no permission to list {} (optional): policies of that kind were not checked",
                path(kind).rsplit('/').next().unwrap_or_default()
            )),
            // The CRD is not installed: no policies of that kind.
            Class::NotFound => {}
            _ => p.problems.push(format!(
                "cannot list {}: {}",
                path(kind).rsplit('/').next().unwrap_or_default(),
                a.message
            )),
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selector_keys_become_identity_labels() {
        let cnp = json!({"metadata": {"name": "p", "namespace": "n"}, "spec": {
            "endpointSelector": {"matchLabels": {"app": "web", "k8s:job-name": "x"}},
            "ingress": [{"fromEndpoints": [{"matchLabels": {"any:team": "a"},
                "matchExpressions": [{"key": "k8s:io.kubernetes.pod.namespace", "operator": "In", "values": ["a"]}]}]}],
            "nodeSelector": {"matchLabels": {"node-role": "x"}}}});
        let s = selectors(PolicyKind::CiliumNetworkPolicy, &cnp);
        assert_eq!(
            s.keys,
            [
                "k8s:app",
                "k8s:io.kubernetes.pod.namespace",
                "k8s:job-name",
                "k8s:team"
            ]
        );
        assert_eq!(s.namespace.as_deref(), Some("n"));
        let np = json!({"metadata": {"name": "q", "namespace": "n"}, "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "db"}},
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}},
                                   "podSelector": {"matchExpressions": [{"key": "role", "operator": "Exists"}]}}]}]}});
        let s = selectors(PolicyKind::NetworkPolicy, &np);
        assert_eq!(
            s.keys,
            [
                "k8s:app.kubernetes.io/name",
                "k8s:io.cilium.k8s.namespace.labels.team",
                "k8s:role"
            ]
        );
    }
}
