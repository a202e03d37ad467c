//! `diagnose --from` a sysdump with the agents' logs (issue 33, 3): the
//! allocator's refusals come first, counted per pod from the lines Cilium's
//! `pkg/allocator` writes (v1.15.6's logrus and v1.19.3's slog, with and
//! without the kubelet's timestamps a sysdump asks for), with why GC is not
//! keeping up; the range judged is the one cilium-config gives, and says
//! so; `--redact` hides the pods and the logged keys.

use super::*;

const TS: &str = "20260601-120000";

/// Two identities of one namespace, one in use, one marked an hour ago
/// (stale by the default 30m heartbeat timeout at the capture time).
const IDENTITIES: &str = r#"items:
- metadata:
    name: "1000"
    uid: u1000
    resourceVersion: "5"
    creationTimestamp: "2026-06-01T10:00:00Z"
    annotations: {io.cilium.heartbeat: "2026-06-01T11:00:00Z"}
  security-labels: {"k8s:app": payments-web, "k8s:io.kubernetes.pod.namespace": payments-prod}
- metadata: {name: "1001", uid: u1001, resourceVersion: "6", creationTimestamp: "2026-06-01T10:00:00Z"}
  security-labels: {"k8s:app": payments-db, "k8s:io.kubernetes.pod.namespace": payments-prod}
"#;

const ENDPOINTS: &str = r#"items:
- metadata: {name: db-0, namespace: payments-prod}
  status: {identity: {id: 1001}}
"#;

/// cilium-config of a cluster in a 511-cluster mesh: a 15-bit range.
const CONFIG: &str = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: cilium-config, namespace: kube-system}
data: {identity-allocation-mode: crd, cluster-id: "0", max-connected-clusters: "511"}
"#;

/// v1.15.6's line (logrus text, as `kubectl logs --timestamps` gives it).
const V115: &str = r#"2026-06-01T11:58:00.000000001Z time="2026-06-01T11:58:00Z" level=warning msg="Key allocation attempt failed" attempt=2 error="no more available IDs in configured space" key="k8s:app=payments-api;k8s:io.kubernetes.pod.namespace=payments-prod;" subsys=allocator"#;
/// v1.19.3's line (slog text).
const V119: &str = r#"time=2026-06-01T11:59:00.5Z level=WARN msg="Key allocation attempt failed" error="no more available IDs in configured space" key="k8s:app=payments-job;k8s:io.kubernetes.pod.namespace=payments-prod;" attempt=0"#;

fn sysdump() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        std::fs::write(
            dir.path().join(format!(
                "{name}-{TS}.{}",
                if name.starts_with("logs-") {
                    "log"
                } else {
                    "yaml"
                }
            )),
            text,
        )
        .unwrap()
    };
    file("ciliumidentities", IDENTITIES);
    file("ciliumendpoints", ENDPOINTS);
    file("cilium-configmap", CONFIG);
    file(
        "logs-cilium-a1b2c-cilium-agent",
        &format!("level=info msg=\"Starting\"\n{V115}\n{V115}\n"),
    );
    file("logs-cilium-d3e4f-cilium-agent", &format!("{V119}\n"));
    file(
        "logs-cilium-operator-5d-x-cilium-operator",
        "level=info msg=\"Starting identity GC\"\n",
    );
    dir
}

async fn diagnose_from(dir: &std::path::Path, redact: bool) -> (Value, String) {
    let mut cmd = binary();
    cmd.args(["diagnose", "-o", "json", "--from"]).arg(dir);
    if redact {
        cmd.arg("--redact");
    }
    let out = cmd.output().await.unwrap();
    assert_ok(&out);
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = schema::errors(&schema::committed_diagnosis(), &d);
    assert!(errors.is_empty(), "{errors:#?}");
    (d, String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test]
async fn the_allocators_refusals_in_the_agents_logs_come_first_with_why_gc_is_not_keeping_up() {
    let dir = sysdump();
    let (d, _) = diagnose_from(dir.path(), false).await;
    let r = &d["allocationRefusals"];
    assert_eq!(
        (r["logsRead"].as_u64(), r["total"].as_u64()),
        (Some(3), Some(3)),
        "{r}"
    );
    assert_eq!(
        r["byPod"],
        json!([
            {"pod": "cilium-a1b2c", "refusals": 2, "firstAt": "2026-06-01T11:58:00.000000001Z", "lastAt": "2026-06-01T11:58:00.000000001Z", "example": V115},
            {"pod": "cilium-d3e4f", "refusals": 1, "firstAt": "2026-06-01T11:59:00.5Z", "lastAt": "2026-06-01T11:59:00.5Z", "example": V119},
        ])
    );
    let first = &d["findings"][0];
    assert_eq!(first["code"], "identity-allocation-refused", "{first}");
    assert_eq!(first["severity"], "critical");
    assert_eq!(
        first["message"],
        "Cilium's allocator refused 3 allocation attempts in 2 agent pods' logs (no more available IDs in configured space): new pods wait for an identity, without networking"
    );
    let evidence: Vec<&str> = first["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        evidence[..5],
        [
            "cilium-a1b2c: 2 refused attempts, 2026-06-01T11:58:00.000000001Z to 2026-06-01T11:58:00.000000001Z",
            "cilium-d3e4f: 1 refused attempts, 2026-06-01T11:59:00.5Z to 2026-06-01T11:59:00.5Z",
            &format!("cilium-a1b2c: {V115}"),
            "by the identities: 2 of 32,512 local ids allocated (0%), 32,510 free (range 256-32767)",
            "local range 256-32767 as Cilium's allocator computes it (GetMinimalAllocationIdentity, GetMaximumAllocationIdentity) from cluster-id 0 (cilium-config) and max-connected-clusters 511 (cilium-config)",
        ]
    );
    let stale = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "stale-backlog")
        .expect("stale-backlog");
    assert_eq!(
        evidence[5..],
        [format!(
            "why GC is not keeping up: stale-backlog ({}): {}",
            stale["severity"].as_str().unwrap(),
            stale["message"].as_str().unwrap()
        )]
    );
    assert_eq!(
        d["identitySpace"]["localRangeFrom"],
        json!({"clusterId": 0, "clusterIdSource": "cilium-config", "maxConnectedClusters": 511, "maxConnectedClustersSource": "cilium-config"})
    );
    let missing = d["source"]["missing"].to_string();
    assert!(!missing.contains("cilium-agent logs"), "{missing}");
}

#[tokio::test]
async fn redacted_refusals_name_neither_pods_nor_the_logged_keys() {
    let dir = sysdump();
    let (d, all) = diagnose_from(dir.path(), true).await;
    for secret in ["payments", "cilium-a1b2c", "cilium-d3e4f"] {
        assert!(!all.contains(secret), "{secret} leaked");
    }
    let pods = d["allocationRefusals"]["byPod"].as_array().unwrap();
    assert_eq!(pods.len(), 2);
    for p in pods {
        assert!(p["pod"].as_str().unwrap().starts_with("pod-"), "{p}");
        assert_eq!(
            p["example"],
            "Key allocation attempt failed: no more available IDs in configured space"
        );
    }
    assert_eq!(d["findings"][0]["code"], "identity-allocation-refused");
}

/// Without an agent log the refusals are unknown, and the diagnosis says so
/// rather than reporting none.
#[tokio::test]
async fn without_agent_logs_the_refusals_are_named_missing() {
    let dir = sysdump();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "log") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let (d, _) = diagnose_from(dir.path(), false).await;
    assert!(d.get("allocationRefusals").is_none());
    assert_ne!(d["findings"][0]["code"], "identity-allocation-refused");
    let missing = d["source"]["missing"].to_string();
    assert!(missing.contains("cilium-agent logs"), "{missing}");
}
