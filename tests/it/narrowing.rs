//! Narrowing flags (`-l`, `-n`, `--min-age`) through `scan` and `delete`
//! over the simulator: exactly the stale identities inside the selection are
//! chosen and deleted, and nothing outside it is written to. The expected
//! set comes from the server's objects and a plain predicate here, never
//! from the tool's own selector. Issue 13 (`delete -l` deleted nothing).

use std::collections::BTreeSet;
use std::time::Duration;

use cilium_gc::report::Outcome;
use cilium_gc::Exit;
use jiff::Timestamp;
use serde_json::Value;

use crate::support::calm;
use crate::support::world::{assert_valid, json, names_with, World};

const TIMEOUT_30M: Duration = Duration::from_secs(30 * 60);
const NS_LABEL: &str = "io.kubernetes.pod.namespace";

/// What the predicate sees of one identity on the server.
struct Seen<'a> {
    labels: &'a serde_json::Map<String, Value>,
    created: Option<Timestamp>,
    now: Timestamp,
}

impl Seen<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).and_then(Value::as_str)
    }
    fn namespace_in(&self, list: &[&str]) -> bool {
        self.label(NS_LABEL).is_some_and(|ns| list.contains(&ns))
    }
    fn older_than(&self, d: Duration) -> bool {
        self.created.is_some_and(|c| {
            self.now
                .duration_since(c)
                .try_into()
                .is_ok_and(|age: Duration| age >= d)
        })
    }
}

/// The stale identities on the server that `pick` selects.
fn expected(w: &World, pick: &dyn Fn(&Seen) -> bool) -> BTreeSet<String> {
    let now = w.sim.now();
    let empty = serde_json::Map::new();
    w.stale_now(TIMEOUT_30M)
        .into_iter()
        .filter(|name| {
            let obj = w.sim.identity(name).expect("stale identity exists");
            let labels = obj
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            let created = obj
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok());
            pick(&Seen {
                labels,
                created,
                now,
            })
        })
        .collect()
}

/// `scan` then `delete` with `flags`: both choose exactly `pick`'s stale
/// identities; the delete removes exactly those and writes to nothing else.
async fn narrowed(flags: &[&str], pick: &dyn Fn(&Seen) -> bool) {
    let w = World::start(calm("small")).await;
    let all_stale = w.stale_now(TIMEOUT_30M);
    let want = expected(&w, pick);
    assert!(
        !want.is_empty() && want.len() < all_stale.len(),
        "{flags:?}: the selection must hold some stale identities but not all ({} of {})",
        want.len(),
        all_stale.len()
    );
    let before = w.names();

    let mut scan = vec!["scan", "--items", "all"];
    scan.extend_from_slice(flags);
    let (report, exit) = w.gc(&scan).await;
    assert_eq!(exit, Exit::Success, "{flags:?}: {:?}", report.aborted);
    let would = names_with(&report, Outcome::WouldDelete);
    assert_eq!(would, want, "scan {flags:?}");
    assert_eq!(report.summary.candidates as usize, want.len());
    assert!(w.sim.ledger().deletes.is_empty(), "scan {flags:?} wrote");
    assert_valid(&json(&report));

    let mut delete = vec!["delete", "--yes", "--qps", "0"];
    delete.extend_from_slice(flags);
    let (report, exit) = w.gc(&delete).await;
    assert_eq!(exit, Exit::Success, "{flags:?}: {:?}", report.aborted);
    let after = w.names();
    let gone: BTreeSet<String> = before.difference(&after).cloned().collect();
    assert_eq!(gone, want, "delete {flags:?}: what left the server");
    assert_eq!(report.summary.deleted as usize, want.len(), "{flags:?}");
    assert_eq!(
        report.summary.reclaimed, 0,
        "{flags:?}: nobody changed anything, so nothing is reclaimed"
    );
    let ledger = w.sim.ledger();
    assert_eq!(ledger.unsafe_deletes().count(), 0);
    let prefix = "/apis/cilium.io/v2/ciliumidentities/";
    for r in &ledger.requests {
        if matches!(r.method.as_str(), "DELETE" | "PATCH" | "PUT") {
            let name = r.path.strip_prefix(prefix).unwrap_or(&r.path);
            let name = name.split('?').next().unwrap_or(name);
            assert!(
                want.contains(name),
                "delete {flags:?} wrote to {} outside the selection",
                r.path
            );
        }
    }
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_equals() {
    narrowed(&["-l", "io.kubernetes.pod.namespace=team-005"], &|s| {
        s.label(NS_LABEL) == Some("team-005")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_not_equals() {
    narrowed(&["-l", "io.kubernetes.pod.namespace!=team-005"], &|s| {
        s.label(NS_LABEL) != Some("team-005")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_in() {
    narrowed(
        &["-l", "io.kubernetes.pod.namespace in (team-001, team-002)"],
        &|s| s.namespace_in(&["team-001", "team-002"]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_notin() {
    narrowed(
        &[
            "-l",
            "io.kubernetes.pod.namespace notin (team-001,team-002,team-003)",
        ],
        &|s| !s.namespace_in(&["team-001", "team-002", "team-003"]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_exists() {
    narrowed(&["-l", "job-name"], &|s| s.label("job-name").is_some()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_not_exists() {
    narrowed(&["-l", "!job-name"], &|s| s.label("job-name").is_none()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_namespaces() {
    let pick = |s: &Seen| s.namespace_in(&["team-003", "team-007"]);
    narrowed(&["-n", "team-003,team-007"], &pick).await;
    narrowed(&["-n", "team-003", "-n", "team-007"], &pick).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_age() {
    let three_weeks = Duration::from_secs(21 * 86_400);
    narrowed(&["--min-age", "21d"], &|s| s.older_than(three_weeks)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_and_namespaces_together() {
    narrowed(&["-l", "app,!job-name", "-n", "team-004,team-008"], &|s| {
        s.label("app").is_some()
            && s.label("job-name").is_none()
            && s.namespace_in(&["team-004", "team-008"])
    })
    .await;
}
