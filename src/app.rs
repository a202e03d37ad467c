//! Dispatch a parsed command line to the subcommand that serves it, and
//! write its output: the report on stdout, nothing else there.

use std::io::{IsTerminal, Write};

use crate::cli::{Cli, Command, ScanArgs, SchemaKind};
use crate::exit::Exit;
use crate::gc::{self, GcSettings, Ui};
use crate::render::{color_allowed, no_color_env, render, write_report_file, ColorChoice, Style};
use crate::report::Report;
use crate::stop::Stop;

/// Run the command; returns the exit status. Errors are printed once, on
/// stderr, as one line.
pub async fn run(cli: Cli) -> Exit {
    let stop = Stop::default();
    match cli.command {
        Command::Scan(args) => match GcSettings::for_scan(args) {
            Ok(s) => gc_and_emit(&cli.kube, s, &stop, &Ui::detect(), cli.color).await,
            Err(e) => usage_error(&e.to_string()),
        },
        Command::Delete(args) => match GcSettings::for_delete(args) {
            Ok(s) => gc_and_emit(&cli.kube, s, &stop, &Ui::detect(), cli.color).await,
            Err(e) => usage_error(&e.to_string()),
        },
        Command::Demo(args) => crate::demo::run(args, &stop, cli.color).await,
        Command::Diagnose(args) => crate::diagnose::run(&cli.kube, args, &stop, cli.color).await,
        Command::Schema(args) => print_json(&match args.kind {
            SchemaKind::Report => crate::report::schema(),
            SchemaKind::Diagnosis => crate::diagnose::schema(),
        }),
        Command::Version => {
            let t = gc::tool();
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
        Command::SimServe(args) => crate::demo::serve(args).await,
    }
}

/// Run scan/delete with signal handling and write the report.
pub async fn gc_and_emit(
    kube: &crate::cli::KubeArgs,
    s: GcSettings,
    stop: &Stop,
    ui: &Ui,
    color: ColorChoice,
) -> Exit {
    stop.listen_for_signals();
    let (report, exit) = gc::run(kube, &s, stop, ui).await;
    let exit = emit(&report, &s.scan, exit, color);
    export_metrics(&report, &s.scan).await;
    exit
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

/// Write the report: to stdout as `-o` says, and to `--report-file`.
pub fn emit(report: &Report, args: &ScanArgs, exit: Exit, color: ColorChoice) -> Exit {
    let mut exit = exit;
    if let Some(path) = &args.report_file {
        if let Err(e) = write_report_file(path, report) {
            eprintln!("error: cannot write report file {}: {e}", path.display());
            exit = exit.max(Exit::Unexpected);
        }
    }
    if let Some(a) = &report.aborted {
        eprintln!("error: {}", a.message);
    }
    let mut buf = Vec::new();
    let style = Style {
        color: color_allowed(color, std::io::stdout().is_terminal(), no_color_env()),
    };
    if let Err(e) = render(report, args.output, style, &mut buf) {
        eprintln!("error: cannot render the report: {e}");
        return Exit::Unexpected;
    }
    match write_stdout(&buf) {
        Exit::Success => exit,
        other => other,
    }
}

fn usage_error(message: &str) -> Exit {
    eprintln!("error: {message}");
    Exit::Usage
}

fn print_json(v: &serde_json::Value) -> Exit {
    let mut s = serde_json::to_string_pretty(v).expect("JSON values serialize");
    s.push('\n');
    write_stdout(s.as_bytes())
}

fn println_or_pipe(line: &str) -> Exit {
    write_stdout(format!("{line}\n").as_bytes())
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
pub fn write_stdout(bytes: &[u8]) -> Exit {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Exit::Success,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Success,
        Err(e) => {
            eprintln!("error: writing to stdout: {e}");
            Exit::Unexpected
        }
    }
}
