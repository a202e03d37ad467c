//! A pod that starts after the first id is freed (issue 33, 4): the goal is
//! that it is allocated at its first attempt. The audit log is tailed while
//! the plugin runs; at the first DELETE of a CiliumIdentity by `cilium-gc`
//! answered 200, a new `cilium-agents` process starts one pod with a label
//! set of its own (so a new identity) on Cilium 1.15.6's allocator. Its
//! refusals are the allocator's own records (the agents' summary,
//! `allocationRefusals`: every refused attempt, as the exhaustion e2e
//! counts them), its allocation time the audit log's create of the
//! identity it holds. A new agent lists every identity before it allocates
//! (`WaitForInitialSync`), so its time includes that list.

use std::io::{BufRead, Seek};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{json, Value};

use super::Cluster;

/// The longest the tail waits for the first id freed.
const WAIT_FOR_FREED: Duration = Duration::from_secs(300);

/// The new pod, started once the first id is freed.
pub(super) struct Fresh {
    done: Arc<AtomicBool>,
    thread: JoinHandle<Option<Started>>,
}

/// What the tail saw and what the new agents process printed.
struct Started {
    freed_seen: Timestamp,
    spawned: Timestamp,
    exit: Option<i32>,
    summary: Value,
}

impl Fresh {
    /// Tail `audit` from `offset`; at the plugin's first freed id, start
    /// one agent with one pod labelled `prefix` (`bin`: `cilium-agents`).
    pub(super) fn when_first_freed(
        cluster: &Cluster,
        bin: PathBuf,
        max_id: u64,
        audit: PathBuf,
        offset: u64,
        prefix: &str,
    ) -> Fresh {
        let done = Arc::new(AtomicBool::new(false));
        let kubeconfig = cluster.kubeconfig("admin");
        let log = cluster.dir.join(format!("agents-{prefix}.log"));
        let prefix = prefix.to_owned();
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let freed_seen = first_freed(&audit, offset, &stop)?;
            let spawned = Timestamp::now();
            let out = Command::new(bin)
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(["--agents", "1", "--pods", "1", "--churn", "0"])
                .args(["--duration", "5m", "--label-sets", "1"])
                .args(["--label-prefix", &prefix, "--wait-for-identity=true"])
                .args(["--min-id", "256", "--max-id", &max_id.to_string()])
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&log).unwrap())
                .output()
                .expect("cilium-agents runs");
            let summary = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!("no summary from the new agent ({e}); log {}", log.display())
            });
            Some(Started {
                freed_seen,
                spawned,
                exit: out.status.code(),
                summary,
            })
        });
        Fresh { done, thread }
    }

    /// Once the plugin has ended: the new pod's figures, seconds from
    /// `started` (the plugin's start); `created` is when the audit log
    /// shows the agents' create of an identity, by name.
    pub(super) fn finish(
        self,
        started: Timestamp,
        created: impl Fn(&str) -> Option<Timestamp>,
    ) -> Value {
        self.done.store(true, Ordering::Relaxed);
        let Some(s) = self.thread.join().expect("the new agent's thread") else {
            return json!({"started": false, "why": "no id freed by cilium-gc in the audit log"});
        };
        let secs = |t: Timestamp| super::r3((t - started).total(jiff::Unit::Second).unwrap());
        let held = s.summary["heldIdentities"][0].as_u64();
        let allocated = held.and_then(|id| created(&id.to_string()));
        let refusals = s.summary["allocationRefusals"].as_u64();
        json!({
            "started": true,
            "firstFreedSeenSeconds": secs(s.freed_seen),
            "spawnedSeconds": secs(s.spawned),
            "exit": s.exit,
            "identity": held,
            "identityCreatedSeconds": allocated.map(secs),
            "spawnToAllocatedSeconds": allocated.map(|t| super::r3((t - s.spawned).total(jiff::Unit::Second).unwrap())),
            "allocationRefusals": refusals,
            "allocations": s.summary["allocations"],
            "allocationErrors": s.summary["allocationErrors"],
            "allocatedAtFirstAttempt": refusals == Some(0) && s.summary["allocations"] == 1,
            "note": "a new agent process: it lists every identity (WaitForInitialSync) before it allocates",
        })
    }
}

/// When the tail of `path` from `offset` first shows a DELETE of a
/// CiliumIdentity by `cilium-gc` answered 200 (`None`: `stop` was set or
/// [`WAIT_FOR_FREED`] passed first).
fn first_freed(path: &Path, offset: u64, stop: &AtomicBool) -> Option<Timestamp> {
    let started = std::time::Instant::now();
    let mut file = std::fs::File::open(path).ok()?;
    file.seek(std::io::SeekFrom::Start(offset)).ok()?;
    let mut reader = std::io::BufReader::new(file);
    let mut line = String::new();
    loop {
        let n = reader.read_line(&mut line).ok()?;
        if n == 0 || !line.ends_with('\n') {
            // At the end, or a line not yet whole: keep it, read on later.
            if stop.load(Ordering::Relaxed) || started.elapsed() > WAIT_FOR_FREED {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        if freed_by_plugin(&line) {
            return Some(Timestamp::now());
        }
        line.clear();
    }
}

/// An audit line: DELETE of a CiliumIdentity by `cilium-gc`, answered 200.
fn freed_by_plugin(line: &str) -> bool {
    if !line.contains("\"ciliumidentities\"") || !line.contains("\"delete\"") {
        return false;
    }
    let Ok(e) = serde_json::from_str::<Value>(line) else {
        return false;
    };
    e["stage"] == "ResponseComplete"
        && e["verb"] == "delete"
        && e["objectRef"]["resource"] == "ciliumidentities"
        && e["user"]["username"] == "cilium-gc"
        && e["responseStatus"]["code"] == 200
}
