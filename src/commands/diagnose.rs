//! `diagnose` as the CLI runs it: signals, `--demo-scenario`, output, exit
//! code. The diagnosis itself ([`mod@cilium_gc_diagnose`]) is the engine's.
//!
//! *Exit codes:* 0 when a diagnosis was written, whatever it found —
//! findings never change the exit code, so a CronJob can archive the
//! output without treating a full identity space as its own failure; 2 for
//! flag, kubeconfig, connection and permission problems; 3 when the
//! CiliumIdentity CRD is not installed; 130/143 on SIGINT/SIGTERM.
//!
//! Over several contexts (`--context` repeated or a glob, `--all-contexts`,
//! `--context-regex`) it is `fleet`'s.

use cilium_gc::ConnectSettings;
use cilium_gc::Exit;
use cilium_gc::{Stop, StopReason};
use cilium_gc_diagnose::{diagnose, DiagnoseError, Diagnosis};

use crate::cli::DiagnoseArgs;
use crate::views::diagnosis::render as render_diagnosis;
use crate::views::format::{stdout_style, ColorChoice};

/// Why `diagnose` wrote nothing.
enum Failed {
    /// The engine could not diagnose (its exit code).
    Diagnose(DiagnoseError),
    /// `--demo-scenario` could not start its cluster (exit 2).
    #[cfg(feature = "sim")]
    Demo(super::sim::DemoError),
}

/// `diagnose` as the CLI runs it.
pub(super) async fn run(
    kube: &ConnectSettings,
    args: DiagnoseArgs,
    stop: &Stop,
    color: ColorChoice,
) -> Exit {
    crate::signals::listen(stop);
    let result = diagnosis(kube, &args, stop).await;
    if let Some(exit) = stop.reason().and_then(StopReason::exit) {
        return exit;
    }
    let d = match result {
        Ok(d) => d,
        Err(Failed::Diagnose(e)) => {
            eprintln!("error: {}", e.message());
            return e.exit();
        }
        #[cfg(feature = "sim")]
        Err(Failed::Demo(e)) => {
            return crate::output::usage_error(&format!("--demo-scenario: {e}"))
        }
    };
    for w in &d.warnings {
        tracing::warn!("{w}");
    }
    let style = stdout_style(color);
    let mut buf = Vec::new();
    if let Err(e) = render_diagnosis(&d, args.output, style, &mut buf) {
        eprintln!("error: cannot render the diagnosis: {e}");
        return Exit::Unexpected;
    }
    crate::output::write_stdout(&buf)
}

/// `diagnose` over the contexts the flags select: one fleet diagnosis.
async fn diagnosis(
    kube: &ConnectSettings,
    args: &DiagnoseArgs,
    stop: &Stop,
) -> Result<Diagnosis, Failed> {
    if let Some(path) = &args.from {
        return cilium_gc_diagnose::diagnose_saved(path, &args.settings())
            .map_err(Failed::Diagnose);
    }
    #[cfg(feature = "sim")]
    if let Some(name) = &args.demo_scenario {
        let scenario = super::sim::scenario(name).map_err(Failed::Demo)?;
        let started = super::sim::start(scenario).await.map_err(Failed::Demo)?;
        let result = diagnose(&started.kube, &args.settings(), stop).await;
        started.sim.shutdown().await;
        return result.map_err(Failed::Diagnose);
    }
    diagnose(kube, &args.settings(), stop)
        .await
        .map_err(Failed::Diagnose)
}

#[cfg(test)]
mod tests {
    use cilium_gc::ConnectError;
    use cilium_gc::ScanError;
    use cilium_gc::ServerError;

    use super::*;

    #[test]
    fn errors_map_to_documented_exit_codes() {
        let cases = [
            DiagnoseError::CrdMissing,
            DiagnoseError::List(ScanError::NotInstalled(ServerError {
                code: 404,
                message: "404".into(),
            })),
            DiagnoseError::List(ScanError::Denied(ServerError {
                code: 403,
                message: "403".into(),
            })),
            DiagnoseError::Discovery(cilium_gc::DiscoveryError::Request {
                version: "v2",
                message: "refused".into(),
            }),
            DiagnoseError::Connect(ConnectError::NoConfig),
            DiagnoseError::SyncTimeout(120),
            DiagnoseError::Settings("x".into()),
            DiagnoseError::Saved("x".into()),
            DiagnoseError::List(ScanError::Interrupted),
        ];
        for e in cases {
            let code = e.exit().code();
            assert!(
                crate::cli::DIAGNOSE_EXIT_HELP.contains(&format!("  {code} ")),
                "{code} undocumented"
            );
        }
    }
}
