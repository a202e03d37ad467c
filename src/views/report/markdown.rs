//! `scan`/`delete -o markdown`: the report, headline to footer.

use std::fmt::Write as _;

use cilium_gc::report::Report;
use cilium_gc::thousands;
use cilium_gc_documents::report::{Mode, Outcome};

use crate::views::markdown::*;
use crate::views::next_steps::next_steps;

/// The scan/delete report as Markdown.
pub fn report(r: &Report) -> String {
    let mut o = String::new();
    for section in [
        report_headline,
        report_summary,
        report_reasons,
        report_preflight,
        report_next,
        report_items,
        report_errors,
        report_footer,
    ] {
        section(&mut o, r);
    }
    o
}

/// The title, the verdict and which tool, cluster and time.
fn report_headline(o: &mut String, r: &Report) {
    let verb = match r.mode {
        Mode::Scan => "scan",
        Mode::Delete => "delete",
        Mode::DryRunServer => "delete --dry-run=server",
    };
    let _ = writeln!(o, "# kubectl cilium-gc {verb}\n");
    let _ = writeln!(o, "**Verdict: {}**\n", report_verdict(r));
    table(
        o,
        &["About", "Value"],
        &[
            vec!["Cluster".into(), opt(r.cluster.server.as_deref())],
            vec!["Context".into(), opt(r.cluster.context.as_deref())],
            vec![
                "Kubernetes".into(),
                opt(r.cluster.kubernetes_version.as_deref()),
            ],
            vec!["Started at".into(), r.span.started_at.to_string()],
            vec![
                "Duration".into(),
                format!("{:.1}s", r.span.duration_seconds),
            ],
            vec!["Exit code".into(), r.exit_code.to_string()],
            vec!["Tool".into(), tool_line(&r.header.tool)],
        ],
    );
}

/// The main counts.
fn report_summary(o: &mut String, r: &Report) {
    let s = &r.summary;
    let _ = writeln!(o, "## Summary\n");
    let mut rows = vec![
        vec!["Identities scanned".into(), thousands(s.scanned)],
        vec!["Candidates (stale)".into(), thousands(s.candidates)],
    ];
    if r.mode != Mode::Scan {
        rows.extend([
            if r.mode == Mode::DryRunServer {
                vec!["Validated (dry run)".into(), thousands(s.validated)]
            } else {
                vec!["Deleted".into(), thousands(s.deleted)]
            },
            vec!["Already gone".into(), thousands(s.already_gone)],
            vec![
                "Reclaimed during the run (left alone)".into(),
                thousands(s.reclaimed),
            ],
            vec!["Failed".into(), thousands(s.failed)],
            vec!["Not attempted".into(), thousands(s.not_attempted)],
            vec!["Marked (--mark)".into(), thousands(s.marked)],
            vec!["409 conflicts re-decided".into(), thousands(s.conflicts)],
            vec!["429 throttled".into(), thousands(s.throttled)],
            vec!["Retries".into(), thousands(s.retries)],
            vec![
                "Delete rate".into(),
                format!("{:.1}/s", s.delete_rate_per_second),
            ],
        ]);
    }
    rows.push(vec![
        "Endpoints / slices".into(),
        format!(
            "{} / {}",
            thousands(s.endpoints),
            thousands(s.endpoint_slices)
        ),
    ]);
    table(o, &["Count", "Value"], &rows);
}

/// Identities by decision reason.
fn report_reasons(o: &mut String, r: &Report) {
    let s = &r.summary;
    let _ = writeln!(o, "## Identities by reason\n");
    let rs = &s.reasons;
    let rows: Vec<Vec<String>> = [
        ("in-use", rs.in_use),
        ("stale", rs.stale),
        ("mark-too-recent", rs.mark_too_recent),
        ("unmarked", rs.unmarked),
        ("malformed-mark", rs.malformed_mark),
        ("filtered", rs.filtered),
        ("not-local", rs.not_local),
    ]
    .iter()
    .map(|(k, v)| vec![format!("`{k}`"), thousands(*v)])
    .collect();
    table(o, &["Reason", "Identities"], &rows);
}

/// The preflight checks, when any ran.
fn report_preflight(o: &mut String, r: &Report) {
    if !r.preflight.checks.is_empty() {
        let _ = writeln!(o, "## Preflight\n");
        let rows: Vec<Vec<String>> = r
            .preflight
            .checks
            .iter()
            .map(|c| {
                let name = serde_json::to_value(c.name)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                vec![
                    format!("`{name}`"),
                    if c.passed { "✅ passed" } else { "❌ failed" }.into(),
                    cell(&c.message),
                ]
            })
            .collect();
        table(o, &["Check", "Result", "Details"], &rows);
    }
}

/// What to do next.
fn report_next(o: &mut String, r: &Report) {
    let steps = next_steps(r);
    if !steps.is_empty() {
        let _ = writeln!(o, "## Next steps\n");
        for st in steps {
            let _ = writeln!(o, "- {}", cell(&st));
        }
        o.push('\n');
    }
}

/// The identities acted on, folded.
fn report_items(o: &mut String, r: &Report) {
    let acted: Vec<_> = r
        .items
        .iter()
        .filter(|i| i.outcome != Outcome::Skipped || r.mode == Mode::Scan)
        .collect();
    if !acted.is_empty() {
        let rows: Vec<Vec<String>> = acted
            .iter()
            .take(MAX_ITEMS)
            .map(|i| {
                let value = |v: serde_json::Result<serde_json::Value>| {
                    v.ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                };
                vec![
                    cell(&i.name),
                    i.namespace.as_deref().map(cell).unwrap_or_default(),
                    value(serde_json::to_value(i.reason)),
                    value(serde_json::to_value(i.outcome)),
                    i.attempts.to_string(),
                    i.conflicts.len().to_string(),
                    i.last_error.as_deref().map(cell).unwrap_or_default(),
                ]
            })
            .collect();
        let shown = if acted.len() > MAX_ITEMS {
            format!(
                "Identities (first {} of {}; all of them in `-o json`)",
                thousands(MAX_ITEMS as u64),
                thousands(acted.len() as u64)
            )
        } else {
            format!("Identities ({})", thousands(acted.len() as u64))
        };
        let _ = writeln!(o, "## Items\n");
        details(
            o,
            &shown,
            &[
                "Identity",
                "Namespace",
                "Reason",
                "Outcome",
                "Attempts",
                "Conflicts",
                "Last error",
            ],
            &rows,
        );
    }
}

/// Run-level errors and warnings.
fn report_errors(o: &mut String, r: &Report) {
    if !r.errors.is_empty() {
        let rows: Vec<Vec<String>> = r
            .errors
            .iter()
            .map(|e| {
                let kind = serde_json::to_value(e.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                vec![format!("`{kind}`"), cell(&e.message)]
            })
            .collect();
        let _ = writeln!(o, "## Errors\n");
        long_table(o, "errors", &["Kind", "Message"], &rows);
    }
}

/// Who wrote it, and where the full report is.
fn report_footer(o: &mut String, r: &Report) {
    let _ = writeln!(
        o,
        "<sub>Written by {} at {}; the full report as JSON: `-o json` or `--report-file`.</sub>",
        tool_line(&r.header.tool),
        r.span.finished_at
    );
}

/// One line: how the run ended.
fn report_verdict(r: &Report) -> String {
    let s = &r.summary;
    if let Some(a) = &r.aborted {
        return format!("❌ stopped early — {}", cell(&a.message));
    }
    match r.mode {
        Mode::Scan if s.reasons.stale > 0 => format!(
            "🟠 {} stale {} waiting to be deleted (of {} scanned)",
            thousands(s.reasons.stale),
            if s.reasons.stale == 1 {
                "identity"
            } else {
                "identities"
            },
            thousands(s.scanned)
        ),
        Mode::Scan => format!("🟢 nothing stale (of {} scanned)", thousands(s.scanned)),
        _ if s.failed > 0 => format!(
            "🟠 {} deleted, {} failed, {} conflicts re-decided",
            thousands(s.deleted),
            thousands(s.failed),
            thousands(s.conflicts)
        ),
        _ => format!(
            "🟢 {} deleted, {} conflicts re-decided, {} reclaimed during the run and left alone",
            thousands(s.deleted),
            thousands(s.conflicts),
            thousands(s.reclaimed)
        ),
    }
}
