//! The plugin's deletes under real API Priority and Fairness (issue 28).
//!
//! One cluster whose server concurrency limit is small
//! (`--max-requests-inflight` + `--max-mutating-requests-inflight`), and a
//! `Limited` priority level for the user `cilium-gc` that neither lends nor
//! borrows seats (`lendablePercent: 0`, `borrowingLimitPercent: 0`), so
//! its seats are exactly its nominal share; the bench reads that number
//! back from the server's metrics (`apiserver_flowcontrol_nominal_limit_seats`)
//! and prints it. Two configurations: `Reject` (no queue: what does not
//! get a seat gets 429 at once) and `Queue` (queued, 429 only when the
//! queues are full or the wait too long).
//!
//! For each:
//! - **capacity**: `refclient -mode capacity`, exactly `seats` DELETEs in
//!   flight, a 429 retried at once: what the level admits, at most;
//!   measured before, between and after the plugin's `--qps 0` runs, each
//!   run judged against the mean of the two around it (the machine's load
//!   moves it);
//! - **the neighbour alone**: `refclient -mode neighbour`, a workload of
//!   the same level (the same user: one flow), GETs at a fixed rate, each
//!   429 waited out as client-go does; its 429s counted;
//! - **the plugin at `--qps 0`** (default concurrency), alone as the
//!   capacity was measured: the report's `deleteRatePerSecond` as a
//!   fraction of the capacity;
//! - **the plugin at `--qps 0` and at default settings** (`--qps 40
//!   --concurrency 8`) with the neighbour running beside it: the
//!   neighbour's 429s, and the plugin's rate (at default settings as a
//!   fraction of the lower of the capacity and `--qps`).
//!
//! Each plugin run deletes its own fresh stale identities; after each, what
//! is left on the server is checked (every stale identity deleted, nothing
//! else).
//!
//! *Why `--qps 0` is measured alone as well:* a neighbour's requests take
//! seats at moments of their own, so a client beside it cannot hold every
//! seat without being refused whenever the neighbour holds one; a 2026-12-05
//! run held 3 of 4 seats beside the 20 GETs/s neighbour (whom it left
//! without a 429). The capacity is measured alone, so the fraction is too;
//! the run beside the neighbour shows what sharing costs each side.

use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};

use super::{json_of, plugin_report, r3, seed_from, Cluster};
use crate::common::say;

/// The server's concurrency limit: 30 + 10 seats, shared by every level.
const SERVER_FLAGS: [&str; 2] = [
    "--max-requests-inflight=30",
    "--max-mutating-requests-inflight=10",
];

/// Nominal concurrency shares of our level: 25 of 270 (the default levels
/// hold 245) of 40 seats is 3.7, so 4 seats.
const SHARES: u32 = 25;

/// In-use identities (each with a CiliumEndpoint), so the cluster is not
/// empty (the plugin refuses to delete where there are no endpoints).
const IN_USE: u64 = 200;

/// The neighbour's workload: GETs per second.
const NEIGHBOUR_RATE: f64 = 20.0;

fn level(response: &str) -> String {
    format!(
        r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {{name: cilium-gc-bench}}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: {SHARES}
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {response}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {{name: cilium-gc-bench}}
spec:
  priorityLevelConfiguration: {{name: cilium-gc-bench}}
  matchingPrecedence: 200
  distinguisherMethod: {{type: ByUser}}
  rules:
    - subjects: [{{kind: User, user: {{name: cilium-gc}}}}]
      resourceRules:
        - {{verbs: ["*"], apiGroups: ["*"], resources: ["*"], clusterScope: true, namespaces: ["*"]}}
      nonResourceRules:
        - {{verbs: ["*"], nonResourceURLs: ["*"]}}
"#
    )
}

/// Apply `yaml` as admin.
fn apply(cluster: &Cluster, yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("apf.yaml");
    std::fs::write(&f, yaml).unwrap();
    let out = cluster.admin(&["apply", "-f", f.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The level's seats, as the server computed them.
fn seats(cluster: &Cluster) -> u64 {
    for _ in 0..50 {
        let out = cluster.admin(&["get", "--raw", "/metrics"]);
        let text = String::from_utf8_lossy(&out.stdout);
        let found = text.lines().find_map(|l| {
            let rest = l.strip_prefix("apiserver_flowcontrol_nominal_limit_seats{")?;
            rest.contains("priority_level=\"cilium-gc-bench\"")
                .then(|| rest.rsplit(' ').next()?.parse::<f64>().ok())?
        });
        if let Some(s) = found {
            return s as u64;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    panic!("the server never reported the level's seats");
}

/// Identities left on the server.
fn identities_left(cluster: &Cluster) -> u64 {
    let out = cluster.admin(&["get", "ciliumidentities", "-o", "name"]);
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

/// One plugin run on `stale` fresh stale identities (ids from `first`),
/// the neighbour beside it for `secs` (none when `secs` is 0).
#[allow(clippy::too_many_arguments)]
fn plugin_run(
    rt: &tokio::runtime::Runtime,
    cluster: &Cluster,
    refclient: &Path,
    first: u64,
    stale: u64,
    secs: u64,
    args: &[&str],
) -> Value {
    rt.block_on(seed_from(cluster, first, 0, stale, false));
    let before = identities_left(cluster);
    let neighbour = (secs > 0).then(|| neighbour(cluster, refclient, secs));
    let mut all = vec!["delete", "--yes", "-o", "json"];
    all.extend(args);
    let started = std::time::Instant::now();
    let run = format!("apf, {stale} stale from {first}, neighbour {secs} s");
    let (report, exit, cpu) = plugin_report(cluster, &all, &run);
    let wall = started.elapsed().as_secs_f64();
    let neighbour = neighbour.map_or(Value::Null, |n| n.join().unwrap());
    let left = identities_left(cluster);
    let s = &report["summary"];
    json!({
        "args": args.join(" "), "stale": stale, "exit": exit, "wallSeconds": r3(wall),
        "deleted": s["deleted"], "failed": s["failed"], "throttled": s["throttled"],
        "retryAfterWaitSeconds": s["retryAfterWaitSeconds"],
        "ratePerSecond": s["deleteRatePerSecond"], "cpuSeconds": r3(cpu),
        "onlyStaleDeleted": before - left == stale && left == IN_USE,
        "neighbour": neighbour,
    })
}

/// The neighbour for `secs`, on a thread of its own.
fn neighbour(cluster: &Cluster, refclient: &Path, secs: u64) -> std::thread::JoinHandle<Value> {
    let mut cmd = cluster.refclient(
        refclient,
        "cilium-gc",
        &[
            "-mode",
            "neighbour",
            "-rate",
            &NEIGHBOUR_RATE.to_string(),
            "-duration",
            &format!("{secs}s"),
            "-get",
            "1000",
        ],
    );
    cmd.stdout(Stdio::piped());
    std::thread::spawn(move || json_of(&mut cmd))
}

/// The level's capacity: `refclient -mode capacity` deleting `n` fresh
/// stale identities (ids from `first`) with exactly `seats` in flight.
fn capacity(
    rt: &tokio::runtime::Runtime,
    cluster: &Cluster,
    refclient: &Path,
    seats: u64,
    first: u64,
    n: u64,
) -> Value {
    rt.block_on(seed_from(cluster, first, 0, n, false));
    json_of(
        cluster
            .refclient(
                refclient,
                "cilium-gc",
                &[
                    "-mode",
                    "capacity",
                    "-inflight",
                    &seats.to_string(),
                    "-from",
                    &first.to_string(),
                    "-to",
                    &(first + n).to_string(),
                ],
            )
            .stdout(Stdio::piped()),
    )
}

/// One configuration of the level: the capacity measured before, between
/// and after the `--qps 0` runs (the machine's load moves it, so each run
/// is judged against the mean of the two around it), the neighbour alone,
/// the plugin at `--qps 0` alone and beside the neighbour, and at default
/// settings beside the neighbour.
fn configuration(
    rt: &tokio::runtime::Runtime,
    cluster: &Cluster,
    refclient: &Path,
    name: &str,
    quick: bool,
) -> Value {
    let secs: u64 = if quick { 10 } else { 20 };
    let seats = seats(cluster);
    // Each configuration's ids from 2000 again: every run deletes all of
    // its own (checked), and 3 capacity runs and 2 plugin runs of up to
    // 12,000 would not fit cluster 0's local range (..65535) twice.
    let mut next = 2_000;
    let n = if quick { 2_000 } else { 5_000 };
    let measure = |next: &mut u64| {
        let c = capacity(rt, cluster, refclient, seats, *next, n);
        *next += n;
        c
    };
    let caps = [measure(&mut next)];
    let cap = caps[0]["ratePerSecond"].as_f64().unwrap_or(f64::NAN);
    say!("apf {name}: {seats} seats, capacity {cap:.0}/s");
    let alone = neighbour(cluster, refclient, secs).join().unwrap();
    // --qps 0: enough identities for about `secs` at the capacity; alone
    // (as the capacity is measured), then beside the neighbour.
    let stale = ((cap * secs as f64) as u64).clamp(500, 12_000);
    let qps0 = plugin_run(rt, cluster, refclient, next, stale, 0, &["--qps", "0"]);
    next += stale;
    let caps = [caps[0].clone(), measure(&mut next)];
    let shared = plugin_run(rt, cluster, refclient, next, stale, secs, &["--qps", "0"]);
    next += stale;
    let caps = [caps[0].clone(), caps[1].clone(), measure(&mut next)];
    // Defaults: --qps 40 --concurrency 8, about `secs` of deletes.
    let default = plugin_run(rt, cluster, refclient, next, 40 * secs, secs, &[]);
    let rate = |c: &Value| c["ratePerSecond"].as_f64().unwrap_or(f64::NAN);
    let around = |a: usize| (rate(&caps[a]) + rate(&caps[a + 1])) / 2.0;
    let of = |r: &Value, ceiling: f64| r["ratePerSecond"].as_f64().unwrap_or(0.0) / ceiling;
    let ceiling = around(1).min(40.0);
    say!(
        "| {name}, {seats} seats | capacity {:.0} / {:.0} / {:.0}/s | --qps 0: {:.0}/s ({:.0}%), beside the neighbour {:.0}/s ({:.0}%) | default: {:.1}/s ({:.0}% of min(capacity, 40/s)) | neighbour 429s alone / beside default / beside --qps 0: {} / {} / {} |",
        rate(&caps[0]), rate(&caps[1]), rate(&caps[2]),
        rate(&qps0), 100.0 * of(&qps0, around(0)),
        rate(&shared), 100.0 * of(&shared, around(1)),
        rate(&default), 100.0 * of(&default, ceiling),
        alone["throttled"], default["neighbour"]["throttled"], shared["neighbour"]["throttled"],
    );
    json!({
        "limitResponse": name, "seats": seats, "capacity": caps,
        "neighbourAlone": alone,
        "qps0": qps0, "qps0OfCapacity": r3(of(&qps0, around(0))),
        "qps0BesideNeighbour": shared, "qps0BesideNeighbourOfCapacity": r3(of(&shared, around(1))),
        "default": default, "defaultOfCeiling": r3(of(&default, ceiling)),
    })
}

/// The whole APF part: both configurations.
pub fn run(rt: &tokio::runtime::Runtime, refclient: &Path, quick: bool) -> Value {
    let secs: u64 = if quick { 10 } else { 20 };
    say!("apf: starting a cluster ({})", SERVER_FLAGS.join(" "));
    let cluster = Cluster::up(&SERVER_FLAGS);
    rt.block_on(seed_from(&cluster, 1000, IN_USE, 0, true));
    // Every id in cluster 0's local range (256..65535), or the plugin
    // would not judge it ours: in use 1000..1199, the rest from 2000.
    let mut rows = Vec::new();
    for (name, response) in [
        ("Reject", "{type: Reject}".to_owned()),
        (
            "Queue",
            "{type: Queue, queuing: {queues: 16, handSize: 4, queueLengthLimit: 50}}".to_owned(),
        ),
    ] {
        apply(&cluster, &level(&response));
        rows.push(configuration(rt, &cluster, refclient, name, quick));
    }
    // Every id from 2000 was seeded stale (the plugin's runs and the
    // capacity's); the plugin's reports say how many it deleted.
    let deleted: u64 = rows
        .iter()
        .flat_map(|r| ["qps0", "qps0BesideNeighbour", "default"].map(|k| &r[k]["deleted"]))
        .map(|d| d.as_u64().expect("the plugin's report has summary.deleted"))
        .sum();
    let judged =
        crate::common::judge::judge(&cluster.dir, &(2_000..=65_535).collect(), Some(deleted));
    json!({"judge": judged.json(),"serverFlags": SERVER_FLAGS, "shares": SHARES, "neighbourRate": NEIGHBOUR_RATE,
           "neighbourSeconds": secs, "configurations": rows})
}
