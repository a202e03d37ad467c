//! The endpoint watch across a kube-apiserver restart on the same etcd:
//! deletes wait while the server is gone, the watch resumes, and an
//! endpoint created after the restart (with no write to its identity, the
//! case only live usage protects) keeps its identity.

use std::time::Duration;

use crate::support::cluster::Cluster;
use crate::support::objects::{self, create_all, identity_names};
use crate::support::runs::{delete_until_the_first_is_gone, seed_stale};
use crate::support::{assert_exit, report, summary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_watch_resumes_after_an_apiserver_restart() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    seed_stale(&cluster, 200).await;
    let run =
        delete_until_the_first_is_gone(&cluster, &["--qps", "10", "--concurrency", "2"]).await;
    cluster.stop_apiserver();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.start_apiserver();
    // Deleted last (list order): an endpoint takes it up with no write to
    // the identity itself. Only the resumed watch can know.
    let client = cluster.admin().await;
    create_all(&client, vec![objects::endpoint("team-0", "pod-1199", 1199)]).await;

    let out = run.await.unwrap();
    let r = report(&out);
    let failed: Vec<_> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["outcome"] == "failed")
        .collect();
    assert!(failed.is_empty(), "failed items: {failed:?}");
    assert_exit(&out, 0);
    let left = identity_names(&client).await;
    assert!(
        left.contains("1199"),
        "the identity an endpoint took up after the restart was deleted"
    );
    assert!(left.contains("500"));
    assert_eq!(
        left.len(),
        2,
        "every other stale identity deleted: {left:?}"
    );
    assert!(
        summary(&r, "watcherRestarts") > 0,
        "the watch was re-established: {}",
        r["summary"]
    );
    assert_eq!(summary(&r, "failed"), 0);
}
