//! The one state where the plugin's core check is all that stands between
//! an identity in use and its delete: a heartbeat mark older than the
//! timeout on an identity a CiliumEndpoint references. With real Cilium
//! it is rare but real: the operator marks an identity in the window
//! between a pod's allocation and its agent's CiliumEndpoint write, and a
//! third writer (a restore, a tool, a person) can set the annotation. The
//! allocator strips a mark only when it allocates the key again, so a
//! running pod's identity keeps it.
//!
//! The world: the real kube-apiserver, the real cilium-operator (current
//! release) and agents on Cilium's allocator of the same release; pods
//! churned, each with a label set of its own, some still running. Then
//! the writers are held still (SIGSTOP: nothing strips or adds a mark),
//! and a third writer (`admin`) marks, an hour ago, every identity in use
//! and half of the unused ones. `kubectl cilium-gc delete --yes` as the
//! published RBAC's user must delete exactly the marked unused ones: not
//! one in use (the core check), not one unmarked (never marked is never
//! stale). Judged by the audit log, with the premise (every identity in
//! use carried an hour-old mark and was referenced by a CiliumEndpoint
//! when the plugin started) asserted from the server's record.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::support::audit::Actor;
use crate::support::cluster::Cluster;
use crate::support::freeze::Freeze;
use crate::support::objects::{ago, api, Kind, HEARTBEAT};
use crate::support::operator::{Agents, Operator, Version, World};
use crate::support::workload::{record, GC_FLAGS};
use crate::support::{assert_exit, finish, plugin, report, summary};

/// Label sets the pods draw from: so many that each pod has its own.
const FRESH: u32 = 1_000_000_000;

/// How old the third writer's marks are: twice the plugin's timeout.
const MARK_AGE: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_in_use_with_an_old_mark_is_kept_and_only_marked_unused_ones_go() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let Some(_operator) = Operator::up(&cluster, Version::Current, &GC_FLAGS) else {
        return;
    };
    let client = cluster.admin().await;
    // 2 agents of 5 pods, one pod ending and another starting every
    // 500 ms each for 8 s; the last 10 pods keep running.
    let agents = Agents {
        agents: 2,
        pods: 5,
        churn: Duration::from_millis(500),
        duration: Duration::from_secs(8),
        label_sets: FRESH,
        label_prefix: "held".into(),
        seed: 91,
        ..Agents::default()
    }
    .run(&cluster, Version::Current)
    .await;
    assert!(
        agents.pods_running >= 5 && agents.pods_ended >= 5,
        "pods running and ended: {agents:?}"
    );
    // Held still from here: the operator neither marks nor strips.
    let _still = Freeze::writers(&cluster, 0);
    let world = World::read(&client).await;
    let in_use: BTreeSet<String> = world
        .identities
        .keys()
        .filter(|n| world.used.contains(*n))
        .cloned()
        .collect();
    let unused: Vec<String> = world
        .identities
        .keys()
        .filter(|n| !world.used.contains(*n))
        .cloned()
        .collect();
    let marked_unused: BTreeSet<String> = unused.iter().step_by(2).cloned().collect();
    let unmarked_unused: BTreeSet<String> = unused.iter().skip(1).step_by(2).cloned().collect();
    for name in in_use.iter().chain(&marked_unused) {
        set_mark(&client, name, true).await;
    }
    for name in &unmarked_unused {
        set_mark(&client, name, false).await;
    }

    // The premise, from the server at the plugin's start.
    let before = World::read(&client).await;
    let old = |n: &String| {
        before.identities[n]
            .marked_at
            .is_some_and(|t| t < ago(MARK_AGE - Duration::from_secs(60)))
    };
    assert!(in_use.len() >= 5, "identities in use: {in_use:?}");
    assert!(
        in_use.iter().all(|n| before.used.contains(n) && old(n)),
        "premise: every identity in use is referenced by a CiliumEndpoint and carries an hour-old mark"
    );
    assert!(
        !marked_unused.is_empty()
            && marked_unused.iter().all(old)
            && !unmarked_unused.is_empty()
            && unmarked_unused
                .iter()
                .all(|n| !before.identities[n].marked),
        "premise: unused identities both marked an hour ago and unmarked: {marked_unused:?} {unmarked_unused:?}"
    );

    let out = delete_run(&cluster).await;
    assert_exit(&out, 0);
    let r = report(&out);
    let audit = cluster.audit();
    let judged = audit.judge(Duration::ZERO);
    judged.assert_no_plugin_violation();
    let deleted = judged.deleted_by(&Actor::Plugin);
    assert_eq!(
        deleted, marked_unused,
        "the plugin deleted exactly the marked unused identities (audit log)"
    );
    let after = World::read(&client).await;
    for n in in_use.iter().chain(&unmarked_unused) {
        assert_eq!(
            after.identities.get(n).map(|i| &i.uid),
            Some(&before.identities[n].uid),
            "{n} is kept, the same object"
        );
    }
    let line = format!(
        "marked in use (real cilium-operator {}, frozen; agents on its allocator): {} identities in use each carrying an hour-old mark and referenced by a CiliumEndpoint, {} unused marked an hour ago, {} unused unmarked; delete --yes deleted {} (audit log: exactly the marked unused), kept every one in use and every unmarked one; report deleted {}",
        crate::support::operator::release(Version::Current),
        in_use.len(),
        marked_unused.len(),
        unmarked_unused.len(),
        deleted.len(),
        summary(&r, "deleted")
    );
    eprintln!("{line}");
    assert_eq!(summary(&r, "deleted"), deleted.len() as u64, "{line}");
    record(
        "marked_in_use",
        json!({"inUse": in_use, "markedUnused": marked_unused,
               "unmarkedUnused": unmarked_unused, "deleted": deleted, "printed": [line]}),
    );
}

/// Set `io.cilium.heartbeat` to an hour ago (`true`) or remove it, as
/// `admin` (a third writer).
async fn set_mark(client: &kube::Client, name: &str, marked: bool) {
    let mark = marked.then(|| ago(MARK_AGE).to_string());
    let patch = json!({"metadata": {"annotations": {HEARTBEAT: mark}}});
    api(client, Kind::Identity, None)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("mark set");
}

/// `delete --yes -o json` as the published RBAC's user, the heartbeat
/// timeout half the marks' age.
async fn delete_run(cluster: &Cluster) -> std::process::Output {
    let mut cmd = plugin();
    cmd.arg("--kubeconfig").arg(cluster.gc_kubeconfig()).args([
        "delete",
        "--yes",
        "-o",
        "json",
        "--heartbeat-timeout",
        "30m",
    ]);
    finish(cmd).await
}
