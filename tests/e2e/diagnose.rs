//! `diagnose` against the real server: the real `/version`, the operator's
//! version from its Deployment, and the findings as on the simulator.

use crate::scale::seed;
use crate::support::cluster::Cluster;
use crate::support::objects::cilium_workloads;
use crate::support::{assert_exit, report, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnose_reads_the_real_version_and_the_operator_defect() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let seeded = seed(&cluster, 500).await;
    cluster.apply(&cilium_workloads("v1.15.3"));
    let out = run(&cluster.gc_kubeconfig(), &["diagnose", "-o", "json"]).await;
    assert_exit(&out, 0);
    let d = report(&out);
    let version = d["cluster"].to_string();
    let release = crate::support::cluster::k8s_version();
    assert!(
        version.contains(release),
        "the real server's version {release}: {version}"
    );
    assert_eq!(
        d["identitySpace"]["total"].as_u64(),
        Some(seeded.all.len() as u64),
        "{}",
        d["identitySpace"]
    );
    assert_eq!(
        d["identitySpace"]["states"]["inUse"].as_u64(),
        Some(seeded.in_use.len() as u64),
        "{}",
        d["identitySpace"]
    );
    assert_eq!(
        d["identitySpace"]["states"]["staleCandidates"].as_u64(),
        Some(seeded.stale.len() as u64),
        "{}",
        d["identitySpace"]
    );
    let findings = d["findings"].to_string();
    assert!(
        findings.contains("33142"),
        "cilium#33142 for operator 1.15.3: {findings}"
    );
}
