//! A `delete` under way on a real cluster, for tests that act while it runs.

use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::support::cluster::Cluster;
use crate::support::objects::{self, ago, create_all, identity_names};
use crate::support::{finish, plugin};

/// Seed `n` stale identities from id 1000 (marked an hour ago, unused), one
/// namespace, and an endpoint on an unrelated identity so the cluster is
/// not endpoint-less.
pub async fn seed_stale(cluster: &Cluster, n: u64) -> BTreeSet<String> {
    let client = cluster.admin().await;
    create_all(&client, vec![objects::namespace("team-0")]).await;
    let hour = ago(Duration::from_secs(3600));
    let mut objs: Vec<_> = (1000..1000 + n)
        .map(|id| objects::identity(id, "team-0", Some(hour)))
        .collect();
    objs.push(objects::identity(500, "team-0", None));
    objs.push(objects::endpoint("team-0", "pod-500", 500));
    create_all(&client, objs).await;
    (1000..1000 + n).map(|i| i.to_string()).collect()
}

/// Wait until the run has deleted at least one identity: its scan is done,
/// so every write from now on meets a resourceVersion the run holds.
pub async fn wait_for_first_delete(client: &kube::Client, before: usize) {
    for _ in 0..600 {
        if identity_names(client).await.len() < before {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the run deleted nothing within 60 s");
}

/// Start `delete --yes -o json` as the user `cilium-gc` with `args`, and
/// return once it has deleted one identity (its scan is done).
pub async fn delete_until_the_first_is_gone(
    cluster: &Cluster,
    args: &[&str],
) -> JoinHandle<Output> {
    let client = cluster.admin().await;
    let before = identity_names(&client).await.len();
    let mut cmd = plugin();
    cmd.arg("--kubeconfig")
        .arg(cluster.gc_kubeconfig())
        .args(["delete", "--yes", "-o", "json"])
        .args(args);
    let run = tokio::spawn(finish(cmd));
    wait_for_first_delete(&client, before).await;
    run
}
