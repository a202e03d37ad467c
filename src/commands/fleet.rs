//! `scan` and `delete` over several contexts: select them from the
//! kubeconfig, run the engine's fleet with signals and a progress line per
//! cluster, then write the fleet report and the metrics labelled per cluster.

use std::io::Write as _;
use std::sync::Arc;

use cilium_gc::fleet::{self, FleetReport, FleetSettings};
use cilium_gc::kubeconfig_contexts;
use cilium_gc::Exit;
use cilium_gc::Stop;
use cilium_gc::{GcSettings, SettingsError};

use crate::cli::{KubeArgs, ScanArgs};
use crate::output::usage_error;
use crate::progress::FleetTerminal;
use crate::render::{stdout_style, write_report_file, ColorChoice};

/// Run scan/delete on every selected context and write the fleet report.
/// Flags that cannot work on several clusters, and a selection that
/// matches nothing, are usage errors (exit 2) before any cluster is
/// contacted.
pub async fn fleet_and_emit(
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
    let contexts = match select_contexts(kube) {
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
    report
        .clusters
        .update(|entry| entry.report = entry.report.take().map(crate::next_steps::with_next_steps));
    let exit = emit(&report, args, exit, color);
    let labels = cluster_labels(&contexts, &args.cluster_label);
    crate::gc_command::export_fleet_metrics(&report, &labels, args).await;
    exit
}

/// Why the flags select no fleet (a usage error, exit 2). Each message
/// carries its cause (printed as one line).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SelectContextsError {
    /// `--server` or `--cluster` with several contexts.
    #[error("--server and --cluster point every context at one server: with several contexts, each context's own cluster is used")]
    OneServer,
    /// The kubeconfig could not be read.
    #[error("{0}")]
    Kubeconfig(cilium_gc::ConnectError),
    /// The selection matched nothing usable.
    #[error("{0}")]
    Select(fleet::SelectError),
}

/// The contexts the flags select, from the kubeconfig they name.
pub(crate) fn select_contexts(kube: &KubeArgs) -> Result<Vec<String>, SelectContextsError> {
    if kube.server.is_some() || kube.cluster.is_some() {
        return Err(SelectContextsError::OneServer);
    }
    let (available, _) =
        kubeconfig_contexts(kube.kubeconfig.as_deref()).map_err(SelectContextsError::Kubeconfig)?;
    kube.context_filter()
        .select(&available)
        .map_err(SelectContextsError::Select)
}

/// The metrics' `cluster` label of each context: `--cluster-label`, else
/// the context name.
pub fn cluster_labels(contexts: &[String], chosen: &[(String, String)]) -> Vec<String> {
    contexts
        .iter()
        .map(|c| {
            chosen
                .iter()
                .rev()
                .find(|(ctx, _)| ctx == c)
                .map_or_else(|| c.clone(), |(_, l)| l.clone())
        })
        .collect()
}

/// Write the fleet report: to stdout as `-o` says, and to `--report-file`
/// (JSON). The exit is the fleet's, or 1 when the report could not be
/// written.
fn emit(report: &FleetReport, args: &ScanArgs, exit: Exit, color: ColorChoice) -> Exit {
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
    let written = crate::render::write_document(
        report,
        args.output,
        || crate::render::fleet_text(report, style),
        || crate::markdown::fleet(report),
        &mut out,
    )
    .and_then(|()| out.flush());
    match written {
        Ok(()) => exit,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit,
        Err(e) => {
            eprintln!("error: writing the report to stdout: {e}");
            Exit::Unexpected
        }
    }
}
