//! `diagnose --from` (issue 36, 2): the diagnosis of `kubectl get -o yaml`
//! dumps taken at the same moment as a live `diagnose`, on the real
//! kube-apiserver with identities allocated by agents on Cilium's own code
//! and marked by the real current operator. The findings (codes and
//! severities) and the identity counts must be the same; the saved one
//! says where it came from and what was missing.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::support::cluster::Cluster;
use crate::support::operator::{Operator, Version};
use crate::support::workload::seed_old;
use crate::support::{assert_exit, plugin, report, run};

/// The operator marks every unused identity but deletes at most one an
/// hour: the world holds still between the dumps and the live run.
const SLOW_GC: [&str; 4] = [
    "--identity-gc-interval=2s",
    "--identity-heartbeat-timeout=2s",
    "--identity-gc-rate-limit=1",
    "--identity-gc-rate-interval=1h",
];

fn findings(d: &Value) -> BTreeSet<(String, String)> {
    d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_dumps_give_the_live_findings() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    if crate::support::operator::build(Version::Current).is_none() {
        return;
    }
    let old = seed_old(&cluster, Version::Current).await;
    let _operator = Operator::up(&cluster, Version::Current, &SLOW_GC).expect("operator");
    // Let it mark them and spend its one delete.
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;

    let dir = cluster.dir().join("saved");
    std::fs::create_dir_all(&dir).unwrap();
    for (args, file) in [
        // managedFields are left out by kubectl unless asked for.
        (
            &["ciliumidentities.cilium.io", "-A", "--show-managed-fields"][..],
            "identities.yaml",
        ),
        (&["ciliumendpoints.cilium.io", "-A"][..], "endpoints.yaml"),
        (
            &["configmap", "cilium-config", "-n", "kube-system"][..],
            "cilium-config.yaml",
        ),
    ] {
        let resource = args[0];
        let out = cluster.kubectl(&[&["get"][..], args, &["-o", "yaml"]].concat());
        assert!(
            out.status.success(),
            "kubectl get {resource}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(dir.join(file), &out.stdout).unwrap();
    }
    let out = run(&cluster.gc_kubeconfig(), &["diagnose", "-o", "json"]).await;
    assert_exit(&out, 0);
    let live = report(&out);

    let mut cmd = plugin();
    cmd.args(["diagnose", "-o", "json", "--from"]).arg(&dir);
    let out = crate::support::finish(cmd).await;
    assert_exit(&out, 0);
    let saved = report(&out);

    // The premise: the operator marked the agents' unused identities.
    assert!(
        live["identitySpace"]["states"]["unusedMarked"].as_u64() > Some(old.len() as u64 / 2),
        "{}",
        live["identitySpace"]
    );
    assert_eq!(findings(&saved), findings(&live));
    assert_eq!(
        saved["identitySpace"]["states"], live["identitySpace"]["states"],
        "the same states"
    );
    assert_eq!(
        saved["identitySpace"]["total"],
        live["identitySpace"]["total"]
    );
    assert_eq!(saved["writers"], live["writers"], "the same writers");
    let source = &saved["source"];
    assert_eq!(source["capturedAtFrom"], "newest-object", "{source}");
    let missing = source["missing"].to_string();
    assert!(!missing.contains("cilium-config"), "{missing}");
    assert!(missing.contains("cilium-operator metrics"), "{missing}");
    assert!(live.get("source").is_none());
    assert!(saved["warnings"][0]
        .as_str()
        .unwrap()
        .starts_with("source: saved objects"));
}
