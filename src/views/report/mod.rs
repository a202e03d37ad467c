//! The report of a scan or delete: its text summary (`text`) and its
//! Markdown ticket (`markdown`); JSON and YAML are the report itself, one
//! document, nothing else, so `-o json | jq` works with stderr discarded.
//! A run that stopped before it read anything is an early abort: its text
//! is the error and what to try next ([`early_abort_text`]).

use std::fmt::Write as _;
use std::io::{self, Write};

use cilium_gc::report::Report;
use cilium_gc_documents::report::AbortReason;

use super::format::{write_document, OutputFormat, Style};
use super::next_steps::next_steps;

mod markdown;
mod text;

pub(crate) use self::markdown::report as markdown;
pub(super) use self::text::text;

/// Writes `report` to `out` in `format`.
///
/// JSON is exactly one pretty document followed by a newline; YAML is one
/// document; text is the human summary, coloured only when `style.color`.
/// Errs only when `out` does (a closed pipe is the caller's to treat as
/// success).
pub(crate) fn render(
    report: &Report,
    format: OutputFormat,
    style: Style,
    out: &mut impl Write,
) -> io::Result<()> {
    write_document(
        report,
        format,
        || text(report, style),
        || markdown(report),
        out,
    )
}

/// Whether the run stopped before it read a single identity (no
/// kubeconfig, server unreachable, credentials rejected, preflight refused,
/// interrupted while connecting). Its text output is then the error and
/// what to try next, on stderr, and nothing else: a table of zeros says
/// nothing. JSON and YAML still carry the whole report.
fn is_early_abort(report: &Report) -> bool {
    let s = &report.summary;
    report.aborted.is_some()
        && s.scanned == 0
        && s.malformed == 0
        && s.list_pages == 0
        && report.items.is_empty()
}

/// The stderr lines of an early abort in text mode: the error, then what to
/// try next (a preflight refusal's next steps, else a hint). `None` when the run got further (see [`is_early_abort`]).
pub(crate) fn early_abort_text(report: &Report) -> Option<String> {
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
