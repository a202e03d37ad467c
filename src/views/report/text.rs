//! The text form of a report: a summary for a person at a terminal, with
//! colour only when the caller allows it, ending with what to do next.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use cilium_gc::report::Report;
use cilium_gc::thousands;
use cilium_gc_cluster::policy::Reason;
use cilium_gc_documents::report::{Mode, Outcome};

use crate::views::format::{kebab, run_duration, warn_if, Paint, Style, Tone};
use crate::views::next_steps::{next_steps, plural};

/// Most failed items listed in the text output; the rest are in `-o json`.
pub(super) const MAX_FAILED_SHOWN: usize = 20;
/// Most conflict managers listed in the text output.
pub(super) const MAX_MANAGERS_SHOWN: usize = 5;
/// Width of the label column of the counts table.
pub(super) const LABEL_WIDTH: usize = 22;

/// The human summary. Returns a `String` so colour codes never split a write.
pub(crate) fn text(report: &Report, style: Style) -> String {
    let p = Paint::new(style);
    let mut o = String::new();
    for section in [
        header,
        banners,
        counts,
        failed_items,
        conflicts_by_manager,
        run_errors,
        what_now,
    ] {
        section(&mut o, report, &p);
    }
    o
}

/// Header: what ran, where, and how long.
pub(super) fn header(o: &mut String, report: &Report, p: &Paint) {
    let mode = match report.mode {
        Mode::Scan => "scan",
        Mode::Delete => "delete",
        Mode::DryRunServer => "delete --dry-run=server",
    };
    let mut cluster = report
        .cluster
        .server
        .clone()
        .unwrap_or_else(|| "unknown server".to_string());
    if let Some(ctx) = &report.cluster.context {
        let _ = write!(cluster, " (context {ctx})");
    }
    let _ = writeln!(
        o,
        "{} {} on {} in {}",
        p.bold("cilium-gc"),
        p.bold(mode),
        cluster,
        run_duration(report.span.duration_seconds),
    );
    if report.mode == Mode::DryRunServer {
        let _ = writeln!(
            o,
            "{}",
            p.yellow("server-side dry run: nothing was deleted")
        );
    }
}

/// Banners: an abort, an interruption, failed preflight checks.
pub(super) fn banners(o: &mut String, report: &Report, p: &Paint) {
    if let Some(a) = &report.aborted {
        let _ = writeln!(
            o,
            "{}",
            p.red(&format!("ABORTED ({}): {}", kebab(&a.reason), a.message))
        );
    }
    if report.interrupted && report.aborted.is_none() {
        let _ = writeln!(o, "{}", p.red("INTERRUPTED: the run stopped early"));
    }
    for c in report.preflight.checks.iter().filter(|c| !c.passed) {
        let _ = writeln!(
            o,
            "{} {}: {}",
            p.red("preflight failed"),
            kebab(&c.name),
            c.message
        );
    }
    o.push('\n');
}

/// The counts, one row each; decision reasons indented under `scanned`.
pub(super) fn counts(o: &mut String, report: &Report, p: &Paint) {
    let s = &report.summary;
    let row = |o: &mut String, indent: usize, label: &str, value: String, tone: Tone| {
        let label = format!("{:indent$}{label}", "");
        let value = p.tone(&format!("{value:>12}"), tone);
        let _ = writeln!(o, "  {label:<LABEL_WIDTH$} {value}");
    };
    let n = |v: u64| thousands(v);
    row(o, 0, "scanned", n(s.scanned), Tone::Plain);
    let mut reasons: Vec<(Reason, u64)> = Reason::ALL
        .iter()
        .map(|&r| (r, s.reasons.get(r)))
        .filter(|&(_, n)| n > 0)
        .collect();
    // Largest first; ties keep report order (the sort is stable).
    reasons.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    for (r, count) in reasons {
        row(o, 2, r.as_str(), n(count), Tone::Plain);
    }
    row(o, 0, "candidates", n(s.candidates), Tone::Bold);
    if report.mode != Mode::Scan {
        if report.mode == Mode::DryRunServer {
            row(o, 0, "validated", n(s.validated), Tone::Good);
        } else {
            row(o, 0, "deleted", n(s.deleted), Tone::Good);
        }
        row(o, 0, "already gone", n(s.already_gone), Tone::Plain);
        row(o, 0, "reclaimed", n(s.reclaimed), Tone::Plain);
        let failed = if s.failed > 0 { Tone::Bad } else { Tone::Plain };
        row(o, 0, "failed", n(s.failed), failed);
        row(
            o,
            0,
            "not attempted",
            n(s.not_attempted),
            warn_if(s.not_attempted),
        );
    }
    if report.mode != Mode::Scan || s.marked > 0 {
        row(o, 0, "marked", n(s.marked), Tone::Plain);
    }
    row(o, 0, "conflicts", n(s.conflicts), warn_if(s.conflicts));
    row(o, 0, "retries", n(s.retries), warn_if(s.retries));
    row(o, 0, "throttled", n(s.throttled), warn_if(s.throttled));
    row(
        o,
        0,
        "server errors",
        n(s.server_errors),
        warn_if(s.server_errors),
    );
    let pages = format!("{} / {}", n(s.list_pages), n(s.list_restarts));
    row(o, 0, "list pages / restarts", pages, Tone::Plain);
    let restarts = s.watcher_restarts;
    row(o, 0, "watcher restarts", n(restarts), warn_if(restarts));
    if s.malformed > 0 {
        row(o, 0, "malformed objects", n(s.malformed), Tone::Warn);
    }
    if report.mode != Mode::Scan {
        let rate = format!("{:.1}/s", s.delete_rate_per_second);
        row(o, 0, "delete rate", rate, Tone::Plain);
        if let (Some(t), Some(low)) = (s.throttled_seconds, s.lowest_rate_per_second) {
            if t > 0.0 {
                let v = format!("{t:.1}s below --qps, lowest {low:.1}/s");
                row(o, 0, "slowed by throttling", v, Tone::Warn);
            }
        }
        let concurrency = u64::from(report.options.pacing.concurrency);
        if let Some(low) = s.lowest_in_flight.filter(|low| *low < concurrency) {
            let v = format!("cut to {low} of {concurrency} by throttling, at the lowest");
            row(o, 0, "writes in flight", v, Tone::Warn);
        }
    }
}

/// Failed items, the first few of them.
pub(super) fn failed_items(o: &mut String, report: &Report, p: &Paint) {
    let failed: Vec<_> = report
        .items
        .iter()
        .filter(|i| i.outcome == Outcome::Failed)
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(
            o,
            "\n{}",
            p.red(&format!("Failed ({}):", thousands(failed.len() as u64)))
        );
        for i in failed.iter().take(MAX_FAILED_SHOWN) {
            let ns = i.namespace.as_deref().unwrap_or("-");
            let err = i.last_error.as_deref().unwrap_or("no error recorded");
            let _ = writeln!(
                o,
                "  {} {} {}: {err}",
                i.name,
                p.dim(&format!("[{ns}]")),
                p.dim(&format!(
                    "{} {}",
                    i.attempts,
                    plural(u64::from(i.attempts), "attempt", "attempts")
                )),
            );
        }
        if failed.len() > MAX_FAILED_SHOWN {
            let _ = writeln!(
                o,
                "  {}",
                p.dim(&format!(
                    "... and {} more (see -o json)",
                    thousands((failed.len() - MAX_FAILED_SHOWN) as u64)
                ))
            );
        }
    }
}

/// Who kept changing our candidates: conflicts by field manager.
pub(super) fn conflicts_by_manager(o: &mut String, report: &Report, p: &Paint) {
    let mut managers: BTreeMap<&str, u64> = BTreeMap::new();
    for c in report.items.iter().flat_map(|i| &i.conflicts) {
        *managers
            .entry(c.manager.as_deref().unwrap_or("(unknown)"))
            .or_insert(0) += 1;
    }
    if !managers.is_empty() {
        let mut managers: Vec<_> = managers.into_iter().collect();
        managers.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
        let _ = writeln!(o, "\n{}", p.bold("Conflicts by field manager:"));
        for (m, n) in managers.iter().take(MAX_MANAGERS_SHOWN) {
            let _ = writeln!(o, "  {m:<LABEL_WIDTH$} {:>12}", thousands(*n));
        }
        if managers.len() > MAX_MANAGERS_SHOWN {
            let _ = writeln!(
                o,
                "  {}",
                p.dim(&format!(
                    "... and {} more",
                    managers.len() - MAX_MANAGERS_SHOWN
                ))
            );
        }
    }
}

/// Run-level errors and warnings.
pub(super) fn run_errors(o: &mut String, report: &Report, p: &Paint) {
    if !report.errors.is_empty() {
        let _ = writeln!(
            o,
            "\n{}",
            p.yellow(&format!(
                "Errors ({}):",
                thousands(report.errors.len() as u64)
            ))
        );
        for e in &report.errors {
            let _ = writeln!(
                o,
                "  {} {}",
                p.dim(&format!("[{}]", kebab(&e.kind))),
                e.message
            );
        }
    }
}

/// What to do next.
pub(super) fn what_now(o: &mut String, report: &Report, p: &Paint) {
    let steps = next_steps(report);
    if !steps.is_empty() {
        o.push('\n');
        for step in steps {
            let _ = writeln!(o, "{} {step}", p.cyan("Next:"));
        }
    }
}
