//! Writing what a command produced: the report on stdout and nothing else
//! there, errors as one line on stderr, `--report-file` atomically.

pub mod metrics;

use std::io::Write;
use std::path::Path;

use cilium_gc::report::Report;
use cilium_gc::Exit;
use cilium_gc_documents::report::AbortReason;

use crate::views::format::{stdout_style, write_report_file, ColorChoice, OutputFormat};
use crate::views::report::{early_abort_text, render};

/// Write the report: to stdout as `-o` (`format`) says, and to
/// `--report-file` (`report_file`).
pub(crate) fn emit(
    report: &Report,
    (format, report_file): (OutputFormat, Option<&Path>),
    exit: Exit,
    color: ColorChoice,
) -> Exit {
    let mut exit = exit;
    if let Some(path) = report_file {
        if let Err(e) = write_report_file(path, report) {
            eprintln!("error: cannot write report file {}: {e}", path.display());
            exit = exit.max(Exit::Unexpected);
        }
    }
    if format == OutputFormat::Text {
        if let Some(lines) = early_abort_text(report) {
            eprint!("{lines}");
            return exit;
        }
    }
    // An internal error printed its line in the panic hook already.
    if let Some(a) = report
        .aborted
        .as_ref()
        .filter(|a| a.reason != AbortReason::InternalError)
    {
        eprintln!("error: {}", a.message);
    }
    // Streamed to stdout, not rendered into a buffer first: the JSON of a
    // 65k-identity report is tens of MiB, and a whole copy of it (grown by
    // doubling) was the run's peak memory.
    let style = stdout_style(color);
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    match render(report, format, style, &mut out).and_then(|()| out.flush()) {
        Ok(()) => exit,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit,
        Err(e) => {
            eprintln!("error: writing the report to stdout: {e}");
            Exit::Unexpected
        }
    }
}

/// One line on stderr, exit 2.
pub(crate) fn usage_error(message: &str) -> Exit {
    eprintln!("error: {message}");
    Exit::Usage
}

/// A JSON value, pretty, on stdout.
pub(crate) fn print_json(v: &serde_json::Value) -> Exit {
    let mut s = serde_json::to_string_pretty(v).expect("JSON values serialize");
    s.push('\n');
    write_stdout(s.as_bytes())
}

/// One line on stdout.
pub(crate) fn println_or_pipe(line: &str) -> Exit {
    write_stdout(format!("{line}\n").as_bytes())
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn write_stdout(bytes: &[u8]) -> Exit {
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
