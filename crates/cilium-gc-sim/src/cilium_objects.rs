//! The Cilium objects the simulated cluster is made of, written as agents
//! and the operator write them: identities (numeric names, `k8s:` security
//! labels, managedFields), CiliumEndpoints and CiliumEndpointSlices. Used
//! by the seed and by the actors that create objects during a run.

use jiff::Timestamp;
use rand::Rng;
use serde_json::{json, Value};

use super::object::{rfc3339_secs, uuid};
use crate::kinds::{HEARTBEAT_ANNOTATION, NAMESPACE_LABEL};

/// Identity labels of one workload.
#[derive(Debug, Clone)]
pub(crate) struct Workload {
    /// Pod namespace.
    pub namespace: String,
    /// `app` label value.
    pub app: String,
    /// For jobs: (job name, controller uid).
    pub job: Option<(String, String)>,
}

impl Workload {
    /// A random workload in one of `namespaces` namespaces.
    pub(crate) fn random(rng: &mut impl Rng, namespaces: usize, job_ratio: f64) -> Self {
        let ns = rng.random_range(0..namespaces.max(1));
        let namespace = format!("team-{ns:03}");
        let app = format!("svc-{}", rng.random_range(0..400u32));
        let job = rng.random_bool(job_ratio.clamp(0.0, 1.0)).then(|| {
            let name = format!("{app}-job-{}", rng.random_range(0..100_000_000u32));
            (name, uuid(rng))
        });
        Workload {
            namespace,
            app,
            job,
        }
    }

    /// `security-labels` (all `k8s:`-prefixed), sorted by key as Go
    /// encodes maps.
    pub(crate) fn security_labels(&self) -> Vec<(String, &str)> {
        let mut m: Vec<(String, &str)> = vec![
            ("k8s:app".into(), self.app.as_str()),
            (
                "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name".into(),
                self.namespace.as_str(),
            ),
            ("k8s:io.cilium.k8s.policy.cluster".into(), "default"),
            ("k8s:io.cilium.k8s.policy.serviceaccount".into(), "default"),
            (format!("k8s:{NAMESPACE_LABEL}"), self.namespace.as_str()),
        ];
        if let Some((job, uid)) = &self.job {
            m.push((
                "k8s:batch.kubernetes.io/controller-uid".into(),
                uid.as_str(),
            ));
            m.push(("k8s:batch.kubernetes.io/job-name".into(), job.as_str()));
            m.push(("k8s:controller-uid".into(), uid.as_str()));
            m.push(("k8s:job-name".into(), job.as_str()));
        }
        m.sort();
        m
    }
}

/// A JSON string literal.
fn q(s: &str) -> String {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        format!("\"{s}\"")
    } else {
        Value::String(s.to_owned()).to_string()
    }
}

/// `{"k":"v",...}` from pairs.
fn str_map<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let body: Vec<String> = pairs.map(|(k, v)| format!("{}:{}", q(k), q(v))).collect();
    format!("{{{}}}", body.join(","))
}

/// `"resourceVersion":"N",` or nothing.
fn rv_field(rv: Option<u64>) -> String {
    rv.map(|rv| format!(r#""resourceVersion":"{rv}","#))
        .unwrap_or_default()
}

/// A CiliumIdentity as JSON text, written directly (seeding 65k of them
/// through `serde_json::Value` is too slow in debug builds).
pub(crate) fn identity_text(
    name: &str,
    w: &Workload,
    created: Timestamp,
    uid: &str,
    mark: Option<&str>,
    mark_time: Timestamp,
    rv: Option<u64>,
) -> String {
    let sec = w.security_labels();
    let sec_json = str_map(sec.iter().map(|(k, v)| (k.as_str(), *v)));
    let labels = str_map(
        sec.iter()
            .map(|(k, v)| (k.trim_start_matches("k8s:"), *v))
            .filter(|(k, _)| !k.starts_with("io.cilium.k8s.namespace.labels")),
    );
    let created = rfc3339_secs(created);
    let (annotations, operator_entry) = match mark {
        Some(m) => (
            format!(r#","annotations":{{"{HEARTBEAT_ANNOTATION}":{}}}"#, q(m)),
            format!(
                r#",{{"manager":"cilium-operator-generic","operation":"Update","apiVersion":"cilium.io/v2","time":"{}","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:annotations":{{".":{{}},"f:{HEARTBEAT_ANNOTATION}":{{}}}}}}}}}}"#,
                rfc3339_secs(mark_time)
            ),
        ),
        None => (String::new(), String::new()),
    };
    format!(
        concat!(
            r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumIdentity","metadata":{{"name":{name},"uid":"{uid}",{rv}"generation":1,"creationTimestamp":"{created}","labels":{labels}{annotations},"#,
            r#""managedFields":[{{"manager":"cilium-agent","operation":"Update","apiVersion":"cilium.io/v2","time":"{created}","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:labels":{{}}}},"f:security-labels":{{}}}}}}{op}]}},"#,
            r#""security-labels":{sec}}}"#
        ),
        name = q(name),
        uid = uid,
        rv = rv_field(rv),
        created = created,
        labels = labels,
        annotations = annotations,
        op = operator_entry,
        sec = sec_json
    )
}

/// A CiliumIdentity object (no resourceVersion yet).
pub(crate) fn identity(
    name: &str,
    w: &Workload,
    created: Timestamp,
    uid: String,
    mark: Option<String>,
    manager_time: Timestamp,
) -> Value {
    serde_json::from_str(&identity_text(
        name,
        w,
        created,
        &uid,
        mark.as_deref(),
        manager_time,
        None,
    ))
    .unwrap_or(Value::Null)
}

/// A CiliumEndpoint of pod `name` using identity `id`, as JSON text.
pub(crate) fn endpoint_text(
    name: &str,
    w: &Workload,
    id: u64,
    created: Timestamp,
    uid: &str,
    ip: u32,
    rv: Option<u64>,
) -> String {
    let ipv4 = format!(
        "10.{}.{}.{}",
        (ip >> 16) & 0xff,
        (ip >> 8) & 0xff,
        ip & 0xff
    );
    let labels: Vec<String> = w
        .security_labels()
        .iter()
        .map(|(k, v)| q(&format!("{k}={v}")))
        .collect();
    let created = rfc3339_secs(created);
    let (ns, app, name) = (q(&w.namespace), q(&w.app), q(name));
    format!(
        concat!(
            r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumEndpoint","metadata":{{"name":{name},"namespace":{ns},"uid":"{uid}",{rv}"generation":1,"creationTimestamp":"{created}","#,
            r#""labels":{{"app":{app}}},"ownerReferences":[{{"apiVersion":"v1","kind":"Pod","name":{name},"uid":"{uid}","blockOwnerDeletion":true}}],"#,
            r#""managedFields":[{{"manager":"cilium-agent","operation":"Update","apiVersion":"cilium.io/v2","time":"{created}","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:labels":{{}},"f:ownerReferences":{{}}}},"f:status":{{}}}}}}]}},"#,
            r#""status":{{"id":{epid},"identity":{{"id":{id},"labels":[{labels}]}},"networking":{{"addressing":[{{"ipv4":"{ipv4}"}}],"node":"192.168.0.{node}"}},"state":"ready","encryption":{{}},"#,
            r#""external-identifiers":{{"container-id":"{cid:016x}","k8s-namespace":{ns},"k8s-pod-name":{name},"pod-name":{podname}}}}}}}"#
        ),
        name = name,
        ns = ns,
        uid = uid,
        rv = rv_field(rv),
        created = created,
        app = app,
        epid = ip & 0xfff,
        id = id,
        labels = labels.join(","),
        ipv4 = ipv4,
        node = ip % 50 + 1,
        cid = ip as u64 * 2654435761,
        podname = q(&format!("{}/{}", w.namespace, name.trim_matches('"')))
    )
}

/// A CiliumEndpoint of pod `name` using identity `id`.
pub(crate) fn endpoint(
    name: &str,
    w: &Workload,
    id: u64,
    created: Timestamp,
    uid: String,
    ip: u32,
) -> Value {
    serde_json::from_str(&endpoint_text(name, w, id, created, &uid, ip, None))
        .unwrap_or(Value::Null)
}

/// A CiliumEndpointSlice with `(pod name, identity id)` entries.
pub(crate) fn slice(
    name: &str,
    namespace: &str,
    entries: &[(String, u64)],
    created: Timestamp,
    uid: String,
) -> Value {
    let eps: Vec<Value> = entries
        .iter()
        .enumerate()
        .map(|(i, (pod, id))| json!({"id": id, "name": pod, "networking": {"addressing": [{"ipv4": format!("10.1.{}.{}", i / 250, i % 250 + 1)}], "node": "192.168.0.1"}}))
        .collect();
    json!({
        "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumEndpointSlice",
        "metadata": {"name": name, "uid": uid, "generation": 1, "creationTimestamp": rfc3339_secs(created),
            "managedFields": [{"manager": "cilium-operator-generic", "operation": "Update", "apiVersion": "cilium.io/v2alpha1",
                "time": rfc3339_secs(created), "fieldsType": "FieldsV1", "fieldsV1": {"f:endpoints": {}, "f:namespace": {}}}]},
        "endpoints": eps,
        "namespace": namespace
    })
}
