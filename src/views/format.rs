//! Rendering the [`Report`]: text for humans, JSON or YAML for machines.
//!
//! Pure: [`render`] writes to any `Write` and reads no environment, clock or
//! terminal; the caller decides colour once with [`color_allowed`] and passes
//! it in a [`Style`]. That is what makes every format testable byte for byte.
//! JSON and YAML are the [`Report`] itself, one document, nothing else, so
//! `-o json | jq` works with stderr discarded. The text form is a summary; it
//! ends with the [`next_steps`] a human should take.
//!
//! [`write_report_file`] is the one function here that touches the
//! filesystem: `--report-file` must never leave half a report behind.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use owo_colors::OwoColorize;
use serde::Serialize;

use cilium_gc::policy::Reason;
use cilium_gc::report::{AbortReason, Mode, Outcome, Report};
use cilium_gc::{human_duration, thousands};

use crate::next_steps::{next_steps, plural};

mod fleet;
#[cfg(test)]
pub(crate) mod tests;
mod text;

pub use fleet::{
    fleet_confirmation, fleet_diagnosis_header, fleet_diagnosis_row, fleet_diagnosis_text,
    fleet_header, fleet_row, fleet_text,
};
pub use text::Paint;
use text::*;

/// `-o`: how the report is written to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// A summary for humans, with the next step to take.
    #[default]
    Text,
    /// The report as one pretty-printed JSON document (`schema/report-v1.json`).
    Json,
    /// The report as one YAML document, same fields as JSON.
    Yaml,
    /// GitHub-flavoured Markdown to paste into a ticket: verdict, tables, details.
    Markdown,
}

/// `--color`: when the text output may use colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    /// Always colour, even into a pipe or with `NO_COLOR` set.
    Always,
    /// Never colour.
    Never,
}

/// How text is drawn. JSON and YAML ignore it: they are never coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Style {
    /// Emit ANSI colour codes.
    pub color: bool,
}

/// Whether to colour, following <https://no-color.org>: `NO_COLOR` set to a
/// non-empty value turns colour off in `auto` only; an explicit
/// `--color=always` is the user asking, and wins.
///
/// `no_color_env` is "`NO_COLOR` is present and not empty"; see
/// [`no_color_env`] for reading it.
pub fn color_allowed(choice: ColorChoice, stdout_is_terminal: bool, no_color_env: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => stdout_is_terminal && !no_color_env,
    }
}

/// The style of stdout for `--color`: colour only on a terminal, never with
/// `NO_COLOR` in `auto` (shared by every command that writes a document).
pub fn stdout_style(color: ColorChoice) -> Style {
    use std::io::IsTerminal;
    Style {
        color: color_allowed(color, std::io::stdout().is_terminal(), no_color_env()),
    }
}

/// Whether `NO_COLOR` is set to a non-empty value (no-color.org: an empty
/// value counts as unset). The only function here that reads the environment.
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Writes `report` to `out` in `format`.
///
/// JSON is exactly one pretty document followed by a newline; YAML is one
/// document; text is the human summary, coloured only when `style.color`.
/// Errs only when `out` does (a closed pipe is the caller's to treat as
/// success).
pub fn render(
    report: &Report,
    format: OutputFormat,
    style: Style,
    out: &mut impl Write,
) -> io::Result<()> {
    write_document(
        report,
        format,
        || text(report, style),
        || crate::markdown::report(report),
        out,
    )
}

/// Writes any of our documents: JSON (one pretty document and a newline),
/// YAML (one document), or the text or Markdown view `text`/`markdown`
/// draw. Shared by the GC report and the diagnosis so both follow the same
/// output rules.
pub fn write_document<T: serde::Serialize>(
    doc: &T,
    format: OutputFormat,
    text: impl FnOnce() -> String,
    markdown: impl FnOnce() -> String,
    out: &mut impl Write,
) -> io::Result<()> {
    match format {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, doc).map_err(io::Error::from)?;
            out.write_all(b"\n")
        }
        OutputFormat::Yaml => {
            let yaml = serde_saphyr::to_string(doc).map_err(io::Error::other)?;
            out.write_all(yaml.as_bytes())
        }
        OutputFormat::Text => out.write_all(text().as_bytes()),
        OutputFormat::Markdown => out.write_all(markdown().as_bytes()),
    }
}

/// Writes `report` as JSON to `path` atomically: to a temporary file in the
/// same directory, flushed to disk, then renamed over `path`. A crash or a
/// full disk leaves either the old file or the new one, never half a report.
///
/// Errs when the directory is not writable or the disk is full; the
/// temporary file is removed then. Not worth retrying.
/// Any of our documents (the report, the fleet report) goes through here.
/// The JSON is streamed to the file: a fleet report is never whole in
/// memory (its clusters are read back from disk one at a time).
pub fn write_report_file<T: Serialize>(path: &Path, report: &T) -> io::Result<()> {
    write_atomically_with(path, |file| {
        let mut w = io::BufWriter::new(file);
        serde_json::to_writer_pretty(&mut w, report).map_err(io::Error::from)?;
        w.write_all(b"\n")?;
        w.flush()
    })
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory (so the rename cannot cross filesystems), synced, then renamed
/// over `path` by `tempfile`'s `persist`. The temporary file is removed on
/// any failure.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomically_with(path, |file| file.write_all(bytes))
}

/// [`write_atomically`], the content written by `write` to the file.
fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path has no file name",
        ));
    }
    let mut file = tempfile::Builder::new()
        .prefix(".report")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    write(file.as_file_mut())?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    // Make the rename itself durable. Directories cannot be opened for this
    // on every platform, so this is best effort.
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Whether the run stopped before it read a single identity (no
/// kubeconfig, server unreachable, credentials rejected, preflight refused,
/// interrupted while connecting). Its text output is then the error and
/// what to try next, on stderr, and nothing else: a table of zeros says
/// nothing. JSON and YAML still carry the whole report.
pub fn is_early_abort(report: &Report) -> bool {
    let s = &report.summary;
    report.aborted.is_some()
        && s.scanned == 0
        && s.malformed == 0
        && s.list_pages == 0
        && report.items.is_empty()
}

/// The stderr lines of an early abort in text mode: the error, then what to
/// try next (a preflight refusal's next steps, else a hint). `None` when the run got further (see [`is_early_abort`]).
pub fn early_abort_text(report: &Report) -> Option<String> {
    if !is_early_abort(report) {
        return None;
    }
    let a = report.aborted.as_ref()?;
    let mut o = String::new();
    // An internal error printed its own line in the panic hook.
    if a.reason != AbortReason::InternalError {
        let _ = writeln!(o, "error: {}", a.message);
    }
    // A refusal by a preflight check: its own remedy (the next steps the
    // JSON and Markdown reports carry), not a generic hint.
    let steps = next_steps(report);
    let refused = a.reason == AbortReason::PreflightRefused
        && !a.message.contains("401")
        && report.preflight.checks.iter().any(|c| !c.passed);
    if refused && !steps.is_empty() {
        for step in steps {
            let _ = writeln!(o, "Next: {step}");
        }
    } else {
        let _ = writeln!(o, "{}", early_abort_hint(report));
    }
    Some(o)
}

/// What to try after an early abort, chosen from why it stopped.
fn early_abort_hint(report: &Report) -> String {
    let Some(a) = &report.aborted else {
        return String::new();
    };
    let message = a.message.to_ascii_lowercase();
    let server = report.cluster.server.as_deref();
    let hint = match a.reason {
        AbortReason::Interrupted => {
            "interrupted before anything was read: nothing was changed".to_string()
        }
        AbortReason::InternalError => {
            "this is a bug: please report it, with the output of the same run with RUST_BACKTRACE=1 and -o json"
                .to_string()
        }
        AbortReason::PreflightRefused if message.contains("401") => {
            "refresh the credentials (log in again, or pass --token) and check them with `kubectl auth whoami`".to_string()
        }
        AbortReason::PreflightRefused | AbortReason::PermissionLost => {
            "fix what the error says and rerun; `-o json` lists every preflight check, examples/cronjob.yaml the permissions needed"
                .to_string()
        }
        _ if message.contains("no kubeconfig") || message.starts_with("kubeconfig") => {
            "point at a cluster: --kubeconfig PATH (or $KUBECONFIG), --context NAME, or --server URL --token TOKEN; `kubectl config get-contexts` lists the contexts"
                .to_string()
        }
        _ if server.is_some() => format!(
            "check that the cluster is up and that this is its address: `kubectl cluster-info{}`; --context or --server pick another, --request-timeout waits longer",
            report
                .cluster
                .context
                .as_deref()
                .map(|c| format!(" --context {c}"))
                .unwrap_or_default()
        ),
        _ => "fix what the error says and rerun (-v shows more)".to_string(),
    };
    format!("hint: {hint}")
}

/// A run's wall time: `850ms`, `12.4s`, then [`human_duration`].
fn run_duration(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        "?".to_string()
    } else if seconds < 1.0 {
        format!("{}ms", (seconds * 1000.0).round() as u64)
    } else if seconds < 60.0 {
        format!("{seconds:.1}s")
    } else {
        human_duration(seconds)
    }
}

/// The lower-kebab name serde gives a unit enum variant.
fn kebab<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_string(),
    }
}
