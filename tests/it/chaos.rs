//! Safety under chaos (issue 8): random scenarios with faults and actors
//! (property tests), malformed objects in lists and watches, spoiled list
//! pages, a server restarted mid-run, clock skew, and signals at random
//! points. Every test judges the run by the simulator's ledger: what the
//! server saw, not what the tool says it did.
//!
//! `CHAOS_CASES=N` runs N random schedules instead of the default few.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cilium_gc::exit::Exit;
use cilium_gc::report::{AbortReason, ErrorKind, Outcome, Report};
use cilium_gc::settings::ConnectOptions;
use cilium_gc::stop::Stop;
use cilium_gc_sim::{ActorRates, Faults, PageFault, Scenario, Simulator, ThrottleShape};
use cilium_gc_sim::{Kind, HEARTBEAT_ANNOTATION};
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::support::calm;
use crate::support::world::{assert_valid, binary, deletes_after, gc_at, json, World};

const TIMEOUT_30M: Duration = Duration::from_secs(30 * 60);
/// The note sweep puts on a 404 that followed a lost answer.
const LOST_ANSWER_NOTE: &str = "an earlier attempt got no answer";

fn calm_sized(identities: usize) -> Scenario {
    Scenario {
        identities,
        endpoints: identities,
        ..calm("small")
    }
}

/// Random schedules per property test: `CHAOS_CASES`, else 6.
fn cases() -> u32 {
    std::env::var("CHAOS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

fn ago(now: Timestamp, secs: i64) -> String {
    (now - SignedDuration::from_secs(secs)).to_string()
}

/// A well-formed CiliumIdentity with an optional heartbeat mark.
fn identity(name: &str, mark: Option<&str>) -> Value {
    let mut v = json!({
        "metadata": {"name": name, "labels": {"io.kubernetes.pod.namespace": "chaos"}},
        "security-labels": {"k8s:io.kubernetes.pod.namespace": "chaos"},
    });
    if let Some(m) = mark {
        v["metadata"]["annotations"] = json!({ HEARTBEAT_ANNOTATION: m });
    }
    v
}

/// A raw CiliumIdentity exactly as given (with apiVersion and kind).
fn raw_identity(metadata: Value) -> Value {
    json!({"apiVersion": "cilium.io/v2", "kind": "CiliumIdentity", "metadata": metadata,
           "security-labels": {"k8s:io.kubernetes.pod.namespace": "chaos"}})
}

/// A raw CiliumEndpoint in namespace `chaos` with the given `status`.
fn raw_endpoint(name: Value, status: Option<Value>) -> Value {
    let mut v = json!({"apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
        "metadata": {"name": name, "namespace": "chaos", "uid": format!("uid-cep-{name}"),
                     "resourceVersion": "1"}});
    if let Some(s) = status {
        v["status"] = s;
    }
    v
}

/// Outcome counts the ledger can be held to.
fn check_ledger_agrees(report: &Report, w: &World) {
    let ledger = w.sim.ledger();
    assert_eq!(
        ledger.unsafe_deletes().count(),
        0,
        "identities in use were deleted: {:?}",
        ledger.unsafe_deletes().collect::<Vec<_>>()
    );
    assert!(
        ledger.deletes.iter().all(|d| d.preconditions),
        "every delete carries preconditions"
    );
    let mut once = BTreeSet::new();
    for d in &ledger.deletes {
        assert!(once.insert(d.name.clone()), "{} deleted twice", d.name);
    }
    let by_outcome = |o: Outcome| -> BTreeSet<String> {
        report
            .items
            .iter()
            .filter(|i| i.outcome == o)
            .map(|i| i.name.clone())
            .collect()
    };
    let deleted = by_outcome(Outcome::Deleted);
    assert_eq!(report.summary.deleted as usize, deleted.len());
    let noted_gone: BTreeSet<String> = report
        .items
        .iter()
        .filter(|i| i.outcome == Outcome::AlreadyGone)
        .filter(|i| {
            i.last_error
                .as_deref()
                .is_some_and(|e| e.contains(LOST_ANSWER_NOTE))
        })
        .map(|i| i.name.clone())
        .collect();
    assert!(
        deleted.is_subset(&once),
        "reported deleted, but the server saw no delete: {:?}",
        deleted.difference(&once).collect::<Vec<_>>()
    );
    let explained: BTreeSet<String> = deleted.union(&noted_gone).cloned().collect();
    assert!(
        once.is_subset(&explained),
        "the server saw deletes the report does not account for: {:?}",
        once.difference(&explained).collect::<Vec<_>>()
    );
}

// ---- property tests ----

/// One random schedule: cluster size and shape, actors, faults, client pace.
#[derive(Debug, Clone)]
struct Schedule {
    seed: u64,
    identities: usize,
    stale_ratio: f64,
    actors: ActorRates,
    faults: Faults,
    qps: u32,
    concurrency: u32,
    page_size: u32,
}

fn actor_rates() -> impl Strategy<Value = ActorRates> {
    prop_oneof![
        Just(ActorRates::default()),
        (
            0.0..4.0f64,
            0.0..2.0f64,
            0.0..4.0f64,
            0.0..2.0f64,
            0.0..4.0f64
        )
            .prop_map(
                |(agent_reclaim, reuse, operator_mark, identity_churn, endpoint_churn)| {
                    ActorRates {
                        agent_reclaim,
                        reuse,
                        operator_mark,
                        identity_churn,
                        endpoint_churn,
                        ..ActorRates::default()
                    }
                }
            ),
    ]
}

fn faults() -> impl Strategy<Value = Faults> {
    (
        (0.0..0.02f64, 0u64..=1, prop::bool::ANY),
        (0.0..0.02f64, 0.0..0.02f64, 0.0..0.01f64),
        (0.0..0.02f64, 0.0..0.1f64, 0.0..0.1f64),
        prop::option::of(40.0..200.0f64),
    )
        .prop_map(
            |(
                (throttle, retry_after, status_shape),
                (e500, e503, e504),
                (reset, slow, expire),
                cap,
            )| {
                Faults {
                    throttle_fraction: throttle,
                    throttle_shape: if status_shape {
                        ThrottleShape::Mixed
                    } else {
                        ThrottleShape::Apf
                    },
                    retry_after_secs: retry_after,
                    delete_rate_cap: cap,
                    error_500_fraction: e500,
                    error_503_fraction: e503,
                    error_504_fraction: e504,
                    reset_fraction: reset,
                    slow_fraction: slow,
                    slow_delay: Duration::from_millis(40),
                    expire_continue_fraction: expire,
                    ..Faults::default()
                }
            },
        )
}

fn schedule() -> impl Strategy<Value = Schedule> {
    (
        any::<u64>(),
        100usize..=600,
        0.2..0.8f64,
        actor_rates(),
        faults(),
        prop_oneof![Just(0u32), 30u32..300],
        1u32..=16,
        prop_oneof![Just(500u32), 40u32..500],
    )
        .prop_map(
            |(seed, identities, stale_ratio, actors, faults, qps, concurrency, page_size)| {
                Schedule {
                    seed,
                    identities,
                    stale_ratio,
                    actors,
                    faults,
                    qps,
                    concurrency,
                    page_size,
                }
            },
        )
}

async fn run_schedule(s: Schedule) {
    let scenario = Scenario {
        seed: s.seed,
        stale_ratio: s.stale_ratio,
        actors: s.actors,
        faults: s.faults.clone(),
        ..calm_sized(s.identities)
    };
    let w = World::start(scenario).await;
    let stale = w.stale_now(TIMEOUT_30M);
    let (qps, conc, page) = (
        s.qps.to_string(),
        s.concurrency.to_string(),
        s.page_size.to_string(),
    );
    let (report, exit) = w
        .gc(&[
            "delete",
            "--yes",
            "--items",
            "all",
            "--qps",
            &qps,
            "--concurrency",
            &conc,
            "--page-size",
            &page,
            "--max-retries",
            "12",
        ])
        .await;
    w.sim.stop_actors();
    if let Some(abort) = &report.aborted {
        // The one early end allowed: the endpoint watchers could not list
        // (kube's watcher restarts a paged list on any failed page, as
        // client-go's reflector does). Then nothing more may be written, and
        // what was written must still add up.
        // Before the first full list: read-failed; mid-run: usage-lost.
        assert!(
            matches!(
                abort.reason,
                AbortReason::ReadFailed | AbortReason::UsageLost
            ),
            "{abort:?}"
        );
        assert!(abort.message.contains("endpoint watchers"), "{abort:?}");
        assert_eq!(exit, Exit::Unexpected);
        check_ledger_agrees(&report, &w);
        assert_valid(&json(&report));
        eprintln!("schedule ended safely without usage: {}", abort.message);
        w.sim.shutdown().await;
        return;
    }
    let failed: Vec<_> = report
        .items
        .iter()
        .filter(|i| i.outcome == Outcome::Failed)
        .collect();
    assert_eq!(failed.len() as u64, report.summary.failed);
    assert!(
        failed.iter().all(|i| i.last_error.is_some()),
        "every failure has a reason: {failed:?}"
    );
    let want = if failed.is_empty() {
        Exit::Success
    } else {
        Exit::PartialFailure
    };
    assert_eq!(exit, want, "{failed:?}");
    assert_eq!(report.exit_code, want.code());

    check_ledger_agrees(&report, &w);

    // Stale at the start and left alone by actors: gone, or failed with a reason.
    let ledger = w.sim.ledger();
    let left = w.names();
    let failed: BTreeSet<&str> = failed.iter().map(|i| i.name.as_str()).collect();
    let missed: Vec<_> = stale
        .iter()
        .filter(|n| !ledger.actor_touched.contains(*n))
        .filter(|n| left.contains(*n) && !failed.contains(n.as_str()))
        .collect();
    assert!(
        missed.is_empty(),
        "stale, untouched, neither deleted nor failed: {missed:?}"
    );
    assert_valid(&json(&report));
    w.sim.shutdown().await;
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        // Each case starts a server and runs a whole delete: shrinking would
        // take minutes. The failing schedule is printed whole instead.
        max_shrink_iters: 0,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Invariants of any run, whatever the cluster, the actors and the faults.
    #[test]
    fn chaos_schedules_keep_the_invariants(s in schedule()) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(180), run_schedule(s))
                .await
                .expect("a chaos schedule finished in time")
        });
    }
}

// ---- malformed objects ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_malformed_objects_are_reported_and_skipped_never_deleted() {
    let w = World::start(calm_sized(100)).await;
    let sim = &w.sim;
    let now = sim.now();
    let old = ago(now, 2 * 3600);
    let hb = |m: &str| json!({ HEARTBEAT_ANNOTATION: m });
    // Identities a delete must never touch, however stale they look.
    let malformed: BTreeMap<&str, Value> = BTreeMap::from([
        (
            "60001",
            json!({"name": "60001", "resourceVersion": "3", "annotations": hb(&old)}),
        ),
        (
            "60002",
            json!({"name": "60002", "uid": "u-60002", "annotations": hb(&old)}),
        ),
        (
            "60003",
            json!({"name": "60003", "uid": "u", "resourceVersion": "3",
                          "labels": {"app": 7}, "annotations": hb(&old)}),
        ),
        (
            "60004",
            json!({"name": "60004", "uid": "u", "resourceVersion": "3",
                          "annotations": [HEARTBEAT_ANNOTATION, old]}),
        ),
        (
            "60005",
            json!({"name": "60005", "uid": "u", "resourceVersion": "3",
                          "annotations": {HEARTBEAT_ANNOTATION: 1_700_000_000}}),
        ),
        (
            "60006",
            json!({"name": 60006, "uid": "u", "resourceVersion": "3",
                          "annotations": hb(&old)}),
        ),
        (
            "60007",
            json!({"name": "60007", "uid": ["u"], "resourceVersion": 3,
                          "annotations": hb(&old)}),
        ),
    ]);
    for (key, meta) in &malformed {
        sim.inject_raw(Kind::Identity, key, raw_identity(meta.clone()));
    }
    sim.inject_raw(
        Kind::Identity,
        "60008",
        json!({"apiVersion": "cilium.io/v2", "kind": "CiliumIdentity", "metadata": "60008"}),
    );
    sim.inject_raw(Kind::Identity, "60009", json!(["not", "an", "object"]));
    // Well-formed, but never collected: not numeric, out of range, bad marks.
    for name in [
        "stale-but-named",
        "99999999999999999999999",
        "70000",
        "-300",
    ] {
        sim.create_object(
            Kind::Identity,
            identity(name, Some(&old)),
            "cilium-operator",
        )
        .unwrap();
    }
    for (name, mark) in [
        ("60010", "yesterday"),
        ("60011", ""),
        ("60012", "1700000000"),
    ] {
        sim.create_object(
            Kind::Identity,
            identity(name, Some(mark)),
            "cilium-operator",
        )
        .unwrap();
    }
    // Referenced through an id that is a numeric string (or an integral
    // float): in use, whatever the mark says.
    for name in ["60020", "60021"] {
        sim.create_object(
            Kind::Identity,
            identity(name, Some(&old)),
            "cilium-operator",
        )
        .unwrap();
    }
    sim.inject_raw(
        Kind::Endpoint,
        "chaos/by-string",
        raw_endpoint(
            json!("by-string"),
            Some(json!({"identity": {"id": "60020"}})),
        ),
    );
    sim.inject_raw(
        Kind::Endpoint,
        "chaos/by-float",
        raw_endpoint(
            json!("by-float"),
            Some(json!({"identity": {"id": 60021.0}})),
        ),
    );
    // Two endpoints whose names are unreadable must not share one key: each
    // keeps its own identity in use.
    for (i, id) in [(1, 60022), (2, 60023)] {
        sim.create_object(
            Kind::Identity,
            identity(&id.to_string(), Some(&old)),
            "cilium-operator",
        )
        .unwrap();
        let mut cep = raw_endpoint(json!(i), Some(json!({"identity": {"id": id}})));
        cep["metadata"]["uid"] = json!(format!("uid-unnamed-{i}"));
        sim.inject_raw(Kind::Endpoint, &format!("chaos/unnamed-{i}"), cep);
    }
    // Endpoints that reference nothing: no status, id 0, wrong types.
    for (name, status) in [
        ("no-status", None),
        ("id-zero", Some(json!({"identity": {"id": 0}}))),
        ("id-bool", Some(json!({"identity": {"id": true}}))),
        (
            "id-object",
            Some(json!({"identity": {"id": {"value": 60030}}})),
        ),
        ("id-negative", Some(json!({"identity": {"id": -60031}}))),
        ("status-string", Some(json!("ready"))),
        ("identity-list", Some(json!({"identity": [60032]}))),
    ] {
        sim.inject_raw(
            Kind::Endpoint,
            &format!("chaos/{name}"),
            raw_endpoint(json!(name), status),
        );
    }
    // A valid stale identity with a huge label map is an ordinary candidate.
    let mut huge = identity("60040", Some(&old));
    for i in 0..5000 {
        huge["metadata"]["labels"][format!("k8s:label-{i}")] = json!(format!("value-{i}"));
    }
    sim.create_object(Kind::Identity, huge, "cilium-operator")
        .unwrap();

    let stale = w.stale_now(TIMEOUT_30M);
    // Issue 12: endpoints whose identity cannot be read block deletes.
    let before = w.names();
    let (refused, exit) = w
        .gc(&["delete", "--yes", "--qps", "0", "--items", "all"])
        .await;
    assert_eq!(exit, Exit::Refused, "{:?}", refused.aborted);
    let why = &refused.aborted.as_ref().unwrap().message;
    assert!(
        why.contains("chaos/id-bool") && why.contains("--allow-unreadable-endpoints"),
        "{why}"
    );
    assert!(
        !why.contains("chaos/id-zero") && !why.contains("no-status"),
        "{why}"
    );
    assert_eq!(w.names(), before, "nothing deleted");
    assert!(w.sim.ledger().deletes.is_empty());
    assert_valid(&json(&refused));

    let (report, exit) = w
        .gc(&[
            "delete",
            "--yes",
            "--qps",
            "0",
            "--items",
            "all",
            "--allow-unreadable-endpoints",
        ])
        .await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert!(report.options.allow_unreadable_endpoints);
    assert_valid(&json(&report));
    check_ledger_agrees(&report, &w);

    // Every malformed identity and endpoint is counted and named: 9
    // identities, and 7 endpoints whose name or id path cannot be read.
    assert_eq!(report.summary.malformed, 16, "{:#?}", report.errors);
    let malformed_errors: Vec<&str> = report
        .errors
        .iter()
        .filter(|e| e.kind == ErrorKind::MalformedObject)
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(malformed_errors.len(), 16, "{malformed_errors:#?}");
    for name in ["60001", "60002", "60003", "60004", "60005", "60007"] {
        assert!(
            malformed_errors.iter().any(|m| m.contains(name)),
            "{name} is named: {malformed_errors:#?}"
        );
    }
    for name in [
        "id-bool",
        "id-object",
        "id-negative",
        "status-string",
        "identity-list",
    ] {
        let what = format!("ciliumendpoint chaos/{name}:");
        assert!(
            malformed_errors.iter().any(|m| m.starts_with(&what)),
            "{name} is named: {malformed_errors:#?}"
        );
    }
    assert_eq!(
        malformed_errors
            .iter()
            .filter(|m| m.starts_with("ciliumendpoint <no name>: no readable metadata.name"))
            .count(),
        2
    );
    for m in &malformed_errors {
        assert!(
            m.ends_with("(skipped)")
                || m.ends_with("--allow-unreadable-endpoints)")
                || m.ends_with("its identity reference was read)"),
            "{m}"
        );
    }

    let left = w.names();
    for name in [
        "60001",
        "60002",
        "60003",
        "60004",
        "60005",
        "60006",
        "60007",
        "60008",
        "60009",
        "stale-but-named",
        "99999999999999999999999",
        "70000",
        "-300",
        "60010",
        "60011",
        "60012",
        "60020",
        "60021",
        "60022",
        "60023",
    ] {
        assert!(left.contains(name), "{name} must not be deleted");
    }
    assert!(
        !left.contains("60040"),
        "a huge label map is no reason to keep"
    );
    let item = |n: &str| report.items.iter().find(|i| i.name == n);
    for n in ["60020", "60021", "60022", "60023"] {
        assert_eq!(
            item(n).map(|i| i.reason),
            Some(cilium_gc::policy::Reason::InUse),
            "{n}"
        );
    }
    // Everything else stale by the simulator's reckoning went. (It calls the
    // malformed ones stale too, and 60022/60023: its decoder drops an
    // endpoint whose name is not a string; keeping them is the safe side.)
    let kept_on_purpose = ["60021", "60022", "60023"];
    let should_go: BTreeSet<&String> = stale
        .iter()
        .filter(|n| !malformed.contains_key(n.as_str()) && !kept_on_purpose.contains(&n.as_str()))
        .collect();
    let stayed: Vec<_> = should_go.iter().filter(|n| left.contains(**n)).collect();
    assert!(stayed.is_empty(), "stale but not deleted: {stayed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_malformed_endpoints_arriving_by_watch_do_not_stall_or_confuse_the_run() {
    let w = World::start(calm_sized(200)).await;
    let stale = w.stale_now(TIMEOUT_30M);
    assert!(stale.len() > 20);
    let sim = &w.sim;
    let run = w.gc(&[
        "delete",
        "--yes",
        "--qps",
        "25",
        "--burst",
        "1",
        "--allow-unreadable-endpoints",
    ]);
    let inject = async {
        while sim.ledger().deletes.len() < 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        sim.inject_raw(Kind::Endpoint, "chaos/junk", json!("junk"));
        sim.inject_raw(
            Kind::Endpoint,
            "chaos/no-rv",
            json!({"metadata": {"name": "no-rv", "namespace": "chaos"},
                   "status": {"identity": {"id": true}}}),
        );
        sim.inject_raw(
            Kind::Endpoint,
            "chaos/meta-string",
            json!({"metadata": "x", "status": {"identity": {"id": "zero"}}}),
        );
        sim.inject_raw(
            Kind::Endpoint,
            "chaos/huge",
            raw_endpoint(
                json!("huge"),
                Some(json!({"identity": {"id": 0, "labels": vec!["k8s:x=y"; 20_000]}})),
            ),
        );
    };
    let ((report, exit), ()) = tokio::join!(run, inject);
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    // Seen by watch or by the re-list a watch event without resourceVersion
    // causes: reported, referencing nothing.
    let reported: Vec<&str> = report
        .errors
        .iter()
        .filter(|e| e.kind == ErrorKind::MalformedObject)
        .map(|e| e.message.as_str())
        .collect();
    assert!(
        reported
            .iter()
            .any(|m| m.starts_with("ciliumendpoint chaos/no-rv: status.identity.id")),
        "{reported:#?}"
    );
    assert!(
        reported.iter().any(|m| m.contains("not a JSON object")),
        "{reported:#?}"
    );
    assert_eq!(report.summary.malformed as usize, reported.len());
    check_ledger_agrees(&report, &w);
    assert_eq!(
        w.names().intersection(&stale).count(),
        0,
        "every stale identity went"
    );
    assert_valid(&json(&report));
}

// ---- server faults ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_truncated_and_dropped_list_pages_are_fetched_again() {
    let w = World::start(calm_sized(300)).await;
    let stale = w.stale_now(TIMEOUT_30M);
    let before = w.names();
    w.sim.spoil_lists(Kind::Identity, PageFault::Truncate, 2);
    w.sim.spoil_lists(Kind::Identity, PageFault::DropMidBody, 2);
    w.sim.spoil_lists(Kind::Identity, PageFault::Truncate, 1);
    w.sim.spoil_lists(Kind::Endpoint, PageFault::Truncate, 1);
    w.sim.spoil_lists(Kind::Endpoint, PageFault::DropMidBody, 1);
    let (report, exit) = w
        .gc(&["delete", "--yes", "--qps", "0", "--page-size", "25"])
        .await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert_eq!(w.sim.spoiled_lists(), 7, "every spoiler was served");
    let deleted: BTreeSet<String> = before.difference(&w.names()).cloned().collect();
    assert_eq!(deleted, stale, "the same identities as with a clean server");
    assert_eq!(
        report.summary.scanned as usize,
        before.len(),
        "no identity lost or counted twice"
    );
    assert!(report.summary.retries >= 5, "{:?}", report.summary);
    assert!(report.summary.watcher_restarts >= 1, "{:?}", report.summary);
    check_ledger_agrees(&report, &w);
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_server_restarted_mid_run_on_the_same_port_with_the_same_state() {
    let w = World::start(calm_sized(200)).await;
    let stale = w.stale_now(TIMEOUT_30M);
    let before = w.names();
    let World {
        sim,
        dir: _dir,
        kubeconfig,
    } = w;
    let kube = ConnectOptions {
        kubeconfig: Some(kubeconfig),
        ..ConnectOptions::default()
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let restarter = tokio::spawn(async move {
        while sim.ledger().deletes.len() < 5 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let state = sim.shutdown_keep_state().await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let sim = Simulator::start_with_state(state).await.expect("restarts");
        let _ = tx.send(());
        sim
    });
    let (report, exit) = gc_at(
        kube,
        &[
            "delete",
            "--yes",
            "--items",
            "all",
            "--qps",
            "20",
            "--burst",
            "1",
            "--concurrency",
            "2",
            "--max-retries",
            "10",
        ],
        &Stop::default(),
    )
    .await;
    rx.await.expect("the server was restarted during the run");
    let sim = restarter.await.unwrap();
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    let left: BTreeSet<String> = sim.identity_names().into_iter().collect();
    let deleted: BTreeSet<String> = before.difference(&left).cloned().collect();
    assert_eq!(deleted, stale);
    let ledger = sim.ledger();
    assert_eq!(ledger.unsafe_deletes().count(), 0);
    assert_eq!(
        report.summary.deleted + report.summary.already_gone,
        stale.len() as u64
    );
    assert_eq!(ledger.deletes.len(), stale.len());
    assert!(
        report.summary.watcher_restarts >= 1 || report.summary.retries >= 1,
        "the outage was noticed: {:?}",
        report.summary
    );
    assert_valid(&json(&report));
}

/// Marks are judged by the server's clock, learned from its `Date` header:
/// the operator writes them with the cluster's clock, not ours.
async fn skewed(offset_secs: i64) {
    let w = World::start(Scenario {
        clock_offset_secs: offset_secs,
        ..calm_sized(50)
    })
    .await;
    let server_now = w.sim.now();
    let client_now = Timestamp::now();
    let skew = (server_now - client_now).get_seconds();
    assert!((skew - offset_secs).abs() <= 2, "{skew}");
    let cases = [
        ("61001", ago(server_now, 40 * 60), true), // 40 min old by the server
        ("61002", ago(server_now, 10 * 60), false), // 10 min: too recent
        ("61003", ago(server_now, -10 * 60), false), // in the server's future
        ("61004", ago(client_now, 40 * 60), offset_secs > 0), // 40 min by *our* clock
    ];
    for (name, mark, _) in &cases {
        w.sim
            .create_object(
                Kind::Identity,
                identity(name, Some(mark)),
                "cilium-operator",
            )
            .unwrap();
    }
    let (report, exit) = w
        .gc(&["delete", "--yes", "--qps", "0", "--items", "all"])
        .await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    let left = w.names();
    for (name, mark, collected) in cases {
        assert_eq!(
            !left.contains(name),
            collected,
            "{name} marked {mark}, server clock {offset_secs:+}s from ours"
        );
    }
    assert_eq!(w.sim.ledger().unsafe_deletes().count(), 0);
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_server_clock_two_hours_ahead_judges_marks_by_server_time() {
    skewed(2 * 3600).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_server_clock_two_hours_behind_judges_marks_by_server_time() {
    skewed(-2 * 3600).await;
}

// ---- signals ----

/// Signal the built binary at a random point (during preflight and scan, or
/// during deletes): a valid report, exit 130/143, no delete after it.
async fn signal_at_random_point(seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (signal, code) = if rng.random_bool(0.5) {
        ("INT", 130)
    } else {
        ("TERM", 143)
    };
    let during_deletes = rng.random_bool(0.5);
    let mut scenario = calm_sized(300);
    // Slow reads so the scan takes a few seconds and can be hit.
    scenario.faults.slow_fraction = 0.5;
    scenario.faults.slow_delay = Duration::from_millis(60);
    let w = World::start(scenario).await;
    let mut cmd = binary();
    cmd.arg("--kubeconfig")
        .arg(&w.kubeconfig)
        .args([
            "delete",
            "--yes",
            "--qps",
            "8",
            "--burst",
            "1",
            "--page-size",
            "10",
            "-o",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let ready = |w: &World| {
        let l = w.sim.ledger();
        if during_deletes {
            !l.deletes.is_empty()
        } else {
            !l.requests.is_empty()
        }
    };
    while !ready(&w) {
        assert!(tokio::time::Instant::now() < deadline, "run never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let wait = rng.random_range(0..if during_deletes { 800 } else { 2500 });
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let signalled_at = w.sim.now();
    let deletes_before = w.sim.ledger().deletes.len();
    let kill = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let what = format!(
        "seed {seed}: SIG{signal} {wait}ms after {} ({deletes_before} deletes)",
        if during_deletes {
            "the first delete"
        } else {
            "the first request"
        }
    );
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report on stdout");
    assert_valid(&report);
    assert_eq!(report["interrupted"], true, "{what}");
    assert_eq!(report["exitCode"], code, "{what}");
    let grace = SignedDuration::from_millis(300);
    let late = deletes_after(&w.sim, signalled_at, grace);
    assert!(
        late.is_empty(),
        "{what}: deletes after the signal: {late:?}"
    );
    let ledger = w.sim.ledger();
    assert_eq!(ledger.unsafe_deletes().count(), 0);
    assert_eq!(
        report["summary"]["deleted"].as_u64().unwrap() as usize
            + report["summary"]["alreadyGone"].as_u64().unwrap() as usize,
        ledger.deletes.len(),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_signals_at_random_points_stop_cleanly() {
    let base: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    let n = cases().div_ceil(2).max(3);
    for i in 0..n as u64 {
        signal_at_random_point(base.wrapping_add(i)).await;
    }
}

// ---- regressions ----

/// Broke: `scan::list_raw` counted every 410 of the whole list against
/// `MAX_LIST_RESTARTS` and never reset it, although continuing with the
/// server's token always makes progress. A long list through a server that
/// compacts often (more than 5 expiries in all) was aborted, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn regression_continue_token_expiring_often_over_a_long_list_aborted_the_scan() {
    let mut s = calm_sized(300);
    s.faults.expire_continue_fraction = 0.5;
    // One page of endpoints: kube's watcher restarts its initial list on a
    // 410, and at this rate would never finish a paged one.
    s.endpoints = 5;
    let w = World::start(s).await;
    let all = w.names();
    let (report, exit) = w.gc(&["scan", "--page-size", "10"]).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert!(
        report.summary.list_restarts > 5,
        "the schedule expired more than 5 tokens: {:?}",
        report.summary
    );
    assert_eq!(report.summary.scanned as usize, all.len());
}

// ---- the fuzz targets' properties, as property tests ----
//
// `fuzz/` holds cargo-fuzz targets for the same four paths; these run the
// same properties on every `cargo test`, with JSON shaped like the objects
// (the keys the decoders look for, values of every type).

fn fuzz_cases() -> u32 {
    cases().saturating_mul(64).max(384)
}

fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("metadata".to_owned()),
        Just("name".to_owned()),
        Just("namespace".to_owned()),
        Just("uid".to_owned()),
        Just("resourceVersion".to_owned()),
        Just("labels".to_owned()),
        Just("annotations".to_owned()),
        Just(HEARTBEAT_ANNOTATION.to_owned()),
        Just("managedFields".to_owned()),
        Just("status".to_owned()),
        Just("identity".to_owned()),
        Just("id".to_owned()),
        Just("endpoints".to_owned()),
        Just("security-labels".to_owned()),
        "[a-z0-9.:/-]{0,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e20..1e20f64).prop_map(Value::from),
        (0u32..70_000).prop_map(|n| Value::from(f64::from(n))),
        "[0-9]{0,6}".prop_map(Value::from),
        "2026-0[1-9]-1[0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?Z"
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: fuzz_cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// fuzz target `decode_identity`.
    #[test]
    fn fuzz_prop_decode_identity_accepts_only_deletable_identities(v in json_value()) {
        let raw = serde_json::value::RawValue::from_string(v.to_string()).unwrap();
        match cilium_gc::model::decode_identity(&raw) {
            Ok(i) => prop_assert!(
                !i.name.is_empty() && !i.uid.is_empty() && !i.resource_version.is_empty()
            ),
            Err(bad) => prop_assert!(!bad.problem.is_empty()),
        }
    }

    /// fuzz target `decode_usage`: any JSON value decodes (an error would
    /// fail a whole watcher page), and finds every id the simulator's own
    /// decoder (the cluster's ground truth, written apart from the engine's)
    /// says the object protects, read as a CiliumEndpoint or as a slice.
    #[test]
    fn fuzz_prop_decode_usage_never_fails_and_misses_no_reference(v in json_value()) {
        // The value as a whole object, and in the id positions themselves
        // (random objects seldom grow `status.identity.id` on their own).
        let in_place = json!({
            "metadata": {"name": "p", "namespace": "n"},
            "status": {"identity": {"id": v.clone()}},
            "endpoints": [{"id": v.clone()}, {"id": 7}],
        });
        for v in [&v, &in_place] {
            let text = v.to_string();
            let usage = serde_json::from_str::<cilium_gc::usage::UsageObject>(&text);
            prop_assert!(usage.is_ok(), "{text}");
            let lenient = usage.unwrap();
            for kind in [Kind::Endpoint, Kind::EndpointSlice] {
                for id in cilium_gc_sim::referenced_ids(kind, v) {
                    prop_assert!(lenient.ids().contains(&id), "{text}: {kind:?} {id}");
                }
            }
        }
    }

    /// fuzz target `decide`: stale only when unreferenced, local, and marked
    /// longer ago than the timeout; referenced always wins.
    #[test]
    fn fuzz_prop_decide_is_stale_only_when_it_must_be(
        name in prop_oneof!["[0-9]{1,7}", ".{0,8}"],
        mark in prop_oneof![
            (-7200i64..7200).prop_map(Some),
            Just(None),
        ],
        raw_mark in prop::option::of(".{0,30}"),
        refs in prop_oneof![Just(0u32), any::<u32>()],
        timeout_secs in 0u64..7200,
        cluster_id in 0u64..4,
        wide in any::<bool>(),
    ) {
        use cilium_gc::policy::{decide, local_range, parse_mark, Reason, Rules};
        let now: Timestamp = "2026-06-01T12:00:00Z".parse().unwrap();
        let identity = cilium_gc::model::Identity {
            name,
            uid: "u".into(),
            resource_version: "1".into(),
            created_at: None,
            labels: Default::default(),
            namespace: None,
            mark: mark.map(|s| ago(now, s)).or(raw_mark),
            last_change: None,
        };
        let policy = Rules {
            local_range: local_range(cluster_id, if wide { 511 } else { 255 }),
            heartbeat_timeout: Duration::from_secs(timeout_secs),
        };
        let d = decide(&identity, refs, &policy, now);
        if d.reason == Reason::Stale {
            prop_assert_eq!(refs, 0);
            let id = identity.numeric_id().unwrap();
            prop_assert!(policy.local_range.contains(&id));
            let m = parse_mark(identity.mark.as_deref().unwrap()).unwrap();
            let age: Result<Duration, _> = now.duration_since(m).try_into();
            prop_assert!(age.is_ok_and(|a| a > policy.heartbeat_timeout));
        }
        if refs > 0 && identity.numeric_id().is_some() {
            prop_assert_eq!(d.reason, Reason::InUse);
        }
    }

    /// fuzz target `selector`: parse and match never panic; a parsed
    /// selector prints back to one that matches the same labels.
    #[test]
    fn fuzz_prop_selector_round_trips(
        text in prop_oneof![
            "[a-z!=(), ]{0,24}",
            "(!?[a-z]{1,3}((=|==|!=)[a-z]{0,3}| (in|notin) \\([a-z,]{0,6}\\))?,?){1,3}",
            ".{0,24}",
        ],
        labels in prop::collection::btree_map("[a-z]{1,3}", "[a-z]{0,3}", 0..5),
    ) {
        use cilium_gc::selector::Selector;
        // parse -> render -> parse gives the same structure (Display renders
        // from the parsed requirements, and equality compares them).
        if let Ok(sel) = Selector::parse(&text) {
            let rendered = sel.to_string();
            let again = Selector::parse(&rendered);
            prop_assert!(again.is_ok(), "{} rendered as {}", text, rendered);
            let again = again.unwrap();
            prop_assert_eq!(&again, &sel, "{} rendered as {}", text, rendered);
            prop_assert_eq!(again.to_string(), rendered);
            prop_assert_eq!(again.matches(&labels), sel.matches(&labels));
        }
    }
}

/// Broke: when the endpoint watchers could not re-list mid-run (here: list
/// and watch of CiliumEndpoints forbidden, then the watch expired), every
/// delete worker waited for usage to be ready again, forever: the run hung
/// until killed, with no report. Since issue 11 the run ends `usage-lost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn regression_endpoint_watchers_unable_to_relist_hung_the_run() {
    let w = World::start(calm_sized(200)).await;
    let sim = &w.sim;
    // Slow enough that candidates remain once the usage last known
    // complete is older than `FRESHNESS_LIMIT`.
    let run = w.gc(&["delete", "--yes", "--qps", "2", "--burst", "1"]);
    let break_usage = async {
        while sim.ledger().deletes.len() < 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        sim.set_rbac_denials(vec![
            cilium_gc_sim::Denial::new("list", "ciliumendpoints"),
            cilium_gc_sim::Denial::new("watch", "ciliumendpoints"),
        ]);
        sim.compact();
        sim.now()
    };
    let ((report, exit), broken_at) = tokio::time::timeout(Duration::from_secs(200), async {
        tokio::join!(run, break_usage)
    })
    .await
    .expect("the run ends although endpoint usage can no longer be read");
    assert_ne!(exit, Exit::Success, "{:?}", report.aborted);
    assert!(report.aborted.is_some());
    assert!(report.summary.not_attempted > 0 || report.summary.failed > 0);
    // The watch ended when usage broke: the index is known complete up to
    // then, and writes may rely on it for `FRESHNESS_LIMIT` (issue 11), no
    // longer (plus in-flight requests).
    let unknown_from = broken_at
        + SignedDuration::try_from(cilium_gc::usage::FRESHNESS_LIMIT).unwrap()
        + SignedDuration::from_millis(300);
    let late: Vec<_> = sim
        .ledger()
        .requests
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.time > unknown_from)
        .collect();
    assert!(late.is_empty(), "deletes while usage was unknown: {late:?}");
    assert_eq!(
        report.aborted.as_ref().map(|a| a.reason),
        Some(AbortReason::UsageLost)
    );
    assert_valid(&json(&report));
}
