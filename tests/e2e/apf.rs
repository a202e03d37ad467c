//! API Priority and Fairness: a `Limited` priority level with
//! `limitResponse: Reject` for the plugin's user and a low
//! `--max-requests-inflight`, so the real server answers 429s. The run
//! still finishes, counts the throttling, and deletes nothing unsafe.

use std::collections::BTreeSet;

use crate::scale::seed;
use crate::support::cluster::Cluster;
use crate::support::objects::identity_names;
use crate::support::{assert_exit, report, run, summary};

/// One seat for everything the user `cilium-gc` sends; the rest rejected.
pub const LIMITED: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: cilium-gc-limited}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: cilium-gc-limited}
spec:
  priorityLevelConfiguration: {name: cilium-gc-limited}
  matchingPrecedence: 200
  distinguisherMethod: {type: ByUser}
  rules:
    - subjects: [{kind: User, user: {name: cilium-gc}}]
      resourceRules:
        - {verbs: ["*"], apiGroups: ["*"], resources: ["*"], clusterScope: true, namespaces: ["*"]}
      nonResourceRules:
        - {verbs: ["*"], nonResourceURLs: ["*"]}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_and_fairness_429s_are_honoured_and_counted() {
    let Some(cluster) = Cluster::up(&[
        "--max-requests-inflight=10",
        "--max-mutating-requests-inflight=5",
    ]) else {
        return;
    };
    let seeded = seed(&cluster, 1000).await;
    cluster.apply(LIMITED);
    let out = run(
        &cluster.gc_kubeconfig(),
        &[
            "delete",
            "--yes",
            "-o",
            "json",
            "--qps",
            "1000",
            "--concurrency",
            "32",
        ],
    )
    .await;
    assert_exit(&out, 0);
    let r = report(&out);
    assert!(
        summary(&r, "throttled") > 0,
        "the server answered 429s: {}",
        r["summary"]
    );
    let client = cluster.admin().await;
    let left = identity_names(&client).await;
    let expected: BTreeSet<String> = seeded.all.difference(&seeded.stale).cloned().collect();
    assert_eq!(left, expected, "every stale identity deleted, nothing else");
    assert_eq!(summary(&r, "deleted"), seeded.stale.len() as u64);
    assert_eq!(summary(&r, "failed"), 0);
}
