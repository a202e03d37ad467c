//! Discovery documents (legacy, plain `application/json`, so clients fall
//! back from aggregated discovery), the CRD objects, `cilium-config` and
//! SelfSubjectAccessReview (reference §1, §6, §8).

use axum::body::Body;
use axum::http::Response;
use serde_json::{json, Value};

use super::crds::crd_json;
use super::scenario::CrdSet;
use super::state::ServerState;
use super::status::{self, ResourceRef};
use crate::kinds::{Kind, CILIUM_GROUP};

const ALL_KINDS: [Kind; 3] = [Kind::Identity, Kind::Endpoint, Kind::EndpointSlice];
const CRD_VERBS: [&str; 8] = [
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

/// `/version`.
pub(crate) fn version() -> Value {
    json!({"major":"1","minor":"32","gitVersion":"v1.32.0","gitCommit":"70d3cc986aa8221cd1dfb1121852688902d3bf53",
           "gitTreeState":"clean","buildDate":"2024-12-11T17:59:15Z","goVersion":"go1.23.3","compiler":"gc","platform":"linux/amd64"})
}

/// `/api`.
pub(crate) fn api_versions() -> Value {
    json!({"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"10.0.0.1:6443"}]})
}

/// `/api/v1`.
pub(crate) fn core_v1() -> Value {
    json!({"kind":"APIResourceList","groupVersion":"v1","resources":[
        {"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap",
         "verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["cm"],"storageVersionHash":"qFsyl6wFWjQ="},
        {"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace",
         "verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["ns"],"storageVersionHash":"Q3oi5N2YM8M="}
    ]})
}

fn group_version(group: &str, version: &str) -> Value {
    json!({"groupVersion": format!("{group}/{version}"), "version": version})
}

/// Versions of `cilium.io` served, given the installed CRDs.
fn cilium_versions(crds: &CrdSet) -> Vec<&'static str> {
    let mut v = Vec::new();
    if crds.identities || crds.endpoints || (crds.slices && crds.slices_v2) {
        v.push("v2");
    }
    if crds.slices {
        v.push("v2alpha1");
    }
    v
}

/// One `APIGroup`.
fn api_group(name: &str, versions: &[&str]) -> Value {
    json!({"name": name,
           "versions": versions.iter().map(|v| group_version(name, v)).collect::<Vec<_>>(),
           "preferredVersion": group_version(name, versions[0])})
}

/// `/apis`: cilium.io only when some Cilium CRD is installed.
pub(crate) fn api_groups(crds: &CrdSet) -> Value {
    let mut groups = vec![
        api_group("apiextensions.k8s.io", &["v1"]),
        api_group("authorization.k8s.io", &["v1"]),
    ];
    let cv = cilium_versions(crds);
    if !cv.is_empty() {
        groups.push(api_group(CILIUM_GROUP, &cv));
    }
    json!({"kind":"APIGroupList","apiVersion":"v1","groups": groups})
}

/// `/apis/<group>`, or `None` (404 page not found).
pub(crate) fn group(crds: &CrdSet, name: &str) -> Option<Value> {
    let versions = match name {
        CILIUM_GROUP => cilium_versions(crds),
        "apiextensions.k8s.io" | "authorization.k8s.io" => vec!["v1"],
        _ => vec![],
    };
    if versions.is_empty() {
        return None;
    }
    let mut g = api_group(name, &versions);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// The `APIResource` entries of one CRD (resource and status subresource).
fn crd_resources(kind: Kind) -> Vec<Value> {
    let crd = crd_json(kind, 1);
    let names = &crd["spec"]["names"];
    let namespaced = crd["spec"]["scope"] == "Namespaced";
    let mut main = json!({"name": kind.plural(), "singularName": names["singular"], "namespaced": namespaced,
        "kind": kind.kind(), "verbs": CRD_VERBS, "storageVersionHash": format!("{:012}", kind as u8 + 1)});
    if let Some(s) = names.get("shortNames") {
        main["shortNames"] = s.clone();
    }
    if let Some(c) = names.get("categories") {
        main["categories"] = c.clone();
    }
    let status = json!({"name": format!("{}/status", kind.plural()), "singularName": "", "namespaced": namespaced,
        "kind": kind.kind(), "verbs": ["get","patch","update"]});
    vec![main, status]
}

/// `/apis/<group>/<version>`, or `None` (404 page not found).
pub(crate) fn group_version_resources(crds: &CrdSet, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = match (group, version) {
        (CILIUM_GROUP, _) => ALL_KINDS
            .iter()
            .filter(|k| crds.serves(**k, version))
            .flat_map(|k| crd_resources(*k))
            .collect(),
        ("apiextensions.k8s.io", "v1") => vec![
            json!({"name":"customresourcedefinitions","singularName":"customresourcedefinition",
            "namespaced":false,"kind":"CustomResourceDefinition","verbs":CRD_VERBS,"shortNames":["crd","crds"],"categories":["api-extensions"]}),
        ],
        ("authorization.k8s.io", "v1") => vec![
            json!({"name":"selfsubjectaccessreviews","singularName":"selfsubjectaccessreview",
            "namespaced":false,"kind":"SelfSubjectAccessReview","verbs":["create"]}),
        ],
        _ => vec![],
    };
    if resources.is_empty() {
        return None;
    }
    Some(
        json!({"kind":"APIResourceList","apiVersion":"v1","groupVersion": format!("{group}/{version}"),"resources": resources}),
    )
}

const CRD_RES: ResourceRef<'static> = ResourceRef {
    group: "apiextensions.k8s.io",
    plural: "customresourcedefinitions",
    kind: "CustomResourceDefinition",
};

/// `GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions[/NAME]`.
pub(crate) fn crds(app: &ServerState, name: Option<&str>) -> Response<Body> {
    let installed: Vec<Kind> = ALL_KINDS.into_iter().filter(|k| app.crds.has(*k)).collect();
    match name {
        None => {
            let items: Vec<Value> = installed.iter().map(|k| crd_json(*k, 1)).collect();
            status::json_response(
                200,
                &json!({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinitionList",
                "metadata":{"resourceVersion": app.store.rv().to_string()},"items": items}),
            )
        }
        Some(n) => match installed.iter().find(|k| k.crd_name() == n) {
            Some(k) => status::json_response(200, &crd_json(*k, 1)),
            None => status::not_found(CRD_RES, n),
        },
    }
}

/// `GET /api/v1/namespaces/kube-system/configmaps/cilium-config`.
pub(crate) fn cilium_config(app: &ServerState) -> Response<Body> {
    let res = ResourceRef {
        group: "",
        plural: "configmaps",
        kind: "ConfigMap",
    };
    match &app.cilium_config {
        None => status::not_found(res, "cilium-config"),
        Some(data) => status::json_response(
            200,
            &json!({"kind":"ConfigMap","apiVersion":"v1",
            "metadata":{"name":"cilium-config","namespace":"kube-system","uid":"c0f1c0f1-0000-4000-8000-000000000001",
                        "resourceVersion":"1","creationTimestamp":"2024-01-01T00:00:00Z"},
            "data": data}),
        ),
    }
}

/// `POST .../selfsubjectaccessreviews`: 201 with the spec echoed and the
/// scenario's RBAC verdict. Protobuf bodies are not decoded (415).
pub(crate) fn access_review(app: &ServerState, body: &[u8]) -> Response<Body> {
    let Ok(mut review) = serde_json::from_slice::<Value>(body) else {
        return status::failure(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml", None);
    };
    let attrs = &review["spec"]["resourceAttributes"];
    let verb = attrs["verb"].as_str().unwrap_or_default();
    let resource = attrs["resource"].as_str().unwrap_or_default();
    let allowed = app.allowed(verb, resource);
    review["kind"] = json!("SelfSubjectAccessReview");
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["metadata"] = json!({});
    review["status"] = if allowed {
        json!({"allowed": true, "reason": format!("RBAC: allowed by ClusterRoleBinding \"sim-admin\" of ClusterRole \"cluster-admin\" to User {:?}", app.user)})
    } else {
        json!({"allowed": false})
    };
    status::json_response(201, &review)
}
