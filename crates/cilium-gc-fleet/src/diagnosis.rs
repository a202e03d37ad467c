//! `diagnose` over many clusters: the single-cluster
//! [`diagnose`](cilium_gc_diagnose::diagnose) on every selected context, at
//! most `parallel` at a time, gathered into one [`FleetDiagnosis`] (one
//! ticket for many clusters). Each cluster's diagnosis is exactly what
//! `diagnose --context <it>` writes; the fleet adds the table's columns
//! (identity space, GC verdict, worst finding) and the fleet scan's
//! per-cluster failure and exit rule ([`fleet_exit`]).

use std::sync::Arc;
use std::time::Instant;

use cilium_gc_documents::header::{Header, Span};
use jiff::Timestamp;
use tokio::sync::Semaphore;

use super::document::{fleet_exit, BuildEntry as _};
use super::runner::{each_cluster, interrupted, stop_exit, Cluster};
use cilium_gc::ConnectSettings;
use cilium_gc_cluster::exit::Exit;
use cilium_gc_cluster::stop::Stop;
use cilium_gc_diagnose::{DiagnoseError, DiagnoseSettings};
use cilium_gc_documents::fleet::{
    ClusterEntry, ClusterError, ClusterFailure, ClusterStatus, FleetDiagnosis,
    FleetDiagnosisSummary, Fullest, IdentitySpaceUse,
};
use cilium_gc_documents::report::AbortReason;

/// Diagnose every context of `contexts` with `ds` (each context replacing
/// `kube`'s, every other connection flag kept), at most `parallel` at a
/// time. Always returns the document, however it ended.
pub async fn diagnose_fleet(
    kube: &ConnectSettings,
    ds: &DiagnoseSettings,
    contexts: &[String],
    parallel: u32,
    stop: &Stop,
) -> (FleetDiagnosis, Exit) {
    let (started_at, started) = (Timestamp::now(), Instant::now());
    let parallel = parallel.max(1);
    let slots = Arc::new(Semaphore::new(parallel as usize));
    let task = |c: Cluster| {
        let (ds, stop) = (ds.clone(), stop.clone());
        async move {
            match c.permit.filter(|_| stop.reason().is_none()) {
                Some(_permit) => diagnose_one(c.context, &c.kube, &ds, &stop).await,
                None => ClusterEntry::not_started(c.context, stop_exit(&stop)),
            }
        }
    };
    // The whole document is redacted at the end.
    let entries = each_cluster(kube, contexts, &slots, stop, task, |_| {}).await;
    let interrupted = interrupted(stop);
    let exit = fleet_exit(
        entries
            .iter()
            .map(|e| Exit::from_code(e.exit_code).unwrap_or(Exit::Unexpected)),
    );
    let exit = if interrupted && exit == Exit::Success {
        stop_exit(stop)
    } else {
        exit
    };
    let mut doc = FleetDiagnosis {
        header: Header::new(cilium_gc_documents::report::Tool::current()),
        span: Span::new(started_at, Timestamp::now(), started.elapsed()),
        parallel,
        exit_code: exit.code(),
        interrupted,
        redacted: false,
        summary: summarize(&entries),
        clusters: entries,
    };
    if ds.redact {
        super::redact::redact_diagnosis(&mut doc);
    }
    (doc, exit)
}

/// One cluster: does its server answer at all (one `GET /version`: a
/// blackholed address would otherwise cost every retry of the diagnosis),
/// then its diagnosis.
async fn diagnose_one(
    context: String,
    kube: &ConnectSettings,
    ds: &DiagnoseSettings,
    stop: &Stop,
) -> ClusterEntry {
    let mut entry = ClusterEntry::not_started(context, Exit::Success);
    entry.error = None;
    let stats = Arc::new(cilium_gc_cluster::stats::Stats::default());
    match cilium_gc_cluster::cluster::ApiClient::connect(kube, stats).await {
        Ok((api, endpoint)) => {
            entry.server = Some(endpoint.server.clone());
            let answer = tokio::select! {
                a = api.get("/version", 0) => a,
                _ = stop.wait() => return failed_by_stop(entry, stop),
            };
            if answer.code == 0 {
                let message = format!(
                    "the API server at {} did not answer: {}",
                    endpoint.server, answer.message
                );
                return failed(entry, AbortReason::ReadFailed.into(), message, Exit::Usage);
            }
        }
        Err(e) => {
            let e = DiagnoseError::Connect(e);
            let message = e.message();
            return failed(entry, AbortReason::ReadFailed.into(), message, e.exit());
        }
    }
    match cilium_gc_diagnose::diagnose(kube, ds, stop).await {
        Ok(d) => {
            entry.status = ClusterStatus::Succeeded;
            entry.exit_code = Exit::Success.code();
            entry.with_diagnosis(d)
        }
        Err(_) if stop.reason().is_some() => failed_by_stop(entry, stop),
        Err(e) => {
            let reason = match e {
                DiagnoseError::CrdMissing => AbortReason::PreflightRefused,
                DiagnoseError::List(cilium_gc_cluster::scan::ScanError::NotInstalled(_)) => {
                    AbortReason::PreflightRefused
                }
                _ => AbortReason::ReadFailed,
            };
            let message = e.message();
            failed(entry, reason.into(), message, e.exit())
        }
    }
}

/// `entry` failed with `reason`.
fn failed(
    mut entry: ClusterEntry,
    reason: ClusterFailure,
    message: String,
    exit: Exit,
) -> ClusterEntry {
    entry.status = ClusterStatus::Failed;
    entry.exit_code = exit.code();
    entry.error = Some(ClusterError { reason, message });
    entry
}

/// `entry` stopped by a signal while being diagnosed.
fn failed_by_stop(entry: ClusterEntry, stop: &Stop) -> ClusterEntry {
    failed(
        entry,
        AbortReason::Interrupted.into(),
        "stopped by signal while diagnosing: no diagnosis".into(),
        stop_exit(stop),
    )
}

/// The summary of `entries`.
fn summarize(entries: &[ClusterEntry]) -> FleetDiagnosisSummary {
    let mut s = FleetDiagnosisSummary {
        clusters: entries.len() as u64,
        ..FleetDiagnosisSummary::default()
    };
    for e in entries {
        if e.status == ClusterStatus::Succeeded {
            s.diagnosed += 1;
        } else {
            s.failed += 1;
        }
        for f in e.diagnosis.iter().flat_map(|d| &d.findings) {
            use cilium_gc_documents::diagnosis::Severity;
            match f.severity {
                Severity::Critical => s.findings.critical += 1,
                Severity::Warning => s.findings.warning += 1,
                Severity::Info => s.findings.info += 1,
            }
        }
        if let Some(space) = e.identity_space {
            let ratio = |u: &IdentitySpaceUse| u.allocated as f64 / u.capacity.max(1) as f64;
            if s.fullest
                .as_ref()
                .is_none_or(|f| ratio(&space) > ratio(&f.identity_space))
            {
                s.fullest = Some(Fullest {
                    context: e.context.clone(),
                    identity_space: space,
                });
            }
        }
    }
    s
}
