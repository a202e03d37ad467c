//! The forecast of `diagnose` judged against the real cilium-operator
//! v1.19.3 (`identity-heartbeat-timeout` 20s, `identity-gc-interval` 10s,
//! in cilium-config and on its command line) and agents on Cilium's own
//! allocator (`tests/cilium/agents`, the same release) churning pods, each
//! with a label set of its own (so one new identity per pod), in a small
//! id range ([`IDS`], the allocator's `--min-id`/`--max-id`).
//!
//! The ranges. `diagnose` learns the local range from cilium-config
//! (`cluster-id`, `max-connected-clusters`): at its smallest that is 32,512
//! ids, and no cilium-config key sets the agents program's `--min-id` /
//! `--max-id` (as in `exhaustion.rs`, which says so too). So the report's
//! own `steadyState.exceedsRange`, `percentOfRange` and the
//! `gc-cannot-keep-up` finding, which compare with 65,280 ids here, cannot
//! judge a 300-id allocator. What does not depend on the range is
//! asserted instead, against the allocator's range computed in the test:
//! the report's `steadyState.staleHeld` (pace × (timeout + interval), the
//! pace from `--sample`) plus its `inUse`, against [`RANGE`]; and the
//! settings it read (20 s, 10 s). The report's capacity is asserted to be
//! cilium-config's 65,280, so that a reader sees why.
//!
//! 1. A pace no GC keeps up with: `staleHeld + inUse > RANGE` in a
//!    diagnosis taken before the allocator's first refusal (asserted: the
//!    diagnose ended before the agents' first refused attempt), and the
//!    range then runs out (refused attempts counted by the agents).
//! 2. A pace GC keeps up with: `staleHeldMax + inUse` under half of
//!    [`RANGE`], no `gc-cannot-keep-up`; over more than four (timeout +
//!    interval) cycles the operator completes passes and deletes
//!    identities (its metrics, the audit log, the identities' count going
//!    down), the churn creates more identities than the range holds, and
//!    the allocator never refuses.
//! 3. One range (the plugin's and the allocator's): cilium-config and the
//!    operator at `max-connected-clusters` 511 (and a 5m timeout, 2m30s
//!    interval, so that no delete comes before the range runs out), the
//!    agents at 256..=32767, all but 1,200 ids in use; `gc-cannot-keep-up` critical and
//!    `exceedsRange` in a diagnosis before the first refusal, then
//!    refusals; no identity in use deleted.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::{json, Value};

use crate::support::audit::Actor;
use crate::support::cluster::Cluster;
use crate::support::objects::{api, cilium_workloads, seed_in_use, Kind};
use crate::support::operator::{release, Agents, AgentsSummary, Operator, Version};
use crate::support::workload::record;
use crate::support::{assert_exit, report, run};

/// The allocator's range in both tests (`--min-id`, `--max-id`).
const IDS: (u64, u64) = (256, 555);
/// Ids in it.
const RANGE: u64 = IDS.1 - IDS.0 + 1;
/// The operator's settings, as cilium-config and its flags carry them.
const TIMEOUT: &str = "20s";
const INTERVAL: &str = "10s";
/// Timeout + interval, in seconds: how long GC holds an unused identity
/// on average.
const HELD_SECONDS: u64 = 30;
/// The local range the plugin reads from this cilium-config (cluster-id 0,
/// max-connected-clusters 255: 256..=65535).
const CONFIG_CAPACITY: u64 = 65_280;
/// Label sets the pods draw from: so many that each pod has its own.
const FRESH: u32 = 1_000_000_000;

/// A cluster with cilium-config saying the operator's settings, the
/// workloads naming its release, and the real v1.19.3 operator running
/// with them. `None` only outside CI when a tool is missing.
fn cluster_with_operator() -> Option<(Cluster, Operator)> {
    let cluster = Cluster::up(&[])?;
    crate::support::operator::build(Version::Current)?;
    cluster.set_cilium_config(&[
        ("identity-heartbeat-timeout", TIMEOUT),
        ("identity-gc-interval", INTERVAL),
    ]);
    cluster.apply(&cilium_workloads(&release(Version::Current)));
    let flags = [
        format!("--identity-heartbeat-timeout={TIMEOUT}"),
        format!("--identity-gc-interval={INTERVAL}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let operator = Operator::up(&cluster, Version::Current, &flags)?;
    Some((cluster, operator))
}

/// Agents whose every pod has a label set of its own, in [`IDS`]; a
/// refused pod gives up after 2 s (its agent churns on).
fn fresh_churn(agents: u32, pods: u32, churn: Duration, duration: Duration, seed: u64) -> Agents {
    Agents {
        agents,
        pods,
        churn,
        duration,
        label_sets: FRESH,
        label_prefix: format!("fresh{seed}"),
        seed,
        ids: IDS,
        allocate_timeout: Duration::from_secs(2),
        wait_for_identity: false,
        ..Agents::default()
    }
}

/// Run `agents` (release v1.19.3) in a task of their own.
fn spawn(cluster: &Cluster, agents: Agents) -> tokio::task::JoinHandle<AgentsSummary> {
    spawn_until(cluster, agents, None)
}

/// [`spawn`], ended early (SIGTERM; they still print their summary) once
/// `stop` says so.
fn spawn_until(
    cluster: &Cluster,
    agents: Agents,
    stop: Option<tokio::sync::watch::Receiver<bool>>,
) -> tokio::task::JoinHandle<AgentsSummary> {
    let (dir, kubeconfig) = (cluster.dir().to_path_buf(), cluster.admin_kubeconfig());
    tokio::spawn(async move {
        agents
            .run_at(&dir, &kubeconfig, Version::Current, stop)
            .await
    })
}

/// How many identities exist now. Retries for 30 s: when the operator
/// registers its release's CRDs, the server answers 429 "storage is
/// (re)initializing" for a moment (as `World::read` does).
async fn identity_count(client: &kube::Client) -> usize {
    let lp = kube::api::ListParams::default();
    let mut last = None;
    for _ in 0..60 {
        match api(client, Kind::Identity, None).list_metadata(&lp).await {
            Ok(list) => return list.items.len(),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("identities could not be listed: {last:?}");
}

/// Returns once at least `n` identities exist (the agents' first pods
/// have theirs): at most 120 s.
async fn until_identities(client: &kube::Client, n: usize) {
    for _ in 0..600 {
        if identity_count(client).await >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the agents did not allocate {n} identities within 120 s");
}

/// Live `diagnose -o json --sample <sample>` as `cilium-gc`: the report
/// (schema-validated) and the moment it ended.
async fn diagnose_sampled(cluster: &Cluster, sample: &str) -> (Value, Timestamp) {
    let args = ["diagnose", "-o", "json", "--sample", sample];
    let out = run(&cluster.gc_kubeconfig(), &args).await;
    let ended = Timestamp::now();
    assert_exit(&out, 0);
    (report(&out), ended)
}

/// What the forecast's steady state says, with the premises every test
/// asserts: the pace was watched (`--sample`), the settings are the
/// operator's, the range is cilium-config's.
struct Steady {
    stale_held: u64,
    stale_held_max: u64,
    in_use: u64,
    /// New identities per second, as `diagnose` watched them.
    pace: f64,
    /// Creations it watched.
    watched: u64,
}

fn steady(d: &Value) -> Steady {
    let f = &d["forecast"];
    assert_eq!(
        f["pace"]["source"], "sample",
        "the pace is the watched one: {}",
        f["pace"]
    );
    let s = &f["steadyState"];
    assert_eq!(
        (
            s["heartbeatTimeoutSeconds"].as_f64(),
            s["gcIntervalSeconds"].as_f64()
        ),
        (Some(20.0), Some(10.0)),
        "the operator's settings, from cilium-config: {s}"
    );
    assert_eq!(
        s["capacity"].as_u64(),
        Some(CONFIG_CAPACITY),
        "the plugin judges cilium-config's local range, not the allocator's {RANGE} ids: {s}"
    );
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}"));
    Steady {
        stale_held: n("staleHeld"),
        stale_held_max: n("staleHeldMax"),
        in_use: n("inUse"),
        pace: f["pace"]["ratePerHour"].as_f64().expect("ratePerHour") / 3600.0,
        watched: f["pace"]["created"].as_u64().expect("created"),
    }
}

fn codes(d: &Value) -> Vec<String> {
    d["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["code"].as_str().map(str::to_string))
        .collect()
}

/// 4 agents of 5 pods ending and starting one pod each 200 ms: about 20
/// new identities a second, 600 held by a working GC (20 × 30 s) against
/// 300 ids: the range runs out in about 14 s, before the operator's first
/// delete can come (one timeout after its first mark).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pace_no_gc_keeps_up_with_is_forecast_before_the_allocator_refuses() {
    let Some((cluster, _operator)) = cluster_with_operator() else {
        return;
    };
    let client = cluster.admin().await;
    let churn = fresh_churn(
        4,
        5,
        Duration::from_millis(200),
        Duration::from_secs(40),
        81,
    );
    let churning = spawn(&cluster, churn);
    until_identities(&client, 20).await;
    let (d, diagnosed) = diagnose_sampled(&cluster, "4s").await;
    let agents = churning.await.expect("agents task");

    let s = steady(&d);
    assert!(
        s.stale_held + s.in_use > RANGE,
        "at the watched pace ({:.1}/s), staleHeld {} + inUse {} exceeds the allocator's {RANGE} ids",
        s.pace,
        s.stale_held,
        s.in_use
    );
    let first_refusal = agents.waits.iter().map(|w| w.first_refused_at).min();
    assert!(
        agents.allocation_refusals > 0,
        "the range ran out: Cilium's allocator refused (`no more available IDs in configured space`): {agents:?}"
    );
    let first_refusal = first_refusal.expect("the refused pods are recorded");
    assert!(
        diagnosed < first_refusal,
        "premise: diagnose ended ({diagnosed}) before the allocator's first refusal ({first_refusal})"
    );
    let line = format!(
        "forecast, a pace no GC keeps up with (allocator ids {}-{}, {RANGE}; real cilium-operator {}, timeout {TIMEOUT}, interval {INTERVAL}): diagnose --sample 4s watched {} created ({:.1}/s), steadyState staleHeld {} + inUse {} = {} > {RANGE}, diagnosed before the allocator's first refusal; then {} refused attempts",
        IDS.0,
        IDS.1,
        release(Version::Current),
        s.watched,
        s.pace,
        s.stale_held,
        s.in_use,
        s.stale_held + s.in_use,
        agents.allocation_refusals
    );
    eprintln!("{line}");
    record(
        "forecast_gc_cannot_keep_up",
        json!({"forecast": d["forecast"], "diagnosedAt": diagnosed.to_string(),
               "firstRefusal": first_refusal.to_string(),
               "allocationRefusals": agents.allocation_refusals, "printed": [line]}),
    );
}

/// 3 agents of 2 pods ending and starting one pod each second: about 3
/// new identities a second, at most 120 held (3 × (20 + 2 × 10) s) plus 6
/// in use, 42 % of 300 ids; 130 s of churn, more than four (timeout +
/// interval) cycles, about 390 identities created in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pace_gc_keeps_up_with_fits_and_the_range_never_runs_out() {
    let Some((cluster, operator)) = cluster_with_operator() else {
        return;
    };
    let client = cluster.admin().await;
    let duration = Duration::from_secs(130);
    assert!(duration.as_secs() >= 4 * HELD_SECONDS);
    let churning = spawn(
        &cluster,
        fresh_churn(3, 2, Duration::from_secs(1), duration, 82),
    );
    until_identities(&client, 6).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (d, _) = diagnose_sampled(&cluster, "8s").await;
    let mut counts = vec![];
    while !churning.is_finished() {
        counts.push(identity_count(&client).await);
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let agents = churning.await.expect("agents task");

    let s = steady(&d);
    assert!(
        (s.stale_held_max + s.in_use) * 2 < RANGE,
        "at the watched pace ({:.1}/s), staleHeldMax {} + inUse {} is under half the allocator's {RANGE} ids",
        s.pace,
        s.stale_held_max,
        s.in_use
    );
    let codes = codes(&d);
    assert!(!codes.iter().any(|c| c == "gc-cannot-keep-up"), "{codes:?}");
    assert_eq!(
        (agents.allocation_refusals, agents.allocation_errors),
        (0, 0),
        "the range never ran out: {agents:?}"
    );
    assert!(
        agents.new_identities > RANGE,
        "the churn created more identities ({}) than the range holds",
        agents.new_identities
    );
    let passes = operator.metrics().successful_runs();
    let deleted = cluster
        .audit()
        .identity_deletes()
        .filter(|w| w.actor == Actor::Operator)
        .count();
    let went_down = counts.windows(2).any(|w| w[1] < w[0]);
    assert!(
        passes >= 4.0 && deleted > 0 && went_down,
        "the operator completed {passes} passes and deleted {deleted} identities (audit log); counts {counts:?}"
    );
    let line = format!(
        "forecast, a pace GC keeps up with (allocator ids {}-{}, {RANGE}; real cilium-operator {}, timeout {TIMEOUT}, interval {INTERVAL}): diagnose --sample 8s watched {} created ({:.1}/s), steadyState staleHeldMax {} + inUse {} = {} < half of {RANGE}, no gc-cannot-keep-up; over {} s of churn the agents created {} identities, the operator completed {passes} passes and deleted {deleted} (audit log), the count went down, 0 refused attempts",
        IDS.0,
        IDS.1,
        release(Version::Current),
        s.watched,
        s.pace,
        s.stale_held_max,
        s.in_use,
        s.stale_held_max + s.in_use,
        duration.as_secs(),
        agents.new_identities
    );
    eprintln!("{line}");
    record(
        "forecast_gc_keeps_up",
        json!({"forecast": d["forecast"], "identityCounts": counts,
               "operatorPasses": passes, "operatorDeletes": deleted,
               "newIdentities": agents.new_identities, "printed": [line]}),
    );
}

/// The third test's range, the plugin's and the allocator's both: cluster-id
/// 0 with `max-connected-clusters: 511` (Cilium's smallest), 256..=32767.
const ONE_RANGE: (u64, u64) = (256, 32_767);
/// Ids in it.
const ONE_CAPACITY: u64 = ONE_RANGE.1 - ONE_RANGE.0 + 1;
/// Ids left free after the seed: what the churn fills.
const ONE_FREE: u64 = 1_200;
/// The third test's operator settings: long enough that no identity can
/// be deleted before the range runs out (the first delete comes one
/// timeout after a mark, 300 s; [`ONE_FREE`] lasts 60 s at the nominal
/// 20 new identities a second, 150 s at 8), so the diagnosis has most of a
/// minute however loaded the machine, and a working GC holds pace × 450 s.
/// The churn goes on until the range is full ([`ONE_CHURN_MOST`] at most):
/// on a loaded machine the agents made 434 identities in 150 s.
const ONE_TIMEOUT: &str = "5m";
const ONE_INTERVAL: &str = "2m30s";
/// The longest the third test's churn goes on: short of the operator's
/// first possible delete, [`ONE_TIMEOUT`] after a mark.
const ONE_CHURN_MOST: Duration = Duration::from_secs(280);
/// The seed's namespace, its CiliumEndpoints' and its identities' label.
const SEEDED_NS: &str = "seeded";

/// A cluster whose cilium-config and operator (v1.19.3, flags as for the
/// other tests plus `--cluster-id=0 --max-connected-clusters=511`) say
/// [`ONE_RANGE`], with every id of it but [`ONE_FREE`] in use by a seeded
/// CiliumEndpoint. The operator's endpoint GC waits a day: the seeded
/// endpoints have no Pod. Seeded once the operator runs: when it registers
/// its release's CRDs the server reloads the identities (429 "storage is
/// (re)initializing" until it has), which with the seed in it held the
/// agents' first watches back for most of a minute.
async fn one_range_with_operator() -> Option<(Cluster, Operator, u64)> {
    let cluster = Cluster::up(&[])?;
    crate::support::operator::build(Version::Current)?;
    cluster.set_cilium_config(&[
        ("identity-heartbeat-timeout", ONE_TIMEOUT),
        ("identity-gc-interval", ONE_INTERVAL),
        ("cluster-id", "0"),
        ("max-connected-clusters", "511"),
    ]);
    cluster.apply(&cilium_workloads(&release(Version::Current)));
    let flags = [
        format!("--identity-heartbeat-timeout={ONE_TIMEOUT}"),
        format!("--identity-gc-interval={ONE_INTERVAL}"),
        "--cluster-id=0".into(),
        "--max-connected-clusters=511".into(),
        "--cilium-endpoint-gc-interval=24h".into(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let operator = Operator::up(&cluster, Version::Current, &flags)?;
    let seeded = ONE_RANGE.0..=ONE_RANGE.1 - ONE_FREE;
    let n = seeded.end() - seeded.start() + 1;
    seed_in_use(&cluster.admin().await, SEEDED_NS, seeded).await;
    Some((cluster, operator, n))
}

/// How many identities match `selector`. Retries for 60 s: when the
/// operator registers its release's CRDs, the server answers 429 "storage
/// is (re)initializing" while it reloads the 32,000 seeded identities.
async fn count_labelled(client: &kube::Client, selector: &str) -> usize {
    let lp = kube::api::ListParams::default().labels(selector);
    let mut last = None;
    for _ in 0..120 {
        match api(client, Kind::Identity, None).list_metadata(&lp).await {
            Ok(list) => return list.items.len(),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("identities could not be listed: {last:?}");
}

/// Identities not of the seed (the agents'): a cheap count.
async fn churned_count(client: &kube::Client) -> usize {
    count_labelled(client, &format!("io.kubernetes.pod.namespace!={SEEDED_NS}")).await
}

/// The seeded identities left, and how many of them the operator deleted
/// (audit log): the seed is in use, so none.
async fn seed_kept(cluster: &Cluster, client: &kube::Client) -> (usize, usize) {
    let left = count_labelled(client, &format!("io.kubernetes.pod.namespace={SEEDED_NS}")).await;
    let seeded = ONE_RANGE.0..=ONE_RANGE.1 - ONE_FREE;
    let deleted = cluster
        .audit()
        .identity_deletes()
        .filter(|w| w.took_effect() && w.name.parse().is_ok_and(|id| seeded.contains(&id)))
        .count();
    (left, deleted)
}

/// The finding itself, in the allocator's own range: 31,312 ids in use
/// (seeded, each with a CiliumEndpoint), 1,200 free; 4 agents of 5 pods
/// ending and starting one pod each 200 ms, about 20 new identities a
/// second, 9,000 held by a working GC (20 × (300 + 150) s) against 1,200
/// free: the range runs out within about 60 s, before the operator can
/// delete any (its first delete is one 300 s timeout after a mark).
/// `diagnose --sample 4s` taken before the first refusal reports
/// `gc-cannot-keep-up` (critical, `exceedsRange`), and the allocator then
/// refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_cannot_keep_up_is_found_in_the_allocators_own_range_before_it_refuses() {
    let Some((cluster, _operator, seeded)) = one_range_with_operator().await else {
        return;
    };
    let client = cluster.admin().await;
    let churn = Agents {
        ids: ONE_RANGE,
        ..fresh_churn(4, 5, Duration::from_millis(200), ONE_CHURN_MOST, 83)
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let churning = spawn_until(&cluster, churn, Some(stopped));
    while churned_count(&client).await < 20 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (d, _) = diagnose_sampled(&cluster, "4s").await;
    // Until every free id is taken (whatever the machine's load), then a
    // few seconds of the allocator's refusals.
    while !churning.is_finished() && churned_count(&client).await < ONE_FREE as usize {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let _ = stop.send(true);
    let agents = churning.await.expect("agents task");

    let generated_at: Timestamp = d["generatedAt"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("generatedAt");
    let first_refusal = agents.waits.iter().map(|w| w.first_refused_at).min();
    assert!(
        agents.allocation_refusals > 0,
        "the range ran out: Cilium's allocator refused: {agents:?}"
    );
    let first_refusal = first_refusal.expect("the refused pods are recorded");
    assert!(
        generated_at < first_refusal,
        "premise: no refusal yet at diagnose's generatedAt ({generated_at}); the first came at {first_refusal}"
    );
    let found = judged_in_one_range(&d);
    let (left, deleted) = seed_kept(&cluster, &client).await;
    assert_eq!(
        (left as u64, deleted),
        (seeded, 0),
        "the seed in use is kept"
    );
    let line = format!(
        "forecast, one range (ids {}-{}, cilium-config max-connected-clusters 511 and the allocator's; {seeded} in use with a CiliumEndpoint each; real cilium-operator {}, timeout {ONE_TIMEOUT}, interval {ONE_INTERVAL}): {found}, diagnosed before the allocator's first refusal; then {} refused attempts; {left} seeded identities left, 0 deleted",
        ONE_RANGE.0,
        ONE_RANGE.1,
        release(Version::Current),
        agents.allocation_refusals
    );
    eprintln!("{line}");
    record(
        "forecast_gc_cannot_keep_up_one_range",
        json!({"forecast": d["forecast"], "identitySpace": d["identitySpace"], "findings": d["findings"],
               "firstRefusal": first_refusal.to_string(),
               "allocationRefusals": agents.allocation_refusals, "printed": [line]}),
    );
}

/// What the third test asserts of its diagnosis: the range it judged is
/// the allocator's, the pace the sample's, the operator's settings read,
/// staleHeld + inUse over the capacity, `exceedsRange`, and the finding
/// `gc-cannot-keep-up` critical. Returns the part of the printed line.
fn judged_in_one_range(d: &Value) -> String {
    let space = &d["identitySpace"];
    assert_eq!(
        (
            space["localRange"]["min"].as_u64(),
            space["localRange"]["max"].as_u64(),
            space["capacity"].as_u64()
        ),
        (Some(ONE_RANGE.0), Some(ONE_RANGE.1), Some(ONE_CAPACITY)),
        "the plugin judges the allocator's range: {space}"
    );
    let f = &d["forecast"];
    let watched = f["pace"]["created"].as_u64().unwrap_or_default();
    assert!(
        f["pace"]["source"] == "sample" && watched >= 10,
        "the pace is the watched one: {}",
        f["pace"]
    );
    let s = &f["steadyState"];
    assert_eq!(
        (
            s["heartbeatTimeoutSeconds"].as_f64(),
            s["gcIntervalSeconds"].as_f64(),
            s["capacity"].as_u64(),
            s["exceedsRange"].as_bool()
        ),
        (Some(300.0), Some(150.0), Some(ONE_CAPACITY), Some(true)),
        "steadyState: {s}"
    );
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}"));
    let (held, in_use, needed) = (n("staleHeld"), n("inUse"), n("needed"));
    assert!(
        held + in_use == needed && needed > ONE_CAPACITY,
        "staleHeld + inUse = needed, over the capacity: {s}"
    );
    let finding = d["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["code"] == "gc-cannot-keep-up");
    assert_eq!(
        finding.map(|f| f["severity"].clone()),
        Some(json!("critical")),
        "findings: {:?}",
        codes(d)
    );
    format!(
        "diagnose --sample 4s watched {watched} created ({:.1}/s), steadyState staleHeld {held} + inUse {in_use} = {needed} > capacity {ONE_CAPACITY}, exceedsRange true, gc-cannot-keep-up critical",
        f["pace"]["ratePerHour"].as_f64().unwrap_or_default() / 3600.0
    )
}
