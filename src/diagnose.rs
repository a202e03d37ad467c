//! `diagnose` as the CLI runs it: signals, `--demo-scenario`, output, exit
//! code. The diagnosis itself ([`mod@cilium_gc::diagnose`]) is the engine's.
//!
//! *Exit codes:* 0 when a diagnosis was written, whatever it found —
//! findings never change the exit code, so a CronJob can archive the
//! output without treating a full identity space as its own failure; 2 for
//! flag, kubeconfig, connection and permission problems; 3 when the
//! CiliumIdentity CRD is not installed; 130/143 on SIGINT/SIGTERM.
//!
//! Over several contexts (`--context` repeated or a glob, `--all-contexts`,
//! `--context-regex`) it writes one fleet diagnosis ([`run_fleet`]): each
//! cluster's diagnosis as above, and the exit a fleet scan would give (0
//! only when every cluster was diagnosed, else the most severe cluster's).

pub mod phrases;
pub mod text;

use std::io::{self, Write};

use cilium_gc::diagnose::{diagnose, DiagnoseError, DiagnoseSettings, Diagnosis};
use cilium_gc::ConnectSettings;
use cilium_gc::Exit;
use cilium_gc::{Stop, StopReason};

use crate::cli::DiagnoseArgs;
use crate::render::{ColorChoice, OutputFormat, Style};

/// Writes `d` in `format`: one pretty JSON document and a newline, one YAML
/// document, or the text view. Errs only when `out` does.
pub fn render(
    d: &Diagnosis,
    format: OutputFormat,
    style: Style,
    out: &mut impl Write,
) -> io::Result<()> {
    crate::render::write_document(
        d,
        format,
        || text::text(d, style),
        || crate::markdown::diagnosis(d),
        out,
    )
}

impl DiagnoseArgs {
    /// The engine's diagnose settings.
    pub fn settings(&self) -> DiagnoseSettings {
        DiagnoseSettings {
            cilium_namespace: self.cilium_namespace.clone(),
            page_size: self.page_size,
            redact: self.redact,
            operator_metrics_wait: self.operator_metrics_wait,
            labels: self.labels.clone(),
        }
    }
}

/// Why `diagnose` wrote nothing.
enum Failed {
    /// The engine could not diagnose (its exit code).
    Diagnose(DiagnoseError),
    /// `--demo-scenario` could not start its cluster (exit 2).
    #[cfg(feature = "sim")]
    Demo(crate::demo::DemoError),
}

/// `diagnose` as the CLI runs it.
pub async fn run(
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
    let style = crate::render::stdout_style(color);
    let mut buf = Vec::new();
    if let Err(e) = render(&d, args.output, style, &mut buf) {
        eprintln!("error: cannot render the diagnosis: {e}");
        return Exit::Unexpected;
    }
    crate::output::write_stdout(&buf)
}

/// `diagnose` over the contexts the flags select: one fleet diagnosis.
pub async fn run_fleet(
    kube: &crate::cli::KubeArgs,
    args: DiagnoseArgs,
    stop: &Stop,
    color: ColorChoice,
) -> Exit {
    #[cfg(feature = "sim")]
    if args.demo_scenario.is_some() {
        return crate::output::usage_error(
            "--demo-scenario runs one simulated cluster: give one --context",
        );
    }
    let contexts = match crate::fleet_command::select_contexts(kube) {
        Ok(c) => c,
        Err(e) => return crate::output::usage_error(&e.to_string()),
    };
    crate::signals::listen(stop);
    let (doc, exit) = cilium_gc::fleet::diagnose_fleet(
        &kube.settings(),
        &args.settings(),
        &contexts,
        args.parallel,
        stop,
    )
    .await;
    let style = crate::render::stdout_style(color);
    let mut buf = Vec::new();
    let rendered = crate::render::write_document(
        &doc,
        args.output,
        || crate::render::fleet_diagnosis_text(&doc, style),
        || crate::markdown::fleet_diagnosis(&doc),
        &mut buf,
    );
    if let Err(e) = rendered {
        eprintln!("error: cannot render the diagnosis: {e}");
        return Exit::Unexpected;
    }
    match crate::output::write_stdout(&buf) {
        Exit::Success => exit,
        other => other,
    }
}

async fn diagnosis(
    kube: &ConnectSettings,
    args: &DiagnoseArgs,
    stop: &Stop,
) -> Result<Diagnosis, Failed> {
    if let Some(path) = &args.from {
        return cilium_gc::diagnose::diagnose_saved(path, &args.settings())
            .map_err(Failed::Diagnose);
    }
    #[cfg(feature = "sim")]
    if let Some(name) = &args.demo_scenario {
        let scenario = crate::demo::scenario(name).map_err(Failed::Demo)?;
        let started = crate::demo::start(scenario).await.map_err(Failed::Demo)?;
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
            DiagnoseError::Flag("x".into()),
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
