//! The fleet documents: the fleet report's parts (one entry per cluster,
//! the fleet's counts) and the whole fleet diagnosis, one document for
//! `scan`, `delete` or `diagnose` over many clusters, holding each
//! cluster's ordinary [`Report`] or [`Diagnosis`] unchanged.
//!
//! `schema/fleet-report-v1.json` and `schema/fleet-diagnosis-v1.json` are
//! generated from these types and a test fails when a committed file
//! drifts. Same rules as the report's: v1 only ever gains optional fields.
//!
//! [`FleetReport`] is generic over how it holds its clusters: a plain
//! `Vec<ClusterEntry>` by default (what a reader deserializes), or the
//! engine's `cilium_gc::fleet::Clusters`, which keeps finished clusters
//! spooled on disk and serializes them back one at a time. Either way the
//! document written, and its schema, is the same.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diagnosis::{Diagnosis, FindingCode, Severity};
use crate::header::{Document, Header, Span, Timed};
use crate::report::{Abort, AbortReason, Mode, ReasonCounts, Report};

/// `kind` of the fleet report.
pub const FLEET_KIND: &str = "CiliumIdentityGCFleetReport";
/// `$id` of the published schema, also written as `$schema` in every fleet report.
pub const FLEET_SCHEMA_ID: &str =
    "https://raw.githubusercontent.com/kubectl-cilium-gc/kubectl-cilium-gc/main/schema/fleet-report-v1.json";

/// The result of one `kubectl cilium-gc` scan or delete over several
/// clusters (`--context` repeated, `--all-contexts`, `--context-regex`).
// `C` holds the clusters: any sequence that serializes as the entries (see
// the module doc); the schema always says `Vec<ClusterEntry>`. (A plain
// comment: a doc line here would change the published schema's text.)
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "CiliumIdentityGCFleetReport", bound = "")]
pub struct FleetReport<C = Vec<ClusterEntry>> {
    /// `$schema`, `apiVersion`, `kind`, `tool` (see [`Header`]).
    #[serde(flatten)]
    pub header: Header<FleetReport>,
    /// `startedAt`, `finishedAt`, `durationSeconds` (see [`Span`]).
    #[serde(flatten)]
    pub span: Span<FleetReport>,
    /// What every cluster's run was allowed to do.
    pub mode: Mode,
    /// Clusters run at the same time (`--parallel`).
    pub parallel: u32,
    /// The process exit status: 0 only when every cluster's run succeeded,
    /// else the most severe cluster's (order: 143, 130, 1, 4, 5, 3, 2).
    pub exit_code: u8,
    /// True when SIGINT or SIGTERM stopped the fleet run early.
    pub interrupted: bool,
    /// True when contexts and servers are replaced by keyed hashes
    /// (`--redact`) everywhere in this document.
    pub redacted: bool,
    /// Counts over every cluster.
    pub summary: FleetSummary,
    /// One entry per selected context, in the order they were selected.
    #[schemars(with = "Vec<ClusterEntry>")]
    pub clusters: C,
}

impl Document for FleetReport {
    const KIND: &'static str = FLEET_KIND;
    const SCHEMA_ID: &'static str = FLEET_SCHEMA_ID;
    const KIND_DOC: &'static str = "Always `CiliumIdentityGCFleetReport`.";
    const TOOL_DOC: &'static str = "The program that wrote the report.";
}

impl Timed for FleetReport {
    const STARTED_DOC: &'static str = "When the fleet run started (RFC 3339, UTC).";
    const FINISHED_DOC: &'static str = "When the fleet report was written (RFC 3339, UTC).";
    const DURATION_DOC: &'static str = "Wall time of the whole fleet run, in seconds.";
}

/// The published JSON Schema of the fleet report.
pub fn schema() -> serde_json::Value {
    crate::report::publishable_schema(schemars::schema_for!(FleetReport), FLEET_SCHEMA_ID)
}

/// Counts over every cluster of the fleet run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetSummary {
    /// Clusters selected.
    pub clusters: u64,
    /// Clusters whose run succeeded (exit code 0).
    pub succeeded: u64,
    /// Clusters whose run did not (their entries say why).
    pub failed: u64,
    /// Identities listed, over every cluster.
    pub identities: u64,
    /// Identities per decision reason, over every cluster.
    pub reasons: ReasonCounts,
    /// Deletion candidates at scan time, over every cluster.
    pub candidates: u64,
    /// Identities deleted, over every cluster (0 with `--dry-run=server`).
    pub deleted: u64,
    /// With `--dry-run=server`: deletes the servers validated, over every cluster.
    pub validated: u64,
    /// Candidates that could not be deleted, over every cluster.
    pub failed_items: u64,
    /// The cluster whose local identity range is the most used, when any
    /// cluster was listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fullest: Option<Fullest>,
}

/// The fullest identity space of the fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fullest {
    /// Its context (a hash with `--redact`).
    pub context: String,
    /// How full its local range is.
    pub identity_space: IdentitySpaceUse,
}

/// How much of a cluster's local identity range its CiliumIdentities take,
/// as its run listed them (before any delete).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdentitySpaceUse {
    /// Identities in the local range.
    pub allocated: u64,
    /// Ids in the local range (65280 for cluster 0).
    pub capacity: u64,
    /// `allocated` as a percentage of `capacity`, two decimals.
    pub utilisation_percent: f64,
}

/// How one cluster's run ended, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterStatus {
    /// Exit code 0.
    Succeeded,
    /// Anything else: see `error` and the report.
    Failed,
    /// The fleet run was stopped before this cluster's run started.
    NotStarted,
}

/// One cluster of the fleet run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEntry {
    /// The kubeconfig context (a hash with `--redact`).
    pub context: String,
    /// The API server URL, when the context names one (a hash with `--redact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// How its run ended.
    pub status: ClusterStatus,
    /// The exit code this cluster's run would have ended a single-context
    /// run with.
    pub exit_code: u8,
    /// Why the run did not succeed: the report's `aborted`, failed items,
    /// or why it never ran. Absent on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ClusterError>,
    /// How full its identity space was when listed (by the run, else by
    /// the diagnosis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_space: Option<IdentitySpaceUse>,
    /// What diagnose's findings say of its identity GC, in a few words
    /// (e.g. `operator 1.15.3: cilium#33142`, `GC is keeping up`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_verdict: Option<String>,
    /// The most severe finding of its diagnosis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_finding: Option<WorstFinding>,
    /// The cluster's run, exactly as `--context <this>` alone writes it
    /// (schema `report-v1.json`). Absent only when it never ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
    /// The read-only health report `diagnose` writes (schema
    /// `diagnosis-v1.json`), made just before the run, so it describes the
    /// cluster as the run found it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<Diagnosis>,
    /// Why no diagnosis could be made, when the run reached the cluster but
    /// diagnose could not. Never changes the exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis_error: Option<String>,
}

/// Why a cluster's run did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterError {
    /// The category.
    pub reason: ClusterFailure,
    /// A one-line explanation for humans.
    pub message: String,
}

/// Why a cluster failed: its run's own abort reason (the same words the
/// single-cluster report's `aborted.reason` uses), or one only a fleet has.
/// Serialized as the bare kebab-case word either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ClusterFailure {
    /// The cluster's run aborted, for this reason.
    Aborted(AbortReason),
    /// The cluster failed in a way only a fleet run has.
    Fleet(FleetReason),
}

/// The failures only a fleet run has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FleetReason {
    /// The run finished, but some candidates could not be deleted.
    ItemsFailed,
    /// The fleet run was stopped before this cluster's run started.
    NotStarted,
}

impl From<AbortReason> for ClusterFailure {
    fn from(r: AbortReason) -> Self {
        ClusterFailure::Aborted(r)
    }
}

impl From<FleetReason> for ClusterFailure {
    fn from(r: FleetReason) -> Self {
        ClusterFailure::Fleet(r)
    }
}

impl From<&Abort> for ClusterError {
    fn from(a: &Abort) -> Self {
        ClusterError {
            reason: a.reason.into(),
            message: a.message.clone(),
        }
    }
}

/// A finding, in short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorstFinding {
    /// How urgent it is.
    pub severity: Severity,
    /// What it is about.
    pub code: FindingCode,
    /// One sentence for humans.
    pub message: String,
}

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
    /// `$schema`, `apiVersion`, `kind`, `tool` (see [`Header`]).
    #[serde(flatten)]
    pub header: Header<FleetDiagnosis>,
    /// `startedAt`, `finishedAt`, `durationSeconds` (see [`Span`]).
    #[serde(flatten)]
    pub span: Span<FleetDiagnosis>,
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

impl Document for FleetDiagnosis {
    const KIND: &'static str = FLEET_DIAGNOSIS_KIND;
    const SCHEMA_ID: &'static str = FLEET_DIAGNOSIS_SCHEMA_ID;
    const KIND_DOC: &'static str = "Always `CiliumIdentityFleetDiagnosis`.";
    const TOOL_DOC: &'static str = "The program that wrote the document.";
}

impl Timed for FleetDiagnosis {
    const STARTED_DOC: &'static str = "When the first diagnosis started (RFC 3339, UTC).";
    const FINISHED_DOC: &'static str = "When the document was written (RFC 3339, UTC).";
    const DURATION_DOC: &'static str = "Wall time of the whole run, in seconds.";
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
