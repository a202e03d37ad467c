//! `-o markdown`: the report or the diagnosis as GitHub-flavoured Markdown,
//! to paste into a GitHub issue or a Jira/Linear ticket.
//!
//! Layout, for both documents: a headline verdict, a small table saying
//! which tool, cluster, Kubernetes version and time, then one section per
//! part of the document, each a table; lists longer than a few rows go in
//! collapsible `<details>` blocks so the ticket stays readable.
//!
//! Pure like [`crate::render`]: a document in, a `String` out. Every value
//! that came from the cluster goes through [`cell`] (pipes, angle brackets
//! and newlines escaped), so a label value cannot break a table or inject
//! HTML. `--redact` needs nothing here: the diagnosis is redacted before it
//! is analysed, so this view only ever sees the tokens.

use std::fmt::Write as _;

use crate::next_steps::next_steps;
use cilium_gc::diagnose::types::{AgeBucket, Diagnosis, Level, Severity};
use cilium_gc::humanize::{human_duration, thousands as n};
use cilium_gc::report::{Mode, Outcome, Report, Tool};

/// Rows shown before the rest of a list is folded into `<details>`.
const VISIBLE_ROWS: usize = 10;
/// Most report items listed; the JSON report has them all.
const MAX_ITEMS: usize = 500;

/// Escapes `s` for a table cell (or any inline text): `|` would end the
/// cell, `<`/`>`/`&` could open HTML, a newline would end the row.
pub fn cell(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => o.push_str("\\|"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '\n' | '\r' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// A table: header and rows, already escaped. Rows shorter than the header
/// are padded so every row has the header's column count.
fn table(o: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(o, "| {} |", header.join(" | "));
    let _ = writeln!(o, "|{}|", vec!["---"; header.len()].join("|"));
    for r in rows {
        let mut r = r.clone();
        r.resize(header.len(), String::new());
        let _ = writeln!(o, "| {} |", r.join(" | "));
    }
    o.push('\n');
}

/// A table whose rows beyond [`VISIBLE_ROWS`] are folded into `<details>`.
fn long_table(o: &mut String, what: &str, header: &[&str], rows: &[Vec<String>]) {
    if rows.len() <= VISIBLE_ROWS {
        table(o, header, rows);
        return;
    }
    table(o, header, &rows[..VISIBLE_ROWS]);
    let rest = &rows[VISIBLE_ROWS..];
    let _ = writeln!(
        o,
        "<details><summary>{} more {what}</summary>\n",
        n(rest.len() as u64)
    );
    table(o, header, rest);
    let _ = writeln!(o, "</details>\n");
}

/// Everything in `<details>` with a summary line.
fn details(o: &mut String, summary: &str, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(o, "<details><summary>{}</summary>\n", cell(summary));
    table(o, header, rows);
    let _ = writeln!(o, "</details>\n");
}

fn tool_line(t: &Tool) -> String {
    match &t.commit {
        Some(c) => format!("{} {} (commit {})", t.name, t.version, cell(c)),
        None => format!("{} {}", t.name, t.version),
    }
}

fn opt(s: Option<&str>) -> String {
    s.map(cell).unwrap_or_else(|| "unknown".into())
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "🔴 critical",
        Severity::Warning => "🟠 warning",
        Severity::Info => "🔵 info",
    }
}

/// The diagnosis as Markdown.
pub fn diagnosis(d: &Diagnosis) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Cilium identity diagnosis\n");
    let _ = writeln!(o, "**Verdict: {}**\n", diagnosis_verdict(d));
    let c = &d.cluster;
    let mut about = vec![
        vec!["Cluster".into(), opt(c.server.as_deref())],
        vec!["Context".into(), opt(c.context.as_deref())],
        vec!["Kubernetes".into(), opt(c.kubernetes_version.as_deref())],
        vec!["Generated at".into(), d.generated_at.to_string()],
        vec!["Tool".into(), tool_line(&d.tool)],
        vec![
            "Endpoints".into(),
            format!(
                "{} CiliumEndpoints, {} CiliumEndpointSlices",
                n(c.endpoints),
                n(c.endpoint_slices)
            ),
        ],
    ];
    if d.redacted {
        about.push(vec![
            "Redacted".into(),
            "yes: namespaces, label values, server and context are hashes".into(),
        ]);
    }
    table(&mut o, &["About", "Value"], &about);

    let _ = writeln!(o, "## Findings\n");
    if d.findings.is_empty() {
        let _ = writeln!(o, "None: the identity space looks healthy.\n");
    } else {
        let rows: Vec<Vec<String>> = d
            .findings
            .iter()
            .map(|f| {
                vec![
                    severity(f.severity).into(),
                    format!("`{}`", f.code.as_str()),
                    cell(&f.message),
                    f.evidence
                        .iter()
                        .map(|e| cell(e))
                        .collect::<Vec<_>>()
                        .join("<br>"),
                    f.suggestion.as_deref().map(cell).unwrap_or_default(),
                ]
            })
            .collect();
        table(
            &mut o,
            &["Severity", "Code", "Finding", "Evidence", "Next step"],
            &rows,
        );
    }

    identity_space_section(&mut o, d);
    gc_health_section(&mut o, d);
    age_section(&mut o, d);
    churn_section(&mut o, d);
    integrity_section(&mut o, d);
    config_section(&mut o, d);
    if !d.warnings.is_empty() {
        let rows: Vec<Vec<String>> = d.warnings.iter().map(|w| vec![cell(w)]).collect();
        let _ = writeln!(o, "## Warnings\n");
        long_table(&mut o, "warnings", &["Warning"], &rows);
    }
    let _ = writeln!(
        o,
        "<sub>Written by {} at {}; the same diagnosis as JSON: `kubectl cilium-gc diagnose -o json`.</sub>",
        tool_line(&d.tool),
        d.generated_at
    );
    o
}

/// One line: the worst finding, or that all is well.
fn diagnosis_verdict(d: &Diagnosis) -> String {
    let count = |s: Severity| d.findings.iter().filter(|f| f.severity == s).count() as u64;
    let (crit, warn, info) = (
        count(Severity::Critical),
        count(Severity::Warning),
        count(Severity::Info),
    );
    let tally = format!("{crit} critical, {warn} warning, {info} info");
    match d.findings.iter().min_by_key(|f| f.severity) {
        Some(f) if f.severity != Severity::Info => {
            format!("{} — {} ({tally})", severity(f.severity), cell(&f.message))
        }
        _ => format!("🟢 healthy — nothing needs attention ({tally})"),
    }
}

fn identity_space_section(o: &mut String, d: &Diagnosis) {
    let sp = &d.identity_space;
    let st = &sp.states;
    let level = match sp.level {
        Level::Ok => "ok",
        Level::Warning => "**warning** (80% or more)",
        Level::Critical => "**critical** (95% or more)",
    };
    let _ = writeln!(o, "## Identity space\n");
    let _ = writeln!(
        o,
        "Local range {}–{}: **{} of {} allocated ({}%)**, {} free — {level}.\n",
        sp.local_range.min,
        sp.local_range.max,
        n(sp.allocated),
        n(sp.capacity),
        sp.utilisation_percent,
        n(sp.headroom),
    );
    let rows: Vec<Vec<String>> = [
        ("In use", st.in_use),
        ("Stale candidates (GC may delete)", st.stale_candidates),
        ("Unused, marked (too recent)", st.unused_marked),
        ("Unused, unmarked", st.unused_unmarked),
        ("Too young to judge", st.too_young),
        ("Not local", st.not_local),
        ("Malformed mark", st.malformed_mark),
        ("**Total**", sp.total),
    ]
    .iter()
    .map(|(k, v)| vec![(*k).to_string(), n(*v)])
    .collect();
    table(o, &["State", "Identities"], &rows);
}

fn gc_health_section(o: &mut String, d: &Diagnosis) {
    let Some(h) = &d.gc_health else {
        return;
    };
    let _ = writeln!(o, "## cilium-operator GC\n");
    let mut rows = vec![vec![
        "Expected collection time (heartbeat timeout + GC interval)".into(),
        human_duration(h.expected_collection_seconds),
    ]];
    if let (Some(m), Some(id)) = (h.oldest_mark, &h.oldest_mark_identity) {
        rows.push(vec![
            "Oldest stale mark".into(),
            format!("{m} (identity {})", cell(id)),
        ]);
    }
    if let Some(t) = h.not_completed_since {
        rows.push(vec!["No GC pass completed since".into(), t.to_string()]);
    }
    rows.push(vec!["Overdue marks".into(), n(h.overdue_marks)]);
    rows.push(vec![
        "Unused identities held by an agent".into(),
        n(h.agent_held_unused),
    ]);
    match (&h.cilium, &h.workloads_problem) {
        (Some(c), _) => {
            rows.push(vec![
                "cilium-operator".into(),
                cell(&c.operator_images.join(", ")),
            ]);
            rows.push(vec![
                "cilium-agent".into(),
                cell(&c.agent_images.join(", ")),
            ]);
        }
        (None, Some(p)) => rows.push(vec!["Cilium workloads".into(), cell(p)]),
        (None, None) => {}
    }
    table(o, &["GC evidence", "Value"], &rows);
    let buckets: Vec<Vec<String>> = h
        .overdue_distribution
        .iter()
        .map(|b| vec![cell(&b.label), n(b.count)])
        .collect();
    table(o, &["Stale mark age (x expected)", "Identities"], &buckets);
    if let Some(c) = &h.cilium {
        if !c.operator_pods.is_empty() {
            let rows: Vec<Vec<String>> = c
                .operator_pods
                .iter()
                .map(|p| {
                    vec![
                        cell(&p.name),
                        p.restarts.to_string(),
                        p.running_since.map(|t| t.to_string()).unwrap_or_default(),
                        p.started_at.map(|t| t.to_string()).unwrap_or_default(),
                    ]
                })
                .collect();
            table(
                o,
                &["Operator pod", "Restarts", "Running since", "Started"],
                &rows,
            );
        }
    }
}

fn age_section(o: &mut String, d: &Diagnosis) {
    let a = &d.age;
    let bucket_rows = |b: &[AgeBucket]| -> Vec<Vec<String>> {
        b.iter().map(|b| vec![cell(&b.label), n(b.count)]).collect()
    };
    let _ = writeln!(o, "## Age and rate\n");
    table(o, &["Created", "Identities"], &bucket_rows(&a.created));
    table(
        o,
        &["Heartbeat mark age", "Identities"],
        &bucket_rows(&a.marks),
    );
    let _ = write!(
        o,
        "Marks past the {} heartbeat timeout: **{}**. Created in the last 24h: **{}** ({}/h)",
        human_duration(d.configuration.heartbeat_timeout_seconds),
        n(a.marks_past_timeout),
        n(a.created_last24h),
        a.creation_rate_per_hour
    );
    match (a.exhaustion_in_seconds, a.exhausted_at) {
        (Some(s), Some(at)) if s > 0.0 => {
            let _ = writeln!(
                o,
                "; at that rate the range is full in **{}** ({at}) if GC stalls.\n",
                human_duration(s)
            );
        }
        (Some(_), _) => {
            let _ = writeln!(o, "; the range is full.\n");
        }
        _ => {
            let _ = writeln!(o, ".\n");
        }
    }
}

fn churn_section(o: &mut String, d: &Diagnosis) {
    let c = &d.churn;
    let _ = writeln!(o, "## Churn\n");
    if !c.label_keys.is_empty() {
        let rows: Vec<Vec<String>> = c
            .label_keys
            .iter()
            .map(|k| {
                vec![
                    format!("`{}`", k.key.replace('`', "'")),
                    n(k.distinct_values),
                    n(k.identities),
                    format!("{}%", k.share_percent),
                    if k.high_cardinality { "**yes**" } else { "no" }.into(),
                ]
            })
            .collect();
        long_table(
            o,
            "label keys",
            &[
                "Label key",
                "Values",
                "Identities",
                "Share",
                "High cardinality",
            ],
            &rows,
        );
    }
    let ns_rows = |v: &[cilium_gc::diagnose::types::NamespaceStat]| -> Vec<Vec<String>> {
        v.iter()
            .map(|s| vec![cell(&s.namespace), n(s.identities), n(s.stale), n(s.unused)])
            .collect()
    };
    let header = ["Namespace", "Identities", "Stale", "Unused"];
    if !c.namespaces_by_identities.is_empty() {
        let _ = writeln!(o, "**Namespaces by identities**\n");
        long_table(
            o,
            "namespaces",
            &header,
            &ns_rows(&c.namespaces_by_identities),
        );
    }
    if !c.namespaces_by_stale.is_empty() {
        let _ = writeln!(o, "**Namespaces by stale identities**\n");
        long_table(o, "namespaces", &header, &ns_rows(&c.namespaces_by_stale));
    }
    let _ = writeln!(
        o,
        "Duplicate label sets: **{}** ({} surplus identities).\n",
        n(c.duplicates.groups),
        n(c.duplicates.surplus)
    );
    if !c.duplicates.examples.is_empty() {
        let rows: Vec<Vec<String>> = c
            .duplicates
            .examples
            .iter()
            .map(|g| {
                let labels = g
                    .labels
                    .iter()
                    .map(|(k, v)| cell(&format!("{k}={v}")))
                    .collect::<Vec<_>>()
                    .join("<br>");
                vec![cell(&g.identities.join(", ")), labels]
            })
            .collect();
        details(
            o,
            &format!("{} largest duplicate groups", rows.len()),
            &["Identities", "Security labels"],
            &rows,
        );
    }
}

fn integrity_section(o: &mut String, d: &Diagnosis) {
    let i = &d.integrity;
    let m = &d.modifiers;
    let _ = writeln!(o, "## Integrity and modifiers\n");
    table(
        o,
        &["Check", "Count"],
        &[
            vec![
                "Ids referenced by endpoints but missing".into(),
                n(i.dangling_ids),
            ],
            vec![
                "Endpoint references to missing ids".into(),
                n(i.dangling_references),
            ],
            vec![
                "Unused identities whose mark an agent stripped".into(),
                n(i.strip_loop),
            ],
            vec![
                "Identities changed after creation".into(),
                n(m.changed_identities),
            ],
        ],
    );
    if !i.dangling_examples.is_empty() {
        let rows: Vec<Vec<String>> = i
            .dangling_examples
            .iter()
            .map(|id| vec![id.to_string()])
            .collect();
        details(o, "Missing ids", &["Identity id"], &rows);
    }
    if !i.strip_loop_examples.is_empty() {
        let rows: Vec<Vec<String>> = i
            .strip_loop_examples
            .iter()
            .map(|e| {
                vec![
                    cell(&e.name),
                    opt(e.namespace.as_deref()),
                    cell(&e.manager),
                    e.time.to_string(),
                ]
            })
            .collect();
        details(
            o,
            "Identities whose mark was stripped while unused",
            &["Identity", "Namespace", "Manager", "Changed at"],
            &rows,
        );
    }
    if !m.managers.is_empty() {
        let rows: Vec<Vec<String>> = m
            .managers
            .iter()
            .map(|a| vec![cell(&a.manager), n(a.identities), a.latest.to_string()])
            .collect();
        long_table(
            o,
            "field managers",
            &["Last changed by", "Identities", "Latest change"],
            &rows,
        );
    }
}

fn config_section(o: &mut String, d: &Diagnosis) {
    let cfg = &d.configuration;
    let _ = writeln!(o, "## Configuration\n");
    if !cfg.found {
        let _ = writeln!(
            o,
            "_cilium-config could not be read: Cilium defaults shown._\n"
        );
    }
    let rows: Vec<Vec<String>> = cfg
        .values
        .iter()
        .map(|v| {
            let source = match v.source {
                cilium_gc::report::ConfigSource::CiliumConfig => "cilium-config",
                cilium_gc::report::ConfigSource::Flag => "flag",
                cilium_gc::report::ConfigSource::Default => "default",
                cilium_gc::report::ConfigSource::Discovered => "discovered",
            };
            let value = if v.value.is_empty() {
                "\"\"".to_string()
            } else {
                cell(&v.value)
            };
            vec![format!("`{}`", v.key), value, source.into()]
        })
        .collect();
    table(o, &["Key", "Value", "Source"], &rows);
    if let Some(s) = &cfg.suggested_labels {
        let _ = writeln!(o, "Suggested `labels`: `{}`\n", s.replace('`', "'"));
    }
}

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
            vec!["Started at".into(), r.started_at.to_string()],
            vec!["Duration".into(), format!("{:.1}s", r.duration_seconds)],
            vec!["Exit code".into(), r.exit_code.to_string()],
            vec!["Tool".into(), tool_line(&r.tool)],
        ],
    );
}

/// The main counts.
fn report_summary(o: &mut String, r: &Report) {
    let s = &r.summary;
    let _ = writeln!(o, "## Summary\n");
    let mut rows = vec![
        vec!["Identities scanned".into(), n(s.scanned)],
        vec!["Candidates (stale)".into(), n(s.candidates)],
    ];
    if r.mode != Mode::Scan {
        rows.extend([
            vec!["Deleted".into(), n(s.deleted)],
            vec!["Already gone".into(), n(s.already_gone)],
            vec![
                "Reclaimed during the run (left alone)".into(),
                n(s.reclaimed),
            ],
            vec!["Failed".into(), n(s.failed)],
            vec!["Not attempted".into(), n(s.not_attempted)],
            vec!["Marked (--mark)".into(), n(s.marked)],
            vec!["409 conflicts re-decided".into(), n(s.conflicts)],
            vec!["429 throttled".into(), n(s.throttled)],
            vec!["Retries".into(), n(s.retries)],
            vec![
                "Delete rate".into(),
                format!("{:.1}/s", s.delete_rate_per_second),
            ],
        ]);
    }
    rows.push(vec![
        "Endpoints / slices".into(),
        format!("{} / {}", n(s.endpoints), n(s.endpoint_slices)),
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
    .map(|(k, v)| vec![format!("`{k}`"), n(*v)])
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
                n(MAX_ITEMS as u64),
                n(acted.len() as u64)
            )
        } else {
            format!("Identities ({})", n(acted.len() as u64))
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
        tool_line(&r.tool),
        r.finished_at
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
            n(s.reasons.stale),
            if s.reasons.stale == 1 {
                "identity"
            } else {
                "identities"
            },
            n(s.scanned)
        ),
        Mode::Scan => format!("🟢 nothing stale (of {} scanned)", n(s.scanned)),
        _ if s.failed > 0 => format!(
            "🟠 {} deleted, {} failed, {} conflicts re-decided",
            n(s.deleted),
            n(s.failed),
            n(s.conflicts)
        ),
        _ => format!(
            "🟢 {} deleted, {} conflicts re-decided, {} reclaimed during the run and left alone",
            n(s.deleted),
            n(s.conflicts),
            n(s.reclaimed)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Column count of a table row: unescaped pipes minus one.
    pub(crate) fn columns(row: &str) -> usize {
        let mut prev = ' ';
        let mut pipes = 0;
        for c in row.chars() {
            if c == '|' && prev != '\\' {
                pipes += 1;
            }
            prev = c;
        }
        pipes - 1
    }

    #[test]
    fn cells_cannot_break_tables_or_inject_html() {
        let s = cell("a|b<script>\nx&y");
        assert_eq!(s, "a\\|b&lt;script&gt; x&amp;y");
        let mut o = String::new();
        table(
            &mut o,
            &["A", "B"],
            &[vec![s.clone(), "1".into()], vec!["x".into()]],
        );
        for line in o.lines().filter(|l| l.starts_with('|')) {
            assert_eq!(columns(line), 2, "{line}");
        }
    }

    #[test]
    fn report_has_verdict_tables_and_items() {
        let r = crate::render::tests::sample();
        let md = report(&r);
        assert!(md.starts_with("# kubectl cilium-gc delete\n"), "{md}");
        assert!(md.contains("**Verdict: 🟠 1 deleted, 1 failed"), "{md}");
        assert!(md.contains("| Kubernetes | v1.33.1 |"), "{md}");
        assert!(
            md.contains("<details><summary>Identities (2)</summary>"),
            "{md}"
        );
        assert!(md.contains("503 Service Unavailable"), "{md}");
        assert!(md.contains("## Next steps"), "{md}");
    }
}
