//! `--dry-run=server`: the real server validates every delete (with its
//! preconditions) and applies none.

use crate::scale::seed;
use crate::support::cluster::Cluster;
use crate::support::objects::identity_names;
use crate::support::{assert_exit, report, run, summary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dry_run_leaves_every_object_in_place() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let seeded = seed(&cluster, 500).await;
    let out = run(
        &cluster.gc_kubeconfig(),
        &[
            "delete",
            "--dry-run=server",
            "--yes",
            "-o",
            "json",
            "--qps",
            "500",
        ],
    )
    .await;
    assert_exit(&out, 0);
    let r = report(&out);
    assert_eq!(r["mode"], "dry-run-server", "{}", r["mode"]);
    assert_eq!(summary(&r, "candidates"), seeded.stale.len() as u64);
    assert_eq!(
        summary(&r, "validated"),
        seeded.stale.len() as u64,
        "every delete validated"
    );
    assert_eq!(
        summary(&r, "deleted"),
        0,
        "nothing deleted, and the report says so"
    );
    assert_eq!(summary(&r, "failed"), 0);
    let client = cluster.admin().await;
    assert_eq!(identity_names(&client).await, seeded.all, "nothing deleted");
}
