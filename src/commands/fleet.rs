//! What a selection of several contexts changes: which flags fit it
//! ([`fleet_flags_fit`]), and `diagnose` over it ([`diagnose`]): each
//! cluster's diagnosis as `diagnose --context <it>` writes it, in one fleet
//! diagnosis, and the exit a fleet scan would give (0 only when every
//! cluster was diagnosed, else the most severe cluster's). `scan` and
//! `delete` over a fleet are `scan`'s, through the shared `gc_run`.

use cilium_gc::Exit;
use cilium_gc::Stop;

use crate::cli::{Cli, Command, DiagnoseArgs, KubeArgs};
use crate::output::{usage_error, write_stdout};
use crate::views::fleet::render_fleet_diagnosis;
use crate::views::format::{stdout_style, ColorChoice};

/// Diagnose every selected context and write one fleet diagnosis.
pub(super) async fn diagnose(
    kube: &KubeArgs,
    args: DiagnoseArgs,
    stop: &Stop,
    color: ColorChoice,
) -> Exit {
    #[cfg(feature = "sim")]
    if args.demo_scenario.is_some() {
        return usage_error("--demo-scenario runs one simulated cluster: give one --context");
    }
    let contexts = match super::contexts::select_contexts(kube) {
        Ok(c) => c,
        Err(e) => return usage_error(&e.to_string()),
    };
    crate::signals::listen(stop);
    let (doc, exit) = cilium_gc_fleet::diagnose_fleet(
        &kube.settings(),
        &args.settings(),
        &contexts,
        args.parallel,
        stop,
    )
    .await;
    let style = stdout_style(color);
    let mut buf = Vec::new();
    let rendered = render_fleet_diagnosis(&doc, args.output, style, &mut buf);
    if let Err(e) = rendered {
        eprintln!("error: cannot render the diagnosis: {e}");
        return Exit::Unexpected;
    }
    match write_stdout(&buf) {
        Exit::Success => exit,
        other => other,
    }
}

/// Flags that do not fit the selection of clusters (a usage error).
#[derive(Debug, thiserror::Error)]
pub(super) enum FleetFlagsError {
    /// A fleet flag with one cluster.
    #[error("--redact, --cluster-label and --no-diagnosis apply to a fleet run: give several --context, a glob, --all-contexts or --context-regex")]
    FleetFlagsWithOneCluster,
    /// Several clusters with a command that works on one.
    #[error("several contexts (--context repeated or a glob, --all-contexts, --context-regex) work with scan, delete and diagnose only; give one --context")]
    FleetWithOneClusterCommand,
}

/// Fleet flags only with a fleet selection, and a fleet selection only
/// where several clusters make sense (`scan`, `delete`).
pub(super) fn fleet_flags_fit(cli: &Cli, fleet: bool) -> Result<(), FleetFlagsError> {
    let scan = match &cli.command {
        Command::Scan(a) => Some(a),
        Command::Delete(d) => Some(&d.scan),
        _ => None,
    };
    match scan {
        Some(_) if fleet => Ok(()),
        Some(a) if a.redact || a.no_diagnosis || !a.cluster_label.is_empty() => {
            Err(FleetFlagsError::FleetFlagsWithOneCluster)
        }
        Some(_) => Ok(()),
        None if fleet && matches!(cli.command, Command::Diagnose(_)) => Ok(()),
        None if fleet => Err(FleetFlagsError::FleetWithOneClusterCommand),
        None => Ok(()),
    }
}
