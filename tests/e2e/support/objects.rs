//! Cilium-shaped objects created through the real API, the way cilium-agent
//! and cilium-operator create them, and reads of what the server holds.

use std::collections::BTreeSet;

use futures::{stream, StreamExt, TryStreamExt};
use jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

/// The heartbeat annotation cilium-operator marks unused identities with.
pub const HEARTBEAT: &str = "io.cilium.heartbeat";

/// The kinds the suite creates.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Namespace,
    Identity,
    Endpoint,
    EndpointSlice,
}

impl Kind {
    fn resource(self) -> ApiResource {
        let (g, v, k, plural) = match self {
            Kind::Namespace => ("", "v1", "Namespace", "namespaces"),
            Kind::Identity => ("cilium.io", "v2", "CiliumIdentity", "ciliumidentities"),
            Kind::Endpoint => ("cilium.io", "v2", "CiliumEndpoint", "ciliumendpoints"),
            Kind::EndpointSlice => (
                "cilium.io",
                "v2alpha1",
                "CiliumEndpointSlice",
                "ciliumendpointslices",
            ),
        };
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), plural)
    }

    fn of(obj: &Value) -> Kind {
        match obj["kind"].as_str() {
            Some("Namespace") => Kind::Namespace,
            Some("CiliumIdentity") => Kind::Identity,
            Some("CiliumEndpoint") => Kind::Endpoint,
            Some("CiliumEndpointSlice") => Kind::EndpointSlice,
            other => panic!("no kind {other:?}"),
        }
    }
}

/// The API of `kind` (cluster-wide, or in `namespace`).
pub fn api(client: &kube::Client, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let ar = kind.resource();
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// A namespace.
pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// A CiliumIdentity of a pod in `ns`, marked at `mark` when given.
pub fn identity(id: u64, ns: &str, mark: Option<Timestamp>) -> Value {
    let mut v = json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumIdentity",
        "metadata": {"name": id.to_string(), "labels": {
            "io.kubernetes.pod.namespace": ns, "app": format!("app-{id}")}},
        "security-labels": {
            "k8s:io.kubernetes.pod.namespace": ns,
            "k8s:app": format!("app-{id}"),
            "k8s:io.cilium.k8s.policy.cluster": "default"
        }
    });
    if let Some(m) = mark {
        v["metadata"]["annotations"] = json!({ HEARTBEAT: m.to_string() });
    }
    v
}

/// A CiliumEndpoint of pod `name` in `ns` using identity `id`.
pub fn endpoint(ns: &str, name: &str, id: u64) -> Value {
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
        "metadata": {"name": name, "namespace": ns},
        "status": {"id": 1, "state": "ready",
            "identity": {"id": id, "labels": [format!("k8s:io.kubernetes.pod.namespace={ns}")]},
            "networking": {"addressing": [{"ipv4": "10.0.0.1"}], "node": "192.168.0.1"}}
    })
}

/// A CiliumEndpointSlice in `ns` with one entry per `(pod, id)`.
pub fn slice(name: &str, ns: &str, entries: &[(String, u64)]) -> Value {
    let eps: Vec<Value> = entries
        .iter()
        .map(|(pod, id)| {
            json!({"id": id, "name": pod,
            "networking": {"addressing": [{"ipv4": "10.0.0.2"}], "node": "192.168.0.1"}})
        })
        .collect();
    json!({
        "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumEndpointSlice",
        "metadata": {"name": name}, "namespace": ns, "endpoints": eps
    })
}

/// Create every object, 32 at a time, failing on the first error.
pub async fn create_all(client: &kube::Client, objects: Vec<Value>) {
    stream::iter(objects)
        .map(|obj| async move {
            let kind = Kind::of(&obj);
            let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
            let dobj: DynamicObject = serde_json::from_value(obj).expect("object");
            api(client, kind, ns.as_deref())
                .create(&PostParams::default(), &dobj)
                .await
                .map(|_| ())
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .expect("objects created");
}

/// The names of the CiliumIdentities on the server now.
pub async fn identity_names(client: &kube::Client) -> BTreeSet<String> {
    api(client, Kind::Identity, None)
        .list_metadata(&ListParams::default())
        .await
        .expect("identities listed")
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect()
}

/// `now - age`, for marks.
pub fn ago(age: std::time::Duration) -> Timestamp {
    Timestamp::now() - jiff::SignedDuration::try_from(age).expect("duration")
}

/// The cilium-operator Deployment and cilium DaemonSet as a cluster shows
/// them (the operator binary runs outside the cluster; these name the
/// release `diagnose` reads from their images). The DaemonSet carries the
/// label `cilium sysdump` finds it by, as Cilium's chart sets it.
pub fn cilium_workloads(version: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: cilium-operator, namespace: kube-system}}
spec:
  selector: {{matchLabels: {{io.cilium/app: operator}}}}
  template:
    metadata: {{labels: {{io.cilium/app: operator}}}}
    spec:
      containers: [{{name: cilium-operator, image: "quay.io/cilium/operator-generic:{version}"}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: cilium, namespace: kube-system, labels: {{k8s-app: cilium}}}}
spec:
  selector: {{matchLabels: {{k8s-app: cilium}}}}
  template:
    metadata: {{labels: {{k8s-app: cilium}}}}
    spec:
      containers: [{{name: cilium-agent, image: "quay.io/cilium/cilium:{version}"}}]
"#
    )
}

/// Identities `ids` in use, each with a CiliumEndpoint in namespace `ns`
/// (created here), as the cluster's admin, 64 requests at a time (as the
/// real bench's `seed` does): tens of thousands in a minute or two. A
/// loaded machine's etcd sometimes drops a connection (5xx): retried; a
/// create whose answer was lost may already exist (409 on a retry).
pub async fn seed_in_use(client: &kube::Client, ns: &str, ids: std::ops::RangeInclusive<u64>) {
    create_all(client, vec![namespace(ns)]).await;
    let objects = ids.flat_map(|id| {
        [
            identity(id, ns, None),
            endpoint(ns, &format!("pod-{id}"), id),
        ]
    });
    stream::iter(objects)
        .map(|obj| create_retrying(client, obj))
        .buffer_unordered(64)
        .try_collect::<Vec<()>>()
        .await
        .expect("in-use identities seeded");
}

/// Create `obj`, retrying a 5xx up to five times.
async fn create_retrying(client: &kube::Client, obj: Value) -> Result<(), kube::Error> {
    let kind = Kind::of(&obj);
    let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
    let dobj: DynamicObject = serde_json::from_value(obj).expect("object");
    let api = api(client, kind, ns.as_deref());
    let mut tries = 0;
    loop {
        match api.create(&PostParams::default(), &dobj).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && tries > 0 => return Ok(()),
            Err(kube::Error::Api(e)) if e.code >= 500 && tries < 5 => {}
            Err(e) => return Err(e),
        }
        tries += 1;
        tokio::time::sleep(std::time::Duration::from_millis(200 * tries)).await;
    }
}
