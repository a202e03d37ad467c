//! Narrowing flags (`-l`, `-n`, `--min-age`) through `scan` and `delete`
//! over the simulator: exactly the stale identities inside the selection are
//! chosen and deleted, and nothing outside it is written to. The expected
//! set comes from the server's objects and a plain predicate here, never
//! from the tool's own selector. Issue 13 (`delete -l` deleted nothing).
//! (Moved from `tests/it/narrowing.rs`: each case names its flags, and
//! passes them as the settings they become; the plugin's unit test
//! `narrowing_flags_become_scan_settings` pins that mapping.)

use std::collections::BTreeSet;
use std::time::Duration;

use cilium_gc::Exit;
use cilium_gc::ScanSettings;
use cilium_gc_documents::report::{ItemsMode, Outcome};
use jiff::Timestamp;
use serde_json::Value;

use crate::support::{
    assert_valid, calm, delete_with, json, names_with, scan_with, unlimited, Engine, World,
};

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

/// `scan --items all` then `delete --yes --qps 0`, both narrowed by
/// `flags` (the settings they become): both choose exactly `pick`'s stale
/// identities; the delete removes exactly those and writes to nothing else.
async fn narrowed(flags: &str, narrowing: ScanSettings, pick: &dyn Fn(&Seen) -> bool) {
    let w = World::start(calm("small")).await;
    let all_stale = w.stale_now(TIMEOUT_30M);
    let want = expected(&w, pick);
    assert!(
        !want.is_empty() && want.len() < all_stale.len(),
        "{flags}: the selection must hold some stale identities but not all ({} of {})",
        want.len(),
        all_stale.len()
    );
    let before = w.names();

    let scan = ScanSettings {
        items: ItemsMode::All,
        ..narrowing.clone()
    };
    let (report, exit) = w.gc(&scan_with(scan)).await;
    assert_eq!(exit, Exit::Success, "{flags}: {:?}", report.aborted);
    let would = names_with(&report, Outcome::WouldDelete);
    assert_eq!(would, want, "scan {flags}");
    assert_eq!(report.summary.candidates as usize, want.len());
    assert!(w.sim.ledger().deletes.is_empty(), "scan {flags} wrote");
    assert_valid(&json(&report));

    let (report, exit) = w.gc(&delete_with(narrowing, unlimited())).await;
    assert_eq!(exit, Exit::Success, "{flags}: {:?}", report.aborted);
    let after = w.names();
    let gone: BTreeSet<String> = before.difference(&after).cloned().collect();
    assert_eq!(gone, want, "delete {flags}: what left the server");
    assert_eq!(report.summary.deleted as usize, want.len(), "{flags}");
    assert_eq!(
        report.summary.reclaimed, 0,
        "{flags}: nobody changed anything, so nothing is reclaimed"
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
                "delete {flags} wrote to {} outside the selection",
                r.path
            );
        }
    }
    assert_valid(&json(&report));
}

/// `-l <selector>`.
fn selector(s: &str) -> ScanSettings {
    ScanSettings {
        selector: Some(s.into()),
        ..ScanSettings::default()
    }
}

/// `-n <namespaces>`.
fn namespaces(list: &[&str]) -> ScanSettings {
    ScanSettings {
        namespaces: list.iter().map(|n| n.to_string()).collect(),
        ..ScanSettings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_equals() {
    let l = "io.kubernetes.pod.namespace=team-005";
    narrowed(l, selector(l), &|s| s.label(NS_LABEL) == Some("team-005")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_not_equals() {
    let l = "io.kubernetes.pod.namespace!=team-005";
    narrowed(l, selector(l), &|s| s.label(NS_LABEL) != Some("team-005")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_in() {
    let l = "io.kubernetes.pod.namespace in (team-001, team-002)";
    narrowed(l, selector(l), &|s| {
        s.namespace_in(&["team-001", "team-002"])
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_notin() {
    let l = "io.kubernetes.pod.namespace notin (team-001,team-002,team-003)";
    narrowed(l, selector(l), &|s| {
        !s.namespace_in(&["team-001", "team-002", "team-003"])
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_exists() {
    narrowed("job-name", selector("job-name"), &|s| {
        s.label("job-name").is_some()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_not_exists() {
    narrowed("!job-name", selector("!job-name"), &|s| {
        s.label("job-name").is_none()
    })
    .await;
}

/// `-n team-003,team-007` and `-n team-003 -n team-007` are the same
/// settings (the plugin's unit test `narrowing_flags_become_scan_settings`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_namespaces() {
    let pick = |s: &Seen| s.namespace_in(&["team-003", "team-007"]);
    narrowed(
        "-n team-003,team-007",
        namespaces(&["team-003", "team-007"]),
        &pick,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_age() {
    let three_weeks = Duration::from_secs(21 * 86_400);
    let min_age = ScanSettings {
        min_age: Some(three_weeks),
        ..ScanSettings::default()
    };
    narrowed("--min-age 21d", min_age, &|s| s.older_than(three_weeks)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_and_namespaces_together() {
    let both = ScanSettings {
        selector: Some("app,!job-name".into()),
        ..namespaces(&["team-004", "team-008"])
    };
    narrowed("-l app,!job-name -n team-004,team-008", both, &|s| {
        s.label("app").is_some()
            && s.label("job-name").is_none()
            && s.namespace_in(&["team-004", "team-008"])
    })
    .await;
}
