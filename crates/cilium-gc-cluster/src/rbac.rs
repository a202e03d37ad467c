//! The permissions a run needs: one list, used by the
//! SelfSubjectAccessReviews below (preflight's, before any write, and the
//! sweep's, when a write meets a 403 mid-run) and by the least-privilege
//! RBAC in `examples/cronjob.yaml` (a test keeps the two equal).

use http::Method;
use serde::Deserialize;
use serde_json::json;

use crate::cluster::{ApiClient, ServerError, JSON};
use crate::model::{Kind, CILIUM_GROUP};
use crate::retry::Class;

/// One permission: a verb on a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Permission {
    /// API group (`cilium.io`, or `""` for core).
    pub group: &'static str,
    /// Plural resource.
    pub resource: &'static str,
    /// RBAC verb.
    pub verb: &'static str,
    /// Whether the resource is namespaced and the permission is needed only in
    /// the cilium namespace (a Role, not a ClusterRole).
    pub namespaced: bool,
    /// When the permission is needed.
    pub needed_for: Need,
    /// The one object it is needed on, when it is one (RBAC `resourceNames`).
    pub resource_name: Option<&'static str>,
}

/// When a permission is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Need {
    /// Every run, `scan` included.
    Always,
    /// Only when the run deletes (`delete`, dry-run included).
    Delete,
    /// Only with `--mark`.
    Mark,
    /// Only when the CiliumEndpointSlice CRD is installed.
    Slices,
    /// Nice to have: without it defaults are assumed (the cilium-config
    /// ConfigMap) or a diagnose finding is skipped (the Cilium workloads,
    /// the operator's metrics).
    Optional,
}

const fn cilium(kind: Kind, verb: &'static str, needed_for: Need) -> Permission {
    Permission {
        group: CILIUM_GROUP,
        resource: kind.plural(),
        verb,
        namespaced: false,
        needed_for,
        resource_name: None,
    }
}

/// An optional read in the Cilium namespace, of one named object or a list.
const fn optional_read(
    group: &'static str,
    resource: &'static str,
    verb: &'static str,
    resource_name: Option<&'static str>,
) -> Permission {
    Permission {
        group,
        resource,
        verb,
        namespaced: true,
        needed_for: Need::Optional,
        resource_name,
    }
}

/// An optional cluster-wide read (a ClusterRole rule): only `diagnose
/// --labels` uses these, and goes on without them.
const fn optional_cluster_read(
    group: &'static str,
    resource: &'static str,
    verb: &'static str,
) -> Permission {
    Permission {
        group,
        resource,
        verb,
        namespaced: false,
        needed_for: Need::Optional,
        resource_name: None,
    }
}

/// Every permission any run may need.
pub const PERMISSIONS: &[Permission] = &[
    cilium(Kind::Identity, "list", Need::Always),
    cilium(Kind::Identity, "get", Need::Delete),
    cilium(Kind::Identity, "delete", Need::Delete),
    cilium(Kind::Identity, "patch", Need::Mark),
    cilium(Kind::Endpoint, "list", Need::Always),
    cilium(Kind::Endpoint, "watch", Need::Always),
    cilium(Kind::EndpointSlice, "list", Need::Slices),
    cilium(Kind::EndpointSlice, "watch", Need::Slices),
    // Cilium's settings (allocation mode, heartbeat timeout, cluster id).
    optional_read("", "configmaps", "get", Some("cilium-config")),
    // diagnose: the operator's and agents' versions, the operator's restarts.
    optional_read("apps", "deployments", "get", Some("cilium-operator")),
    optional_read("apps", "daemonsets", "get", Some("cilium")),
    optional_read("", "pods", "list", None),
    // diagnose: the operator's identity-GC metrics through the pod proxy.
    optional_read("", "pods/proxy", "get", None),
    // diagnose --labels: the policies whose selectors a filter would break.
    optional_cluster_read(CILIUM_GROUP, "ciliumnetworkpolicies", "list"),
    optional_cluster_read(CILIUM_GROUP, "ciliumclusterwidenetworkpolicies", "list"),
    optional_cluster_read("networking.k8s.io", "networkpolicies", "list"),
];

/// The permissions a run with these settings must have.
pub fn required(deleting: bool, marking: bool, slices: bool) -> Vec<Permission> {
    PERMISSIONS
        .iter()
        .copied()
        .filter(|p| match p.needed_for {
            Need::Always => true,
            Need::Delete => deleting,
            Need::Mark => marking,
            Need::Slices => slices,
            Need::Optional => false,
        })
        .collect()
}

/// `delete ciliumidentities.cilium.io (cluster-wide)`.
pub fn describe_permission(p: &Permission) -> String {
    let res = if p.group.is_empty() {
        p.resource.to_owned()
    } else {
        format!("{}.{}", p.resource, p.group)
    };
    format!("{} {}", p.verb, res)
}

/// Ask SelfSubjectAccessReview for each permission; returns the ones denied.
/// A review that cannot be made is treated as allowed (the run then meets
/// the real 403 and stops cleanly), with a warning.
pub async fn fetch_missing_permissions(
    api: &ApiClient,
    slices_version: &str,
    wanted: &[Permission],
    cilium_namespace: &str,
    max_retries: u32,
) -> (Vec<Permission>, Vec<String>) {
    let mut missing = Vec::new();
    let mut warnings = Vec::new();
    for p in wanted {
        let version = if p.resource == Kind::EndpointSlice.plural() {
            slices_version
        } else {
            "v2"
        };
        match review(api, p, version, cilium_namespace, max_retries).await {
            Ok(true) => {}
            Ok(false) => missing.push(*p),
            Err(message) => warnings.push(format!(
                "could not check permission {} ({message})",
                describe_permission(p)
            )),
        }
    }
    (missing, warnings)
}

/// Whether the server allows `p` now, by SelfSubjectAccessReview (`version`
/// is the Cilium API version of the resource). `Err` with the answer (its
/// status code and message) when the review could not be made.
pub async fn review(
    api: &ApiClient,
    p: &Permission,
    version: &str,
    cilium_namespace: &str,
    max_retries: u32,
) -> Result<bool, ServerError> {
    let mut attrs = json!({"group": p.group, "resource": p.resource, "verb": p.verb});
    if p.namespaced {
        attrs["namespace"] = json!(cilium_namespace);
    }
    if p.group == CILIUM_GROUP {
        attrs["version"] = json!(version);
    }
    let body = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attrs},
    });
    let a = api
        .send(
            Method::POST,
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            Some((JSON, body.to_string().into_bytes())),
            max_retries,
        )
        .await;
    if let (Class::Success, Ok(r)) = (&a.class, a.json::<Review>()) {
        return Ok(r.status.allowed);
    }
    Err(a.into_error())
}

#[derive(Deserialize)]
struct Review {
    #[serde(default)]
    status: ReviewStatus,
}
#[derive(Deserialize, Default)]
struct ReviewStatus {
    #[serde(default)]
    allowed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_needs_no_write_verbs() {
        let verbs: Vec<_> = required(false, false, true)
            .iter()
            .map(|p| p.verb)
            .collect();
        assert!(!verbs.contains(&"delete") && !verbs.contains(&"patch"));
        let all = required(true, true, true);
        assert!(all
            .iter()
            .any(|p| p.verb == "delete" && p.resource == "ciliumidentities"));
        assert!(all.iter().any(|p| p.verb == "patch"));
    }
}
