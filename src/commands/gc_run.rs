//! `scan` and `delete`: run the engine with signals and the terminal, then
//! write the report.

use cilium_gc::report::Report;
use cilium_gc::Exit;
use cilium_gc::Stop;
use cilium_gc::Ui;
use cilium_gc::{ConnectSettings, GcSettings, SettingsError};

use crate::cli::ScanArgs;
use crate::output::{emit, usage_error};
use crate::progress::Terminal;
use crate::render::ColorChoice;

/// Run scan/delete with signal handling and write the report; settings that
/// did not validate are a usage error (exit 2) before any network call.
pub async fn gc_and_emit(
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
pub async fn gc_report_and_emit(
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
    let report = crate::next_steps::with_next_steps(report);
    let exit = emit(&report, args, exit, color);
    export_metrics(&report, args).await;
    (exit, Some(report))
}

/// `--metrics-file` and `--pushgateway`. A failure is one clear line on
/// stderr and never changes the exit code: the run itself did what it did,
/// and the alert on `last_success_timestamp_seconds` catches a push that
/// keeps failing.
pub async fn export_metrics(report: &Report, args: &ScanArgs) {
    if let Some(path) = &args.metrics_file {
        if let Err(e) = crate::metrics::write_textfile(path, report) {
            eprintln!("error: cannot write metrics file {}: {e}", path.display());
        }
    }
    if let Some(url) = &args.pushgateway {
        if let Err(e) = crate::metrics::push(url, &args.pushgateway_job, report).await {
            eprintln!("error: metrics not pushed: {}", error_chain(&e));
        }
    }
}

/// `--metrics-file` and `--pushgateway` of a fleet run: one textfile with
/// every cluster's series labelled `cluster`, and one Pushgateway group per
/// cluster. `labels` are the clusters' labels, in the report's order.
/// Clusters the run never started have no metrics (the textfile keeps
/// nothing of them; their Pushgateway group keeps its last push).
pub async fn export_fleet_metrics(
    report: &cilium_gc::fleet::FleetReport,
    labels: &[String],
    args: &ScanArgs,
) {
    let clusters: Vec<(&str, &Report)> = report
        .clusters
        .iter()
        .zip(labels)
        .filter_map(|(e, label)| Some((label.as_str(), e.report.as_ref()?)))
        .collect();
    if let Some(path) = &args.metrics_file {
        if let Err(e) = crate::metrics::write_fleet_textfile(path, &clusters) {
            eprintln!("error: cannot write metrics file {}: {e}", path.display());
        }
    }
    if let Some(url) = &args.pushgateway {
        for (label, r) in &clusters {
            if let Err(e) = crate::metrics::push_cluster(url, &args.pushgateway_job, label, r).await
            {
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
