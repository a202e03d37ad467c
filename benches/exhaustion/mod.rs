//! The seed's incident at its scale (issue 33, 4): the whole local identity
//! space (ids 256..=`--max-id`, 65,535 by default: 65,280 ids) full on the
//! real kube-apiserver + etcd, ~1,000 identities in use (a CiliumEndpoint
//! each) and the rest stale and marked, agents on Cilium 1.15.6's own
//! allocator (`tests/cilium/build.sh v1.15`, `cilium-agents`) refusing new
//! pods with its own error; then `kubectl cilium-gc delete` as the
//! least-privileged user `cilium-gc`, at the default settings and at
//! `--qps 0`.
//!
//! The stale identities are *seeded* marked, as the operator would leave
//! them (`io.cilium.heartbeat` an hour old, beyond every heartbeat
//! timeout): running the real operator to mark 64k identities would take
//! longer than the bench itself, and the operator's marks are what
//! `tests/e2e/exhaustion.rs` judges.
//!
//! Figures, each from the server's or the agents' own record, in seconds
//! from the plugin's start: the first id freed (the first DELETE of a
//! CiliumIdentity by `cilium-gc` answered 200, audit log), the first
//! identity created after it (audit log) and the first waiting pod
//! allocated (the agents' summary, `waits[].allocatedAt`), the last seeded
//! stale identity gone (audit log); and the plugin's peak RSS (`wait4`).
//!
//! The default settings delete at 40/s (64k identities: about 27 minutes),
//! so in `--only exhaustion` that run is stopped by SIGTERM after [`DEFAULT_RUN`] (the plugin
//! ends the run with its report); its time to clear is computed from its
//! measured rate and says so. Then the identities it freed are seeded
//! again (the space is full again), a fresh agents process is refused
//! again, and the `--qps 0` run clears the space.
//!
//! Before the first run, `diagnose -o json` as `cilium-gc` on the exhausted
//! cluster: its findings (code, severity) in order, and the
//! `identity-space-nearly-full` finding whole.
//!
//! In each run, a pod that starts after the first id is freed (see
//! `fresh`): its refusals (0 is the goal) and its time.
//!
//! After the `--qps 0` run, the ids it freed are seeded again and
//! `curl --parallel` on 32 HTTP/1.1 connections (as the plugin sends them),
//! as `cilium-gc`, deletes the same stale set while a fresh agents process
//! watches and a new pod starts at the first id freed, as during the
//! plugin's run: once without a body (so without preconditions), then,
//! seeded again, with the plugin's own DeleteOptions body (see [`curl`]).
//! The goal is the plugin's time per delete within 1.1x of curl's.
//!
//! `-- --only exhaustion-default` ([`run_default`]) runs the default
//! settings to the end instead (about 27 minutes): time to clear measured.

use std::io::{BufRead, Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::{json, Value};

use super::{common, curl_deletes, plugin, seed_from, Cluster};

pub(crate) mod operator;
use common::judge::{expect_exit, goal, judge, PLUGIN_AGENT};
use common::{load, r3, say};
use std::collections::BTreeSet;

mod fresh;
use fresh::Fresh;

/// Ids in use (a CiliumEndpoint each), from 256.
const IN_USE: u64 = 1_000;

/// How long the run at default settings goes before it is stopped.
const DEFAULT_RUN: Duration = Duration::from_secs(90);

/// 1.15.6's `pkg/allocator` retries inside `Allocate`: pods already waiting
/// try again on that schedule, so their time is reported with it named.
const CILIUM_BACKOFF: &str =
    "Cilium 1.15.6 pkg/allocator backoff: 16 attempts, 20 ms doubling, no cap";

/// The whole part: one cluster, diagnose, the two runs, curl.
pub fn run(rt: &tokio::runtime::Runtime, max_id: u64) -> Value {
    let (cluster, agents_dir, mut out) = exhausted(rt, max_id);
    let (agents, refused_at) = Agents::start(&cluster, &agents_dir, max_id, "new");
    out["diagnose"] = diagnose(&cluster);
    let run = Run {
        cluster: &cluster,
        agents_dir: &agents_dir,
        max_id,
    };
    out["defaultSettings"] = run.one(agents, refused_at, &[], Some(DEFAULT_RUN), "fresh-default");
    let refilled = rt.block_on(refill(&cluster, FIRST, max_id));
    say!("exhaustion: {} freed ids seeded again", refilled.len());
    out["refilledBetweenRuns"] = json!(refilled.len());
    let (agents, refused_at) = Agents::start(&cluster, &agents_dir, max_id, "later");
    let qps0 = run.one(agents, refused_at, &["--qps", "0"], None, "fresh-qps0");
    out["curl"] = curl(rt, &run, &qps0);
    out["qps0"] = qps0;
    out["judge"] = judge_runs(&cluster, max_id, &[&out["defaultSettings"], &out["qps0"]]);
    out
}

/// The audit judge over the whole cluster's log: the plugin deleted only
/// the seeded stale ids (`FIRST + IN_USE..=max_id`, each seeded by the
/// bench when deleted), none in use, each with preconditions, as many as
/// its `runs`' reports say.
fn judge_runs(cluster: &Cluster, max_id: u64, runs: &[&Value]) -> Value {
    let stale: BTreeSet<u64> = (FIRST + IN_USE..=max_id).collect();
    let deleted = runs
        .iter()
        .map(|r| r["deleted"].as_u64().expect("a run's deleted"))
        .sum();
    judge(&cluster.dir, &stale, Some(deleted)).json()
}

/// The default settings to the end (`--only exhaustion-default`): one
/// cluster, the run, no stop.
pub fn run_default(rt: &tokio::runtime::Runtime, max_id: u64) -> Value {
    let (cluster, agents_dir, mut out) = exhausted(rt, max_id);
    let (agents, refused_at) = Agents::start(&cluster, &agents_dir, max_id, "new");
    let run = Run {
        cluster: &cluster,
        agents_dir: &agents_dir,
        max_id,
    };
    out["defaultSettings"] = run.one(agents, refused_at, &[], None, "fresh-default");
    out["judge"] = judge_runs(&cluster, max_id, &[&out["defaultSettings"]]);
    out
}

/// The first id of the local range.
const FIRST: u64 = 256;

/// A cluster whose range `FIRST..=max_id` is full: the cluster, the
/// agents' directory, and what was seeded.
fn exhausted(rt: &tokio::runtime::Runtime, max_id: u64) -> (Cluster, PathBuf, Value) {
    let space = max_id - FIRST + 1;
    let stale = space - IN_USE;
    let agents_dir = cilium_v115();
    say!(
        "exhaustion: ids {FIRST}..={max_id} ({space}): seeding {IN_USE} in use + {stale} stale marked"
    );
    let cluster = Cluster::up(&[]);
    let seed_seconds = rt.block_on(seed_from(&cluster, FIRST, IN_USE, stale, true));
    say!("exhaustion: seeded in {seed_seconds:.0} s");
    let out = json!({
        "ids": {"first": FIRST, "last": max_id, "space": space},
        "inUse": IN_USE, "staleSeeded": stale, "seedSeconds": r3(seed_seconds),
        "marks": "seeded: io.cilium.heartbeat one hour before the seed, as cilium-operator marks an unused identity",
        "agents": "tests/cilium/agents built against Cilium v1.15.6 (pkg/allocator, CRD backend), 2 agents, 10 pods each, --wait-for-identity",
        "ciliumBackoff": CILIUM_BACKOFF,
    });
    (cluster, agents_dir, out)
}

/// `curl --parallel --parallel-max 32 --http1.1` (as the plugin sends
/// them: kube's client speaks HTTP/1.1; an earlier run found HTTP/2 no
/// faster) deleting the same stale set under the `--qps 0` run's
/// conditions (agents watching, a new pod starting at the first id freed
/// (see [`Fresh`])): once without a body, so without preconditions; then,
/// seeded again, with the plugin's own DeleteOptions body, whose
/// `{uid, resourceVersion}` come from a list taken just before (timed
/// apart: the plugin's time includes its own list). The goal compares the
/// plugin's time per delete with curl's.
fn curl(rt: &tokio::runtime::Runtime, run: &Run, qps0: &Value) -> Value {
    let (cluster, max_id) = (run.cluster, run.max_id);
    let plugin_rate = qps0["deleteRatePerSecond"].as_f64().unwrap_or(0.0);
    let plugin_cpu = qps0["cpuSeconds"].as_f64().unwrap_or(0.0);
    // Time to clear per delete, from the plugin's start (list included)
    // to the audit log's last stale delete.
    let clear = qps0["figures"]["lastStaleGoneSeconds"].as_f64();
    let audited = qps0["figures"]["staleDeletesAudited"].as_f64();
    let clear_rate = clear.zip(audited).map(|(t, n)| n / t);
    let mut out = json!({});
    // `prefix` names the agents' pods and label sets: lower case, as a
    // Kubernetes name must be.
    for (key, prefix, body) in [
        ("http11", "http11", false),
        ("http11Preconditions", "http11-preconditions", true),
    ] {
        let ids = rt.block_on(refill(cluster, FIRST, max_id));
        let listed = Instant::now();
        let bodies = body.then(|| rt.block_on(super::parts::preconditions(cluster, &ids)));
        let list_seconds = listed.elapsed().as_secs_f64();
        let (agents, _) = Agents::start(cluster, run.agents_dir, max_id, &format!("curl-{prefix}"));
        let audit = cluster.dir.join("audit.log");
        let offset = std::fs::metadata(&audit).map_or(0, |m| m.len());
        let bin = run.agents_dir.join("bin/cilium-agents");
        let started = Timestamp::now();
        // The new pod of the plugin's run, and its list of every identity.
        let fresh = Fresh::when_first_freed(
            cluster,
            bin,
            max_id,
            audit,
            offset,
            &format!("fresh-curl-{prefix}"),
        );
        let load1 = load();
        let c = match &bodies {
            None => curl_deletes(cluster, &ids, false),
            Some(b) => super::curl_deletes_with_bodies(cluster, &ids, b),
        };
        agents.stop();
        fresh.finish(started, |_| None);
        let how = if body {
            format!("with the plugin's DeleteOptions body ({{uid, resourceVersion}} preconditions from a list of {list_seconds:.1} s before it, not counted)")
        } else {
            "DELETE, no body: no preconditions".to_string()
        };
        say!(
            "exhaustion: curl --parallel --parallel-max 32 --http1.1, as cilium-gc, {how}, agents watching as in the plugin's run, deleted the same {} stale identities at {:.0}/s with {:.1} s of CPU, load1 {load1:.2}; delete --yes --qps 0 cleared at {:.0}/s from its start ({plugin_rate:.0}/s by its report) with {plugin_cpu:.1} s of CPU: its time per delete {:.2}x curl's",
            ids.len(),
            c.rate,
            c.cpu,
            clear_rate.unwrap_or(0.0),
            clear_rate.map_or(0.0, |r| c.rate / r),
        );
        out[key] = json!({
            "command": format!("curl --parallel --parallel-max 32 --http1.1 -sS --fail -X DELETE ({}), as cilium-gc", if body { "the plugin's DeleteOptions body" } else { "no body" }),
            "deleted": ids.len(), "ratePerSecond": r3(c.rate), "ok": c.ok,
            "cpuSeconds": r3(c.cpu), "load1": load1, "agentsWatching": true,
            "preconditionsListSeconds": body.then(|| r3(list_seconds)),
            "pluginTimeOverCurlTime": clear_rate.map(|r| r3(c.rate / r)),
        });
        // The goal against curl sending the same requests: the plugin's
        // DeleteOptions body, the same stale set, in this invocation.
        if body {
            let ratio = clear_rate.map(|r| c.rate / r);
            let met = goal(
                "clearing within 1.1× of curl sending the same requests",
                ratio.is_some_and(|x| x <= 1.1),
                &format!(
                    "{} stale: delete --yes --qps 0 cleared at {:.0}/s from its start, curl --parallel-max 32 --http1.1 with its DeleteOptions body at {:.0}/s in the same run: the plugin's time per delete {}",
                    ids.len(),
                    clear_rate.unwrap_or(0.0),
                    c.rate,
                    ratio.map_or("not measured (no stale delete in the audit log)".into(), |x| format!("{x:.2}× curl's")),
                ),
            );
            out["goalClearingWithin1_1xCurl"] = json!(met);
        }
    }
    out["pluginClearRatePerSecond"] = json!(clear_rate.map(r3));
    out
}

/// `tests/cilium/build.sh v1.15`: the directory holding `bin/cilium-agents`.
fn cilium_v115() -> PathBuf {
    let out = Command::new(super::repo("tests/cilium/build.sh"))
        .arg("v1.15")
        .stderr(Stdio::inherit())
        .output()
        .expect("tests/cilium/build.sh runs");
    assert!(out.status.success(), "building cilium v1.15 failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A running `cilium-agents` process (Cilium 1.15.6's allocator).
struct Agents {
    child: Child,
    log: PathBuf,
}

impl Agents {
    /// Start 2 agents whose pods each want a label set of their own (so a
    /// new identity) in ids 256..=`max_id`, waiting when refused; returns
    /// once Cilium's allocator has refused one (its own log line), with
    /// that time.
    fn start(cluster: &Cluster, dir: &Path, max_id: u64, prefix: &str) -> (Agents, Timestamp) {
        let log = cluster.dir.join(format!("agents-{prefix}.log"));
        let child = Command::new(dir.join("bin/cilium-agents"))
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig("admin"))
            .args(["--agents", "2", "--pods", "10", "--churn", "2s"])
            .args(["--duration", "60m", "--label-sets", "1000000"])
            .args(["--label-prefix", prefix, "--wait-for-identity=true"])
            .args(["--min-id", "256", "--max-id", &max_id.to_string()])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("cilium-agents runs");
        let agents = Agents { child, log };
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&agents.log).unwrap_or_default();
            if text.contains("no more available IDs in configured space") {
                say!("exhaustion: Cilium's allocator refuses new pods");
                return (agents, Timestamp::now());
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "no refusal from Cilium's allocator in 300 s (log {})",
                agents.log.display()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// SIGTERM, then the summary the agents print when they end.
    fn stop(mut self) -> Value {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let _ = self.child.wait();
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("no agents summary ({e}); log {}", self.log.display()))
    }
}

/// `diagnose -o json` as `cilium-gc`: exit, the findings' codes and
/// severities in order, and the `identity-space-nearly-full` finding.
fn diagnose(cluster: &Cluster) -> Value {
    let out = plugin(cluster, &["diagnose", "-o", "json"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let run = "exhaustion: diagnose -o json as cilium-gc";
    expect_exit(
        run,
        out.status.code().unwrap_or(-1),
        cilium_gc::Exit::Success.code(),
    );
    let d = common::judge::report(run, &out.stdout);
    let findings = d["findings"].as_array().cloned().unwrap_or_default();
    let order: Vec<Value> = findings
        .iter()
        .map(|f| json!({"code": f["code"], "severity": f["severity"]}))
        .collect();
    let full = findings
        .iter()
        .find(|f| f["code"] == "identity-space-nearly-full")
        .cloned();
    let first_is_full = findings
        .first()
        .is_some_and(|f| f["code"] == "identity-space-nearly-full");
    say!(
        "exhaustion: diagnose -o json as cilium-gc: exit {:?}, first finding {} ({}), identity-space-nearly-full first: {first_is_full}",
        out.status.code(),
        findings.first().map_or(Value::Null, |f| f["code"].clone()),
        findings.first().map_or(Value::Null, |f| f["severity"].clone()),
    );
    json!({"exit": out.status.code(), "findings": order, "identitySpaceNearlyFull": full,
           "identitySpaceNearlyFullIsFirst": first_is_full})
}

/// Run the plugin with `args` to its end, sent SIGTERM after `limit` if
/// it is still running: its report, exit code, rusage (its own peak RSS),
/// whether it was sent SIGTERM, and the launcher's peak RSS (KiB: ours
/// when we started it, what a child spawned straight from here would
/// report; see `common::through_launcher`). Its report must parse (the
/// run named `run` otherwise).
fn run_plugin(
    cluster: &Cluster,
    args: &[&str],
    limit: Option<Duration>,
    run: &str,
) -> (Value, i32, libc::rusage, bool, i64) {
    common::reset_peak_rss();
    let rss_file = std::env::temp_dir().join(format!("kcg-bench-rss-{}", std::process::id()));
    let mut child = common::through_launcher(&plugin(cluster, args), &rss_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        stdout.read_to_end(&mut v).unwrap();
        v
    });
    let pid = child.id() as i32;
    let (ended, ended_rx) = std::sync::mpsc::channel::<()>();
    let stopper = limit.map(|l| {
        std::thread::spawn(move || {
            if ended_rx.recv_timeout(l).is_err() {
                // SAFETY: kill(2) on our own child's pid, not yet reaped:
                // wait4 below returns only after `ended` is sent.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                return true;
            }
            false
        })
    });
    // Blocks until the child has ended, leaving it unreaped (WNOWAIT), so
    // the stopper can never signal a reused pid; wait4 then reaps it.
    // SAFETY: waitid on our own child; siginfo_t is plain data.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    let _ = ended.send(());
    let signalled = stopper.is_some_and(|s| s.join().unwrap());
    let (exit, mut usage) = common::wait4(child);
    assert_eq!(r, 0, "waitid");
    // The plugin's own peak in `usage`; the launcher's returned apart.
    let launcher = usage.ru_maxrss;
    usage.ru_maxrss = common::launched_rss_kib(&rss_file);
    let report = common::judge::report(run, &reader.join().unwrap());
    (report, exit, usage, signalled, launcher)
}

/// What each run shares: the cluster, the agents' build, the range.
struct Run<'a> {
    cluster: &'a Cluster,
    agents_dir: &'a Path,
    max_id: u64,
}

impl Run<'_> {
    /// One plugin run beside the refused agents, a new pod started once
    /// the first id is freed (labelled `fresh`); stopped after `limit`.
    fn one(
        &self,
        agents: Agents,
        refused_at: Timestamp,
        flags: &[&str],
        limit: Option<Duration>,
        fresh: &str,
    ) -> Value {
        let (cluster, max_id) = (self.cluster, self.max_id);
        let audit_path = cluster.dir.join("audit.log");
        let offset = std::fs::metadata(&audit_path).map_or(0, |m| m.len());
        let load1 = load();
        let mut args = vec!["delete", "--yes", "-o", "json"];
        args.extend(flags);
        let bin = self.agents_dir.join("bin/cilium-agents");
        let started = Timestamp::now();
        let fresh =
            Fresh::when_first_freed(cluster, bin, max_id, audit_path.clone(), offset, fresh);
        let run = format!("exhaustion: kubectl cilium-gc {}", args.join(" "));
        let (report, exit, usage, stopped, launcher_rss) = run_plugin(cluster, &args, limit, &run);
        let wall = started.duration_until(Timestamp::now()).as_secs_f64();
        // SIGTERM ends a run with its report and 143; else 0.
        let want = if stopped {
            cilium_gc::Exit::Terminated
        } else {
            cilium_gc::Exit::Success
        };
        expect_exit(&run, exit, want.code());
        // Pods already waiting try again on Cilium's backoff.
        std::thread::sleep(Duration::from_secs(20));
        let summary = agents.stop();
        let events = audit_from(&audit_path, offset);
        let fresh = fresh.finish(started, |name| {
            events
                .iter()
                .filter(|e| e.verb == "create" && e.code == 201 && e.agents && e.name == name)
                .map(|e| e.done)
                .min()
        });
        let figures = figures(&events, &summary, started, refused_at, max_id);
        let rate = report["summary"]["deleteRatePerSecond"]
            .as_f64()
            .unwrap_or_else(|| panic!("violation: {run}: no summary.deleteRatePerSecond"));
        let deleted = report["summary"]["deleted"]
            .as_u64()
            .unwrap_or_else(|| panic!("violation: {run}: no summary.deleted"));
        let rss = usage.ru_maxrss as f64 / 1024.0;
        let secs = |v: &Value| v.as_f64().map_or("-".into(), |s| format!("{s:.1} s"));
        let clear = if stopped {
            let left = (max_id - FIRST + 1 - IN_USE).saturating_sub(deleted) as f64;
            format!(
                "stopped at {wall:.0} s by SIGTERM with {deleted} deleted: clear computed at {:.0} s from its rate, not measured",
                wall + left / rate.max(1e-9)
            )
        } else {
            format!(
                "the last stale identity gone at {}",
                secs(&figures["lastStaleGoneSeconds"])
            )
        };
        say!(
            "exhaustion ({} ids full, {IN_USE} in use; agents on Cilium 1.15.6's allocator refused {} attempts in all, {} pods waiting at its start): delete --yes {}as cilium-gc: first id freed at {}, first identity created at {}, first waiting pod allocated at {} and the last at {} ({CILIUM_BACKOFF}), {clear}; {deleted} deleted at {rate:.0}/s, peak RSS {rss:.1} MiB, load1 {load1:.2}",
            max_id - FIRST + 1,
            figures["allocationRefusalsInAll"],
            figures["waitingAtStart"],
            flags.iter().map(|f| format!("{f} ")).collect::<String>(),
            secs(&figures["firstFreedSeconds"]),
            secs(&figures["firstCreatedSeconds"]),
            secs(&figures["firstWaitingAllocatedSeconds"]),
            secs(&figures["lastWaitingAllocatedSeconds"]),
        );
        say!(
            "exhaustion: a pod started after the first id was freed (a new agent on Cilium 1.15.6's allocator, started at {}): {} refused attempts (0 expected), allocated identity {} at {} ({} after its agent started, its list of every identity included)",
            secs(&fresh["spawnedSeconds"]),
            fresh["allocationRefusals"],
            fresh["identity"],
            secs(&fresh["identityCreatedSeconds"]),
            secs(&fresh["spawnToAllocatedSeconds"]),
        );
        let first = figures["firstFreedSeconds"].as_f64();
        let met = goal(
            "first id freed ≤ 1 s",
            first.is_some_and(|s| s <= 1.0),
            &format!(
                "delete --yes {}as cilium-gc: the first identity DELETE answered 200 at {} from the plugin's start (audit log), {} ids full",
                flags.iter().map(|f| format!("{f} ")).collect::<String>(),
                first.map_or("never".into(), |s| format!("{s:.2} s")),
                max_id - FIRST + 1,
            ),
        );
        json!({
            "goalFirstFreedWithin1s": met,
            "flags": flags, "load1": load1, "load1After": load(),
            "exit": exit, "wallSeconds": r3(wall), "stoppedBySigterm": stopped,
            "cpuSeconds": r3(common::cpu_seconds(&usage)), "peakRssKiB": usage.ru_maxrss,
            "launcherPeakRssKiB": launcher_rss,
            "deleted": deleted, "deleteRatePerSecond": rate,
            "summary": report["summary"], "figures": figures,
            "freshPod": fresh,
            "agentsRefusedFirstAt": refused_at.to_string(),
            "agents": {"allocationRefusals": summary["allocationRefusals"], "allocations": summary["allocations"],
                       "allocationErrors": summary["allocationErrors"], "podsStarted": summary["podsStarted"],
                       "waits": summary["waits"]},
        })
    }
}

/// One CiliumIdentity write in the audit log.
struct Event {
    verb: String,
    name: String,
    code: u64,
    plugin: bool,
    agents: bool,
    done: Timestamp,
}

/// The CiliumIdentity writes the audit log holds from byte `offset` on.
fn audit_from(path: &Path, offset: u64) -> Vec<Event> {
    let mut file = std::fs::File::open(path).expect("the cluster's audit log");
    file.seek(std::io::SeekFrom::Start(offset)).unwrap();
    let mut events = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line.unwrap();
        if !line.contains("\"ciliumidentities\"") {
            continue;
        }
        let Ok(e) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if e["objectRef"]["resource"] != "ciliumidentities" || e["stage"] != "ResponseComplete" {
            continue;
        }
        let user = e["user"]["username"].as_str().unwrap_or_default();
        let agent = e["userAgent"].as_str().unwrap_or_default();
        // The plugin: its user and its user agent (curl sends as the same
        // user in the curl runs).
        events.push(Event {
            verb: e["verb"].as_str().unwrap_or_default().to_owned(),
            name: e["objectRef"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            code: e["responseStatus"]["code"].as_u64().unwrap_or(0),
            plugin: user == "cilium-gc" && agent.starts_with(PLUGIN_AGENT),
            agents: agent.starts_with("cilium-agents"),
            done: e["stageTimestamp"].as_str().unwrap().parse().unwrap(),
        });
    }
    events
}

/// The run's figures, in seconds from `started`.
fn figures(
    events: &[Event],
    agents: &Value,
    started: Timestamp,
    refused_at: Timestamp,
    max_id: u64,
) -> Value {
    let secs = |t: Timestamp| r3((t.as_millisecond() - started.as_millisecond()) as f64 / 1000.0);
    let stale = |name: &str| {
        name.parse::<u64>()
            .is_ok_and(|n| (256 + IN_USE..=max_id).contains(&n))
    };
    let deletes = || {
        events
            .iter()
            .filter(|e| e.verb == "delete" && e.code == 200)
    };
    let first_freed = deletes().filter(|e| e.plugin).map(|e| e.done).min();
    let last_stale_gone = deletes().filter(|e| stale(&e.name)).map(|e| e.done).max();
    let stale_deletes = deletes().filter(|e| stale(&e.name)).count();
    let first_created = events
        .iter()
        .filter(|e| e.verb == "create" && e.code == 201 && e.agents && e.done >= started)
        .map(|e| e.done)
        .min();
    let time = |w: &Value, k: &str| w[k].as_str().and_then(|s| s.parse::<Timestamp>().ok());
    let waits = agents["waits"].as_array().cloned().unwrap_or_default();
    let waiting: Vec<&Value> = waits
        .iter()
        .filter(|w| time(w, "firstRefusedAt").is_some_and(|t| t < started))
        .filter(|w| time(w, "allocatedAt").is_none_or(|t| t > started))
        .collect();
    let allocated: Vec<Timestamp> = waiting
        .iter()
        .filter_map(|w| time(w, "allocatedAt"))
        .collect();
    json!({
        "firstFreedSeconds": first_freed.map(secs),
        "firstCreatedSeconds": first_created.map(secs),
        "firstWaitingAllocatedSeconds": allocated.iter().min().copied().map(secs),
        "lastWaitingAllocatedSeconds": allocated.iter().max().copied().map(secs),
        "lastStaleGoneSeconds": last_stale_gone.map(secs),
        "staleDeletesAudited": stale_deletes,
        "pluginDeletesAudited": deletes().filter(|e| e.plugin).count(),
        "firstRefusalBeforeStartSeconds": secs(refused_at),
        "allocationRefusalsInAll": agents["allocationRefusals"],
        "waitingAtStart": waiting.len(),
        "waitingAllocated": allocated.len(),
    })
}

/// Seed again, stale and marked, every id of `first..=last` the server no
/// longer holds (those a run freed and the agents did not take): the space
/// is full again. Returns those ids.
async fn refill(cluster: &Cluster, first: u64, last: u64) -> Vec<u64> {
    let ids: Vec<u64> = (first..=last).collect();
    super::reseed(cluster, &ids).await
}
