//! Real 409s: a task playing cilium-agent writes identities while `delete`
//! runs, and an identity is deleted and re-created under the run. The
//! server's preconditions and the plugin's re-decision keep every identity
//! that was reclaimed, reused or re-created.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::support::cluster::Cluster;
use crate::support::objects::{self, ago, api, create_all, identity_names, Kind};
use crate::support::runs::{delete_until_the_first_is_gone, seed_stale};
use crate::support::{assert_exit, report, summary};

/// What the agent did to each identity, for the verdict afterwards.
#[derive(Default)]
struct AgentWrites {
    /// Mark removed (the identity was reused or its holder re-announced it).
    stripped: BTreeSet<String>,
    /// Mark removed, then a CiliumEndpoint created with it.
    reused: BTreeSet<String>,
    /// A label changed, the mark kept: still stale after the conflict.
    touched: BTreeSet<String>,
}

/// Play cilium-agent on `targets`: strip, reuse or touch each in turn.
/// Writes that meet a 404 (already deleted by the run) are not counted.
async fn agent(client: kube::Client, targets: Vec<String>) -> AgentWrites {
    let ids = api(&client, Kind::Identity, None);
    let mut done = AgentWrites::default();
    let pp = PatchParams::default();
    for (i, name) in targets.into_iter().enumerate() {
        let patch = match i % 3 {
            0 | 1 => json!({"metadata": {"annotations": {objects::HEARTBEAT: null}}}),
            _ => json!({"metadata": {"labels": {"touched": "yes"}}}),
        };
        match ids.patch(&name, &pp, &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => panic!("agent write failed: {e}"),
        }
        match i % 3 {
            0 => done.stripped.insert(name),
            1 => {
                let id: u64 = name.parse().unwrap();
                create_all(
                    &client,
                    vec![objects::endpoint("team-0", &format!("pod-{id}"), id)],
                )
                .await;
                done.reused.insert(name)
            }
            _ => done.touched.insert(name),
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_agent_writes_meet_real_409s_and_nothing_reclaimed_is_deleted() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let stale = seed_stale(&cluster, 600).await;
    let client = cluster.admin().await;
    let before = identity_names(&client).await.len();
    let run =
        delete_until_the_first_is_gone(&cluster, &["--qps", "40", "--concurrency", "4"]).await;
    // The run deletes in id order: the highest 150 are still there.
    let mut targets: Vec<String> = stale.iter().cloned().collect();
    targets.sort_by_key(|n| std::cmp::Reverse(n.parse::<u64>().unwrap()));
    targets.truncate(150);
    let writes = agent(client.clone(), targets).await;
    let out = run.await.unwrap();
    assert_exit(&out, 0);
    let r = report(&out);

    let left = identity_names(&client).await;
    for name in writes.stripped.iter().chain(&writes.reused) {
        assert!(
            left.contains(name),
            "identity {name} was reclaimed by the agent, yet deleted"
        );
    }
    for name in &writes.touched {
        assert!(
            !left.contains(name),
            "{name} was still stale after its 409, yet left"
        );
    }
    assert!(
        writes.stripped.len() + writes.reused.len() > 20,
        "the agent reclaimed identities under the run ({} stripped, {} reused)",
        writes.stripped.len(),
        writes.reused.len()
    );
    assert!(summary(&r, "conflicts") > 0, "real 409s were met");
    assert_eq!(
        summary(&r, "reclaimed"),
        (writes.stripped.len() + writes.reused.len()) as u64,
        "every reclaim is reported as one"
    );
    assert_eq!(summary(&r, "failed"), 0);
    assert_eq!(summary(&r, "deleted") as usize, before - left.len());
    // Each conflict records who changed the identity (managedFields).
    let conflict = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["conflicts"].as_array().cloned().unwrap_or_default())
        .next()
        .expect("a conflict recorded on an item");
    assert!(
        conflict["observedResourceVersion"].is_string(),
        "{conflict}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_re_created_with_a_new_uid_during_the_run_is_not_deleted() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let stale = seed_stale(&cluster, 300).await;
    let client = cluster.admin().await;
    let run =
        delete_until_the_first_is_gone(&cluster, &["--qps", "20", "--concurrency", "2"]).await;
    // Delete the highest 10 and create them again, still marked an hour ago
    // (stale by every rule but the uid): a different identity of the same name.
    let ids = api(&client, Kind::Identity, None);
    let mut recreated = BTreeSet::new();
    let mut old_uids = Vec::new();
    for id in (1000 + 300 - 10..1000 + 300).rev() {
        let name = id.to_string();
        let old = ids.get(&name).await.expect("still there");
        old_uids.push(old.metadata.uid.clone().unwrap());
        ids.delete(&name, &Default::default())
            .await
            .expect("deleted");
        create_all(
            &client,
            vec![objects::identity(
                id,
                "team-0",
                Some(ago(Duration::from_secs(3600))),
            )],
        )
        .await;
        recreated.insert(name);
    }
    let out = run.await.unwrap();
    assert_exit(&out, 0);
    let r = report(&out);
    let left = identity_names(&client).await;
    assert_eq!(
        left.intersection(&stale).cloned().collect::<BTreeSet<_>>(),
        recreated,
        "every original stale identity is gone and every re-created one is left"
    );
    for name in &recreated {
        let now = ids.get(name).await.unwrap();
        assert!(
            !old_uids.contains(now.metadata.uid.as_ref().unwrap()),
            "{name} is the new object"
        );
    }
    let gone = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| recreated.contains(i["name"].as_str().unwrap()))
        .filter(|i| i["outcome"] == "already-gone")
        .count();
    assert_eq!(
        gone,
        recreated.len(),
        "the planned identities are reported already gone"
    );
}
