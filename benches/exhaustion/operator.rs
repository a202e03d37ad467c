//! The seed's full identity space left to the real cilium-operator v1.19.3
//! (issue 33, 4: "the same cluster left to the real v1.19.3 operator at its
//! defaults"), `-- --only exhaustion-operator`.
//!
//! The cluster is seeded as [`super::run`] seeds it (65,280 ids: 1,000 in
//! use with a CiliumEndpoint each, 64,280 stale and marked an hour ago),
//! agents on Cilium 1.15.6's allocator are refused, then the real
//! `cilium-operator-generic` v1.19.3 starts (`tests/cilium/operator.sh up
//! DIR current`) with its GC *rate* at its defaults: `identity-gc-rate-limit`
//! 2,500 per `identity-gc-rate-interval` 1m (`operator/identitygc/cell.go`,
//! Cilium's `pkg/rate.Limiter`: the tokens used are released at each tick,
//! so a batch per minute), `operator-k8s-client-qps` 100, burst 200
//! (`operator/cmd/root.go`). Only its pass interval and heartbeat timeout
//! are shortened, by the same factor 60 (15m/30m → 15s/30s), so that its
//! first delete comes within a minute: after a start every identity has a
//! sign of life (the informer's first list) and nothing is deleted before
//! one heartbeat timeout has passed (docs/real-cilium.md, row 3). Its
//! endpoint GC runs at 24h, not 30s: the seeded CiliumEndpoints have no Pod,
//! and a CiliumEndpoint younger than that interval is "too new" to collect.
//!
//! Measured from the audit log (the operator's identity DELETEs answered 200)
//! over [`WINDOW`] from its first delete, and from its metrics (the passes it
//! completed before the pass that deletes, the last one's length); the time
//! to clear at full defaults is then *computed* from those and the
//! documented intervals, and the line printed says which figure is which.

use std::io::{Read, Seek};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::{json, Value};

use super::{audit_from, cilium_v115, figures, Agents, CILIUM_BACKOFF, IN_USE};
use crate::common::judge::judge;
use crate::common::{load, r3, say};
use crate::{repo, seed_from, Cluster};

/// How long deletes are measured after the first one: four GC-limiter
/// intervals and most of a fifth, so five batches are seen.
const WINDOW: Duration = Duration::from_secs(4 * 60 + 40);

/// The operator's pass interval and heartbeat timeout at its defaults
/// (`defaults.KVstoreLeaseTTL` 15m, twice that), in seconds.
const DEFAULT_INTERVAL: f64 = 900.0;
const DEFAULT_HEARTBEAT: f64 = 1_800.0;
/// The shortened interval of the run ([`FLAGS`]), in seconds.
const SHORT_INTERVAL: f64 = 15.0;
/// Its GC limiter at its defaults: tokens per interval, interval seconds.
const RATE_LIMIT: u64 = 2_500;
const RATE_INTERVAL: f64 = 60.0;

/// The shortened flags (the same ratio as the defaults); the rest of the
/// flags are `operator.sh`'s.
const FLAGS: [&str; 3] = [
    "--identity-gc-interval=15s",
    "--identity-heartbeat-timeout=30s",
    "--cilium-endpoint-gc-interval=24h",
];

/// The whole part: one full cluster, the operator on it.
pub(crate) fn run(rt: &tokio::runtime::Runtime, max_id: u64) -> Value {
    const FIRST: u64 = 256;
    let space = max_id - FIRST + 1;
    let stale = space - IN_USE;
    let agents_dir = cilium_v115();
    say!("exhaustion-operator: ids {FIRST}..={max_id} ({space}): seeding {IN_USE} in use + {stale} stale marked");
    let cluster = Cluster::up(&[]);
    let seed_seconds = rt.block_on(seed_from(&cluster, FIRST, IN_USE, stale, true));
    say!("exhaustion-operator: seeded in {seed_seconds:.0} s");
    let (agents, refused_at) = Agents::start(&cluster, &agents_dir, max_id, "new");
    let audit_path = cluster.dir.join("audit.log");
    let offset = std::fs::metadata(&audit_path).map_or(0, |m| m.len());
    let load1 = load();
    let started = Timestamp::now();
    operator(&cluster, &["up"], true);
    let env = std::fs::read_to_string(cluster.dir.join("operator/env")).unwrap();
    let var = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .unwrap()
            .to_owned()
    };
    let (metrics_url, log) = (var("METRICS_URL"), var("OPERATOR_LOG"));
    let watched = watch(&audit_path, offset, &metrics_url, &log);
    // `down` removes its directory, log included.
    let gc_started = gc_started(&std::fs::read_to_string(&log).unwrap_or_default());
    operator(&cluster, &["down"], false);
    std::thread::sleep(Duration::from_secs(5));
    let summary = agents.stop();
    let events = audit_from(&audit_path, offset);
    let agents_figures = figures(&events, &summary, started, refused_at, max_id);
    let deletes = operator_deletes(&audit_path, offset);
    let in_use_deleted = deletes
        .iter()
        .filter(|d| d.code == 200)
        .filter(|d| d.name.parse::<u64>().is_ok_and(|n| n < FIRST + IN_USE))
        .count();
    let m = measured(&deletes, started, gc_started, &watched);
    let c = computed(&m, stale);
    let secs = |v: &Value| v.as_f64().map_or("-".into(), |s| format!("{s:.1} s"));
    let line = format!(
        "exhaustion left to the real cilium-operator v1.19.3 ({space} ids full, {IN_USE} in use, {stale} stale marked; agents on Cilium 1.15.6's allocator refused {} attempts; its GC rate at the defaults: identity-gc-rate-limit {RATE_LIMIT} per identity-gc-rate-interval 1m, operator-k8s-client-qps 100 burst 200): MEASURED with identity-gc-interval 15s and identity-heartbeat-timeout 30s: GC started at {}, {} passes completed before the one that deletes, first id freed at {}, first waiting pod allocated at {} ({CILIUM_BACKOFF}), then {} deletes per 1m limiter tick at {:.0}/s ({} deleted in {:.0} s, batches {}), {in_use_deleted} in use deleted; COMPUTED for its full defaults (identity-gc-interval 15m, identity-heartbeat-timeout 30m) from those: first id freed at {:.1} min, the space clear at {:.1} min ({} batches); load1 {load1:.2}",
        agents_figures["allocationRefusalsInAll"],
        secs(&m["gcStartedSeconds"]),
        m["passesBeforeDeleting"],
        secs(&m["firstDeleteSeconds"]),
        secs(&agents_figures["firstWaitingAllocatedSeconds"]),
        m["firstBatch"],
        m["burstPerSecond"].as_f64().unwrap_or(0.0),
        m["deletedInWindow"],
        m["windowSeconds"].as_f64().unwrap_or(0.0),
        m["batchSizes"],
        c["firstFreedMinutes"].as_f64().unwrap_or(f64::NAN),
        c["clearMinutes"].as_f64().unwrap_or(f64::NAN),
        c["batches"],
    );
    say!("{line}");
    // The plugin does not run here: the judge holds it to no delete at all.
    let judged = judge(&cluster.dir, &Default::default(), Some(0));
    json!({
        "ids": {"first": FIRST, "last": max_id, "space": space},
        "inUse": IN_USE, "staleSeeded": stale, "seedSeconds": r3(seed_seconds),
        "operator": "cilium-operator-generic v1.19.3 (tests/cilium/build.sh current, tests/cilium/operator.sh)",
        "flags": FLAGS,
        "rateDefaults": {"identityGcRateLimit": RATE_LIMIT, "identityGcRateIntervalSeconds": RATE_INTERVAL,
                         "operatorK8sClientQps": 100, "operatorK8sClientBurst": 200},
        "load1": load1, "load1After": load(),
        "measured": m, "computedAtDefaults": c,
        "inUseDeleted": in_use_deleted,
        "operatorDeletesByCode": by_code(&deletes),
        "agentsRefusedFirstAt": refused_at.to_string(),
        "agents": agents_figures,
        "printed": line,
        "judge": judged.json(),
    })
}

/// `tests/cilium/operator.sh ARGS DIR [current --owner PID -- FLAGS]`.
fn operator(cluster: &Cluster, args: &[&str], up: bool) {
    let mut cmd = Command::new(repo("tests/cilium/operator.sh"));
    cmd.args(args).arg(&cluster.dir);
    if up {
        cmd.args(["current", "--owner", &std::process::id().to_string(), "--"])
            .args(FLAGS);
    }
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .expect("operator.sh runs");
    assert!(out.status.success(), "operator.sh {args:?} failed");
}

/// What is watched while the operator runs: its completed passes and the
/// last one's seconds when its first delete showed in the audit log.
struct Watched {
    passes_at_first_delete: u64,
    last_pass_seconds: Option<f64>,
    window: f64,
}

/// Poll the audit log and the operator's metrics each second until
/// [`WINDOW`] after its first identity delete (at most 10 minutes for it).
fn watch(audit: &Path, offset: u64, metrics_url: &str, log: &str) -> Watched {
    let mut file = std::fs::File::open(audit).unwrap();
    file.seek(std::io::SeekFrom::Start(offset)).unwrap();
    let mut pending = String::new();
    let begun = Instant::now();
    let mut first: Option<(Instant, u64, Option<f64>)> = None;
    loop {
        let mut chunk = String::new();
        file.read_to_string(&mut chunk).unwrap();
        pending.push_str(&chunk);
        let cut = pending.rfind('\n').map_or(0, |i| i + 1);
        let lines: String = pending.drain(..cut).collect();
        if first.is_none() && lines.lines().any(is_operator_delete) {
            let (passes, last) = gc_metrics(metrics_url);
            say!("exhaustion-operator: its first delete, after {passes} completed passes");
            first = Some((Instant::now(), passes as u64, last));
        }
        if let Some((at, passes, last)) = first {
            if at.elapsed() >= WINDOW {
                return Watched {
                    passes_at_first_delete: passes,
                    last_pass_seconds: last,
                    window: at.elapsed().as_secs_f64(),
                };
            }
        }
        assert!(
            first.is_some() || begun.elapsed() < Duration::from_secs(600),
            "the operator deleted nothing in 10 minutes (log {log})"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// An audit line of a CiliumIdentity delete by the operator, answered 200.
fn is_operator_delete(line: &str) -> bool {
    line.contains("\"ciliumidentities\"")
        && line.contains("\"verb\":\"delete\"")
        && line.contains("\"userAgent\":\"cilium-operator")
        && line.contains("\"stage\":\"ResponseComplete\"")
        && line.contains("\"code\":200")
}

/// `identity_gc_runs{outcome="success"}` and `identity_gc_latency` of the
/// CRD GC, as the operator serves them.
fn gc_metrics(url: &str) -> (f64, Option<f64>) {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "10", url])
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let value = |name: &str| {
        text.lines()
            .filter(|l| l.starts_with(name))
            .filter(|l| l.contains("outcome=\"success\"") && l.contains("identity_type=\"crd\""))
            .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    (
        value("cilium_operator_identity_gc_runs{").unwrap_or(0.0),
        value("cilium_operator_identity_gc_latency{"),
    )
}

/// One CiliumIdentity delete by the operator in the audit log.
struct Delete {
    name: String,
    code: u64,
    done: Timestamp,
}

/// The operator's CiliumIdentity deletes from byte `offset` on.
fn operator_deletes(path: &Path, offset: u64) -> Vec<Delete> {
    let mut file = std::fs::File::open(path).unwrap();
    file.seek(std::io::SeekFrom::Start(offset)).unwrap();
    let mut text = String::new();
    file.read_to_string(&mut text).unwrap();
    text.lines()
        .filter(|l| l.contains("\"ciliumidentities\"") && l.contains("\"verb\":\"delete\""))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| {
            e["userAgent"]
                .as_str()
                .is_some_and(|a| a.starts_with("cilium-operator"))
        })
        .map(|e| Delete {
            name: e["objectRef"]["name"].as_str().unwrap_or_default().into(),
            code: e["responseStatus"]["code"].as_u64().unwrap_or(0),
            done: e["stageTimestamp"].as_str().unwrap().parse().unwrap(),
        })
        .collect()
}

fn by_code(deletes: &[Delete]) -> Value {
    let mut m = std::collections::BTreeMap::<String, u64>::new();
    for d in deletes {
        *m.entry(d.code.to_string()).or_default() += 1;
    }
    json!(m)
}

/// When its log says `Starting CRD identity garbage collector` (`time=`).
fn gc_started(text: &str) -> Option<Timestamp> {
    let line = text
        .lines()
        .find(|l| l.contains("Starting CRD identity garbage collector"))?;
    line.split(' ')
        .find_map(|w| w.strip_prefix("time="))?
        .parse()
        .ok()
}

/// The figures of the run: seconds from the operator's start; the batches
/// its GC limiter let through (deletes more than 5 s apart start a new one).
fn measured(deletes: &[Delete], started: Timestamp, gc: Option<Timestamp>, w: &Watched) -> Value {
    let secs = |t: Timestamp| (t.as_millisecond() - started.as_millisecond()) as f64 / 1000.0;
    let mut times: Vec<f64> = deletes
        .iter()
        .filter(|d| d.code == 200)
        .map(|d| secs(d.done))
        .collect();
    times.sort_by(f64::total_cmp);
    let mut batches: Vec<Vec<f64>> = Vec::new();
    for t in &times {
        match batches.last_mut() {
            Some(b) if t - b.last().unwrap() <= 5.0 => b.push(*t),
            _ => batches.push(vec![*t]),
        }
    }
    let burst = batches
        .first()
        .filter(|b| b.len() > 1)
        .map(|b| (b.len() - 1) as f64 / (b.last().unwrap() - b[0]).max(1e-3));
    let starts: Vec<f64> = batches.iter().map(|b| r3(b[0])).collect();
    json!({
        "gcStartedSeconds": gc.map(|t| r3(secs(t))),
        "passesBeforeDeleting": w.passes_at_first_delete,
        "lastPassSecondsBeforeDeleting": w.last_pass_seconds,
        "firstDeleteSeconds": times.first().copied().map(r3),
        "lastDeleteSeconds": times.last().copied().map(r3),
        "windowSeconds": r3(w.window),
        "deletedInWindow": times.len(),
        "firstBatch": batches.first().map_or(0, Vec::len),
        "batchSizes": batches.iter().map(Vec::len).collect::<Vec<_>>(),
        "batchStartsSeconds": starts,
        "burstPerSecond": burst.map(r3),
    })
}

/// The time to clear `stale` at full defaults, from the measured figures.
/// The first deleting pass is the one after as many passes as measured
/// (the informer's first list is a sign of life, and the heartbeat timeout
/// is two intervals at the defaults as in the run: which pass deletes
/// first depends on the pass lengths, not on the interval), so it comes
/// that many times (15m - 15s) later than measured. The GC limiter's ticks
/// keep the measured phase (every minute from its creation at the
/// operator's start): the first batch at once, the next at each tick, each
/// of the measured size, the last one at the measured burst rate.
fn computed(m: &Value, stale: u64) -> Value {
    let passes = m["passesBeforeDeleting"].as_f64().unwrap_or(f64::NAN);
    let first = m["firstDeleteSeconds"].as_f64().unwrap_or(f64::NAN)
        + passes * (DEFAULT_INTERVAL - SHORT_INTERVAL);
    let batch = m["firstBatch"].as_u64().unwrap_or(0).max(1);
    let burst = m["burstPerSecond"].as_f64().unwrap_or(f64::NAN);
    // A tick measured: the second batch's start.
    let tick = m["batchStartsSeconds"][1].as_f64().unwrap_or(f64::NAN) % RATE_INTERVAL;
    let batches = stale.div_ceil(batch);
    let last_batch = (stale - (batches - 1) * batch) as f64;
    let second = tick + ((first - tick) / RATE_INTERVAL).floor() * RATE_INTERVAL + RATE_INTERVAL;
    let last_start = if batches == 1 {
        first
    } else {
        second + (batches - 2) as f64 * RATE_INTERVAL
    };
    let clear = last_start + (last_batch - 1.0) / burst;
    json!({
        "how": "computed, not measured: the measured first delete plus, for each pass measured before the deleting one, identity-gc-interval 15m instead of 15s (heartbeat timeout 30m instead of 30s); then one batch of the measured size per identity-gc-rate-interval 1m at the measured tick phase, the last at the measured burst rate",
        "identityGcIntervalSeconds": DEFAULT_INTERVAL, "identityHeartbeatTimeoutSeconds": DEFAULT_HEARTBEAT,
        "firstFreedSeconds": r3(first), "firstFreedMinutes": r3(first / 60.0),
        "batches": batches, "tickPhaseSeconds": r3(tick),
        "clearSeconds": r3(clear), "clearMinutes": r3(clear / 60.0),
    })
}
