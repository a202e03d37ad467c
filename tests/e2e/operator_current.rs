//! Today's real cilium-operator (the current release that builds here, see
//! `tests/cilium/current/go.mod`) with agents on Cilium's own identity code
//! of the same release: the seed's workload, the plugin deleting next to it,
//! and heartbeat marks both ways. Issue 25, 4.1 (second half), 4.2, 4.3.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::audit::{Actor, Resource, Verb, Write};
use crate::support::cluster::Cluster;
use crate::support::operator::{Operator, Version, World};
use crate::support::workload::{
    churn_under_operator, operator_identity_writes, passes_at_409s_on_delete,
    plugin_under_churn_after, record, seed_old, GC_FLAGS, PASS_GAP, PLUGIN_TIMEOUT,
    PLUGIN_TIMEOUT_DURATION,
};
use crate::support::{assert_exit, report, run, summary};

/// 4.1, the same workload as `operator_115`: a 409 on delete is skipped
/// (logged at warn level, `Could not delete identity due to conflict`;
/// v1.19.3's `operator/identitygc/crd_gc.go`), so passes go on, and at the
/// end of the churn no stale identity is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_operator_skips_409s_on_delete_and_leaves_no_stale_identity() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let Some(operator) = Operator::up(&cluster, Version::Current, &GC_FLAGS) else {
        return;
    };
    let old = seed_old(&cluster, Version::Current).await;
    // 75 s at least, then on until a 409 on delete was skipped (at most 180 s).
    let run = churn_under_operator(
        &cluster,
        &operator,
        Version::Current,
        &old,
        (Duration::from_secs(75), Duration::from_secs(180)),
        |log| log.conflicts_skipped >= 1,
    )
    .await;
    eprintln!("{run}");
    run.assert_premise();
    let audit = cluster.audit();
    let refused = operator_identity_writes(&audit, Verb::Delete, 409);
    assert!(
        run.log.conflicts_skipped >= 1,
        "a 409 on delete was skipped: {:?}",
        run.log
    );
    assert!(
        refused >= run.log.conflicts_skipped,
        "every skipped 409 is a delete the server answered 409 (audit log: {refused})"
    );
    assert_eq!(
        run.log.delete_errors.conflict, 0,
        "no pass ended at a 409 on delete: {:?}",
        run.log
    );
    assert!(
        run.samples.iter().any(|s| s.successful_runs > 0.0),
        "passes complete: {run}"
    );
    // The control of operator_115's defect helper: by the same pass
    // boundaries, today's operator goes on after a 409 on delete with
    // other identities due (the premise: it met such 409s). A pass boundary
    // is a silence of PASS_GAP after the 409; under CI's load a running
    // pass was once silent that long after 1 of 42 such 409s (its own log:
    // no pass ended at one), so the control allows fewer than one in ten.
    // 1.15.6 abandons the pass at every one of them.
    let passes = passes_at_409s_on_delete(&audit, Duration::from_secs(2), PASS_GAP);
    eprintln!("{passes}");
    assert!(
        passes.met >= 1 && passes.stopped.len() * 10 < passes.met,
        "409s with others due were met, and passes went on after them: {passes}"
    );
    let last = run.samples.last().expect("sampled");
    assert_eq!(last.old_left, 0, "no stale identity left: {run}");
    let line = format!(
        "cilium-operator {}: {} 409s on delete skipped ({} deletes answered 409 in the audit log), 0 passes ended at one, {} of {} stale identities left after {} s",
        run.version,
        run.log.conflicts_skipped,
        refused,
        last.old_left,
        old.len(),
        last.at.as_secs()
    );
    eprintln!("{line}");
    let judged = audit.judge(PLUGIN_TIMEOUT_DURATION);
    let theirs = judged.tally(&Actor::Operator);
    assert!(theirs.deletes > 0, "{theirs}");
    eprintln!("{theirs}");
    record(
        "operator_current_alone",
        json!({
            "release": run.version,
            "staleSeeded": old.len(),
            "staleLeft": last.old_left,
            "seconds": last.at.as_secs(),
            "conflictsSkipped": run.log.conflicts_skipped,
            "deletesAnswered409": refused,
            "deletes409WithOthersDue": passes.met,
            "passesStoppedAt409": passes.stopped.len(),
            "auditOperator": theirs.to_json(),
            "printed": [run.to_string(), line, theirs.to_string(), passes.to_string()],
        }),
    );
}

/// 4.2: the plugin deletes while today's operator collects the same
/// identities. Nothing in use deleted (audit log, at the instant of each
/// delete), every stale identity gone, the report equal to the server; the
/// report's `already-gone` are exactly the planned identities the operator
/// deleted during the run (audit log; less any whose name came back
/// before our attempt); the operator passes our deletes ended (a 404 on its
/// delete or mark) are the operator's writes the server answered 404, each
/// on a name we deleted, at most one per GC interval (2 s) from our first
/// delete to its last 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_next_to_the_current_operator_already_gone_are_its_deletes_and_our_deletes_end_few_passes(
) {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let Some(operator) = Operator::up(&cluster, Version::Current, &GC_FLAGS) else {
        return;
    };
    let old = seed_old(&cluster, Version::Current).await;
    // Let the operator start marking (2 s unused, then a pass) and deleting
    // (4/s). Waiting for all its marks let it delete every old identity
    // first on a loaded machine (the plugin then had nothing to judge), so
    // the plugin starts once the first mark is past its timeout (5 s).
    wait_first_marked(&cluster, &old).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // At 10 deletes/s the run spans several of the operator's 2 s passes.
    // At the default 40/s it once ended inside the gap between two passes
    // (CI, loaded machine), so the operator deleted none of the planned
    // identities during it and the premise below failed. The operator's
    // own timeout (2 s), so both judge the same identities due: with the
    // plugin's usual 5 s the operator, deleting 2 s after its marks,
    // had deleted every one the plugin would have judged due before its
    // plan on a loaded machine (0 planned).
    let verdict = plugin_under_churn_after(
        &cluster,
        Version::Current,
        &old,
        Duration::from_secs(2),
        &["--qps", "10"],
    )
    .await;
    assert!(
        verdict.items().iter().any(|i| i["outcome"] != "skipped"),
        "premise: the plugin planned identities to delete: {}",
        verdict.report["summary"]
    );
    eprintln!("{verdict}");
    verdict.assert_sound();
    let [ours, theirs] = verdict.judge_deletes();
    eprintln!("{ours}");
    eprintln!("{theirs}");
    // No less safe than the operator: of our deletes, not significantly
    // more hit a key an agent still held (its name came back with the same
    // labels), and at most 2 %.
    ours.assert_no_less_safe_than(&theirs);

    // already-gone = the operator's deletes of planned identities.
    let planned: BTreeSet<String> = verdict
        .items()
        .iter()
        .filter(|i| i["outcome"] != "skipped")
        .filter_map(|i| i["name"].as_str().map(str::to_string))
        .collect();
    let judged = verdict.audit.judge(verdict.timeout);
    let operator_deleted: BTreeSet<String> = judged
        .deletes
        .iter()
        .filter(|d| d.actor == Actor::Operator && d.at >= verdict.started)
        .filter(|d| planned.contains(&d.name))
        .map(|d| d.name.clone())
        .collect();
    let gone = verdict.names_with("already-gone");
    assert!(
        !operator_deleted.is_empty(),
        "premise: the operator deleted planned identities during our run (audit log)"
    );
    assert!(
        gone.is_subset(&operator_deleted),
        "every already-gone was the operator's delete (audit log): {:?}",
        gone.difference(&operator_deleted).collect::<Vec<_>>()
    );
    for name in operator_deleted.difference(&gone) {
        assert!(
            judged
                .deletes
                .iter()
                .any(|d| &d.name == name && d.actor == Actor::Operator && d.came_back.is_some()),
            "{name}: the operator deleted it during our run, and it did not come back, yet the report does not say already-gone"
        );
    }

    // After the run the operator goes on: every old identity ends gone. By
    // label set, not name: a freed id may now carry a job's new identity.
    let client = cluster.admin().await;
    let mut left = usize::MAX;
    for _ in 0..60 {
        left = World::read(&client).await.of_label("old").len();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(
        left, 0,
        "stale identities left after the plugin and the operator"
    );

    // The passes our deletes ended, counted once the operator has caught up
    // (no one else deletes identities: every 404 it met follows ours).
    let log = operator.passes();
    let audit = cluster.audit();
    let not_found: Vec<&Write> = audit
        .writes()
        .iter()
        .filter(|w| w.actor == Actor::Operator && w.resource == Resource::Identity)
        .filter(|w| w.code == 404)
        .collect();
    assert!(
        !not_found.is_empty(),
        "premise: our deletes ended at least one of the operator's passes (a 404 on its write)"
    );
    let ended_by_404 = log.delete_errors.not_found + log.mark_errors.not_found;
    assert_eq!(
        ended_by_404,
        not_found.len(),
        "each pass the operator's log says a 404 ended is a write the server answered 404"
    );
    let ours_deleted = judged.deleted_by(&Actor::Plugin);
    for w in &not_found {
        assert!(
            ours_deleted.contains(&w.name),
            "the operator's 404 on {} follows our delete",
            w.name
        );
    }
    // A pass ends at its first failed write, and passes start a GC interval
    // (2 s) apart: at most one per interval from our first delete on.
    let first = audit
        .first_identity_delete(&Actor::Plugin)
        .expect("we deleted")
        .done;
    let span = not_found
        .iter()
        .map(|w| w.done.duration_since(first).as_secs_f64())
        .fold(0.0, f64::max);
    let bound = (span / 2.0).ceil() as usize + 1;
    assert!(
        ended_by_404 <= bound,
        "at most one pass per 2 s GC interval: {ended_by_404} in {span:.1} s"
    );
    let line = format!(
        "cilium-operator {}: {} planned identities it deleted during our run, {} of them already-gone in our report; {} of its passes ended by our deletes (404 on delete or mark, audit log) within {:.1} s of our first delete (bound {}); 409s on delete skipped {}",
        crate::support::operator::release(Version::Current),
        operator_deleted.len(),
        gone.len(),
        ended_by_404,
        span,
        bound,
        log.conflicts_skipped,
    );
    eprintln!("{line}");
    record(
        "operator_current_coexistence",
        json!({
            "plugin": verdict.report["summary"],
            "operatorDeletedPlanned": operator_deleted.len(),
            "alreadyGone": gone.len(),
            "passesEndedByOurDeletes": ended_by_404,
            "spanSeconds": span,
            "auditPlugin": ours.to_json(),
            "auditOperator": theirs.to_json(),
            "printed": [verdict.to_string(), ours.to_string(), theirs.to_string(), line],
        }),
    );
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

/// Until the operator has marked at least one of `old` (the premise of a
/// run next to it: it is collecting them).
async fn wait_first_marked(cluster: &Cluster, old: &BTreeSet<String>) {
    let client = cluster.admin().await;
    for _ in 0..120 {
        let w = World::read(&client).await;
        if old
            .iter()
            .any(|n| w.identities.get(n).is_some_and(|i| i.marked))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the operator marked none of the old identities within 60 s");
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
/// plugin's decisions. The operator deletes on our marks without marking
/// those identities itself (its log and the audit log: no update of them by
/// it), while it does mark others (the positive control: the same readings
/// see its marks on the identities it finds unmarked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_operator_collects_our_marks_without_its_own_and_we_read_its_marks_alike_across_a_restart(
) {
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
    let updates_of = |names: &BTreeSet<String>| {
        cluster
            .audit()
            .writes()
            .iter()
            .filter(|w| w.actor == Actor::Operator && w.resource == Resource::Identity)
            .filter(|w| w.verb != Verb::Delete && w.took_effect() && names.contains(&w.name))
            .count()
    };
    assert_eq!(updates_of(&ours), 0, "the server saw no mark of ours by it");
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
    // The positive control: its log and the server show its marks.
    let marked = operator.passes().marked;
    assert!(
        !marked.is_disjoint(&theirs),
        "the operator's log shows it marked identities it found unmarked"
    );
    let audited = updates_of(&theirs);
    assert!(audited > 0, "the server saw its marks");
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
