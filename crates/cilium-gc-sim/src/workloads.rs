//! The Cilium workloads in `kube-system`: the cilium-operator Deployment,
//! the cilium DaemonSet and the operator's pods, read-only. `diagnose`
//! reads their images (which version, which known GC defects) and the
//! pods' restart counts and start times; nothing writes them.
//!
//! Served as a real API server would: `GET .../deployments/cilium-operator`,
//! `GET .../daemonsets/cilium`, and `GET /api/v1/namespaces/<ns>/pods`
//! with an equality `labelSelector`; other names are 404, and RBAC denials
//! of the scenario apply (`get deployments`, `list pods`, ...). The pod
//! proxy (`GET .../pods/<name>:9963/proxy/metrics`, `get pods/proxy`)
//! serves an operator pod's identity-GC metrics when the scenario gives it
//! some.

use std::time::Duration;

use axum::body::Body;
use axum::http::Response;
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};

use super::install::{CiliumInstall, OperatorPod, OPERATOR_METRICS_PORT};
use super::state::{ClientRequest, ServerState};
use super::status::{self, ResourceRef};

const LABELS: [(&str, &str); 2] = [("io.cilium/app", "operator"), ("name", "cilium-operator")];

fn ago(now: Timestamp, d: Duration) -> String {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::ZERO);
    now.checked_sub(d).unwrap_or(now).to_string()
}

fn meta(name: &str, ns: &str, created: &str) -> Value {
    json!({"name": name, "namespace": ns, "uid": format!("5e1f0000-0000-4000-8000-{:012x}", name.len()),
           "resourceVersion": "1", "generation": 1, "creationTimestamp": created})
}

fn deployment(i: &CiliumInstall, now: Timestamp) -> Value {
    let labels: serde_json::Map<String, Value> = LABELS
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    let created = ago(now, Duration::from_secs(90 * 86_400));
    json!({"kind": "Deployment", "apiVersion": "apps/v1",
        "metadata": meta("cilium-operator", &i.namespace, &created),
        "spec": {"replicas": i.operator_pods.len(), "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "cilium-operator", "image": i.operator_image,
                    "command": ["cilium-operator-generic"]}]}}},
        "status": {"replicas": i.operator_pods.len(), "readyReplicas": i.operator_pods.len()}})
}

fn daemonset(i: &CiliumInstall, now: Timestamp) -> Value {
    let created = ago(now, Duration::from_secs(90 * 86_400));
    json!({"kind": "DaemonSet", "apiVersion": "apps/v1",
        "metadata": meta("cilium", &i.namespace, &created),
        "spec": {"selector": {"matchLabels": {"k8s-app": "cilium"}},
            "template": {"metadata": {"labels": {"k8s-app": "cilium"}},
                "spec": {"initContainers": [{"name": "config", "image": i.agent_image}],
                    "containers": [{"name": "cilium-agent", "image": i.agent_image}]}}}})
}

fn pod(i: &CiliumInstall, p: &OperatorPod, now: Timestamp) -> Value {
    let labels: serde_json::Map<String, Value> = LABELS
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    let started = ago(now, p.running_for);
    let mut status = json!({"name": "cilium-operator", "image": i.operator_image, "ready": true,
        "restartCount": p.restarts, "state": {"running": {"startedAt": started}}});
    if p.restarts > 0 {
        status["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error",
            "startedAt": ago(now, p.running_for + Duration::from_secs(3600)), "finishedAt": started}});
    }
    let mut m = meta(&p.name, &i.namespace, &ago(now, p.age));
    m["labels"] = Value::Object(labels);
    // As Cilium's chart with prometheus enabled: a named container port.
    json!({"kind": "Pod", "apiVersion": "v1", "metadata": m,
        "spec": {"containers": [{"name": "cilium-operator", "image": i.operator_image,
            "args": ["--config-dir=/tmp/cilium/config-map"],
            "ports": [{"name": "prometheus", "containerPort": OPERATOR_METRICS_PORT, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "startTime": ago(now, p.age), "containerStatuses": [status]}})
}

/// `GET pods/<pod>:<port>/proxy/<path>`: the API server's proxy to an
/// operator pod's metrics endpoint. Needs `get` on `pods/proxy`; a pod
/// that does not exist is 404; a port or path nothing serves is 503, the
/// code kube-apiserver gives when the dial to the pod fails.
pub(crate) fn proxy(
    app: &ServerState,
    namespace: &str,
    pod: &str,
    path: &str,
    verb: &str,
) -> Response<Body> {
    let res = ResourceRef {
        group: "",
        plural: "pods/proxy",
        kind: "Pod",
    };
    let (name, port) = match pod.split_once(':') {
        Some((n, p)) => (n, p.parse::<u16>().ok()),
        None => (pod, Some(80)),
    };
    if !app.allowed(verb, "pods/proxy") {
        return status::forbidden(res, name, Some(namespace), &app.user, verb);
    }
    let found = app
        .cilium_install
        .as_ref()
        .filter(|i| i.namespace == namespace)
        .and_then(|i| i.operator_pods.iter().find(|p| p.name == name));
    let Some(p) = found else {
        return status::not_found(res, name);
    };
    match (p.metrics, port, path) {
        (Some(m), Some(OPERATOR_METRICS_PORT), "/metrics") => {
            let started =
                app.clock.now().as_millisecond() as f64 / 1000.0 - p.running_for.as_secs_f64();
            Response::builder()
                .status(200)
                .header("content-type", "text/plain; version=0.0.4; charset=utf-8")
                .body(Body::from(m.exposition(started)))
                .unwrap_or_default()
        }
        _ => status::json_response(
            503,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("error trying to reach service: dial tcp 10.0.0.1:{}: connect: connection refused", port.unwrap_or(0)),
                "reason": "ServiceUnavailable", "code": 503}),
        ),
    }
}

/// Whether `obj`'s labels satisfy an equality selector (`a=b,c=d`); other
/// operators are not needed by any client of the simulator.
fn selected(obj: &Value, selector: Option<&String>) -> bool {
    let Some(sel) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    sel.split(',').all(|term| {
        let (k, v) = term.split_once('=').unwrap_or((term, ""));
        let v = v.trim_start_matches('=');
        obj["metadata"]["labels"][k.trim()].as_str() == Some(v.trim())
    })
}

/// `GET` of a Deployment, DaemonSet or Pod (one, or the list of pods).
pub(crate) fn serve(
    app: &ServerState,
    r: &ClientRequest,
    namespace: &str,
    plural: &'static str,
    name: Option<&str>,
    verb: &str,
) -> Response<Body> {
    let (group, kind) = match plural {
        "pods" => ("", "Pod"),
        "deployments" => ("apps", "Deployment"),
        _ => ("apps", "DaemonSet"),
    };
    let res = ResourceRef {
        group,
        plural,
        kind,
    };
    if !app.allowed(verb, plural) {
        return status::forbidden(res, name.unwrap_or(""), Some(namespace), &app.user, verb);
    }
    let now = app.clock.now();
    let install = app
        .cilium_install
        .as_ref()
        .filter(|i| i.namespace == namespace);
    let Some(name) = name else {
        let items: Vec<Value> = match (plural, install) {
            ("pods", Some(i)) => i
                .operator_pods
                .iter()
                .map(|p| pod(i, p, now))
                .filter(|p| selected(p, r.query.get("labelSelector")))
                .collect(),
            ("deployments", Some(i)) => vec![deployment(i, now)],
            ("daemonsets", Some(i)) => vec![daemonset(i, now)],
            _ => vec![],
        };
        let list_kind = format!("{kind}List");
        let api_version = if group.is_empty() { "v1" } else { "apps/v1" };
        return status::json_response(
            200,
            &json!({"kind": list_kind, "apiVersion": api_version,
                    "metadata": {"resourceVersion": "1"}, "items": items}),
        );
    };
    let found = install.and_then(|i| match (plural, name) {
        ("deployments", "cilium-operator") => Some(deployment(i, now)),
        ("daemonsets", "cilium") => Some(daemonset(i, now)),
        ("pods", n) => i
            .operator_pods
            .iter()
            .find(|p| p.name == n)
            .map(|p| pod(i, p, now)),
        _ => None,
    });
    match found {
        Some(v) => status::json_response(200, &v),
        None => status::not_found(res, name),
    }
}
