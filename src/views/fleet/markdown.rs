//! `-o markdown` of a fleet report: the verdict, the clusters table, then
//! each cluster's own report and findings folded into `<details>`; and a
//! fleet diagnosis, each cluster's whole diagnosis folded the same way. With
//! `--redact` the document is redacted before it gets here.

use std::fmt::Write as _;

use cilium_gc::thousands;
use cilium_gc_documents::report::{Mode, Tool};

use crate::views::markdown::*;
use cilium_gc_documents::fleet::{ClusterEntry, ClusterStatus, FleetDiagnosisSummary};
use cilium_gc_fleet::{FleetDiagnosis, FleetReport};

/// The fleet report as Markdown.
pub fn fleet(f: &FleetReport) -> String {
    let mut o = String::new();
    let verb = match f.mode {
        Mode::Scan => "scan",
        Mode::Delete => "delete",
        Mode::DryRunServer => "delete --dry-run=server",
    };
    let s = &f.summary;
    let _ = writeln!(o, "# kubectl cilium-gc {verb}: {} clusters\n", s.clusters);
    let mark = if s.failed > 0 { "🔴" } else { "🟢" };
    let fullest = s
        .fullest
        .as_ref()
        .map(|x| {
            format!(
                "; fullest identity space {} at {:.1}%",
                cell(&x.context),
                x.identity_space.utilisation_percent
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "**Verdict: {mark} {} of {} clusters succeeded; {} stale, {} deleted{fullest}**\n",
        s.succeeded,
        s.clusters,
        thousands(s.reasons.stale),
        thousands(s.deleted),
    );
    about(
        &mut o,
        About {
            started_at: f.span.started_at,
            duration_seconds: f.span.duration_seconds,
            parallel: f.parallel,
            exit_code: f.exit_code,
            redacted: f.redacted,
            tool: &f.header.tool,
        },
    );
    let _ = writeln!(o, "## Clusters\n");
    let header = super::text::fleet_header(f.mode)
        .map(|h| crate::views::phrases::capitalised(&h.to_lowercase()));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = f
        .clusters
        .iter()
        .map(|e| {
            super::text::fleet_row(e, f.mode)
                .iter()
                .map(|c| cell(c))
                .collect()
        })
        .collect();
    table(&mut o, &header, &rows);
    let _ = writeln!(o, "## Per cluster\n");
    // Full entries, one at a time (their items are on disk until now).
    for i in 0..f.clusters.len() {
        let e = f.clusters.full(i).unwrap_or_else(|_| f.clusters[i].clone());
        cluster_details(&mut o, &e);
    }
    o
}

/// One cluster in `<details>`: why it failed, its findings, its report.
fn cluster_details(o: &mut String, e: &ClusterEntry) {
    let outcome = match e.status {
        ClusterStatus::Succeeded => "🟢 succeeded".to_owned(),
        _ => format!("🔴 exit {}", e.exit_code),
    };
    let _ = writeln!(
        o,
        "<details><summary>{}: {outcome}</summary>\n",
        cell(&e.context)
    );
    if let Some(err) = &e.error {
        let _ = writeln!(o, "**Error:** {}\n", cell(&err.message));
    }
    if let Some(d) = &e.diagnosis {
        let _ = writeln!(o, "**Findings**\n");
        crate::views::diagnosis::findings_table(o, &d.findings);
    }
    if let Some(why) = &e.diagnosis_error {
        let _ = writeln!(o, "No diagnosis: {}\n", cell(why));
    }
    if let Some(r) = &e.report {
        // The cluster's own report, its headings one level down.
        for line in crate::views::report::markdown(r).lines() {
            if line.starts_with('#') {
                let _ = writeln!(o, "##{line}");
            } else {
                let _ = writeln!(o, "{line}");
            }
        }
    }
    let _ = writeln!(o, "</details>\n");
}

/// A fleet diagnosis as Markdown: the verdict, the clusters table, then each
/// cluster's whole diagnosis folded into `<details>`.
pub fn fleet_diagnosis(f: &FleetDiagnosis) -> String {
    let mut o = String::new();
    let s = &f.summary;
    let _ = writeln!(o, "# Cilium identity diagnosis: {} clusters\n", s.clusters);
    let _ = writeln!(o, "**Verdict: {}**\n", fleet_diagnosis_verdict(s));
    about(
        &mut o,
        About {
            started_at: f.span.started_at,
            duration_seconds: f.span.duration_seconds,
            parallel: f.parallel,
            exit_code: f.exit_code,
            redacted: f.redacted,
            tool: &f.header.tool,
        },
    );
    let _ = writeln!(o, "## Clusters\n");
    let header = super::text::fleet_diagnosis_header()
        .map(|h| crate::views::phrases::capitalised(&h.to_lowercase()));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = f
        .clusters
        .iter()
        .map(|e| {
            super::text::fleet_diagnosis_row(e)
                .iter()
                .map(|c| cell(c))
                .collect()
        })
        .collect();
    table(&mut o, &header, &rows);
    let _ = writeln!(o, "## Per cluster\n");
    for e in &f.clusters {
        cluster_diagnosis(&mut o, e);
    }
    o
}

/// The fleet diagnosis's verdict line: a mark, how many clusters were
/// diagnosed, the findings, the fullest identity space.
fn fleet_diagnosis_verdict(s: &FleetDiagnosisSummary) -> String {
    let mark = if s.failed > 0 || s.findings.critical > 0 {
        "🔴"
    } else if s.findings.warning > 0 {
        "🟡"
    } else {
        "🟢"
    };
    let fullest = s
        .fullest
        .as_ref()
        .map(|x| {
            format!(
                "; fullest identity space {} at {:.1}%",
                cell(&x.context),
                x.identity_space.utilisation_percent
            )
        })
        .unwrap_or_default();
    format!(
        "{mark} {} of {} clusters diagnosed; {} critical, {} warning findings{fullest}",
        s.diagnosed, s.clusters, s.findings.critical, s.findings.warning,
    )
}

/// One cluster of the fleet diagnosis, folded: its outcome, its error, its
/// own diagnosis.
fn cluster_diagnosis(o: &mut String, e: &ClusterEntry) {
    let outcome = match e.status {
        ClusterStatus::Succeeded => {
            format!("🟢 {}", e.gc_verdict.as_deref().unwrap_or("diagnosed"))
        }
        _ => format!("🔴 exit {}", e.exit_code),
    };
    let _ = writeln!(
        o,
        "<details><summary>{}: {}</summary>\n",
        cell(&e.context),
        cell(&outcome)
    );
    if let Some(err) = &e.error {
        let _ = writeln!(o, "**Error:** {}\n", cell(&err.message));
    }
    if let Some(d) = &e.diagnosis {
        // The cluster's own diagnosis, its headings one level down.
        for line in crate::views::diagnosis::markdown(d).lines() {
            if line.starts_with('#') {
                let _ = writeln!(o, "##{line}");
            } else {
                let _ = writeln!(o, "{line}");
            }
        }
    }
    let _ = writeln!(o, "</details>\n");
}

/// What a fleet document says about its own run; the report and the
/// diagnosis carry the same fields, shown in one "About" table.
struct About<'a> {
    started_at: jiff::Timestamp,
    duration_seconds: f64,
    parallel: u32,
    exit_code: u8,
    redacted: bool,
    tool: &'a Tool,
}

/// The "About" table of a fleet document.
fn about(o: &mut String, a: About<'_>) {
    table(
        o,
        &["About", "Value"],
        &[
            vec!["Started at".into(), a.started_at.to_string()],
            vec!["Duration".into(), format!("{:.1}s", a.duration_seconds)],
            vec!["Clusters at a time".into(), a.parallel.to_string()],
            vec!["Exit code".into(), a.exit_code.to_string()],
            vec![
                "Redacted".into(),
                if a.redacted { "yes" } else { "no" }.into(),
            ],
            vec!["Tool".into(), tool_line(a.tool)],
        ],
    );
}
