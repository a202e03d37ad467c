//! `diagnose` over many clusters: the single-cluster
//! [`diagnose`](crate::diagnose::diagnose) on every selected context, at
//! most `parallel` at a time, gathered into one [`FleetDiagnosis`] (one
//! ticket for many clusters). Each cluster's diagnosis is exactly what
//! `diagnose --context <it>` writes; the fleet adds the table's columns
//! (identity space, GC verdict, worst finding) and the fleet scan's
//! per-cluster failure and exit rule ([`fleet_exit`]).

use std::sync::Arc;
use std::time::Instant;

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tracing::Instrument as _;

use super::document::{fleet_exit, ClusterEntry, ClusterError, ClusterFailure, ClusterStatus};
use super::{Fullest, IdentitySpaceUse};
use crate::diagnose::{DiagnoseError, DiagnoseSettings};
use crate::exit::Exit;
use crate::report::{AbortReason, Tool, API_VERSION};
use crate::settings::ConnectSettings;
use crate::stop::{Stop, StopReason};

/// `kind` of the fleet diagnosis.
pub const FLEET_DIAGNOSIS_KIND: &str = "CiliumIdentityFleetDiagnosis";
/// `$id` of its published schema, also written as `$schema` in every document.
pub const FLEET_DIAGNOSIS_SCHEMA_ID: &str =
    "https://raw.githubusercontent.com/kubectl-cilium-gc/kubectl-cilium-gc/main/schema/fleet-diagnosis-v1.json";

/// `diagnose` over several clusters (`--context` repeated or a glob,
/// `--all-contexts`, `--context-regex`): one document, a table of the
/// clusters, then each cluster's diagnosis.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "CiliumIdentityFleetDiagnosis")]
pub struct FleetDiagnosis {
    /// The JSON Schema this document conforms to.
    #[serde(rename = "$schema")]
    pub schema: String,
    /// Document version: `cilium-gc.kubectl.io/v1`.
    pub api_version: String,
    /// Always `CiliumIdentityFleetDiagnosis`.
    pub kind: String,
    /// The program that wrote the document.
    pub tool: Tool,
    /// When the first diagnosis started (RFC 3339, UTC).
    pub started_at: Timestamp,
    /// When the document was written (RFC 3339, UTC).
    pub finished_at: Timestamp,
    /// Wall time of the whole run, in seconds.
    pub duration_seconds: f64,
    /// Clusters diagnosed at the same time (`--parallel`).
    pub parallel: u32,
    /// The process exit status: 0 only when every cluster was diagnosed,
    /// else the most severe cluster's (order: 143, 130, 1, 4, 5, 3, 2), as
    /// a fleet scan's.
    pub exit_code: u8,
    /// True when SIGINT or SIGTERM stopped the run early.
    pub interrupted: bool,
    /// True when contexts and servers are replaced by keyed hashes, and
    /// each diagnosis redacted (`--redact`), everywhere in this document.
    pub redacted: bool,
    /// Counts over every cluster.
    pub summary: FleetDiagnosisSummary,
    /// One entry per selected context, in the order they were selected:
    /// the fleet report's entries, with `diagnosis` (or `error`) and never
    /// a `report` (nothing is scanned or deleted). `status` `succeeded`
    /// means the cluster was diagnosed, whatever its findings.
    pub clusters: Vec<ClusterEntry>,
}

/// Counts over every cluster of a fleet diagnosis.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetDiagnosisSummary {
    /// Clusters selected.
    pub clusters: u64,
    /// Clusters diagnosed.
    pub diagnosed: u64,
    /// Clusters that could not be diagnosed (their entries say why).
    pub failed: u64,
    /// Findings over every diagnosis, by severity.
    pub findings: FindingCounts,
    /// The cluster whose local identity range is the most used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fullest: Option<Fullest>,
}

/// Findings by severity.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindingCounts {
    /// Act now.
    pub critical: u64,
    /// Act soon.
    pub warning: u64,
    /// Worth knowing.
    pub info: u64,
}

/// The published JSON Schema of the fleet diagnosis.
pub fn diagnosis_schema() -> serde_json::Value {
    crate::report::publishable_schema(
        schemars::schema_for!(FleetDiagnosis),
        FLEET_DIAGNOSIS_SCHEMA_ID,
    )
}

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
    let mut handles = Vec::with_capacity(contexts.len());
    for context in contexts {
        let kube = ConnectSettings {
            context: Some(context.clone()),
            ..kube.clone()
        };
        // Slots are taken in selection order, as a fleet scan takes them.
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.ok(),
            _ = stop.wait() => None,
        };
        let (ds, stop, context2) = (ds.clone(), stop.clone(), context.clone());
        let span = tracing::warn_span!("cluster", context = %context);
        let task = async move {
            match permit.filter(|_| stop.reason().is_none()) {
                Some(_permit) => diagnose_one(context2, &kube, &ds, &stop).await,
                None => ClusterEntry::not_started(context2, super::stop_exit(&stop)),
            }
        };
        handles.push((context.clone(), tokio::spawn(task.instrument(span))));
    }
    let mut entries = Vec::with_capacity(handles.len());
    for (context, handle) in handles {
        entries.push(handle.await.unwrap_or_else(|e| {
            let message = if e.is_panic() {
                crate::gc::panic_text(e.into_panic().as_ref())
            } else {
                e.to_string()
            };
            failed(
                ClusterEntry::not_started(context, Exit::Unexpected),
                AbortReason::InternalError.into(),
                format!("internal error: {message} (a bug: please report it)"),
                Exit::Unexpected,
            )
        }));
    }
    let interrupted = matches!(
        stop.reason(),
        Some(StopReason::Interrupt | StopReason::Terminate)
    );
    let exit = fleet_exit(
        entries
            .iter()
            .map(|e| Exit::from_code(e.exit_code).unwrap_or(Exit::Unexpected)),
    );
    let exit = if interrupted && exit == Exit::Success {
        super::stop_exit(stop)
    } else {
        exit
    };
    let mut doc = FleetDiagnosis {
        schema: FLEET_DIAGNOSIS_SCHEMA_ID.into(),
        api_version: API_VERSION.into(),
        kind: FLEET_DIAGNOSIS_KIND.into(),
        tool: crate::report::Tool::current(),
        started_at,
        finished_at: Timestamp::now(),
        duration_seconds: (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
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
    let stats = Arc::new(crate::stats::Stats::default());
    match crate::cluster::ApiClient::connect(kube, stats).await {
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
    match crate::diagnose::diagnose(kube, ds, stop).await {
        Ok(d) => {
            entry.status = ClusterStatus::Succeeded;
            entry.exit_code = Exit::Success.code();
            entry.with_diagnosis(d)
        }
        Err(_) if stop.reason().is_some() => failed_by_stop(entry, stop),
        Err(e) => {
            let reason = match e {
                DiagnoseError::CrdMissing => AbortReason::PreflightRefused,
                DiagnoseError::List(crate::scan::ScanError::NotInstalled(_)) => {
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
        super::stop_exit(stop),
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
            use crate::diagnose::Severity;
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
