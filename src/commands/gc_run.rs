//! The engine's scan or delete, run with signals and the terminal on one
//! cluster or on a fleet, then the report written and the metrics exported
//! (shared by `scan`/`delete` and `demo`).

use std::io::Write as _;
use std::sync::Arc;

use cilium_gc::report::Report;
use cilium_gc::Exit;
use cilium_gc::Stop;
use cilium_gc::Ui;
use cilium_gc::{ConnectSettings, GcSettings, SettingsError};
use cilium_gc_fleet as fleet;
use cilium_gc_fleet::{FleetReport, FleetSettings};

use super::progress::{FleetTerminal, Terminal};
use crate::cli::{KubeArgs, ScanArgs};
use crate::output::metrics;
use crate::output::{emit, usage_error};
use crate::views::fleet::render_fleet_report;
use crate::views::format::{stdout_style, write_report_file, ColorChoice};

/// Run scan/delete with signal handling and write the report; settings that
/// did not validate are a usage error (exit 2) before any network call.
pub(super) async fn gc_and_emit(
    kube: &ConnectSettings,
    settings: Result<GcSettings, SettingsError>,
    args: &ScanArgs,
    stop: &Stop,
    color: ColorChoice,
) -> Exit {
    gc_report_and_emit(kube, settings, args, stop, color)
        .await
        .0
}

/// As [`gc_and_emit`], and hands back the report (`None` when the settings
/// were refused before any run).
pub(super) async fn gc_report_and_emit(
    kube: &ConnectSettings,
    settings: Result<GcSettings, SettingsError>,
    args: &ScanArgs,
    stop: &Stop,
    color: ColorChoice,
) -> (Exit, Option<Report>) {
    let settings = match settings {
        Ok(s) => s,
        Err(e) => return (usage_error(&e.to_string()), None),
    };
    crate::signals::listen(stop);
    let ui = Ui::new(Terminal::detect());
    let (report, exit) = cilium_gc::run(kube, &settings, stop, &ui).await;
    let report = crate::views::next_steps::with_next_steps(report);
    let exit = emit(
        &report,
        (args.output, args.report_file.as_deref()),
        exit,
        color,
    );
    export_metrics(&report, args).await;
    (exit, Some(report))
}

/// `--metrics-file` and `--pushgateway`. A failure is one clear line on
/// stderr and never changes the exit code: the run itself did what it did,
/// and the alert on `last_success_timestamp_seconds` catches a push that
/// keeps failing.
async fn export_metrics(report: &Report, args: &ScanArgs) {
    if let Some(path) = &args.metrics_file {
        if let Err(e) = metrics::write_textfile(path, report) {
            eprintln!("error: cannot write metrics file {}: {e}", path.display());
        }
    }
    if let Some(url) = &args.pushgateway {
        if let Err(e) = metrics::push(url, &args.pushgateway_job, report).await {
            eprintln!("error: metrics not pushed: {}", error_chain(&e));
        }
    }
}

/// `--metrics-file` and `--pushgateway` of a fleet run: one textfile with
/// every cluster's series labelled `cluster`, and one Pushgateway group per
/// cluster. `labels` are the clusters' labels, in the report's order.
/// Clusters the run never started have no metrics (the textfile keeps
/// nothing of them; their Pushgateway group keeps its last push).
async fn export_fleet_metrics(report: &FleetReport, labels: &[String], args: &ScanArgs) {
    let clusters: Vec<(&str, &Report)> = report
        .clusters
        .iter()
        .zip(labels)
        .filter_map(|(e, label)| Some((label.as_str(), e.report.as_ref()?)))
        .collect();
    if let Some(path) = &args.metrics_file {
        if let Err(e) = metrics::write_fleet_textfile(path, &clusters) {
            eprintln!("error: cannot write metrics file {}: {e}", path.display());
        }
    }
    if let Some(url) = &args.pushgateway {
        for (label, r) in &clusters {
            if let Err(e) = metrics::push_cluster(url, &args.pushgateway_job, label, r).await {
                eprintln!("error: metrics of {label} not pushed: {}", error_chain(&e));
            }
        }
    }
}

/// `error` and its sources, `: `-separated, on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut s = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        s.push_str(": ");
        s.push_str(&e.to_string());
        source = e.source();
    }
    s
}

/// Run scan/delete on every selected context and write the fleet report.
/// Flags that cannot work on several clusters, and a selection that
/// matches nothing, are usage errors (exit 2) before any cluster is
/// contacted.
pub(super) async fn fleet_and_emit(
    kube: &KubeArgs,
    settings: Result<GcSettings, SettingsError>,
    args: &ScanArgs,
    stop: &Stop,
    color: ColorChoice,
) -> Exit {
    let settings = match settings {
        Ok(s) => s,
        Err(e) => return usage_error(&e.to_string()),
    };
    let contexts = match super::contexts::select_contexts(kube) {
        Ok(c) => c,
        Err(e) => return usage_error(&e.to_string()),
    };
    if let Some((unknown, _)) = args
        .cluster_label
        .iter()
        .find(|(c, _)| !contexts.contains(c))
    {
        return usage_error(&format!(
            "--cluster-label: context {unknown:?} is not one of the selected contexts"
        ));
    }
    crate::signals::listen(stop);
    let fleet = FleetSettings {
        contexts: contexts.clone(),
        parallel: args.parallel,
        diagnose: !args.no_diagnosis,
        redact: args.redact,
    };
    let observer = Arc::new(FleetTerminal::detect(&contexts));
    let (report, exit) =
        fleet::run_fleet(&kube.settings(), &settings, &fleet, stop, observer.clone()).await;
    observer.finish();
    let mut report = report;
    report.clusters.update(|entry| {
        entry.report = entry
            .report
            .take()
            .map(crate::views::next_steps::with_next_steps)
    });
    let exit = emit_fleet(&report, args, exit, color);
    let labels = super::contexts::cluster_labels(&contexts, &args.cluster_label);
    export_fleet_metrics(&report, &labels, args).await;
    exit
}

/// Write the fleet report: to stdout as `-o` says, and to `--report-file`
/// (JSON). The exit is the fleet's, or 1 when the report could not be
/// written.
fn emit_fleet(report: &FleetReport, args: &ScanArgs, exit: Exit, color: ColorChoice) -> Exit {
    let mut exit = exit;
    if let Some(path) = &args.report_file {
        if let Err(e) = write_report_file(path, report) {
            eprintln!("error: cannot write report file {}: {e}", path.display());
            exit = exit.max(Exit::Unexpected);
        }
    }
    let style = stdout_style(color);
    // Streamed to stdout: the clusters are read back from disk one at a
    // time, so the document is never whole in memory.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written =
        render_fleet_report(report, args.output, style, &mut out).and_then(|()| out.flush());
    match written {
        Ok(()) => exit,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit,
        Err(e) => {
            eprintln!("error: writing the report to stdout: {e}");
            Exit::Unexpected
        }
    }
}
