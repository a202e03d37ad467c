//! The text form of a fleet report: one table row per cluster, the fleet's
//! totals, then what went wrong where. Also the table the one confirmation
//! of a fleet delete shows, and the view of a fleet diagnosis.

use std::fmt::Write as _;

use cilium_gc::thousands;
use cilium_gc::PendingWrites;
use cilium_gc_documents::fleet::{ClusterEntry, ClusterStatus};
use cilium_gc_documents::report::Mode;
use cilium_gc_fleet::{FleetDiagnosis, FleetReport};

use crate::views::format::{kebab, run_duration, Paint, Style};

/// One row of the clusters table, as plain cells (the Markdown view uses
/// the same cells).
pub fn fleet_row(e: &ClusterEntry, mode: Mode) -> Vec<String> {
    let dash = || "-".to_owned();
    let report = e.report.as_ref();
    let listed = report.filter(|r| r.summary.list_pages > 0);
    let done = |r: &cilium_gc::report::Report| match mode {
        Mode::Scan => thousands(r.summary.candidates),
        Mode::Delete => format!(
            "{}/{}",
            thousands(r.summary.deleted),
            thousands(r.summary.candidates)
        ),
        Mode::DryRunServer => format!(
            "{}/{}",
            thousands(r.summary.validated),
            thousands(r.summary.candidates)
        ),
    };
    vec![
        e.context.clone(),
        report
            .and_then(|r| r.cluster.kubernetes_version.clone())
            .unwrap_or_else(dash),
        listed
            .map(|r| thousands(r.summary.scanned))
            .or_else(|| Some(thousands(e.diagnosis.as_ref()?.identity_space.total)))
            .unwrap_or_else(dash),
        e.identity_space
            .map_or_else(dash, |s| format!("{:.1}%", s.utilisation_percent)),
        listed
            .map(|r| thousands(r.summary.reasons.stale))
            .or_else(|| {
                let d = e.diagnosis.as_ref()?;
                Some(thousands(d.identity_space.states.stale_candidates))
            })
            .unwrap_or_else(dash),
        listed.map_or_else(dash, done),
        e.gc_verdict.clone().unwrap_or_else(dash),
        e.worst_finding.as_ref().map_or_else(dash, |f| {
            format!("{}: {}", f.severity.as_str(), f.code.as_str())
        }),
        status_cell(e),
    ]
}

/// The header of the clusters table in `mode`.
pub fn fleet_header(mode: Mode) -> [&'static str; 9] {
    [
        "CONTEXT",
        "KUBERNETES",
        "IDENTITIES",
        "SPACE",
        "STALE",
        match mode {
            Mode::Scan => "ELIGIBLE",
            Mode::Delete => "DELETED/ELIGIBLE",
            Mode::DryRunServer => "VALIDATED/ELIGIBLE",
        },
        "GC VERDICT",
        "WORST FINDING",
        "RESULT",
    ]
}

fn status_cell(e: &ClusterEntry) -> String {
    match (e.status, &e.error) {
        (ClusterStatus::Succeeded, _) => "ok".into(),
        (_, Some(err)) => format!("exit {}: {}", e.exit_code, kebab(&err.reason)),
        (_, None) => format!("exit {}", e.exit_code),
    }
}

/// Columns padded to their widest cell; the last one is not padded.
fn aligned(rows: &[Vec<String>], paint: impl Fn(usize, usize, &str) -> String) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut o = String::new();
    for (i, r) in rows.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let padded = if c + 1 == cols {
                cell.clone()
            } else {
                format!("{cell:<w$}  ", w = widths[c])
            };
            line.push_str(&paint(i, c, &padded));
        }
        let _ = writeln!(o, "{}", line.trim_end());
    }
    o
}

/// The text view of a fleet report.
pub fn fleet_text(f: &FleetReport, style: Style) -> String {
    let p = Paint::new(style);
    let rows = f.clusters.iter().map(|e| fleet_row(e, f.mode));
    let statuses: Vec<ClusterStatus> = f.clusters.iter().map(|e| e.status).collect();
    let mut o = clusters_table(&p, &fleet_header(f.mode), rows, &statuses);
    o.push('\n');
    let s = &f.summary;
    let verb = match f.mode {
        Mode::Scan => format!("{} eligible for deletion", thousands(s.candidates)),
        Mode::Delete => format!(
            "{} deleted of {} eligible",
            thousands(s.deleted),
            thousands(s.candidates)
        ),
        Mode::DryRunServer => format!(
            "{} validated (dry run) of {} eligible",
            thousands(s.validated),
            thousands(s.candidates)
        ),
    };
    let _ = writeln!(
        o,
        "{} clusters: {} succeeded, {} failed; {} identities, {} stale, {verb}; {}",
        s.clusters,
        p.green(&s.succeeded.to_string()),
        if s.failed > 0 {
            p.red(&s.failed.to_string())
        } else {
            s.failed.to_string()
        },
        thousands(s.identities),
        thousands(s.reasons.stale),
        run_duration(f.span.duration_seconds),
    );
    if let Some(full) = &s.fullest {
        let _ = writeln!(
            o,
            "fullest identity space: {} at {:.1}% ({} of {})",
            full.context,
            full.identity_space.utilisation_percent,
            thousands(full.identity_space.allocated),
            thousands(full.identity_space.capacity)
        );
    }
    for e in f.clusters.iter().filter(|e| e.error.is_some()) {
        if let Some(err) = &e.error {
            let _ = writeln!(o, "{}: {}", p.bold(&e.context), err.message);
        }
    }
    if f.interrupted {
        let _ = writeln!(
            o,
            "{}",
            p.yellow("interrupted: no delete was started after the signal")
        );
    }
    if s.failed > 0 {
        let _ = writeln!(
            o,
            "{}",
            p.dim("details per cluster: -o json (each entry holds the cluster's whole report) or -o markdown")
        );
    }
    o
}

/// What a fleet delete asks before its first write: one row per cluster
/// about to write, then the totals.
pub fn fleet_confirmation(pending: &[PendingWrites]) -> String {
    let mut rows = vec![["CONTEXT", "SERVER", "IDENTITIES", "TO DELETE", "TO MARK"]
        .map(String::from)
        .to_vec()];
    for w in pending {
        rows.push(vec![
            w.context.clone().unwrap_or_else(|| "-".into()),
            w.server.clone(),
            thousands(w.scanned),
            thousands(w.deletes),
            thousands(w.marks),
        ]);
    }
    let mut o = aligned(&rows, |_, _, s| s.to_owned());
    let deletes: u64 = pending.iter().map(|w| w.deletes).sum();
    let marks: u64 = pending.iter().map(|w| w.marks).sum();
    let _ = writeln!(
        o,
        "About to delete {} stale identities{} on {} clusters.",
        thousands(deletes),
        if marks > 0 {
            format!(" and mark {} unmarked ones", thousands(marks))
        } else {
            String::new()
        },
        pending.len()
    );
    o
}

/// The header of a fleet diagnosis' clusters table.
pub fn fleet_diagnosis_header() -> [&'static str; 8] {
    [
        "CONTEXT",
        "KUBERNETES",
        "IDENTITIES",
        "SPACE",
        "STALE CANDIDATES",
        "GC VERDICT",
        "WORST FINDING",
        "RESULT",
    ]
}

/// One row of a fleet diagnosis' clusters table, as plain cells (the
/// Markdown view uses the same cells).
pub fn fleet_diagnosis_row(e: &ClusterEntry) -> Vec<String> {
    let dash = || "-".to_owned();
    let d = e.diagnosis.as_ref();
    vec![
        e.context.clone(),
        d.and_then(|d| d.cluster.kubernetes_version.clone())
            .unwrap_or_else(dash),
        d.map_or_else(dash, |d| thousands(d.identity_space.total)),
        e.identity_space
            .map_or_else(dash, |s| format!("{:.1}%", s.utilisation_percent)),
        d.map_or_else(dash, |d| {
            thousands(d.identity_space.states.stale_candidates)
        }),
        e.gc_verdict.clone().unwrap_or_else(dash),
        e.worst_finding.as_ref().map_or_else(dash, |f| {
            format!("{}: {}", f.severity.as_str(), f.code.as_str())
        }),
        match e.status {
            ClusterStatus::Succeeded => "diagnosed".into(),
            _ => status_cell(e),
        },
    ]
}

/// The text view of a fleet diagnosis: the clusters table, the totals and
/// what failed where, then each cluster's diagnosis under its context.
pub fn fleet_diagnosis_text(f: &FleetDiagnosis, style: Style) -> String {
    let p = Paint::new(style);
    let rows = f.clusters.iter().map(fleet_diagnosis_row);
    let statuses: Vec<ClusterStatus> = f.clusters.iter().map(|e| e.status).collect();
    let mut o = clusters_table(&p, &fleet_diagnosis_header(), rows, &statuses);
    o.push('\n');
    let s = &f.summary;
    let _ = writeln!(
        o,
        "{} clusters: {} diagnosed, {} failed; findings: {} critical, {} warning, {} info; {}",
        s.clusters,
        p.green(&s.diagnosed.to_string()),
        if s.failed > 0 {
            p.red(&s.failed.to_string())
        } else {
            s.failed.to_string()
        },
        s.findings.critical,
        s.findings.warning,
        s.findings.info,
        run_duration(f.span.duration_seconds),
    );
    if let Some(full) = &s.fullest {
        let _ = writeln!(
            o,
            "fullest identity space: {} at {:.1}% ({} of {})",
            full.context,
            full.identity_space.utilisation_percent,
            thousands(full.identity_space.allocated),
            thousands(full.identity_space.capacity)
        );
    }
    for e in &f.clusters {
        if let Some(err) = &e.error {
            let _ = writeln!(o, "{}: {}", p.bold(&e.context), err.message);
        }
    }
    for e in &f.clusters {
        if let Some(d) = &e.diagnosis {
            let _ = writeln!(o, "\n{}\n", p.bold(&format!("=== {} ===", e.context)));
            o.push_str(&crate::views::diagnosis::text(d, style));
        }
    }
    o
}

/// The clusters table of a fleet document: a bold header, then one row per
/// cluster whose last cell (its status) is green when it succeeded and red
/// otherwise.
fn clusters_table<const N: usize>(
    p: &Paint,
    header: &[&str; N],
    rows: impl Iterator<Item = Vec<String>>,
    statuses: &[ClusterStatus],
) -> String {
    let mut all = vec![header.map(String::from).to_vec()];
    all.extend(rows);
    let last = N - 1;
    aligned(&all, |i, c, s| {
        if i == 0 {
            p.bold(s)
        } else if c == last {
            match statuses[i - 1] {
                ClusterStatus::Succeeded => p.green(s),
                _ => p.red(s),
            }
        } else {
            s.to_owned()
        }
    })
}
