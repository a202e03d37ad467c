//! The engine tests itself: settings built as plain values (no clap, no
//! plugin), one run against the simulated API server over real HTTPS, and
//! assertions on what the server holds afterwards.
//!
//! The oracle here (which identities are stale) is written from the
//! operator's rules and the simulator's own view of references, never from
//! the engine's decision code.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cilium_gc::exit::Exit;
use cilium_gc::gc::{self, Ui};
use cilium_gc::model::NAMESPACE_LABEL;
use cilium_gc::policy::parse_mark;
use cilium_gc::report::{AbortReason, Mode, Outcome, Report};
use cilium_gc::settings::{ConnectSettings, GcSettings, ScanSettings, WriteSettings};
use cilium_gc::stop::Stop;
use cilium_gc_sim::{Faults, Scenario, Simulator};
use jiff::Timestamp;
use serde_json::Value;

/// Every run gives up after this long rather than hang CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(240);
/// cilium-operator's default `--identity-heartbeat-timeout`.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The identities a cluster-local allocation may hand out.
const LOCAL_RANGE: std::ops::RangeInclusive<u64> = 256..=65535;

/// A started simulator and the kubeconfig that points at it.
struct Cluster {
    sim: Simulator,
    _dir: tempfile::TempDir,
    kube: ConnectSettings,
}

impl Cluster {
    /// The `small` preset with no actors and no faults: exact counts hold.
    async fn calm() -> Cluster {
        let scenario = Scenario::preset("small").expect("preset").calm();
        let sim = Simulator::start(scenario).await.expect("simulator starts");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&path).expect("kubeconfig written");
        let kube = ConnectSettings {
            kubeconfig: Some(path),
            ..ConnectSettings::default()
        };
        Cluster {
            sim,
            _dir: dir,
            kube,
        }
    }

    /// Identity names the server holds now.
    fn names(&self) -> BTreeSet<String> {
        self.sim.identity_names().into_iter().collect()
    }

    /// The operator's rule, from the simulator's ground truth: numeric, in
    /// the local range, referenced by no endpoint, marked longer ago than
    /// the heartbeat timeout.
    fn stale(&self) -> BTreeSet<String> {
        let used = self.sim.referenced_ids();
        let now = self.sim.now();
        self.names()
            .into_iter()
            .filter(|name| {
                let Some(id) = cilium_gc::model::parse_id(name) else {
                    return false;
                };
                if used.contains(&id) || !LOCAL_RANGE.contains(&id) {
                    return false;
                }
                self.sim
                    .identity(name)
                    .and_then(|o| mark(&o))
                    .is_some_and(|m| older_than(m, now, HEARTBEAT_TIMEOUT))
            })
            .collect()
    }

    /// Run the engine with `settings` to its report.
    async fn run(&self, settings: &GcSettings) -> (Report, Exit) {
        let (stop, ui) = (Stop::default(), Ui::headless());
        let run = gc::run(&self.kube, settings, &stop, &ui);
        tokio::time::timeout(TEST_TIMEOUT, run)
            .await
            .expect("run finished in time")
    }
}

fn mark(identity: &Value) -> Option<Timestamp> {
    identity
        .pointer("/metadata/annotations/io.cilium.heartbeat")
        .and_then(Value::as_str)
        .and_then(parse_mark)
}

fn older_than(mark: Timestamp, now: Timestamp, timeout: Duration) -> bool {
    now.duration_since(mark)
        .try_into()
        .is_ok_and(|age: Duration| age > timeout)
}

fn names_with(report: &Report, outcome: Outcome) -> BTreeSet<String> {
    report
        .items
        .iter()
        .filter(|i| i.outcome == outcome)
        .map(|i| i.name.clone())
        .collect()
}

/// `delete --yes --qps 0`, as plain values.
fn delete_unlimited() -> WriteSettings {
    WriteSettings {
        qps: 0.0,
        yes: true,
        ..WriteSettings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scan_plans_the_stale_identities_and_writes_nothing() {
    let c = Cluster::calm().await;
    let stale = c.stale();
    let before = c.names();
    let settings = GcSettings::for_scan(ScanSettings::default()).expect("valid");
    let (report, exit) = c.run(&settings).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert_eq!(report.mode, Mode::Scan);
    assert_eq!(names_with(&report, Outcome::WouldDelete), stale);
    assert_eq!(report.summary.scanned as usize, before.len());
    assert_eq!(c.names(), before, "a scan changes nothing on the server");
    assert!(c.sim.ledger().deletes.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_removes_exactly_the_stale_identities() {
    let c = Cluster::calm().await;
    let stale = c.stale();
    assert!(stale.len() > 20, "the scenario has stale identities");
    let before = c.names();
    let settings =
        GcSettings::for_delete(ScanSettings::default(), delete_unlimited()).expect("valid");
    let (report, exit) = c.run(&settings).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    let after = c.names();
    let deleted: BTreeSet<String> = before.difference(&after).cloned().collect();
    assert_eq!(deleted, stale, "exactly the stale identities are gone");
    assert!(after.is_subset(&before), "nothing was created");
    assert_eq!(names_with(&report, Outcome::Deleted), stale);
    let ledger = c.sim.ledger();
    assert_eq!(ledger.deletes.len(), stale.len());
    assert_eq!(ledger.unsafe_deletes().count(), 0);
    assert!(
        ledger.deletes.iter().all(|d| d.preconditions),
        "every delete carries preconditions"
    );
    assert_eq!(report.summary.deleted as usize, stale.len());
    assert_eq!(report.summary.candidates, report.summary.deleted);
    assert_eq!(report.exit_code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_narrowed_to_a_namespace_removes_only_its_stale_identities() {
    let c = Cluster::calm().await;
    let stale = c.stale();
    // The namespace label as the server holds it, never the engine's reading.
    let namespace_of = |name: &String| {
        let identity = c.sim.identity(name)?;
        let labels = identity.pointer("/metadata/labels")?;
        labels.get(NAMESPACE_LABEL)?.as_str().map(str::to_owned)
    };
    let mut per_namespace: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for name in &stale {
        if let Some(ns) = namespace_of(name) {
            per_namespace.entry(ns).or_default().insert(name.clone());
        }
    }
    let (namespace, want) = per_namespace
        .into_iter()
        .max_by_key(|(_, names)| names.len())
        .expect("stale identities carry a namespace");
    assert!(
        want.len() < stale.len(),
        "the namespace holds some, not all"
    );
    let before = c.names();
    let scan = ScanSettings {
        namespaces: vec![namespace.clone()],
        ..ScanSettings::default()
    };
    let settings = GcSettings::for_delete(scan, delete_unlimited()).expect("valid");
    let (report, exit) = c.run(&settings).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    let deleted: BTreeSet<String> = before.difference(&c.names()).cloned().collect();
    assert_eq!(deleted, want, "exactly the stale identities of {namespace}");
    assert_eq!(c.sim.ledger().deletes.len(), want.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_dry_run_deletes_nothing() {
    let c = Cluster::calm().await;
    let stale = c.stale();
    let before = c.names();
    let writes = WriteSettings {
        dry_run: true,
        ..delete_unlimited()
    };
    let settings = GcSettings::for_delete(ScanSettings::default(), writes).expect("valid");
    let (report, exit) = c.run(&settings).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert_eq!(report.mode, Mode::DryRunServer);
    assert_eq!(c.names(), before, "dryRun=All leaves every identity");
    assert_eq!(report.summary.candidates as usize, stale.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blast_radius_stops_before_the_first_delete() {
    let c = Cluster::calm().await;
    assert!(c.stale().len() > 3);
    let before = c.names();
    let writes = WriteSettings {
        max_deletions: Some(3),
        ..delete_unlimited()
    };
    let settings = GcSettings::for_delete(ScanSettings::default(), writes).expect("valid");
    let (report, exit) = c.run(&settings).await;
    assert_eq!(exit, Exit::BlastRadius);
    let aborted = report.aborted.as_ref().expect("the run was aborted");
    assert_eq!(aborted.reason, AbortReason::BlastRadius);
    assert_eq!(c.names(), before, "no identity left the server");
    assert!(c.sim.ledger().requests.iter().all(|r| r.method != "DELETE"));
}

/// Issue 28: a throttled item waits out its own `Retry-After` without
/// holding a worker. One worker, a server that admits 5 deletes/s and
/// answers the rest 429 with `Retry-After: 1`: no identity is sent again
/// before its `Retry-After`, and while one waits, others are deleted (a
/// worker asleep on the wait would have deleted nothing meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_throttled_item_waits_its_retry_after_off_the_workers() {
    let c = Cluster::calm().await;
    let stale = c.stale();
    assert!(stale.len() > 20, "the scenario has stale identities");
    c.sim.set_faults(Faults {
        delete_rate_cap: Some(5.0),
        retry_after_secs: 1,
        ..Faults::default()
    });
    let writes = WriteSettings {
        concurrency: 1,
        ..delete_unlimited()
    };
    let settings = GcSettings::for_delete(ScanSettings::default(), writes).expect("valid");
    let (report, exit) = c.run(&settings).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert_eq!(names_with(&report, Outcome::Deleted), stale);
    let deletes: Vec<_> = c
        .sim
        .ledger()
        .requests
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .collect();
    let throttled: Vec<_> = deletes.iter().filter(|r| r.status == 429).collect();
    assert!(!throttled.is_empty(), "the cap throttled some deletes");
    let mut overlapped = 0;
    for t in &throttled {
        let wait = jiff::SignedDuration::from_secs(t.retry_after.expect("Retry-After") as i64);
        let not_before = t.time.checked_add(wait).expect("time");
        let next = deletes
            .iter()
            .find(|r| r.path == t.path && r.time > t.time)
            .expect("a throttled item is sent again");
        assert!(
            next.time >= not_before,
            "{} re-sent at {}, before its Retry-After ended at {not_before}",
            t.path,
            next.time
        );
        let others_deleted = deletes.iter().any(|r| {
            (200..300).contains(&r.status)
                && r.path != t.path
                && r.time > t.time
                && r.time < not_before
        });
        overlapped += usize::from(others_deleted);
    }
    assert!(
        overlapped * 2 > throttled.len(),
        "others were deleted during most waits ({overlapped} of {})",
        throttled.len()
    );
    assert_eq!(
        report.summary.throttled as usize,
        throttled.len(),
        "every 429 is in the report"
    );
    // Each throttled write waited what the server asked (1 s), never a
    // backoff grown on top of it for an item refused again (issue 28).
    let waited = report.summary.retry_after_wait_seconds.expect("waits");
    assert!(
        waited <= throttled.len() as f64,
        "{waited} s of waits for {} refusals of Retry-After: 1",
        throttled.len()
    );
}

/// Issue 28: at `--qps 0` against a server that works on two deletes at
/// once and refuses the rest at once (an API Priority and Fairness level
/// with two seats and `Reject`), eight workers would each collect a 429 in
/// a millisecond and park item after item; instead the writes in flight
/// are cut to what the server holds, so it refuses few of them. Every stale
/// identity is still deleted, and the report says how far the writes in
/// flight were cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_qps_0_the_writes_in_flight_follow_what_the_server_holds() {
    let c = Cluster::calm().await;
    let stale = c.stale();
    assert!(stale.len() >= 60, "the scenario has {} stale", stale.len());
    c.sim.set_faults(Faults {
        delete_seats: Some(2),
        delete_service: Duration::from_millis(20),
        retry_after_secs: 1,
        ..Faults::default()
    });
    let writes = WriteSettings {
        concurrency: 8,
        ..delete_unlimited()
    };
    let settings = GcSettings::for_delete(ScanSettings::default(), writes).expect("valid");
    let (report, exit) = c.run(&settings).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert_eq!(names_with(&report, Outcome::Deleted), stale);
    let refused = c
        .sim
        .ledger()
        .requests
        .iter()
        .filter(|r| r.method == "DELETE" && r.status == 429)
        .count();
    assert_eq!(report.summary.throttled as usize, refused);
    // Eight at once would have every identity but the first few refused
    // at least once.
    assert!(
        refused * 2 < stale.len(),
        "{refused} deletes refused for {} stale identities",
        stale.len()
    );
    let lowest = report.summary.lowest_in_flight.expect("--qps 0 reports it");
    assert!((1..=4).contains(&lowest), "cut to {lowest} of 8");
}

#[test]
fn settings_reject_what_the_flags_would_reject() {
    let bad_qps = WriteSettings {
        qps: -1.0,
        ..WriteSettings::default()
    };
    assert!(GcSettings::for_delete(ScanSettings::default(), bad_qps).is_err());
    let short = ScanSettings {
        heartbeat_timeout: Some(Duration::from_secs(60)),
        ..ScanSettings::default()
    };
    assert!(GcSettings::for_delete(short, WriteSettings::default()).is_err());
    let bad_selector = ScanSettings {
        selector: Some("a in (".into()),
        ..ScanSettings::default()
    };
    assert!(GcSettings::for_scan(bad_selector).is_err());
}
