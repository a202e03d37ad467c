//! The real Cilium in the test world: cilium-operator-generic of a release
//! (`tests/cilium/operator.sh`, stopped when the [`Operator`] drops and by the
//! script's watchdog if the test binary is killed), and N agents running
//! Cilium's own identity allocation code of the same release
//! (`tests/cilium/agents`, the `cilium-agents` binary). Both are built by
//! `tests/cilium/build.sh` (cached).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;

use crate::support::cluster::Cluster;
use crate::support::repo_path;

/// A Cilium release the suite builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// v1.15.6: the seed's bug (a GC pass returns on the first failed write).
    V115,
    /// The current release that builds here (`tests/cilium/current/go.mod`).
    Current,
}

impl Version {
    fn arg(self) -> &'static str {
        match self {
            Version::V115 => "v1.15",
            Version::Current => "current",
        }
    }
}

/// The build directory of `version` (bin/cilium-operator-generic,
/// bin/cilium-agents, version), built once per test binary. `None` when a
/// tool is missing outside CI; in CI that fails the test.
pub fn build(version: Version) -> Option<&'static Path> {
    static DIRS: [OnceLock<Option<PathBuf>>; 2] = [OnceLock::new(), OnceLock::new()];
    DIRS[version as usize]
        .get_or_init(|| {
            crate::support::cluster::binaries()?;
            let out = Command::new(repo_path("tests/cilium/build.sh"))
                .arg(version.arg())
                .output()
                .expect("build.sh runs");
            assert!(
                out.status.success(),
                "building cilium {} failed:\n{}",
                version.arg(),
                String::from_utf8_lossy(&out.stderr)
            );
            let dir = String::from_utf8(out.stdout).expect("utf-8 path");
            Some(PathBuf::from(dir.trim()))
        })
        .as_deref()
}

/// The Cilium release a build is of (`v1.15.6`, `v1.19.3`).
pub fn release(version: Version) -> String {
    build(version)
        .and_then(|d| std::fs::read_to_string(d.join("version")).ok())
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// A running real cilium-operator on a cluster.
pub struct Operator {
    cluster_dir: PathBuf,
    metrics_url: String,
    log: PathBuf,
}

impl Operator {
    /// Start the operator of `version` on `cluster` with `flags` after the
    /// script's defaults; returns once its identity GC has started. `None`
    /// only when tools are missing on a developer's machine.
    pub fn up(cluster: &Cluster, version: Version, flags: &[&str]) -> Option<Operator> {
        let bin = build(version)?.join("bin");
        let start = || {
            Command::new(repo_path("tests/cilium/operator.sh"))
                .arg("up")
                .arg(cluster.dir())
                .arg(version.arg())
                .args(["--owner", &std::process::id().to_string(), "--"])
                .args(flags)
                .env("KCG_CILIUM_BIN", &bin)
                .output()
                .expect("operator.sh runs")
        };
        // A free port the script picked can be taken before the operator
        // binds it: start again on new ports (as `Cluster::up` does), at
        // most three times. The current release's metrics listener then
        // stops the operator without logging why, so an operator that
        // exited by itself during start is retried too.
        let mut out = start();
        for _ in 0..2 {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if out.status.success()
                || !(stderr.contains("address already in use")
                    || stderr.contains("exited during start"))
            {
                break;
            }
            let _ = Command::new(repo_path("tests/cilium/operator.sh"))
                .arg("down")
                .arg(cluster.dir())
                .output();
            out = start();
        }
        assert!(
            out.status.success(),
            "operator.sh up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env: BTreeMap<String, String> =
            std::fs::read_to_string(cluster.dir().join("operator/env"))
                .expect("operator env")
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        Some(Operator {
            cluster_dir: cluster.dir().to_path_buf(),
            metrics_url: env["METRICS_URL"].clone(),
            log: PathBuf::from(&env["OPERATOR_LOG"]),
        })
    }

    /// Stop and start it again with the same flags: its heartbeat memory
    /// (which identities it saw alive, and when) is gone.
    pub fn restart(&self) {
        let out = Command::new(repo_path("tests/cilium/operator.sh"))
            .arg("restart")
            .arg(&self.cluster_dir)
            .output()
            .expect("operator.sh runs");
        assert!(
            out.status.success(),
            "operator.sh restart failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stop it now (the drop would too).
    pub fn stop(&self) {
        let _ = Command::new(repo_path("tests/cilium/operator.sh"))
            .arg("down")
            .arg(&self.cluster_dir)
            .output();
    }

    /// Its whole log, over restarts.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What its log says about its identity GC passes.
    pub fn passes(&self) -> GcLog {
        GcLog::parse(&self.log())
    }

    /// Its identity GC metrics now: `cilium_operator_identity_gc_runs` and
    /// `cilium_operator_identity_gc_entries`, by label set.
    pub fn metrics(&self) -> GcMetrics {
        GcMetrics::parse(&self.metrics_text())
    }

    /// Its whole `/metrics` text now, as a sysdump saves it.
    pub fn metrics_text(&self) -> String {
        let out = Command::new("curl")
            .args(["-sf", "--max-time", "10", &self.metrics_url])
            .output()
            .expect("curl runs");
        assert!(out.status.success(), "metrics of the operator unreachable");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The operator's identity GC, as its log tells it.
#[derive(Debug, Default, Clone)]
pub struct GcLog {
    /// Identities it marked for later deletion.
    pub marked: BTreeSet<String>,
    /// Passes that ended on a failed mark update, by cause.
    pub mark_errors: Causes,
    /// Passes that ended on a failed delete, by cause.
    pub delete_errors: Causes,
    /// 409s on delete that the pass skipped (1.19 and later).
    pub conflicts_skipped: usize,
}

/// Failed writes by cause.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Causes {
    /// 409 Conflict: the identity changed since the operator read it.
    pub conflict: usize,
    /// 404 Not Found: someone else deleted it.
    pub not_found: usize,
    /// Anything else.
    pub other: usize,
}

impl Causes {
    /// Every pass these ended.
    pub fn total(&self) -> usize {
        self.conflict + self.not_found + self.other
    }

    fn count(&mut self, line: &str) {
        if line.contains("Operation cannot be fulfilled") || line.contains("been modified") {
            self.conflict += 1;
        } else if line.contains("not found") {
            self.not_found += 1;
        } else {
            self.other += 1;
        }
    }
}

impl GcLog {
    /// Read 1.15's logrus lines and the current release's slog lines alike.
    fn parse(log: &str) -> GcLog {
        let mut g = GcLog::default();
        for line in log.lines() {
            let lower = line.to_ascii_lowercase();
            let error = lower.contains("level=error");
            if lower.contains("for later deletion") {
                if error {
                    g.mark_errors.count(line);
                } else if let Some(id) = field(line, "identity") {
                    g.marked.insert(id);
                }
            } else if error && lower.contains("msg=\"deleting unused") {
                g.delete_errors.count(line);
            } else if lower.contains("could not delete identity due to conflict") {
                g.conflicts_skipped += 1;
            }
        }
        g
    }

    /// Every pass a failed write ended.
    pub fn passes_ended(&self) -> usize {
        self.mark_errors.total() + self.delete_errors.total()
    }
}

/// `key=value` or `key="value"` of a log line.
fn field(line: &str, key: &str) -> Option<String> {
    let pat = format!(" {key}=");
    let start = line.find(&pat)? + pat.len();
    let rest = &line[start..];
    let value = match rest.strip_prefix('"') {
        Some(q) => q.split('"').next()?,
        None => rest.split(' ').next()?,
    };
    Some(value.to_string())
}

/// The operator's identity GC gauges and counters, by metric and label set.
#[derive(Debug, Default, Clone)]
pub struct GcMetrics(pub BTreeMap<String, f64>);

impl GcMetrics {
    fn parse(text: &str) -> GcMetrics {
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).expect("metrics parse");
        let mut out = BTreeMap::new();
        for s in scrape.samples {
            if !s.metric.starts_with("cilium_operator_identity_gc_") {
                continue;
            }
            let mut labels: Vec<String> =
                s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.sort();
            let value = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => continue,
            };
            out.insert(format!("{}{{{}}}", s.metric, labels.join(",")), value);
        }
        GcMetrics(out)
    }

    /// The sum of `metric` over the label sets containing every `label=value` given.
    pub fn get(&self, metric: &str, labels: &[&str]) -> f64 {
        self.0
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{metric}{{")))
            .filter(|(k, _)| labels.iter().all(|l| k.contains(l)))
            .map(|(_, v)| v)
            .sum()
    }

    /// Completed passes (`cilium_operator_identity_gc_runs{outcome="success"}`).
    pub fn successful_runs(&self) -> f64 {
        self.get("cilium_operator_identity_gc_runs", &["outcome=success"])
    }
}

/// The agents' summary (`cilium-agents` prints it when it ends). Every
/// field it prints, whether or not a test reads it yet.
#[allow(dead_code)]
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentsSummary {
    pub pods_started: u64,
    pub pods_ended: u64,
    pub allocations: u64,
    pub new_identities: u64,
    pub allocation_errors: u64,
    pub write_errors: u64,
    pub held_identities: Vec<u64>,
    pub pods_running: u64,
    /// Requests by "VERB resource status", e.g. "PUT ciliumidentities 409".
    pub requests: BTreeMap<String, u64>,
    /// Attempts Cilium's allocator refused with `no more available IDs in
    /// configured space`, each attempt of its retries counted (read from its
    /// "Key allocation attempt failed" log record).
    pub allocation_refusals: u64,
    /// Pods refused at least once, with when they got their identity.
    pub waits: Vec<Wait>,
}

/// One pod's wait for an identity, as the agents recorded it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Wait {
    pub pod: String,
    pub first_refused_at: jiff::Timestamp,
    /// When it got its identity; `None`: it never did before the agents ended.
    pub allocated_at: Option<jiff::Timestamp>,
}

impl AgentsSummary {
    /// Requests of `verb` on `resource` with `status`.
    pub fn requests(&self, verb: &str, resource: &str, status: &str) -> u64 {
        self.requests
            .get(&format!("{verb} {resource} {status}"))
            .copied()
            .unwrap_or(0)
    }
}

/// Settings of one run of the agents.
#[derive(Debug, Clone)]
pub struct Agents {
    pub agents: u32,
    pub pods: u32,
    pub churn: Duration,
    pub duration: Duration,
    pub label_sets: u32,
    pub label_prefix: String,
    pub sync_interval: Duration,
    pub end_all: bool,
    pub seed: u64,
    /// The allocator's range (`allocator.WithMin/WithMax`; an agent's: 256..=65535).
    pub ids: (u64, u64),
    /// The context of one `Allocator.Allocate` call (an agent's: a minute).
    pub allocate_timeout: Duration,
    /// A refused pod calls `Allocate` again until the churn ends, rather
    /// than being deleted (as kubelet retries a failed sandbox).
    pub wait_for_identity: bool,
}

impl Default for Agents {
    fn default() -> Self {
        Agents {
            agents: 4,
            pods: 5,
            churn: Duration::from_millis(200),
            duration: Duration::from_secs(10),
            label_sets: 100,
            label_prefix: "app".into(),
            sync_interval: Duration::from_secs(300),
            end_all: false,
            seed: 1,
            ids: (256, 65535),
            allocate_timeout: Duration::from_secs(60),
            wait_for_identity: false,
        }
    }
}

impl Agents {
    /// Run the agents of `version` as the cluster's admin until they end;
    /// their log goes to `cluster_dir/agents-<seed>.log`.
    pub async fn run(&self, cluster: &Cluster, version: Version) -> AgentsSummary {
        self.run_at(cluster.dir(), &cluster.admin_kubeconfig(), version, None)
            .await
    }

    /// [`Agents::run`] with the cluster's directory and kubeconfig (for a
    /// spawned task); when `stop` turns true the agents get SIGTERM, stop
    /// churning and print their summary.
    pub async fn run_at(
        &self,
        dir: &Path,
        kubeconfig: &Path,
        version: Version,
        stop: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> AgentsSummary {
        let bin = build(version)
            .expect("cilium built")
            .join("bin/cilium-agents");
        let log = dir.join(format!("agents-{}.log", self.seed));
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let mut cmd = tokio::process::Command::new(bin);
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--agents", &self.agents.to_string()])
            .args(["--pods", &self.pods.to_string()])
            .args(["--churn", &ms(self.churn)])
            .args(["--duration", &ms(self.duration)])
            .args(["--label-sets", &self.label_sets.to_string()])
            .args(["--label-prefix", &self.label_prefix])
            .args(["--sync-interval", &ms(self.sync_interval)])
            .args(["--seed", &self.seed.to_string()])
            .arg(format!("--end-all={}", self.end_all))
            .args(["--min-id", &self.ids.0.to_string()])
            .args(["--max-id", &self.ids.1.to_string()])
            .args(["--allocate-timeout", &ms(self.allocate_timeout)])
            .arg(format!("--wait-for-identity={}", self.wait_for_identity))
            .stderr(std::fs::File::create(&log).expect("agents log"))
            .kill_on_drop(true);
        let limit = self.duration + Duration::from_secs(120);
        let out = tokio::time::timeout(limit, stoppable(cmd, stop))
            .await
            .expect("the agents ended in time")
            .expect("cilium-agents runs");
        assert!(
            out.status.success(),
            "cilium-agents failed (log {}):\n{}",
            log.display(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "no summary from cilium-agents ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

/// What the server holds: every CiliumIdentity (its pod label set's `app`
/// label, whether it carries the operator's mark) and the identities the
/// CiliumEndpoints use.
#[derive(Debug, Default)]
pub struct World {
    pub identities: BTreeMap<String, Ident>,
    pub used: BTreeSet<String>,
}

/// One CiliumIdentity as the tests judge it.
#[derive(Debug, Clone)]
pub struct Ident {
    /// The `k8s:app` label of its label set (`old-17`, `warm-3`).
    pub app: String,
    /// It carries `io.cilium.heartbeat`.
    pub marked: bool,
    /// The mark's time (RFC 3339, as the operator and the plugin write it).
    pub marked_at: Option<jiff::Timestamp>,
    /// `metadata.uid`: a re-created identity of the same name is another object.
    pub uid: String,
}

impl World {
    /// Read it now, as `admin`. Retries for 30 s: when the operator
    /// registers its release's CRDs, the server answers 429 "storage is
    /// (re)initializing" for a moment.
    pub async fn read(client: &kube::Client) -> World {
        let mut last = None;
        for _ in 0..60 {
            match World::try_read(client).await {
                Ok(w) => return w,
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("identities and endpoints could not be listed: {last:?}");
    }

    async fn try_read(client: &kube::Client) -> Result<World, kube::Error> {
        use crate::support::objects::{api, Kind, HEARTBEAT};
        let lp = kube::api::ListParams::default();
        let ids = api(client, Kind::Identity, None).list(&lp).await?;
        let identities = ids
            .items
            .into_iter()
            .map(|o| {
                // 1.19 copies only the namespace into metadata.labels: the
                // label set is in security-labels.
                let app = o.data["security-labels"]["k8s:app"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let mark = o
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(HEARTBEAT));
                let marked = mark.is_some();
                let marked_at = mark.and_then(|m| m.parse().ok());
                let uid = o.metadata.uid.clone().unwrap_or_default();
                (
                    o.metadata.name.unwrap_or_default(),
                    Ident {
                        app,
                        marked,
                        marked_at,
                        uid,
                    },
                )
            })
            .collect();
        let used = api(client, Kind::Endpoint, None)
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter_map(|o| o.data["status"]["identity"]["id"].as_u64())
            .map(|id| id.to_string())
            .collect();
        Ok(World { identities, used })
    }

    /// Identities of label sets `<prefix>-N` that no endpoint uses.
    pub fn unused(&self, prefix: &str) -> BTreeSet<String> {
        let p = format!("{prefix}-");
        self.identities
            .iter()
            .filter(|(name, i)| i.app.starts_with(&p) && !self.used.contains(*name))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Identities of label sets `<prefix>-N`, used or not. A name alone does
    /// not say which object: a deleted identity's id may be given to a new
    /// identity of another label set.
    pub fn of_label(&self, prefix: &str) -> BTreeSet<String> {
        let p = format!("{prefix}-");
        self.identities
            .iter()
            .filter(|(_, i)| i.app.starts_with(&p))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Identities endpoints use that do not exist: deleted while in use.
    pub fn dangling(&self) -> BTreeSet<String> {
        self.used
            .iter()
            .filter(|id| !self.identities.contains_key(*id))
            .cloned()
            .collect()
    }
}

/// Run `cmd` to its end, sending it SIGTERM once `stop` turns true.
async fn stoppable(
    mut cmd: tokio::process::Command,
    stop: Option<tokio::sync::watch::Receiver<bool>>,
) -> std::io::Result<std::process::Output> {
    cmd.stdout(std::process::Stdio::piped());
    let child = cmd.spawn()?;
    let pid = child.id();
    let output = child.wait_with_output();
    tokio::pin!(output);
    let Some(mut stop) = stop else {
        return output.await;
    };
    tokio::select! {
        out = &mut output => out,
        _ = stopped(&mut stop) => {
            if let Some(pid) = pid {
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
            output.await
        }
    }
}

/// Returns once `stop` is true (never if its sender is gone first).
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    loop {
        let now = *stop.borrow_and_update();
        if now {
            return;
        }
        if stop.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
