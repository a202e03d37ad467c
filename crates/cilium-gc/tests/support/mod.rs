//! A simulated cluster for an engine test, run through `gc::run` with
//! settings built as plain values (the engine has no command line), and the
//! report checked against the committed schema. Moved from `tests/it`'s
//! `support/world.rs`; the plugin's flags map to these settings one to one
//! (`kubectl_cilium_gc::cli`'s unit test `clap_defaults_are_the_engine_defaults`
//! pins that the defaults agree).

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use cilium_gc::policy::parse_mark;
use cilium_gc::report::{ItemsMode, Report};
use cilium_gc::Exit;
use cilium_gc::Stop;
use cilium_gc::Ui;
use cilium_gc::{ConnectSettings, GcSettings, ScanSettings, WriteSettings};
use cilium_gc_sim::{Scenario, Simulator};
use jiff::Timestamp;
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

    /// Connection settings pointing at the simulator.
    pub fn kube(&self) -> ConnectSettings {
        ConnectSettings {
            kubeconfig: Some(self.kubeconfig.clone()),
            ..ConnectSettings::default()
        }
    }

    /// One run with `settings`.
    pub async fn gc(&self, settings: &GcSettings) -> (Report, Exit) {
        let ui = Ui::headless();
        let stop = Stop::default();
        let kube = self.kube();
        let run = cilium_gc::run(&kube, settings, &stop, &ui);
        tokio::time::timeout(TEST_TIMEOUT, run)
            .await
            .expect("gc run finished in time")
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

/// `delete --yes --qps <qps> --concurrency <concurrency>`, with
/// `--items all` when `all_items`.
pub fn delete(qps: f64, concurrency: u32, all_items: bool) -> GcSettings {
    let scan = ScanSettings {
        items: if all_items {
            ItemsMode::All
        } else {
            ItemsMode::default()
        },
        ..ScanSettings::default()
    };
    let writes = WriteSettings {
        yes: true,
        qps,
        concurrency,
        ..WriteSettings::default()
    };
    GcSettings::for_delete(scan, writes).expect("settings valid")
}

/// The report as JSON, for schema validation.
pub fn json(report: &Report) -> Value {
    serde_json::to_value(report).expect("report serializes")
}

/// Fail with the schema errors, if any (`schema/report-v1.json`, draft
/// 2020-12, formats checked).
pub fn assert_valid(report: &Value) {
    let path = cilium_gc_testkit::repo_path("schema/report-v1.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("schema parses");
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "report does not validate:\n{}",
        errors.join("\n")
    );
}
