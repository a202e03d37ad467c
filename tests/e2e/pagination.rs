//! Paged lists against the real server: many small pages, and continue
//! tokens expired by etcd compaction mid-scan (410 Gone with a fresh
//! `rv:-1` continuation, as the API documents).
//!
//! Since Kubernetes 1.34 (`ListFromCacheSnapshot`) the watch cache serves
//! continue tokens from its own snapshots, so compacting etcd no longer
//! expires them; the feature gate is switched off here to reach the path
//! older servers (1.28, where the test runs without it) and evicted
//! snapshots take (docs/real-apiserver.md).

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::scale::seed;
use crate::support::cluster::{k8s_minor, Cluster};
use crate::support::objects::{api, Kind};
use crate::support::{assert_exit, finish, plugin, report, summary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_chunks_and_continue_tokens_expired_by_compaction_are_recovered() {
    // Only the test compacts: the server's own 5-minute compaction off.
    let mut flags = vec!["--etcd-compaction-interval=0"];
    // The gate exists from 1.33 (on from 1.34); 1.28 refuses to start with
    // an unknown gate, and serves continue tokens from etcd anyway.
    if k8s_minor() >= 33 {
        flags.push("--feature-gates=ListFromCacheSnapshot=false");
    }
    let Some(cluster) = Cluster::up(&flags) else {
        return;
    };
    let seeded = seed(&cluster, 3000).await;
    let client = cluster.admin().await;

    let mut cmd = plugin();
    cmd.arg("--kubeconfig").arg(cluster.gc_kubeconfig()).args([
        "scan",
        "-o",
        "json",
        "--chunk-size",
        "5",
        "--items",
        "all",
    ]);
    let scan = tokio::spawn(finish(cmd));
    // Advance etcd's revision and compact, over and over, while the scan pages.
    let ids = api(&client, Kind::Identity, None);
    let mut compactions = 0;
    while !scan.is_finished() {
        let label = json!({"metadata": {"labels": {"tick": compactions.to_string()}}});
        ids.patch("900", &PatchParams::default(), &Patch::Merge(&label))
            .await
            .expect("tick");
        cluster.compact();
        compactions += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = scan.await.unwrap();
    assert_exit(&out, 0);
    let r = report(&out);
    assert!(compactions > 1, "etcd was compacted during the scan");
    assert!(
        summary(&r, "listPages") > 600 / 5,
        "many pages: {}",
        r["summary"]
    );
    assert!(
        summary(&r, "listRestarts") > 0,
        "a continue token expired mid-scan: {}",
        r["summary"]
    );
    // Every identity decided exactly once, none lost or doubled by the
    // inconsistent continuation.
    assert_eq!(summary(&r, "scanned"), seeded.all.len() as u64);
    let mut names: Vec<String> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "no identity reported twice");
    assert_eq!(
        names.into_iter().collect::<std::collections::BTreeSet<_>>(),
        seeded.all
    );
    assert_eq!(summary(&r, "candidates"), seeded.stale.len() as u64);
}
