//! The same requests to the real kube-apiserver and to the simulator, the
//! answers compared after the parts that differ by nature (uids,
//! resourceVersions, timestamps) are blanked. Every difference found is
//! either fixed in the simulator (the real server is right) or, where the
//! difference is one of configuration and not of semantics, pinned here and
//! listed in docs/real-apiserver.md.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::support::cluster::{client_for, Cluster};
use crate::support::objects::{self, ago, create_all};

/// One request, in the shape both servers answer.
struct Probe {
    name: &'static str,
    method: &'static str,
    path: String,
    body: Option<Value>,
}

/// An answer with what may differ by nature blanked.
#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    content_type: String,
    retry_after: Option<String>,
    body: Value,
}

async fn send(client: &kube::Client, p: &Probe) -> Answer {
    let mut req = http::Request::builder()
        .method(p.method)
        .uri(p.path.as_str())
        .header("accept", "application/json");
    let body = match &p.body {
        Some(b) => {
            req = req.header(
                "content-type",
                if p.method == "PATCH" {
                    "application/merge-patch+json"
                } else {
                    "application/json"
                },
            );
            serde_json::to_vec(b).unwrap()
        }
        None => Vec::new(),
    };
    let res = client
        .send(req.body(body.into()).unwrap())
        .await
        .expect("an answer");
    let status = res.status().as_u16();
    let header = |h: &str| {
        res.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let retry_after = header("retry-after");
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes)
        .map(|v: Value| blank(&v))
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).trim().to_string()));
    Answer {
        status,
        content_type,
        retry_after,
        body,
    }
}

/// Uids, resourceVersions, times and managedFields blanked; Status messages
/// with their uids and numbers blanked.
fn blank(v: &Value) -> Value {
    let uid =
        regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap();
    let num = regex::Regex::new(r"\b\d+\b").unwrap();
    fn walk(v: &Value, f: &dyn Fn(&str, &Value) -> Option<Value>) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), f(k, v).unwrap_or_else(|| walk(v, f))))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|v| walk(v, f)).collect()),
            other => other.clone(),
        }
    }
    walk(v, &|k, v| match k {
        "uid" | "resourceVersion" | "creationTimestamp" | "deletionTimestamp" | "continue"
        | "remainingItemCount" => Some(json!("<blank>")),
        "managedFields" | "generation" => Some(json!("<blank>")),
        // The decoder's words for a malformed token differ (Go's JSON vs base64).
        "message"
            if v.as_str()
                .is_some_and(|m| m.starts_with("invalid continue token")) =>
        {
            Some(json!("invalid continue token: <decoder error>"))
        }
        "message" => v
            .as_str()
            .map(|s| json!(num.replace_all(&uid.replace_all(s, "<uid>"), "<n>"))),
        _ => None,
    })
}

/// The identities both servers hold before the probes.
fn identities() -> Vec<Value> {
    let hour = ago(Duration::from_secs(3600));
    vec![
        objects::identity(60000, "team-0", Some(hour)),
        objects::identity(60001, "team-0", None),
        objects::identity(60002, "team-0", None),
        objects::identity(60003, "team-0", None),
    ]
}

fn probes() -> Vec<Probe> {
    let ids = "/apis/cilium.io/v2/ciliumidentities";
    let delete_with = |pre: Value| {
        Some(json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": pre}))
    };
    vec![
        Probe {
            name: "get one",
            method: "GET",
            path: format!("{ids}/60001"),
            body: None,
        },
        Probe {
            name: "get missing",
            method: "GET",
            path: format!("{ids}/4242"),
            body: None,
        },
        Probe {
            name: "delete missing",
            method: "DELETE",
            path: format!("{ids}/4242"),
            body: None,
        },
        Probe {
            name: "delete, stale resourceVersion",
            method: "DELETE",
            path: format!("{ids}/60000"),
            body: delete_with(json!({"resourceVersion": "1"})),
        },
        Probe {
            name: "delete, wrong uid",
            method: "DELETE",
            path: format!("{ids}/60000"),
            body: delete_with(json!({"uid": "00000000-0000-4000-8000-000000000000"})),
        },
        Probe {
            name: "delete, dry run",
            method: "DELETE",
            path: format!("{ids}/60002"),
            body: Some(json!({"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["All"]})),
        },
        Probe {
            name: "delete",
            method: "DELETE",
            path: format!("{ids}/60003"),
            body: None,
        },
        Probe {
            name: "merge patch missing",
            method: "PATCH",
            path: format!("{ids}/4242"),
            body: Some(json!({"metadata": {"annotations": {"a": "b"}}})),
        },
        Probe {
            name: "list, limit 2",
            method: "GET",
            path: format!("{ids}?limit=2"),
            body: None,
        },
        Probe {
            name: "list, bad continue",
            method: "GET",
            path: format!("{ids}?limit=2&continue=garbage"),
            body: None,
        },
        Probe {
            name: "unknown resource",
            method: "GET",
            path: "/apis/cilium.io/v2/nothings".into(),
            body: None,
        },
        Probe {
            name: "unknown group",
            method: "GET",
            path: "/apis/nothing.io/v1".into(),
            body: None,
        },
        Probe {
            name: "watch, too old resourceVersion",
            method: "GET",
            path: format!("{ids}?watch=1&resourceVersion=1&timeoutSeconds=1"),
            body: None,
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_answers_as_the_real_server_does() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let real = cluster.admin().await;
    create_all(&real, vec![objects::namespace("team-0")]).await;
    let seeded = identities();
    create_all(&real, seeded.clone()).await;

    let scenario = cilium_gc_sim::Scenario {
        identities: 0,
        endpoints: 0,
        not_local_identity: false,
        ..crate::support::calm_default()
    };
    let sim = cilium_gc_sim::Simulator::start(scenario)
        .await
        .expect("simulator");
    for v in seeded {
        sim.create_object(cilium_gc_sim::Kind::Identity, v, "test")
            .expect("seeded");
    }
    // The real server's watch cache begins when it starts, after etcd's
    // history: a watch from resourceVersion 1 is too old there. The
    // simulator's history is its own; forget it so the probe asks the same.
    sim.compact_history();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let simulated = client_for(&kc).await;

    let mut diffs = BTreeMap::new();
    for p in probes() {
        let (r, s) = (send(&real, &p).await, send(&simulated, &p).await);
        if r != s {
            diffs.insert(p.name, format!("real:      {r:?}\nsimulator: {s:?}"));
        }
    }
    let report: Vec<String> = diffs.iter().map(|(k, v)| format!("== {k}\n{v}")).collect();
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        report.join("\n")
    );
}
