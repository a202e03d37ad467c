//! The engine's side of the shared test world: how a test runs the engine
//! (`cilium_gc::run`, settings built as plain values: the engine has no command
//! line) against a [`World`] from `cilium-gc-testkit`, and settings for the
//! flags a test names. The plugin's flags map to these settings one to one
//! (`kubectl_cilium_gc::cli`'s unit tests `clap_defaults_are_the_engine_defaults`
//! and `narrowing_flags_become_scan_settings` pin that).

// Each test binary uses part of it.
#![allow(dead_code, unused_imports)]

use std::collections::BTreeSet;

use cilium_gc::report::Report;
use cilium_gc::Exit;
use cilium_gc::Stop;
use cilium_gc::Ui;
use cilium_gc::{ConnectSettings, GcSettings, Pacing, ScanSettings, WriteSettings};
use cilium_gc_documents::report::{ItemsMode, Outcome};
use serde_json::Value;

pub use cilium_gc_testkit::{calm, mark_of, stale_names, Fleet, World, TEST_TIMEOUT};

/// What the engine's tests do with a [`World`].
pub trait Engine {
    /// Connection settings pointing at the simulator.
    fn kube(&self) -> ConnectSettings;
    /// One run with `settings`, to its report.
    async fn gc(&self, settings: &GcSettings) -> (Report, Exit);
}

impl Engine for World {
    fn kube(&self) -> ConnectSettings {
        kube_of(&self.kubeconfig)
    }

    async fn gc(&self, settings: &GcSettings) -> (Report, Exit) {
        gc_at(&self.kube(), settings, &Stop::default()).await
    }
}

/// Connection settings with only `--kubeconfig <kubeconfig>`.
pub fn kube_of(kubeconfig: &std::path::Path) -> ConnectSettings {
    ConnectSettings {
        kubeconfig: Some(kubeconfig.to_owned()),
        ..ConnectSettings::default()
    }
}

/// One run against `kube` with `settings` and a `stop` the test controls.
pub async fn gc_at(kube: &ConnectSettings, settings: &GcSettings, stop: &Stop) -> (Report, Exit) {
    let ui = Ui::headless();
    let run = cilium_gc::run(kube, settings, stop, &ui);
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("gc run finished in time")
}

/// `scan` with `scan`'s listing and narrowing.
pub fn scan_with(scan: ScanSettings) -> GcSettings {
    GcSettings::for_scan(scan).expect("settings valid")
}

/// `scan` with every default.
pub fn scan() -> GcSettings {
    scan_with(ScanSettings::default())
}

/// `delete` with `scan`'s listing and narrowing and `writes`.
pub fn delete_with(scan: ScanSettings, writes: WriteSettings) -> GcSettings {
    GcSettings::for_delete(scan, writes).expect("settings valid")
}

/// `delete --yes`: every other write setting at its default.
pub fn yes() -> WriteSettings {
    WriteSettings {
        yes: true,
        ..WriteSettings::default()
    }
}

/// `delete --yes --qps 0`.
pub fn unlimited() -> WriteSettings {
    WriteSettings {
        pacing: Pacing {
            qps: 0.0,
            ..yes().pacing
        },
        ..yes()
    }
}

/// `delete --dry-run=server --qps 0` (no `--yes`: nothing is deleted).
pub fn server_dry_run() -> GcSettings {
    let writes = WriteSettings {
        pacing: Pacing {
            qps: 0.0,
            ..WriteSettings::default().pacing
        },
        dry_run: true,
        ..WriteSettings::default()
    };
    delete_with(ScanSettings::default(), writes)
}

/// `--items all`.
pub fn all_items() -> ScanSettings {
    ScanSettings {
        items: ItemsMode::All,
        ..ScanSettings::default()
    }
}

/// `delete --yes --qps <qps> --concurrency <concurrency>`, with
/// `--items all` when `all_items`.
pub fn delete(qps: f64, concurrency: u32, all: bool) -> GcSettings {
    let scan = if all {
        all_items()
    } else {
        ScanSettings::default()
    };
    delete_with(
        scan,
        WriteSettings {
            pacing: Pacing {
                qps,
                concurrency,
                ..yes().pacing
            },
            ..yes()
        },
    )
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

/// The report as JSON, for schema validation.
pub fn json(report: &Report) -> Value {
    serde_json::to_value(report).expect("report serializes")
}

/// Fail with the schema errors, if any (`schema/report-v1.json`, draft
/// 2020-12, formats checked).
pub fn assert_valid(report: &Value) {
    cilium_gc_testkit::schema::assert_valid_report(report);
}
