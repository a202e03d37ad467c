//! How the engine builds the fleet report (whose type, and schema, are the
//! documents crate's [`FleetReport`](cilium_gc_documents::fleet::FleetReport)):
//! each cluster's entry from its run, what only the fleet view can say
//! (which cluster is fullest, how many failed) and the fleet's exit code.

use cilium_gc_documents::header::{Header, Span};
use jiff::Timestamp;

use cilium_gc_cluster::exit::Exit;
use cilium_gc_diagnose::Diagnosis;
use cilium_gc_documents::diagnosis::{DefectStatus, FindingCode};
use cilium_gc_documents::report::{AbortReason, Mode, Report};

use super::spool::Clusters;
use cilium_gc_documents::fleet::{
    ClusterEntry, ClusterError, ClusterStatus, FleetReason, FleetSummary, Fullest,
    IdentitySpaceUse, WorstFinding,
};

/// The fleet report as the engine holds it: the documents crate's
/// [`FleetReport`](cilium_gc_documents::fleet::FleetReport) whose clusters
/// are [`Clusters`] (finished ones spooled to disk). It serializes to the
/// same document, against the same schema, as the plain one.
pub type FleetReport = cilium_gc_documents::fleet::FleetReport<Clusters>;

/// The order of severity of exit codes, most severe first: a signal (the
/// whole run was stopped), a bug, items that failed while deleting, a
/// blast-radius refusal, a preflight refusal, a usage or connection error.
/// The fleet exits with the first of these any cluster ended with.
pub(crate) const SEVERITY: [Exit; 7] = [
    Exit::Terminated,
    Exit::Interrupted,
    Exit::Unexpected,
    Exit::PartialFailure,
    Exit::BlastRadius,
    Exit::Refused,
    Exit::Usage,
];

/// The fleet's exit: success only when every cluster succeeded, else the
/// most severe by [`SEVERITY`].
pub(crate) fn fleet_exit(exits: impl IntoIterator<Item = Exit>) -> Exit {
    let rank = |e: Exit| SEVERITY.iter().position(|s| *s == e).unwrap_or(usize::MAX);
    exits
        .into_iter()
        .filter(|e| *e != Exit::Success)
        .min_by_key(|e| rank(*e))
        .unwrap_or(Exit::Success)
}

/// How the engine builds a [`ClusterEntry`].
pub(crate) trait BuildEntry: Sized {
    /// The entry of a cluster whose run went its course.
    fn from_run(context: String, report: Report, exit: Exit) -> Self;
    /// The entry of a cluster whose run never started.
    fn not_started(context: String, exit: Exit) -> Self;
    /// This entry with its cluster's diagnosis.
    fn with_diagnosis(self, diagnosis: Diagnosis) -> Self;
}

impl BuildEntry for ClusterEntry {
    fn from_run(context: String, report: Report, exit: Exit) -> Self {
        ClusterEntry {
            server: report.cluster.server.clone(),
            status: if exit == Exit::Success {
                ClusterStatus::Succeeded
            } else {
                ClusterStatus::Failed
            },
            exit_code: exit.code(),
            error: report.aborted.as_ref().map(ClusterError::from).or_else(|| {
                (exit != Exit::Success).then(|| ClusterError {
                    reason: if report.summary.failed > 0 {
                        FleetReason::ItemsFailed.into()
                    } else {
                        AbortReason::Unexpected.into()
                    },
                    message: format!(
                        "finished with exit code {}: {} of {} candidates could not be deleted",
                        exit.code(),
                        report.summary.failed,
                        report.summary.candidates
                    ),
                })
            }),
            identity_space: identity_space(&report),
            context,
            gc_verdict: None,
            worst_finding: None,
            report: Some(report),
            diagnosis: None,
            diagnosis_error: None,
        }
    }

    /// The entry of a cluster the fleet run was stopped before starting.
    fn not_started(context: String, exit: Exit) -> Self {
        ClusterEntry {
            context,
            server: None,
            status: ClusterStatus::NotStarted,
            exit_code: exit.code(),
            error: Some(ClusterError {
                reason: FleetReason::NotStarted.into(),
                message: "stopped by signal before this cluster's run started: nothing was read or written".into(),
            }),
            identity_space: None,
            gc_verdict: None,
            worst_finding: None,
            report: None,
            diagnosis: None,
            diagnosis_error: None,
        }
    }

    /// Attach the diagnosis, and what its findings say of GC. When the run
    /// stopped before listing (a refused delete), the identity space is
    /// the diagnosis' count.
    fn with_diagnosis(mut self, diagnosis: Diagnosis) -> Self {
        if self.identity_space.is_none() {
            let s = &diagnosis.identity_space;
            self.identity_space = Some(IdentitySpaceUse {
                allocated: s.allocated,
                capacity: s.capacity,
                utilisation_percent: (s.utilisation_percent * 100.0).round() / 100.0,
            });
        }
        self.gc_verdict = Some(gc_verdict(&diagnosis));
        self.worst_finding = diagnosis
            .findings
            .iter()
            .min_by_key(|f| f.severity)
            .map(|f| WorstFinding {
                severity: f.severity,
                code: f.code,
                message: f.message.clone(),
            });
        self.diagnosis = Some(diagnosis);
        self
    }
}

/// How full `report`'s local range was, when identities were listed.
pub(crate) fn identity_space(report: &Report) -> Option<IdentitySpaceUse> {
    if report.summary.list_pages == 0 {
        return None;
    }
    let r = &report.options.local_range;
    let capacity = r.max.saturating_sub(r.min) + 1;
    let allocated = report
        .summary
        .scanned
        .saturating_sub(report.summary.reasons.not_local);
    let percent = allocated as f64 * 100.0 / capacity as f64;
    Some(IdentitySpaceUse {
        allocated,
        capacity,
        utilisation_percent: (percent * 100.0).round() / 100.0,
    })
}

/// What a diagnosis says of identity GC in a few words, most telling first:
/// a known defect the running version has (`operator 1.15.3: cilium#33142`;
/// one upstream cannot confirm for this version counts only while GC is
/// visibly struggling, and says `(unconfirmed)`), the mode, GC switched off,
/// passes not completing, a stale backlog, else that it keeps up.
pub(crate) fn gc_verdict(d: &Diagnosis) -> String {
    let has = |code: FindingCode| d.findings.iter().any(|f| f.code == code);
    let struggling = has(FindingCode::GcNotCompleting) || has(FindingCode::StaleBacklog);
    if has(FindingCode::NotCrdMode) {
        return "not in CRD mode".to_owned();
    }
    if let Some(c) = d.gc_health.as_ref().and_then(|g| g.cilium.as_ref()) {
        let of = |status: DefectStatus| {
            c.known_defects
                .iter()
                .filter(|k| k.status == status)
                .collect::<Vec<_>>()
        };
        let (defects, note) = match of(DefectStatus::Affected) {
            a if !a.is_empty() => (a, ""),
            _ if struggling => (of(DefectStatus::Unconfirmed), " (unconfirmed)"),
            _ => (Vec::new(), ""),
        };
        if let Some(first) = defects.first() {
            let agent = first.component.contains("agent");
            let (component, version) = if agent {
                ("agent", c.agent_version.as_deref())
            } else {
                ("operator", c.operator_version.as_deref())
            };
            let issues = defects
                .iter()
                .filter(|k| k.component.contains("agent") == agent)
                .map(|k| short_issue(&k.issue))
                .collect::<Vec<_>>()
                .join(", ");
            return format!("{component} {}: {issues}{note}", version.unwrap_or("?"));
        }
    }
    let verdict = if has(FindingCode::GcDisabled) {
        "GC disabled (identity-gc-interval 0)"
    } else if has(FindingCode::GcNotCompleting) {
        "GC passes not completing"
    } else if has(FindingCode::StaleBacklog) {
        "GC behind (stale backlog)"
    } else if has(FindingCode::UsageUnknown) {
        "usage unknown"
    } else {
        "GC is keeping up"
    };
    verdict.to_owned()
}

/// `https://github.com/cilium/cilium/issues/33142` as `cilium#33142`.
fn short_issue(url: &str) -> String {
    match url
        .trim_end_matches('/')
        .rsplit_once("/issues/")
        .or_else(|| url.trim_end_matches('/').rsplit_once("/pull/"))
    {
        Some((repo, n)) => {
            let name = repo.rsplit('/').next().unwrap_or("cilium");
            format!("{name}#{n}")
        }
        None => url.to_owned(),
    }
}

/// The fleet summary of `entries`.
pub(crate) fn summarize(entries: &[ClusterEntry]) -> FleetSummary {
    let mut s = FleetSummary {
        clusters: entries.len() as u64,
        ..FleetSummary::default()
    };
    for e in entries {
        if e.status == ClusterStatus::Succeeded {
            s.succeeded += 1;
        } else {
            s.failed += 1;
        }
        let Some(r) = &e.report else { continue };
        let rs = &r.summary;
        s.identities += rs.scanned;
        s.reasons.merge(&rs.reasons);
        s.candidates += rs.candidates;
        s.deleted += rs.deleted;
        s.validated += rs.validated;
        s.failed_items += rs.failed;
        if let Some(space) = e.identity_space {
            let ratio = |u: &IdentitySpaceUse| u.allocated as f64 / u.capacity.max(1) as f64;
            let fuller = s
                .fullest
                .as_ref()
                .is_none_or(|f| ratio(&space) > ratio(&f.identity_space));
            if fuller {
                s.fullest = Some(Fullest {
                    context: e.context.clone(),
                    identity_space: space,
                });
            }
        }
    }
    s
}

/// The document for `entries`, however the fleet run ended.
pub(crate) fn fleet_report(
    entries: Clusters,
    mode: Mode,
    parallel: u32,
    started_at: Timestamp,
    started: std::time::Instant,
    interrupted: bool,
) -> (FleetReport, Exit) {
    let exit = fleet_exit(
        entries
            .iter()
            .map(|e| Exit::from_code(e.exit_code).unwrap_or(Exit::Unexpected))
            .collect::<Vec<_>>(),
    );
    let report = FleetReport {
        header: Header::new(cilium_gc_documents::report::Tool::current()),
        span: Span::new(started_at, Timestamp::now(), started.elapsed()),
        mode,
        parallel,
        exit_code: exit.code(),
        interrupted,
        redacted: false,
        summary: summarize(&entries[..]),
        clusters: entries,
    };
    (report, exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_exit_is_the_most_severe_cluster_exit() {
        use Exit::*;
        assert_eq!(fleet_exit([]), Success);
        assert_eq!(fleet_exit([Success, Success]), Success);
        assert_eq!(fleet_exit([Success, Usage]), Usage);
        assert_eq!(fleet_exit([Usage, Refused, Success]), Refused);
        assert_eq!(fleet_exit([Refused, BlastRadius]), BlastRadius);
        assert_eq!(
            fleet_exit([BlastRadius, PartialFailure, Usage]),
            PartialFailure
        );
        assert_eq!(fleet_exit([PartialFailure, Unexpected]), Unexpected);
        assert_eq!(fleet_exit([Unexpected, Interrupted, Usage]), Interrupted);
        assert_eq!(fleet_exit([Interrupted, Terminated]), Terminated);
        // Every non-success exit has a rank.
        for e in [
            Unexpected,
            Usage,
            Refused,
            PartialFailure,
            BlastRadius,
            Interrupted,
            Terminated,
        ] {
            assert!(SEVERITY.contains(&e), "{e:?}");
        }
    }

    /// `--help`, the README and the schema state the order [`SEVERITY`] is.
    #[test]
    fn the_documented_order_is_the_one_applied() {
        let order = SEVERITY
            .iter()
            .map(|e| e.code().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        assert_eq!(order, "143, 130, 1, 4, 5, 3, 2");
        assert!(Exit::HELP.contains(&order), "{}", Exit::HELP);
        let schema = cilium_gc_documents::fleet::schema().to_string();
        assert!(schema.contains(&format!("(order: {order})")));
    }

    #[test]
    fn issues_are_shortened() {
        assert_eq!(
            short_issue("https://github.com/cilium/cilium/issues/33142"),
            "cilium#33142"
        );
        assert_eq!(
            short_issue("https://github.com/cilium/cilium/pull/1/"),
            "cilium#1"
        );
        assert_eq!(short_issue("cilium#7"), "cilium#7");
    }
}
