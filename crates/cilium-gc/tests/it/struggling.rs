//! Deletes follow what we know (issue 11): on a struggling API server the
//! run still handles every eligible identity, safely; when endpoint usage
//! goes dark for good it stops writing, and says so. (Each run is
//! `delete --yes --qps Q --concurrency C [--items all]`, as settings.)

use std::collections::BTreeSet;
use std::time::Duration;

use cilium_gc::Exit;
use cilium_gc_documents::report::{AbortReason, Outcome};
use cilium_gc_sim::Scenario;

use crate::support::{assert_valid, delete, json, Engine, World};

const TIMEOUT_30M: Duration = Duration::from_secs(30 * 60);

/// The full `hostile` preset, agents reclaiming: every candidate ends
/// deleted, already gone or reclaimed; no delete was unsafe; the report's
/// counts are the server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_delete_handles_every_eligible_identity_safely() {
    let w = World::preset("hostile").await;
    let (report, exit) = w.gc(&delete(100.0, 8, true)).await;
    let failed: Vec<_> = report
        .items
        .iter()
        .filter(|i| i.outcome == Outcome::Failed)
        .collect();
    assert_eq!(exit, Exit::Success, "{:?} {failed:?}", report.aborted);
    let s = &report.summary;
    assert!(s.candidates >= 700, "the preset has ~800 stale: {s:?}");
    let candidates: Vec<_> = report
        .items
        .iter()
        .filter(|i| {
            !matches!(
                i.outcome,
                Outcome::Skipped | Outcome::Marked | Outcome::WouldDelete
            )
        })
        .collect();
    assert_eq!(candidates.len() as u64, s.candidates);
    for i in &candidates {
        assert!(
            matches!(
                i.outcome,
                Outcome::Deleted | Outcome::AlreadyGone | Outcome::Reclaimed
            ),
            "not handled: {i:?}"
        );
    }

    w.sim.pause_actors();
    let ledger = w.sim.ledger();
    let unsafe_deletes: Vec<_> = ledger.unsafe_deletes().collect();
    assert!(unsafe_deletes.is_empty(), "{unsafe_deletes:?}");
    assert!(ledger.deletes.iter().all(|d| d.preconditions));
    // Nothing a candidate was is still stale on the server.
    let names: BTreeSet<String> = candidates.iter().map(|i| i.name.clone()).collect();
    let left: Vec<_> = w
        .stale_now(TIMEOUT_30M)
        .intersection(&names)
        .cloned()
        .collect();
    assert!(left.is_empty(), "eligible and left behind: {left:?}");

    // The report's counts are the server's: every `deleted` item was deleted
    // on the server, and every other server-side delete of ours is an item
    // whose answer was lost or a 5xx, later found gone (and says so).
    let on_server: BTreeSet<&str> = ledger.deletes.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(on_server.len(), ledger.deletes.len(), "each deleted once");
    let deleted: BTreeSet<&str> = candidates
        .iter()
        .filter(|i| i.outcome == Outcome::Deleted)
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(deleted.len() as u64, s.deleted);
    assert!(deleted.is_subset(&on_server));
    for name in on_server.difference(&deleted) {
        let item = candidates.iter().find(|i| i.name == *name);
        assert!(
            item.is_some_and(|i| i.outcome == Outcome::AlreadyGone
                && i.last_error
                    .as_deref()
                    .is_some_and(|e| e.contains("may have deleted"))),
            "deleted on the server, not reported so: {name} {item:?}"
        );
    }
    assert!(
        s.throttled > 0 && s.server_errors > 0 && s.watcher_restarts > 0,
        "{s:?}"
    );
    assert!(s.lowest_rate_per_second.is_some() && s.throttled_seconds.is_some());
    assert_valid(&json(&report));
}

/// CEP/CES watches end within 5 s and fail for good from 8 s; from 30 s
/// endpoints appear for marked identities with no write to the identity.
/// The run must stop writing, delete nothing in use, and end with exit 1
/// and `aborted: usage-lost` listing what it did not attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn usage_dark_stops_writing_and_reports_usage_lost() {
    let w = World::preset("usage-dark").await;
    let (report, exit) = w.gc(&delete(5.0, 4, true)).await;
    assert_eq!(exit, Exit::Unexpected, "{:?}", report.aborted);
    assert_eq!(exit.code(), 1);
    let aborted = report.aborted.as_ref().expect("aborted");
    assert_eq!(aborted.reason, AbortReason::UsageLost, "{aborted:?}");
    let s = &report.summary;
    assert!(s.not_attempted > 0, "{s:?}");
    assert!(s.deleted > 0, "deletes ran while usage was known: {s:?}");
    let not_attempted = report
        .items
        .iter()
        .filter(|i| i.outcome == Outcome::NotAttempted)
        .count() as u64;
    assert_eq!(not_attempted, s.not_attempted);
    w.sim.pause_actors();
    let ledger = w.sim.ledger();
    let unsafe_deletes: Vec<_> = ledger.unsafe_deletes().collect();
    assert!(unsafe_deletes.is_empty(), "{unsafe_deletes:?}");
    assert_eq!(ledger.deletes.len() as u64, s.deleted);
    assert_valid(&json(&report));
}

/// A 429 holds the request that got it, not the run: on the hostile
/// server, other deletes succeed while some request waits out its
/// Retry-After.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_429_delays_only_its_own_request() {
    let mut s = Scenario::preset("hostile").unwrap();
    s.actors = Default::default();
    s.faults.burst_every = None;
    let w = World::start(s).await;
    let (report, exit) = w.gc(&delete(100.0, 8, false)).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    let ledger = w.sim.ledger();
    let deletes: Vec<_> = ledger
        .requests
        .iter()
        .filter(|r| r.verb == "delete")
        .collect();
    let overlapped = deletes.iter().filter(|r| r.status == 429).any(|r| {
        let opens = r.time + jiff::SignedDuration::from_secs(r.retry_after.unwrap_or(1) as i64);
        deletes
            .iter()
            .any(|q| q.status == 200 && q.time > r.time && q.time < opens)
    });
    assert!(overlapped, "no delete succeeded during any Retry-After");
    assert!(report.summary.retry_after_wait_seconds.is_some());
}
