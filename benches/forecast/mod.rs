//! `-- --only forecast`: does `diagnose`'s "full if GC stops" come true?
//!
//! With no cilium-operator (scaled to 0: none is started, so nothing
//! deletes an identity), agents on Cilium's own allocator of the current
//! release (`tests/cilium/agents`, v1.19.3) churn pods at a steady pace,
//! each pod with a label set of its own (one new identity each), into a
//! range with a few thousand free ids. Partway, `diagnose -o json --sample
//! 20s` as `cilium-gc` forecasts when the range is full
//! (`forecast.fullIfGcStops.seconds`, from its `generatedAt`); the agents
//! run on until Cilium's allocator first refuses (`no more available IDs in
//! configured space`, the earliest `waits[].firstRefusedAt` of their
//! summary). The goal: the forecast within 25 % of the measured time.
//!
//! The plugin and the allocator see the same range: cilium-config says
//! `max-connected-clusters: 511` (cluster-id 0: ids 256..=32767, as
//! Cilium's `GetMaximumAllocationIdentity` computes it), the agents run
//! with `--min-id 256 --max-id 32767`, and all of it but [`FREE`] ids is
//! seeded with identities no one uses (nothing deletes them).
//!
//! The run is judged: every exit code, the diagnosis parsed strictly, the
//! range it judged, the pace read from the sample, no refusal before the
//! diagnosis, a refusal after it; any violation fails the bench.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::{json, Value};

use super::{plugin, seed_ids, Cluster};
use crate::common::judge::judge;
use crate::common::say;

/// The local range of cluster-id 0 with max-connected-clusters 511.
const FIRST: u64 = 256;
const LAST: u64 = 32_767;
/// Ids left free after the seed: what the churn fills.
const FREE: u64 = 2_500;
/// The churn: 4 agents of 5 pods, each ending and starting one every
/// 200 ms (about 20 new identities a second when the machine keeps up).
const AGENTS: &str = "4";
const PODS: &str = "5";
const CHURN: &str = "200ms";
/// From the agents' start to the diagnosis, and its sample.
const DIAGNOSE_AFTER: Duration = Duration::from_secs(30);
const SAMPLE: &str = "20s";
/// The goal: forecast within this many percent of the measured time.
const GOAL_PERCENT: f64 = 25.0;
/// Cilium's allocator's error when its range is empty.
const REFUSAL: &str = "no more available IDs in configured space";

/// The whole part: one cluster, the seed, the churn, the diagnosis, the
/// first refusal; the JSON of it.
pub fn run(rt: &tokio::runtime::Runtime) -> Value {
    let bin = cilium_current();
    let cluster = Cluster::up(&[]);
    patch_config(&cluster);
    let seeded: Vec<u64> = (FIRST..=LAST - FREE).collect();
    let seed_seconds = rt.block_on(seed_ids(&cluster, &seeded));
    say!(
        "forecast: ids {FIRST}..={LAST}: {} seeded unused in {seed_seconds:.0} s, {FREE} free; no operator",
        seeded.len()
    );
    let agents = Agents::start(&cluster, &bin);
    std::thread::sleep(DIAGNOSE_AFTER);
    let diagnosis = Diagnosis::take(&cluster);
    assert!(
        !agents.refused(),
        "violation: the allocator refused before the diagnosis ended (log {})",
        agents.log.display()
    );
    agents.until_refused(diagnosis.seconds * 3.0 + 300.0);
    let summary = agents.stop();
    let first_refusal = first_refusal(&summary);
    let measured =
        (first_refusal.as_millisecond() - diagnosis.generated_at.as_millisecond()) as f64 / 1000.0;
    assert!(
        measured > 0.0,
        "violation: the first refusal ({first_refusal}) came before the diagnosis ({})",
        diagnosis.generated_at
    );
    let error = (diagnosis.seconds - measured) / measured * 100.0;
    let met = error.abs() <= GOAL_PERCENT;
    let line = format!(
        "goal forecast within 25%: {} (forecast {:.0} s, measured {measured:.0} s, error {error:+.1} %)",
        if met { "met" } else { "missed" },
        diagnosis.seconds
    );
    say!("{line}");
    // The plugin only diagnoses here: the judge holds it to no delete.
    let judged = judge(&cluster.dir, &Default::default(), Some(0));
    json!({
        "judge": judged.json(),
        "ids": {"first": FIRST, "last": LAST, "space": LAST - FIRST + 1, "seeded": seeded.len(), "free": FREE},
        "seedSeconds": super::r3(seed_seconds),
        "operator": "none (scaled to 0): nothing deletes an identity",
        "agents": format!("tests/cilium/agents, Cilium {}, --agents {AGENTS} --pods {PODS} --churn {CHURN}, a label set of its own per pod", release(&bin)),
        "diagnoseAfterSeconds": DIAGNOSE_AFTER.as_secs(), "sample": SAMPLE,
        "diagnosis": {"generatedAt": diagnosis.generated_at.to_string(), "forecast": diagnosis.forecast,
                      "identitySpace": diagnosis.space},
        "firstRefusal": first_refusal.to_string(),
        "forecastSeconds": diagnosis.seconds, "measuredSeconds": super::r3(measured),
        "errorPercent": super::r3(error), "goalPercent": GOAL_PERCENT, "met": met,
        "agentsSummary": {"newIdentities": summary["newIdentities"], "allocationRefusals": summary["allocationRefusals"],
                          "startedAt": summary["startedAt"], "endedAt": summary["endedAt"]},
        "printed": [line],
    })
}

/// `tests/cilium/build.sh current` (cached): the build directory.
fn cilium_current() -> PathBuf {
    let out = Command::new(super::repo("tests/cilium/build.sh"))
        .arg("current")
        .stderr(Stdio::inherit())
        .output()
        .expect("tests/cilium/build.sh runs");
    assert!(out.status.success(), "building cilium current failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn release(bin: &std::path::Path) -> String {
    std::fs::read_to_string(bin.join("version"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// cilium-config: the range 256..=32767 (max-connected-clusters 511).
fn patch_config(cluster: &Cluster) {
    let out = cluster.admin(&[
        "-n",
        "kube-system",
        "patch",
        "configmap",
        "cilium-config",
        "--type=merge",
        "-p",
        r#"{"data":{"cluster-id":"0","max-connected-clusters":"511"}}"#,
    ]);
    assert!(
        out.status.success(),
        "patching cilium-config: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the diagnosis said.
struct Diagnosis {
    generated_at: Timestamp,
    /// `forecast.fullIfGcStops.seconds`.
    seconds: f64,
    forecast: Value,
    space: Value,
}

impl Diagnosis {
    /// `diagnose -o json --sample SAMPLE` as `cilium-gc`: exit 0, JSON on
    /// stdout, the range it judged the allocator's, the pace the sample's.
    fn take(cluster: &Cluster) -> Diagnosis {
        let out = plugin(cluster, &["diagnose", "-o", "json", "--sample", SAMPLE])
            .output()
            .expect("the plugin runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "violation: diagnose exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let d: Value = serde_json::from_slice(&out.stdout).expect("diagnose -o json is JSON");
        assert_eq!(
            d["kind"], "CiliumIdentityDiagnosis",
            "violation: {}",
            d["kind"]
        );
        let space = d["identitySpace"].clone();
        assert_eq!(
            (
                space["localRange"]["min"].as_u64(),
                space["localRange"]["max"].as_u64()
            ),
            (Some(FIRST), Some(LAST)),
            "violation: the plugin judged another range: {space}"
        );
        let forecast = d["forecast"].clone();
        assert_eq!(
            forecast["pace"]["source"], "sample",
            "violation: the pace is not the sample's: {}",
            forecast["pace"]
        );
        let seconds = forecast["fullIfGcStops"]["seconds"]
            .as_f64()
            .unwrap_or_else(|| panic!("violation: no fullIfGcStops.seconds: {forecast}"));
        let generated_at: Timestamp = d["generatedAt"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .expect("violation: generatedAt is a timestamp");
        say!(
            "forecast: diagnose at {generated_at}: headroom {}, pace {}/h ({} created in {} s watched), full if GC stops in {seconds} s",
            forecast["fullIfGcStops"]["headroom"],
            forecast["pace"]["ratePerHour"],
            forecast["pace"]["created"],
            forecast["pace"]["windowSeconds"]
        );
        Diagnosis {
            generated_at,
            seconds,
            forecast,
            space,
        }
    }
}

/// The earliest refused attempt in the agents' summary.
fn first_refusal(summary: &Value) -> Timestamp {
    assert!(
        summary["allocationRefusals"].as_u64().unwrap_or(0) > 0,
        "violation: no refusal counted: {}",
        summary["allocationRefusals"]
    );
    summary["waits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["firstRefusedAt"].as_str()?.parse::<Timestamp>().ok())
        .min()
        .expect("violation: no refused pod in the agents' summary")
}

/// The running agents program.
struct Agents {
    child: Child,
    log: PathBuf,
}

impl Agents {
    fn start(cluster: &Cluster, bin: &std::path::Path) -> Agents {
        let log = cluster.dir.join("agents-forecast.log");
        let child = Command::new(bin.join("bin/cilium-agents"))
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig("admin"))
            .args(["--agents", AGENTS, "--pods", PODS, "--churn", CHURN])
            .args(["--duration", "30m", "--label-sets", "1000000000"])
            .args(["--label-prefix", "forecast", "--allocate-timeout", "2s"])
            .args([
                "--min-id",
                &FIRST.to_string(),
                "--max-id",
                &LAST.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("cilium-agents runs");
        Agents { child, log }
    }

    /// Cilium's allocator has refused (its own log line).
    fn refused(&self) -> bool {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .contains(REFUSAL)
    }

    /// Wait for the first refusal, at most `limit` seconds.
    fn until_refused(&self, limit: f64) {
        let started = Instant::now();
        while !self.refused() {
            assert!(
                started.elapsed().as_secs_f64() < limit,
                "violation: no refusal within {limit:.0} s (log {})",
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// SIGTERM, then the summary the agents print when they end (exit 0).
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
        let status = self.child.wait().expect("cilium-agents waited for");
        assert!(
            status.success(),
            "violation: cilium-agents exited {status} (log {})",
            self.log.display()
        );
        serde_json::from_str(&out).unwrap_or_else(|e| {
            panic!(
                "violation: no agents summary ({e}); log {}",
                self.log.display()
            )
        })
    }
}

impl Drop for Agents {
    /// A failed run does not leave the agents churning (std does not
    /// signal a child it has already reaped).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
