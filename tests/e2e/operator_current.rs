//! Today's real cilium-operator (the current release that builds here, see
//! `tests/cilium/current/go.mod`) with agents on Cilium's own identity code
//! of the same release: the seed's workload, the plugin deleting next to it,
//! and heartbeat marks both ways. Issue 25, 4.1 (second half), 4.2, 4.3.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use crate::support::cluster::Cluster;
use crate::support::operator::{Operator, Version, World};
use crate::support::workload::{
    churn_under_operator, plugin_under_churn, seed_old, GC_FLAGS, PLUGIN_TIMEOUT,
};
use crate::support::{assert_exit, report, run, summary};

/// 4.1, the same workload as `operator_115`: a 409 on delete is skipped,
/// so no pass ends at one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_operator_under_the_seeds_workload_skips_409s_on_delete() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let Some(operator) = Operator::up(&cluster, Version::Current, &GC_FLAGS) else {
        return;
    };
    let old = seed_old(&cluster, Version::Current).await;
    let run = churn_under_operator(
        &cluster,
        &operator,
        Version::Current,
        &old,
        (Duration::from_secs(75), Duration::from_secs(75)),
        |_| true,
    )
    .await;
    eprintln!("{run}");
    assert_eq!(
        run.log.delete_errors.conflict, 0,
        "a 409 on delete no longer ends a pass: {:?}",
        run.log
    );
    assert!(
        run.samples.iter().any(|s| s.successful_runs > 0.0),
        "passes complete: {run}"
    );
}

/// 4.2: the plugin deletes while today's operator collects the same
/// identities. Nothing in use deleted, every stale identity gone, the report
/// equal to the server; the operator's passes our deletes ended are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_next_to_the_current_operator_collecting_the_same_identities() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let Some(operator) = Operator::up(&cluster, Version::Current, &GC_FLAGS) else {
        return;
    };
    let old = seed_old(&cluster, Version::Current).await;
    // Let the operator mark them (2 s unused, then a pass) and start deleting.
    wait_marked(&cluster, &old).await;
    // Past our timeout (5 s) for the plugin; the operator deletes meanwhile.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = operator.passes();
    let verdict = plugin_under_churn(&cluster, Version::Current, &old, &[]).await;
    let after = operator.passes();
    eprintln!("{verdict}");
    eprintln!(
        "cilium-operator {}: passes ended during the plugin's run: by 404 on delete {}, by mark errors {} (409 {}, 404 {}), other {}; 409s on delete skipped {}",
        crate::support::operator::release(Version::Current),
        after.delete_errors.not_found - before.delete_errors.not_found,
        after.mark_errors.total() - before.mark_errors.total(),
        after.mark_errors.conflict - before.mark_errors.conflict,
        after.mark_errors.not_found - before.mark_errors.not_found,
        after.delete_errors.other - before.delete_errors.other,
        after.conflicts_skipped - before.conflicts_skipped,
    );
    verdict.assert_sound();
    // The operator collected some of the same identities: ours were
    // already gone for it, or its for us.
    assert!(
        verdict.summary("deleted") > 0,
        "the plugin deleted: {}",
        verdict.report["summary"]
    );
    // After the run the operator goes on: every old identity ends gone. By
    // label set, not name: a freed id may now carry a job's new identity.
    let client = cluster.admin().await;
    for _ in 0..60 {
        let w = World::read(&client).await;
        if w.of_label("old").is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("stale identities left after the plugin and the operator");
}

/// Wait (at most 60 s) until the operator has marked every old identity
/// still on the server, or deleted it.
async fn wait_marked(cluster: &Cluster, old: &BTreeSet<String>) {
    let client = cluster.admin().await;
    for _ in 0..120 {
        let w = World::read(&client).await;
        if old
            .iter()
            .all(|n| w.identities.get(n).is_none_or(|i| i.marked))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the operator did not mark the stale identities within 60 s");
}

/// Each identity's decision in a `scan` report.
fn reasons(r: &Value) -> BTreeMap<String, String> {
    r["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_string(),
                i["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// 4.3: marks both ways, and an operator restart changes none of the
/// plugin's decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_marks_both_ways_with_the_current_operator() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    if crate::support::operator::build(Version::Current).is_none() {
        return;
    }
    let gc = cluster.gc_kubeconfig();
    let timeout = [
        "--heartbeat-timeout",
        PLUGIN_TIMEOUT,
        "--allow-short-heartbeat-timeout",
    ];

    // (a) Marked by `delete --mark`, no operator running: collected by the
    // real operator once it runs, without its own mark.
    let ours = seed_old(&cluster, Version::Current).await;
    let out = run(
        &gc,
        &[
            &["delete", "--yes", "--mark", "--force", "-o", "json"][..],
            &timeout,
        ]
        .concat(),
    )
    .await;
    assert_exit(&out, 0);
    let r = report(&out);
    assert_eq!(
        summary(&r, "marked"),
        ours.len() as u64,
        "every unused identity marked"
    );
    let operator = Operator::up(&cluster, Version::Current, &GC_FLAGS).expect("operator");
    let client = cluster.admin().await;
    let mut left = ours.len();
    for _ in 0..90 {
        let w = World::read(&client).await;
        left = ours
            .iter()
            .filter(|n| w.identities.contains_key(*n))
            .count();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(
        left, 0,
        "the real operator collected every identity --mark marked"
    );
    let log = operator.passes();
    assert!(
        log.marked.is_disjoint(&ours),
        "the operator deleted on our marks, without marking them itself"
    );
    operator.stop();

    // (b) Marked by the real operator: the plugin reads its marks
    // (RFC 3339 with nanoseconds): mark-too-recent, then stale, never
    // malformed. Its deletes are held back (one per hour after the first),
    // so its marks stay on the server.
    let theirs = {
        let agents = crate::support::operator::Agents {
            agents: 2,
            pods: 40,
            churn: Duration::ZERO,
            label_sets: 100,
            label_prefix: "theirs".into(),
            end_all: true,
            seed: 41,
            ..Default::default()
        };
        agents.run(&cluster, Version::Current).await;
        World::read(&client).await.unused("theirs")
    };
    let slow = [
        "--identity-gc-interval=2s",
        "--identity-heartbeat-timeout=2s",
        "--identity-gc-rate-limit=1",
        "--identity-gc-rate-interval=1h",
    ];
    let operator = Operator::up(&cluster, Version::Current, &slow).expect("operator");
    wait_marked(&cluster, &theirs).await;
    let scan = |args: &'static [&'static str]| {
        let gc = gc.clone();
        async move {
            let out = run(
                &gc,
                &[
                    &["scan", "-o", "json", "--items", "all"][..],
                    args,
                    &timeout,
                ]
                .concat(),
            )
            .await;
            assert_exit(&out, 0);
            report(&out)
        }
    };
    let first = scan(&[]).await;
    let decided = reasons(&first);
    for name in theirs.iter().filter(|n| decided.contains_key(*n)) {
        assert!(
            ["mark-too-recent", "stale"].contains(&decided[name].as_str()),
            "{name}: the operator's mark read as {}",
            decided[name]
        );
    }
    // Past our timeout every one of them is stale.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let before = reasons(&scan(&[]).await);
    // (c) A restart: the operator forgets every heartbeat; our decisions
    // do not change.
    operator.restart();
    let after = reasons(&scan(&[]).await);
    let both: BTreeSet<&String> = before.keys().filter(|k| after.contains_key(*k)).collect();
    assert!(
        both.len() as f64 >= theirs.len() as f64 * 0.9,
        "nearly all still there"
    );
    for name in both {
        assert_eq!(
            before[name], after[name],
            "{name} decided alike across the restart"
        );
        if theirs.contains(name) {
            assert_eq!(before[name], "stale", "{name}");
        }
    }
}
