//! `scan` and `delete` end to end over the simulator: what ends up deleted,
//! what the safety ledger says about every delete, the report's counts, and
//! the exit codes. Issue 3. (Moved from `tests/it/sweep.rs`: the engine
//! tests itself; each run's settings are the flags the test names, as plain
//! values. What goes through the binary stays there.)

use std::time::Duration;

use cilium_gc::Exit;
use cilium_gc::{GcSettings, Pacing, ScanSettings, WriteSettings};
use cilium_gc_cluster::policy::Reason;
use cilium_gc_documents::report::{AbortReason, Mode, Outcome};
use cilium_gc_sim::Kind;
use cilium_gc_sim::Scenario;
use serde_json::json;

use crate::support::{
    assert_valid, calm, delete_with, json, names_with, scan, server_dry_run, unlimited, yes,
    Engine, World,
};

const TIMEOUT_30M: Duration = Duration::from_secs(30 * 60);

/// `--page-size <n>`.
fn pages_of(page_size: u32) -> ScanSettings {
    ScanSettings {
        page_size,
        ..ScanSettings::default()
    }
}

/// `--heartbeat-timeout 2s --allow-short-heartbeat-timeout`.
fn two_second_timeout() -> ScanSettings {
    ScanSettings {
        heartbeat_timeout: Some(Duration::from_secs(2)),
        allow_short_heartbeat_timeout: true,
        ..ScanSettings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scan_decides_without_writing() {
    let w = World::start(calm("small")).await;
    let stale = w.stale_now(TIMEOUT_30M);
    let before = w.names();
    let (report, exit) = w.gc(&scan()).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert_eq!(report.mode, Mode::Scan);
    assert_eq!(report.summary.scanned as usize, before.len());
    assert_eq!(report.summary.candidates as usize, stale.len());
    let would = names_with(&report, Outcome::WouldDelete);
    assert_eq!(would, stale);
    assert!(
        report.items.iter().all(|i| i.reason != Reason::InUse),
        "in-use identities are only counted"
    );
    let r = &report.summary.reasons;
    assert!(
        r.in_use > 0
            && r.unmarked > 0
            && r.mark_too_recent > 0
            && r.malformed_mark > 0
            && r.not_local > 0
    );
    let ledger = w.sim.ledger();
    assert!(ledger.deletes.is_empty());
    assert!(
        ledger
            .requests
            .iter()
            .all(|q| matches!(q.method.as_str(), "GET" | "POST")),
        "scan only reads (and asks SSAR)"
    );
    assert_eq!(w.names(), before);
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seed_scenario_with_reclaiming_agents_is_safe_and_complete() {
    let mut s = Scenario::preset("seed").unwrap();
    // Agents reclaim hard while we delete, so that many deletes conflict.
    s.actors.agent_reclaim = 400.0;
    s.actors.reuse = 50.0;
    let w = World::start(s).await;
    let stale = w.stale_now(TIMEOUT_30M);
    assert!(
        stale.len() > 10_000,
        "seed has many stale identities ({})",
        stale.len()
    );
    let (report, exit) = w
        .gc(&delete_with(
            ScanSettings::default(),
            WriteSettings {
                pacing: Pacing {
                    concurrency: 32,
                    ..unlimited().pacing
                },
                ..unlimited()
            },
        ))
        .await;
    w.sim.stop_actors();
    assert!(
        matches!(exit, Exit::Success | Exit::PartialFailure),
        "{exit:?} {:?}",
        report.aborted
    );
    assert!(
        report.aborted.is_none(),
        "the run never stops early: {:?}",
        report.aborted
    );
    let ledger = w.sim.ledger();
    assert_eq!(
        ledger.unsafe_deletes().count(),
        0,
        "no identity in use was deleted"
    );
    assert!(ledger.deletes.iter().all(|d| d.preconditions));
    let left = w.names();
    let untouched_left: Vec<_> = stale
        .iter()
        .filter(|n| !ledger.actor_touched.contains(*n) && left.contains(*n))
        .collect();
    assert!(
        untouched_left.is_empty(),
        "stale and untouched, yet not deleted: {untouched_left:?}"
    );
    assert!(report.summary.conflicts > 0, "agents made deletes conflict");
    for item in report.items.iter().filter(|i| !i.conflicts.is_empty()) {
        match item.outcome {
            Outcome::Reclaimed | Outcome::Deleted | Outcome::AlreadyGone => {}
            Outcome::Failed => assert!(item.last_error.is_some(), "{item:?}"),
            other => panic!("a conflict ended {other:?}: {item:?}"),
        }
        assert!(
            item.conflicts.iter().all(|c| c.manager.is_some()),
            "who changed it is recorded"
        );
    }
    assert_eq!(
        report.summary.deleted as usize,
        ledger.deletes.len(),
        "report agrees with the server"
    );
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_server_ends_like_a_calm_one() {
    let calm_world = World::start(calm("hostile")).await;
    let (calm_report, calm_exit) = calm_world.gc(&delete_with(pages_of(50), unlimited())).await;
    assert_eq!(calm_exit, Exit::Success);

    let mut hostile = Scenario::preset("hostile").unwrap();
    hostile.actors = Default::default();
    // Enough pages and expiries that a 410 mid-list is certain, not likely.
    hostile.faults.expire_continue_fraction = 0.3;
    let w = World::start(hostile).await;
    let (report, exit) = w
        .gc(&delete_with(
            pages_of(50),
            WriteSettings {
                pacing: Pacing {
                    max_retries: 10,
                    ..unlimited().pacing
                },
                ..unlimited()
            },
        ))
        .await;
    assert_eq!(
        exit,
        Exit::Success,
        "{:?} {:?}",
        report.aborted,
        report
            .items
            .iter()
            .filter(|i| i.outcome == Outcome::Failed)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        w.names(),
        calm_world.names(),
        "final state equals the calm run's"
    );
    // A delete whose answer was lost to a reset is retried and finds the
    // identity gone: honest reports count it as already gone.
    assert_eq!(
        report.summary.deleted + report.summary.already_gone,
        calm_report.summary.deleted
    );
    assert_eq!(
        w.sim.ledger().deletes.len() as u64,
        calm_report.summary.deleted
    );
    let s = &report.summary;
    assert!(
        s.throttled > 0 && s.server_errors > 0 && s.retries > 0,
        "{s:?}"
    );
    assert!(
        s.list_restarts > 0,
        "a 410 mid-list was met and handled: {s:?}"
    );

    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_rate_stays_within_qps_and_burst() {
    let mut s = calm("small");
    s.identities = 400;
    let w = World::start(s).await;
    let stale = w.stale_now(TIMEOUT_30M).len();
    assert!(stale >= 60, "{stale}");
    let (qps, burst) = (20usize, 5usize);
    let (report, exit) = w
        .gc(&delete_with(
            ScanSettings::default(),
            WriteSettings {
                pacing: Pacing {
                    qps: qps as f64,
                    burst: Some(burst as u32),
                    concurrency: 16,
                    ..yes().pacing
                },
                ..yes()
            },
        ))
        .await;
    assert_eq!(exit, Exit::Success);
    assert_eq!(report.summary.deleted as usize, stale);
    let times: Vec<_> = w
        .sim
        .ledger()
        .requests
        .iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.time)
        .collect();
    // Both bounds on the number of deletes in each one-second window: never
    // more than qps + burst; never fewer than a quarter of qps in a window
    // that lies wholly inside the sweep (a limiter that under-delivers or
    // stalls fails this; a noisy 2-core machine does not).
    let second = jiff::SignedDuration::from_secs(1);
    let last = *times.last().expect("deletes were sent");
    let mut full_windows = 0;
    for (i, t) in times.iter().enumerate() {
        let window = times[i..]
            .iter()
            .take_while(|u| u.duration_since(*t) < second)
            .count();
        assert!(window <= qps + burst, "{window} deletes within 1s of {t}");
        if last.duration_since(*t) >= second {
            full_windows += 1;
            assert!(
                window >= qps / 4,
                "only {window} deletes within 1s of {t} at --qps {qps}"
            );
        }
    }
    assert!(full_windows > 0, "the sweep lasted over a second");
}

async fn assert_refused(w: &World, settings: &GcSettings, needle: &str) {
    let before = w.names();
    let (report, exit) = w.gc(settings).await;
    assert_eq!(exit, Exit::Refused, "{:?}", report.aborted);
    let abort = report.aborted.as_ref().expect("aborted");
    assert!(
        abort.message.contains(needle),
        "{:?} should mention {needle:?}",
        abort.message
    );
    let ledger = w.sim.ledger();
    assert!(
        ledger
            .requests
            .iter()
            .all(|r| !matches!(r.method.as_str(), "DELETE" | "PATCH" | "PUT")),
        "nothing written"
    );
    assert_eq!(w.names(), before);
    assert_eq!(report.exit_code, 3);
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unsafe_clusters_are_refused_with_exit_3() {
    let cases = [
        ("no-endpoints", "zero CiliumEndpoints"),
        ("no-cep-crd", "cannot tell which identities are in use"),
        (
            "forbidden",
            "missing permission: delete ciliumidentities.cilium.io",
        ),
        ("kvstore", "kvstore"),
        ("missing-crd", "CiliumIdentity CRD"),
    ];
    for (preset, needle) in cases {
        let w = World::start(Scenario::preset(preset).unwrap().calm()).await;
        assert_refused(&w, &delete_with(ScanSettings::default(), yes()), needle).await;
        w.sim.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn force_overrides_only_the_zero_endpoints_check() {
    let w = World::start(calm("no-endpoints")).await;
    let force = WriteSettings {
        force: true,
        ..unlimited()
    };
    let (report, exit) = w.gc(&delete_with(ScanSettings::default(), force)).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert!(report.preflight.forced, "the report says --force was used");
    assert!(report.summary.deleted > 0);
    let w = World::start(calm("kvstore")).await;
    let force = WriteSettings {
        force: true,
        ..yes()
    };
    assert_refused(&w, &delete_with(ScanSettings::default(), force), "kvstore").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mark_then_collect_after_the_timeout_spares_reused_identities() {
    let w = World::start(calm("small")).await;
    let mark = WriteSettings {
        mark: true,
        ..unlimited()
    };
    let (report, exit) = w.gc(&delete_with(two_second_timeout(), mark)).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    let marked: Vec<String> = names_with(&report, Outcome::Marked).into_iter().collect();
    assert!(marked.len() >= 10, "{}", marked.len());
    assert_eq!(report.summary.marked as usize, marked.len());
    // Meanwhile a pod reuses one, and an agent reclaims (unmarks) another.
    let reused = marked[0].clone();
    let unmarked = marked[1].clone();
    w.sim
        .create_object(
            Kind::Endpoint,
            json!({"apiVersion":"cilium.io/v2","kind":"CiliumEndpoint",
                   "metadata":{"name":"reuser","namespace":"default"},
                   "status":{"identity":{"id": reused.parse::<u64>().unwrap(),"labels":["k8s:app=x"]}}}),
            "cilium-agent",
        )
        .unwrap();
    w.sim.set_heartbeat(&unmarked, None).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await; // past the 2s timeout
    let (report, exit) = w.gc(&delete_with(two_second_timeout(), unlimited())).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    let left = w.names();
    assert!(
        left.contains(&reused),
        "a reused identity is never collected"
    );
    assert!(
        left.contains(&unmarked),
        "a reclaimed identity is left for a later mark"
    );
    for name in &marked[2..] {
        assert!(
            !left.contains(name),
            "{name} stayed unused after its mark and must be gone"
        );
    }
    assert_eq!(w.sim.ledger().unsafe_deletes().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_dry_run_writes_nothing() {
    let w = World::start(calm("small")).await;
    let stale = w.stale_now(TIMEOUT_30M);
    let before = w.names();
    let (report, exit) = w.gc(&server_dry_run()).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert_eq!(report.mode, Mode::DryRunServer);
    assert_eq!(report.summary.candidates as usize, stale.len());
    assert_eq!(
        report.summary.validated as usize,
        stale.len(),
        "the server validated each delete"
    );
    assert_eq!(
        report.summary.deleted, 0,
        "issue 21: nothing deleted, and the report says so"
    );
    let ledger = w.sim.ledger();
    assert!(
        ledger.deletes.is_empty(),
        "the ledger records no real delete"
    );
    assert_eq!(
        ledger
            .requests
            .iter()
            .filter(|r| r.method == "DELETE")
            .count(),
        stale.len()
    );
    assert_eq!(w.names(), before);
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blast_radius_limits_stop_before_the_first_delete() {
    let w = World::start(calm("small")).await;
    let before = w.names();
    let at_most_3 = WriteSettings {
        max_deletions: Some(3),
        ..yes()
    };
    let (report, exit) = w.gc(&delete_with(ScanSettings::default(), at_most_3)).await;
    assert_eq!(exit, Exit::BlastRadius);
    assert_eq!(
        report.aborted.as_ref().unwrap().reason,
        AbortReason::BlastRadius
    );
    assert_eq!(w.names(), before);
    let at_most_1_percent = WriteSettings {
        max_percent: Some(1.0),
        ..yes()
    };
    let (_, exit) = w
        .gc(&delete_with(ScanSettings::default(), at_most_1_percent))
        .await;
    assert_eq!(exit, Exit::BlastRadius);
    assert_eq!(w.names(), before);
    assert!(w.sim.ledger().requests.iter().all(|r| r.method != "DELETE"));
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lost_permission_mid_run_stops_writes_and_exits_3() {
    let w = World::start(calm("small")).await;
    let stale = w.stale_now(TIMEOUT_30M).len();
    let sim = &w.sim;
    let one_at_10_per_second = WriteSettings {
        pacing: Pacing {
            qps: 10.0,
            burst: Some(1),
            concurrency: 1,
            ..yes().pacing
        },
        ..yes()
    };
    let settings = delete_with(ScanSettings::default(), one_at_10_per_second);
    let run = w.gc(&settings);
    let revoke = async {
        while sim.ledger().deletes.len() < 3 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        sim.set_rbac_denials(vec![cilium_gc_sim::Denial::new(
            "delete",
            "ciliumidentities",
        )]);
    };
    let ((report, exit), ()) = tokio::join!(run, revoke);
    assert_eq!(exit, Exit::Refused);
    assert_eq!(
        report.aborted.as_ref().unwrap().reason,
        AbortReason::PermissionLost
    );
    assert!((report.summary.deleted as usize) < stale);
    assert!(
        report.summary.not_attempted > 0,
        "the rest is reported as not attempted"
    );
    let forbidden = w
        .sim
        .ledger()
        .requests
        .iter()
        .filter(|r| r.method == "DELETE" && r.status == 403)
        .count();
    assert!(
        forbidden <= 1,
        "at most the in-flight delete met the 403, then writes stopped ({forbidden})"
    );
    assert_valid(&json(&report));
}
