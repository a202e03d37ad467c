//! The commands: a parsed command line dispatched to the subcommand family
//! that serves it, which validates its flags once, runs the engine and
//! hands what it returns to the views and `output` (the document on stdout,
//! nothing else there).
//!
//! One module per family: `scan` (scan and delete), `diagnose`, `fleet`
//! (what several contexts change, and `diagnose` over them), `demo`. They
//! never call each other: what two of them share has a module of its own
//! (`gc_run`: the engine's scan or delete and its outputs, on one cluster
//! or a fleet; `contexts`: which contexts a fleet covers; `sim`: a
//! simulated cluster).

use cilium_gc::Exit;
use cilium_gc::GcSettings;
use cilium_gc::Stop;
use cilium_gc_documents::report::Tool;

use crate::cli::{Cli, Command, SchemaKind};
use crate::output::{print_json, println_or_pipe, usage_error, write_stdout};

mod contexts;
#[cfg(feature = "sim")]
mod demo;
mod diagnose;
mod fleet;
mod gc_run;
mod progress;
mod scan;
#[cfg(feature = "sim")]
mod sim;

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
    if let Err(e) = fleet::fleet_flags_fit(&cli, fleet) {
        return usage_error(&e.to_string());
    }
    match cli.command {
        Command::Scan(args) => {
            let settings = GcSettings::for_scan(args.settings());
            scan::run(&cli.kube, fleet, settings, &args, (&stop, cli.color)).await
        }
        Command::Delete(args) => {
            let settings = GcSettings::for_delete(args.scan.settings(), args.writes());
            scan::run(&cli.kube, fleet, settings, &args.scan, (&stop, cli.color)).await
        }
        #[cfg(feature = "sim")]
        Command::Demo(args) => demo::run(args, &stop, cli.color).await,
        Command::Diagnose(args) if fleet => {
            fleet::diagnose(&cli.kube, args, &stop, cli.color).await
        }
        Command::Diagnose(args) => diagnose::run(&kube, args, &stop, cli.color).await,
        Command::Schema(args) => print_json(&match args.kind {
            SchemaKind::Report => cilium_gc_documents::report::schema(),
            SchemaKind::FleetReport => cilium_gc_documents::fleet::schema(),
            SchemaKind::Diagnosis => cilium_gc_documents::diagnosis::schema(),
            SchemaKind::FleetDiagnosis => cilium_gc_documents::fleet::diagnosis_schema(),
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
