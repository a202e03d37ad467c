//! A simulated cluster for a test, and ways to run the real tool against it:
//! through the library (`gc::run`, real kube client over HTTPS) or through
//! the built binary, exactly as a user would.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use cilium_gc::policy::parse_mark;
use cilium_gc::report::{Outcome, Report};
use cilium_gc::Exit;
use cilium_gc::Stop;
use cilium_gc::Ui;
use cilium_gc::{ConnectSettings, GcSettings};
use cilium_gc_sim::{Scenario, Simulator};
use clap::Parser;
use jiff::Timestamp;
use kubectl_cilium_gc::cli::{Cli, Command};
use serde_json::Value;

/// Every test gives up after this long rather than hang CI.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(240);

/// A running simulated cluster with its kubeconfig on disk.
pub struct World {
    /// The simulator.
    pub sim: Simulator,
    /// Scratch directory (kubeconfig, reports).
    pub dir: tempfile::TempDir,
    /// The kubeconfig the simulator wrote.
    pub kubeconfig: PathBuf,
}

impl World {
    /// Start `scenario` and write its kubeconfig.
    pub async fn start(scenario: Scenario) -> World {
        let sim = Simulator::start(scenario).await.expect("simulator starts");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig)
            .expect("kubeconfig written");
        World {
            sim,
            dir,
            kubeconfig,
        }
    }

    /// Start a preset.
    pub async fn preset(name: &str) -> World {
        World::start(Scenario::preset(name).expect("preset exists")).await
    }

    /// Connection flags pointing at the simulator.
    pub fn kube(&self) -> ConnectSettings {
        ConnectSettings {
            kubeconfig: Some(self.kubeconfig.clone()),
            ..ConnectSettings::default()
        }
    }

    /// Run `scan ...` or `delete ...` through the library.
    pub async fn gc(&self, args: &[&str]) -> (Report, Exit) {
        self.gc_with_stop(args, &Stop::default()).await
    }

    /// As [`World::gc`], with a stop flag the test controls.
    pub async fn gc_with_stop(&self, args: &[&str], stop: &Stop) -> (Report, Exit) {
        gc_at(self.kube(), args, stop).await
    }

    /// Run the built binary with `--kubeconfig` to the simulator.
    pub async fn bin(&self, args: &[&str]) -> Output {
        let mut cmd = binary();
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        let out = tokio::time::timeout(TEST_TIMEOUT, cmd.output())
            .await
            .expect("binary finished in time")
            .expect("binary runs");
        out
    }

    /// Identity names on the server now.
    pub fn names(&self) -> BTreeSet<String> {
        self.sim.identity_names().into_iter().collect()
    }

    /// Identities that are stale right now by the operator's rules (unused,
    /// marked longer ago than `timeout`, in the local range).
    pub fn stale_now(&self, timeout: Duration) -> BTreeSet<String> {
        stale_names(&self.sim, timeout)
    }
}

/// [`World::stale_now`] for any simulator.
pub fn stale_names(sim: &Simulator, timeout: Duration) -> BTreeSet<String> {
    let used = sim.referenced_ids();
    let now = sim.now();
    sim.identity_names()
        .into_iter()
        .filter(|name| {
            // The one id rule, shared by engine and simulator.
            let Some(id) = cilium_gc::model::parse_id(name) else {
                return false;
            };
            if used.contains(&id) || !(256..=65535).contains(&id) {
                return false;
            }
            let Some(obj) = sim.identity(name) else {
                return false;
            };
            mark_of(&obj).is_some_and(|m| older_than(m, now, timeout))
        })
        .collect()
}

/// Run `scan ...` or `delete ...` through the library against `kube`.
pub async fn gc_at(kube: ConnectSettings, args: &[&str], stop: &Stop) -> (Report, Exit) {
    let mut argv = vec!["kubectl-cilium_gc"];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).expect("test flags parse");
    let settings = match cli.command {
        Command::Scan(a) => GcSettings::for_scan(a.settings()),
        Command::Delete(d) => GcSettings::for_delete(d.scan.settings(), d.writes()),
        other => panic!("not a gc command: {other:?}"),
    }
    .expect("settings valid");
    let ui = Ui::headless();
    let run = cilium_gc::run(&kube, &settings, stop, &ui);
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("gc run finished in time")
}

/// The names of the report's items that ended in `outcome`.
pub fn names_with(report: &Report, outcome: Outcome) -> BTreeSet<String> {
    report
        .items
        .iter()
        .filter(|i| i.outcome == outcome)
        .map(|i| i.name.clone())
        .collect()
}

/// The heartbeat mark of an identity object, parsed.
pub fn mark_of(obj: &Value) -> Option<Timestamp> {
    obj.pointer("/metadata/annotations/io.cilium.heartbeat")
        .and_then(Value::as_str)
        .and_then(parse_mark)
}

fn older_than(mark: Timestamp, now: Timestamp, timeout: Duration) -> bool {
    now.duration_since(mark)
        .try_into()
        .is_ok_and(|age: Duration| age > timeout)
}

/// The built binary, with a clean environment for colours and kubeconfig.
pub fn binary() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-cilium_gc"));
    cmd.env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    cmd
}

/// The report as JSON, for schema validation.
pub fn json(report: &Report) -> Value {
    serde_json::to_value(report).expect("report serializes")
}

/// Fail with the schema errors, if any.
pub fn assert_valid(report: &Value) {
    let schema = super::schema::committed();
    let errors = super::schema::errors(&schema, report);
    assert!(
        errors.is_empty(),
        "report does not validate:\n{}",
        errors.join("\n")
    );
}

/// Fail, showing stderr, unless the command succeeded.
pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// DELETE requests that reached the server later than `grace` after `at`
/// (server clock): with a stop at `at`, only in-flight ones may arrive.
pub fn deletes_after(
    sim: &Simulator,
    at: Timestamp,
    grace: jiff::SignedDuration,
) -> Vec<cilium_gc_sim::RequestRecord> {
    sim.ledger()
        .requests
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.time > at + grace)
        .collect()
}
