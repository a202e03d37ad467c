//! Dispatch a parsed command line to the subcommand that serves it, and
//! write its output: the report on stdout, nothing else there.

use cilium_gc::report::Tool;
use cilium_gc::Exit;
use cilium_gc::GcSettings;
use cilium_gc::Stop;

use crate::cli::{Cli, Command, SchemaKind};
use crate::fleet_command::fleet_and_emit;
use crate::gc_command::gc_and_emit;
use crate::output::{print_json, println_or_pipe, usage_error, write_stdout};

/// Run the command; returns the exit status. Errors are printed once, on
/// stderr, as one line.
pub async fn run(cli: Cli) -> Exit {
    let stop = Stop::default();
    if matches!(
        cli.command,
        Command::Scan(_) | Command::Delete(_) | Command::Diagnose(_)
    ) {
        if let Err(e) = crate::cli::validate_kube_args(&cli.kube) {
            return usage_error(&e.to_string());
        }
    }
    crate::crash::stop_on_panic(&stop);
    let kube = cli.kube.settings();
    let fleet = cli.kube.context_filter().is_fleet();
    if let Err(e) = fleet_flags_fit(&cli, fleet) {
        return usage_error(&e.to_string());
    }
    match cli.command {
        Command::Scan(args) => {
            let settings = GcSettings::for_scan(args.settings());
            if fleet {
                return fleet_and_emit(&cli.kube, settings, &args, &stop, cli.color).await;
            }
            gc_and_emit(&kube, settings, &args, &stop, cli.color).await
        }
        Command::Delete(args) => {
            let settings = GcSettings::for_delete(args.scan.settings(), args.writes());
            if fleet {
                return fleet_and_emit(&cli.kube, settings, &args.scan, &stop, cli.color).await;
            }
            gc_and_emit(&kube, settings, &args.scan, &stop, cli.color).await
        }
        #[cfg(feature = "sim")]
        Command::Demo(args) => crate::demo::run(args, &stop, cli.color).await,
        Command::Diagnose(args) if fleet => {
            crate::diagnose::run_fleet(&cli.kube, args, &stop, cli.color).await
        }
        Command::Diagnose(args) => crate::diagnose::run(&kube, args, &stop, cli.color).await,
        Command::Schema(args) => print_json(&match args.kind {
            SchemaKind::Report => cilium_gc::report::schema(),
            SchemaKind::FleetReport => cilium_gc::fleet::schema(),
            SchemaKind::Diagnosis => cilium_gc::diagnose::schema(),
            SchemaKind::FleetDiagnosis => cilium_gc::fleet::diagnosis_schema(),
        }),
        Command::Version => {
            let t = Tool::current();
            let commit = t.commit.as_deref().unwrap_or("unknown");
            println_or_pipe(&format!("{} {} (commit {commit})", t.name, t.version))
        }
        Command::Completion { shell } => {
            // Completion scripts complete the executable, whose name has no
            // space (clap_complete cannot walk a bin name with one).
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cmd, "kubectl-cilium_gc", &mut buf);
            write_stdout(&buf)
        }
        Command::Man => {
            let mut buf = Vec::new();
            match clap_mangen::Man::new(crate::cli::command("kubectl-cilium_gc")).render(&mut buf) {
                Ok(()) => write_stdout(&buf),
                Err(e) => usage_error(&e.to_string()),
            }
        }
    }
}

/// Flags that do not fit the selection of clusters (a usage error).
#[derive(Debug, thiserror::Error)]
enum FleetFlagsError {
    /// A fleet flag with one cluster.
    #[error("--redact, --cluster-label and --no-diagnosis apply to a fleet run: give several --context, a glob, --all-contexts or --context-regex")]
    FleetFlagsWithOneCluster,
    /// Several clusters with a command that works on one.
    #[error("several contexts (--context repeated or a glob, --all-contexts, --context-regex) work with scan, delete and diagnose only; give one --context")]
    FleetWithOneClusterCommand,
}

/// Fleet flags only with a fleet selection, and a fleet selection only
/// where several clusters make sense (`scan`, `delete`).
fn fleet_flags_fit(cli: &Cli, fleet: bool) -> Result<(), FleetFlagsError> {
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
