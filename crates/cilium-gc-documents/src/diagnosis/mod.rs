//! The diagnosis document: what `diagnose -o json|yaml` prints.
//!
//! Like the GC report these types are the contract: `schema/diagnosis-v1.json`
//! is generated from them ([`schema`]) and a test fails when it drifts.
//! v1 only gains optional fields. camelCase fields, RFC 3339 UTC times,
//! durations in seconds as numbers, lower-kebab enums.

use std::collections::BTreeMap;

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::header::{Document, Header};
use crate::report::{ConfigValue, IdRange};

mod ticket;
pub use ticket::{
    AffectedPolicy, CaptureTimeFrom, DroppedKey, LabelsWhatIf, PolicyKind, SavedSource,
    WriterActivity, WriterRole, Writers,
};

/// `kind` of the diagnosis.
pub const KIND: &str = "CiliumIdentityDiagnosis";
/// `$id` of the published schema, also written as `$schema` in every diagnosis.
pub const SCHEMA_ID: &str =
    "https://raw.githubusercontent.com/kubectl-cilium-gc/kubectl-cilium-gc/main/schema/diagnosis-v1.json";

impl Document for Diagnosis {
    const KIND: &'static str = KIND;
    const SCHEMA_ID: &'static str = SCHEMA_ID;
    const KIND_DOC: &'static str = "Always `CiliumIdentityDiagnosis`.";
    const TOOL_DOC: &'static str = "The program that wrote the diagnosis.";
}

/// A ticket-ready account of the health of a cluster's identity space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "CiliumIdentityDiagnosis")]
pub struct Diagnosis {
    /// `$schema`, `apiVersion`, `kind`, `tool` (see [`Header`]).
    #[serde(flatten)]
    pub header: Header<Diagnosis>,
    /// The cluster looked at.
    pub cluster: DiagnosedCluster,
    /// The cluster time the identities were judged by (RFC 3339, UTC).
    pub generated_at: Timestamp,
    /// True when namespaces, label values, the server and the context were replaced by hashes (`--redact`).
    pub redacted: bool,
    /// What needs attention, most severe first.
    pub findings: Vec<Finding>,
    /// How full the local identity range is, and what its identities are.
    pub identity_space: IdentitySpace,
    /// When identities were created and marked, and how fast they appear.
    pub age: AgeAndRate,
    /// What makes new identities: label keys, namespaces, duplicates.
    pub churn: Churn,
    /// References to missing identities and marks that keep disappearing.
    pub integrity: Integrity,
    /// Who changed identities after they were created.
    pub modifiers: Modifiers,
    /// The cilium-config values that shape identity allocation and GC.
    pub configuration: Configuration,
    /// Problems met while collecting (the diagnosis may be incomplete).
    pub warnings: Vec<String>,
    /// Why cilium-operator's GC is or is not keeping up: mark ages, the Cilium version and its known defects, operator restarts, agent-held identities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_health: Option<GcHealth>,
    /// Who writes the identities, from every `managedFields` entry: per field manager and operation, how many identities it wrote lately and after a heartbeat mark (the writes that turn the operator's delete into a 409).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writers: Option<Writers>,
    /// What a proposed Cilium `labels` filter would do (`--labels`): the label sets the identities would collapse to, the keys that drive it, and the policies whose selectors use a key it drops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels_what_if: Option<LabelsWhatIf>,
    /// Present when the diagnosis was made from saved objects (`--from`), not a live cluster: where they came from, the capture time used as "now", and what evidence was missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SavedSource>,
    /// Present when cilium-agent logs were read (`--from` a sysdump's `logs-<pod>-<container>-<ts>.log`): every attempt Cilium's allocator refused because its range had no free id, per pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_refusals: Option<AllocationRefusals>,
    /// Where the local range is heading at the recent creation pace, judged with how cilium-operator's GC works: when it is full if GC stops, how many stale identities a working GC holds, and whether that fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<crate::forecast::Forecast>,
}

/// The refused allocation attempts the agents' own logs record: each
/// `Key allocation attempt failed` warning carrying `no more available IDs
/// in configured space` (`Allocator.Allocate` and `lockedAllocate`,
/// `pkg/allocator/allocator.go`, in v1.15.6 and v1.19.3 alike). One line per
/// attempt: a pod's single allocation may be refused up to 16 times.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllocationRefusals {
    /// Log files read.
    pub logs_read: u64,
    /// Refused attempts in all of them.
    pub total: u64,
    /// Per log file's pod, most refusals first; only pods with at least one.
    pub by_pod: Vec<PodRefusals>,
}

/// One agent pod's refused attempts, from its log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodRefusals {
    /// The pod (and container) the log file names.
    pub pod: String,
    /// Refused attempts in its log.
    pub refusals: u64,
    /// The first refused attempt's time, when the line carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_at: Option<Timestamp>,
    /// The last refused attempt's time, when the line carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_at: Option<Timestamp>,
    /// One refused attempt's log line, as written (at most 400 characters; with `--redact`, the message and error only).
    pub example: String,
}

/// Evidence on whether cilium-operator's identity GC keeps up, and why not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcHealth {
    /// identity-heartbeat-timeout + identity-gc-interval, in seconds: how long a working operator lets a mark get.
    pub expected_collection_seconds: f64,
    /// Stale candidates whose mark is older than 3 times that: passes are being abandoned or not run.
    pub overdue_marks: u64,
    /// Stale candidates by mark age, in multiples of the expected collection time.
    pub overdue_distribution: Vec<AgeBucket>,
    /// The oldest heartbeat mark on an unused identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_mark: Option<Timestamp>,
    /// The identity carrying it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_mark_identity: Option<String>,
    /// No GC pass can have completed since this time: one would have deleted the oldest marked identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_completed_since: Option<Timestamp>,
    /// The Cilium workloads read from the Cilium namespace; absent when they could not be read (see `workloadsProblem`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cilium: Option<CiliumWorkloads>,
    /// Why the Cilium workloads could not be read (an optional permission), when they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads_problem: Option<String>,
    /// Unused, unmarked identities last written by an agent recently and older than a pod start: held by an agent, used by no endpoint.
    pub agent_held_unused: u64,
    /// Their namespaces, most identities first (top 10; hashes with `--redact`).
    pub agent_held_namespaces: Vec<NamespaceCount>,
    /// cilium-operator's own identity-GC metrics, read through the API server's pod proxy (optional `pods/proxy` permission); absent when no operator pod was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_metrics: Option<OperatorGcMetrics>,
    /// What the verdict on cilium-operator's GC passes rests on: its metrics when they could be read, else the marks' ages, else only its version.
    #[serde(default)]
    pub pass_evidence: PassEvidence,
}

/// What the verdict on cilium-operator's GC passes rests on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PassEvidence {
    /// The operator's `identity_gc_runs` against its uptime, or between two reads.
    OperatorMetrics,
    /// The age of the oldest heartbeat mark on an unused identity.
    HeartbeatMarks,
    /// Only the operator's version and its known defects (inferred, not seen).
    Version,
    /// Nothing to judge by.
    #[default]
    None,
}

/// cilium-operator's identity-GC metrics and what they say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGcMetrics {
    /// Over all operator pods: the leader's verdict.
    pub verdict: PassVerdict,
    /// `identity-gc-interval` the passes were counted against, in seconds.
    pub gc_interval_seconds: f64,
    /// Each operator pod whose metrics were asked for.
    pub pods: Vec<OperatorMetricsRead>,
}

/// Whether cilium-operator's GC passes complete.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PassVerdict {
    /// Passes complete about once per interval.
    Completing,
    /// Passes start but do not complete: the success counter lags the uptime or does not move (cilium#33142 seen).
    NotCompleting,
    /// No identity-GC series after several intervals: a standby replica, or no pass ever completed.
    NoPasses,
    /// Too early, or nothing could be read.
    #[default]
    Unknown,
}

/// One operator pod's metrics, read once or twice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorMetricsRead {
    /// Pod name.
    pub pod: String,
    /// The metrics port proxied to.
    pub port: u16,
    /// The first read; absent when it failed (see `problem`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<GcCounters>,
    /// The second read, when one was made (`--operator-metrics-wait`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second: Option<GcCounters>,
    /// Passes the uptime allows at this interval (uptime / interval + 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_passes: Option<f64>,
    /// Passes counted as completed (`outcome` success + fail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_passes: Option<u64>,
    /// This pod's verdict.
    pub verdict: PassVerdict,
    /// What the verdict rests on, one line each.
    pub evidence: Vec<String>,
    /// Why the metrics could not be read (no `pods/proxy` permission, pod not running, no answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The identity-GC series of one scrape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcCounters {
    /// When it was read (cluster time).
    pub read_at: Timestamp,
    /// `cilium_operator_process_start_time_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_started_at: Option<Timestamp>,
    /// `cilium_operator_identity_gc_runs{outcome="success"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_success: Option<u64>,
    /// `cilium_operator_identity_gc_runs{outcome="fail"}` (passes cut by a cancelled context only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_fail: Option<u64>,
    /// `cilium_operator_identity_gc_entries{status="alive"}` after the last completed pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries_alive: Option<u64>,
    /// `cilium_operator_identity_gc_entries{status="deleted"}` in the last completed pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries_deleted: Option<u64>,
    /// `cilium_operator_errors_warnings_total{level="error"}` of the identity-GC log subsystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_errors: Option<u64>,
    /// `cilium_operator_identity_gc_latency{outcome="success"}`: how long the
    /// last completed pass took, in seconds (1.16 and later; absent in 1.15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pass_seconds: Option<f64>,
}

impl Default for GcCounters {
    fn default() -> Self {
        GcCounters {
            read_at: Timestamp::UNIX_EPOCH,
            process_started_at: None,
            runs_success: None,
            runs_fail: None,
            entries_alive: None,
            entries_deleted: None,
            gc_errors: None,
            last_pass_seconds: None,
        }
    }
}

/// Identities of one namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceCount {
    /// The namespace (a hash with `--redact`).
    pub namespace: String,
    /// Identities.
    pub identities: u64,
}

/// cilium-operator and cilium-agent as deployed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CiliumWorkloads {
    /// Images of the cilium-operator Deployment's containers.
    pub operator_images: Vec<String>,
    /// The operator's version from its image tag (`1.15.6`), when the tag is a version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// Images of the cilium DaemonSet's containers.
    pub agent_images: Vec<String>,
    /// The agent's version from its image tag, when the tag is a version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The operator's pods.
    pub operator_pods: Vec<OperatorPodStatus>,
    /// Known identity-GC defects of these versions, with the upstream issue.
    pub known_defects: Vec<KnownDefect>,
}

/// One cilium-operator pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorPodStatus {
    /// Pod name.
    pub name: String,
    /// Container restarts.
    pub restarts: u64,
    /// When the pod started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// When its container last (re)started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_since: Option<Timestamp>,
}

/// Whether a known defect is confirmed to affect the running version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DefectStatus {
    /// Upstream sources confirm this version has the defect.
    Affected,
    /// This version may have it: the fixed version could not be confirmed; `check` says what to look at.
    Unconfirmed,
}

/// A known upstream identity-GC defect that may apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KnownDefect {
    /// The upstream issue, e.g. `https://github.com/cilium/cilium/issues/33142`.
    pub issue: String,
    /// The upstream fix, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_by: Option<String>,
    /// What goes wrong.
    pub summary: String,
    /// Which component (`cilium-operator` or `cilium-agent`) and version.
    pub component: String,
    /// Confirmed, or to check.
    pub status: DefectStatus,
    /// What the affected and fixed versions are, as far as upstream sources confirm, and what to check.
    pub check: String,
}

/// The cluster looked at. Never carries a credential.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosedCluster {
    /// API server URL (a hash with `--redact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// kubeconfig context used, if any (a hash with `--redact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Kubernetes `gitVersion` reported by `/version`, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Whether the CiliumEndpoint CRD is served.
    pub endpoint_crd: bool,
    /// Whether the CiliumEndpointSlice CRD is served.
    pub endpoint_slice_crd: bool,
    /// CiliumEndpoints seen.
    pub endpoints: u64,
    /// CiliumEndpointSlices seen.
    pub endpoint_slices: u64,
}

/// How urgent a finding is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Act now: allocation will fail or is failing soon.
    Critical,
    /// Act soon: something is wrong or wasteful.
    Warning,
    /// Worth knowing; nothing to fix on its own.
    Info,
}

impl Severity {
    /// The lower-kebab name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// What a finding is about. Stable: scripts match on these.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FindingCode {
    /// The local identity range is 80% (warning) or 95% (critical) used.
    IdentitySpaceNearlyFull,
    /// At the recent creation pace (see `forecast.pace`; before it, the last 24 hours' rate) the range runs out within a week if GC stops.
    ExhaustionSoon,
    /// Stale identities wait to be deleted: GC is behind.
    StaleBacklog,
    /// Label keys with (nearly) one value per identity split the identity space.
    HighCardinalityLabels,
    /// No `labels` filter is configured while high-cardinality keys exist.
    LabelsFilterMissing,
    /// The `labels` filter lets high-cardinality keys through.
    LabelsFilterLeaky,
    /// Several identities carry the same security labels.
    DuplicateIdentities,
    /// Endpoints reference identities that do not exist.
    DanglingReferences,
    /// Unused identities lose their heartbeat mark to an agent again and again.
    MarkStripLoop,
    /// `identity-gc-interval` is 0: cilium-operator never collects identities.
    GcDisabled,
    /// `identity-heartbeat-timeout` is under 5 minutes.
    HeartbeatTimeoutLow,
    /// `identity-allocation-mode` is not `crd`: these objects are not the identity store.
    NotCrdMode,
    /// `cilium-config` could not be read; Cilium's defaults were assumed.
    ConfigUnavailable,
    /// No endpoint source could be read, or there are no endpoints: "in use" is unknown.
    UsageUnknown,
    /// Heartbeat marks that are not RFC 3339 times.
    MalformedMarks,
    /// Objects that could not be decoded.
    MalformedObjects,
    /// Stale marks far older than a working operator would let them get: GC passes are not completing.
    GcNotCompleting,
    /// The running cilium-operator or cilium-agent version has a known identity-GC defect.
    KnownGcDefect,
    /// cilium-operator restarted recently or often: each restart delays GC by a heartbeat timeout.
    OperatorRestarts,
    /// Unused identities recently refreshed by an agent: held by an agent, used by no endpoint.
    AgentHeldUnused,
    /// cilium-operator's own metrics show its GC passes starting but not completing.
    GcPassesFailing,
    /// Something other than Cilium writes identities, some of them after the operator's mark: each such write makes the operator's delete fail with 409.
    ConflictWriters,
    /// The proposed `labels` filter (`--labels`) drops keys that network policies select on.
    LabelsFilterBreaksPolicies,
    /// The agents' logs show Cilium's allocator refusing new identities: its range has no free id, and new pods wait without networking.
    IdentityAllocationRefused,
    /// At the recent creation pace, the stale identities a working GC holds (pace × (heartbeat timeout + GC interval)) plus those in use exceed the local range (critical) or 80% of it (warning): no GC pass can keep up.
    GcCannotKeepUp,
}

impl FindingCode {
    /// The lower-kebab name.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingCode::IdentitySpaceNearlyFull => "identity-space-nearly-full",
            FindingCode::ExhaustionSoon => "exhaustion-soon",
            FindingCode::StaleBacklog => "stale-backlog",
            FindingCode::HighCardinalityLabels => "high-cardinality-labels",
            FindingCode::LabelsFilterMissing => "labels-filter-missing",
            FindingCode::LabelsFilterLeaky => "labels-filter-leaky",
            FindingCode::DuplicateIdentities => "duplicate-identities",
            FindingCode::DanglingReferences => "dangling-references",
            FindingCode::MarkStripLoop => "mark-strip-loop",
            FindingCode::GcDisabled => "gc-disabled",
            FindingCode::HeartbeatTimeoutLow => "heartbeat-timeout-low",
            FindingCode::NotCrdMode => "not-crd-mode",
            FindingCode::ConfigUnavailable => "config-unavailable",
            FindingCode::UsageUnknown => "usage-unknown",
            FindingCode::MalformedMarks => "malformed-marks",
            FindingCode::MalformedObjects => "malformed-objects",
            FindingCode::GcNotCompleting => "gc-not-completing",
            FindingCode::KnownGcDefect => "known-gc-defect",
            FindingCode::OperatorRestarts => "operator-restarts",
            FindingCode::AgentHeldUnused => "agent-held-unused",
            FindingCode::GcPassesFailing => "gc-passes-failing",
            FindingCode::ConflictWriters => "conflict-writers",
            FindingCode::LabelsFilterBreaksPolicies => "labels-filter-breaks-policies",
            FindingCode::IdentityAllocationRefused => "identity-allocation-refused",
            FindingCode::GcCannotKeepUp => "gc-cannot-keep-up",
        }
    }
}

/// One thing that needs attention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// How urgent it is.
    pub severity: Severity,
    /// What it is about.
    pub code: FindingCode,
    /// One sentence for humans.
    pub message: String,
    /// The numbers and names that show it.
    pub evidence: Vec<String>,
    /// What to do about it, when there is something to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
}

/// How full the local identity range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Under 80% used.
    Ok,
    /// 80% or more used.
    Warning,
    /// 95% or more used.
    Critical,
}

/// The identities and the range they are allocated from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdentitySpace {
    /// CiliumIdentity objects listed (decodable ones).
    pub total: u64,
    /// Identities per state.
    pub states: StateCounts,
    /// The local identity range (from cluster-id and max-connected-clusters).
    pub local_range: IdRange,
    /// Ids in the local range.
    pub capacity: u64,
    /// Identities whose id is in the local range.
    pub allocated: u64,
    /// `allocated` as a percent of `capacity`, one decimal.
    pub utilisation_percent: f64,
    /// Ids still free in the local range.
    pub headroom: u64,
    /// ok under 80%, warning from 80%, critical from 95%.
    pub level: Level,
    /// What `localRange` was computed from, as Cilium computes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_range_from: Option<LocalRangeFrom>,
}

/// The settings the local identity range follows from, as Cilium's
/// allocator computes it (`GetMinimalAllocationIdentity` and
/// `GetMaximumAllocationIdentity`, `pkg/identity/numericidentity.go`):
/// `max-connected-clusters` 255 leaves 16 bits to a cluster's ids, 511
/// leaves 15; cluster 0 starts at 256 (below are reserved), cluster N > 0
/// at N shifted by those bits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalRangeFrom {
    /// `cluster-id`.
    pub cluster_id: u64,
    /// Where `cluster-id` came from.
    pub cluster_id_source: crate::report::ConfigSource,
    /// `max-connected-clusters`.
    pub max_connected_clusters: u64,
    /// Where `max-connected-clusters` came from.
    pub max_connected_clusters_source: crate::report::ConfigSource,
}

/// Identities per state. Every identity is counted once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateCounts {
    /// Referenced by a CiliumEndpoint or CiliumEndpointSlice.
    pub in_use: u64,
    /// Unused, heartbeat mark older than the heartbeat timeout: GC may delete them.
    pub stale_candidates: u64,
    /// Unused, marked less than a heartbeat timeout ago.
    pub unused_marked: u64,
    /// Unused, no mark, older than one identity-gc-interval: the operator should have marked them.
    pub unused_unmarked: u64,
    /// Unused, no mark, created less than one identity-gc-interval ago: too young to judge.
    pub too_young: u64,
    /// Outside the local range or not numeric (another cluster's, or not an identity).
    pub not_local: u64,
    /// Unused, with a heartbeat mark that is not a time.
    pub malformed_mark: u64,
}

/// How many identities fall in one age range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgeBucket {
    /// Human label of the range, e.g. `1h-24h`.
    pub label: String,
    /// Lower bound of the age, in seconds (inclusive).
    pub from_seconds: f64,
    /// Upper bound of the age, in seconds (exclusive); absent for the last bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_seconds: Option<f64>,
    /// Identities in the range.
    pub count: u64,
}

/// When identities were created and marked, and the creation rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgeAndRate {
    /// Identities by creation age (disjoint buckets: last hour, last day, last week, older).
    pub created: Vec<AgeBucket>,
    /// Identities without a readable creationTimestamp.
    pub created_unknown: u64,
    /// Heartbeat marks by age.
    pub marks: Vec<AgeBucket>,
    /// Marked identities whose mark is older than the heartbeat timeout.
    pub marks_past_timeout: u64,
    /// Existing identities in the local range created in the last 24 hours (deleted ones cannot be seen, so this is a lower bound; other clusters' ids do not count).
    pub created_last24h: u64,
    /// `createdLast24h` per hour.
    pub creation_rate_per_hour: f64,
    /// At that rate, seconds until the local range is full if GC stalls; absent when nothing was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exhaustion_in_seconds: Option<f64>,
    /// The time the range would be full at that rate, if GC stalls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exhausted_at: Option<Timestamp>,
}

/// What makes new identities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Churn {
    /// Security-label keys ranked by distinct values (top 20).
    pub label_keys: Vec<LabelKeyStat>,
    /// Namespaces ranked by identity count (top 10).
    pub namespaces_by_identities: Vec<NamespaceStat>,
    /// Namespaces ranked by stale identities (top 10, only those with any).
    pub namespaces_by_stale: Vec<NamespaceStat>,
    /// Identities that share their security labels with another identity.
    pub duplicates: Duplicates,
}

/// One security-label key across all identities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelKeyStat {
    /// The key with its source, e.g. `k8s:job-name`.
    pub key: String,
    /// Distinct values of the key.
    pub distinct_values: u64,
    /// Identities that carry the key.
    pub identities: u64,
    /// `identities` as a percent of all identities: the share of the space this key splits.
    pub share_percent: f64,
    /// True when the key has at least 10 values and one value per two identities or more: a churn driver.
    pub high_cardinality: bool,
}

/// Identities of one pod namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceStat {
    /// The namespace (a hash with `--redact`).
    pub namespace: String,
    /// Identities allocated for it.
    pub identities: u64,
    /// Of which stale candidates.
    pub stale: u64,
    /// Of which unused (any unused state).
    pub unused: u64,
}

/// Identities with identical security labels.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Duplicates {
    /// Label sets carried by more than one identity.
    pub groups: u64,
    /// Identities beyond the first in each group: the ids that could be freed.
    pub surplus: u64,
    /// The largest groups (up to 10).
    pub examples: Vec<DuplicateGroup>,
}

/// Identities that carry the same security labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DuplicateGroup {
    /// The identity names, ascending.
    pub identities: Vec<String>,
    /// Their security labels (values hashed with `--redact`).
    pub labels: BTreeMap<String, String>,
}

/// References to missing identities, and marks that keep disappearing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Integrity {
    /// Distinct local ids (256 and up) referenced by endpoints but with no CiliumIdentity.
    pub dangling_ids: u64,
    /// Endpoint references to those ids (a CES counts once per endpoint in it).
    pub dangling_references: u64,
    /// Up to 20 dangling ids, ascending.
    pub dangling_examples: Vec<u64>,
    /// Unused, unmarked identities last changed by an agent after creation.
    pub strip_loop: u64,
    /// Up to 20 of them, most recently changed first.
    pub strip_loop_examples: Vec<StripExample>,
}

/// An identity whose mark an agent removed while nothing used it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StripExample {
    /// Identity name.
    pub name: String,
    /// Pod namespace (a hash with `--redact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The field manager of the last change.
    pub manager: String,
    /// When it changed the identity.
    pub time: Timestamp,
}

/// Who changed identities after they were created.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Modifiers {
    /// Identities whose newest managedFields entry is later than their creation.
    pub changed_identities: u64,
    /// Per field manager of that newest entry, most identities first.
    pub managers: Vec<ManagerActivity>,
}

/// Identities last changed by one field manager.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagerActivity {
    /// The field manager, e.g. `cilium-agent`.
    pub manager: String,
    /// Identities it changed last.
    pub identities: u64,
    /// Its most recent change.
    pub latest: Timestamp,
}

/// The cilium-config values that matter, and what follows from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Configuration {
    /// Whether the ConfigMap could be read.
    pub found: bool,
    /// Each relevant key, its effective value and where it came from.
    pub values: Vec<ConfigValue>,
    /// `identity-gc-interval` in seconds (0: GC disabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_interval_seconds: Option<f64>,
    /// `identity-heartbeat-timeout` in seconds.
    pub heartbeat_timeout_seconds: f64,
    /// High-cardinality keys the current `labels` filter lets into identities.
    pub leaky_keys: Vec<String>,
    /// The complete `labels` value to set so those keys no longer split identities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_labels: Option<String>,
}

/// The JSON Schema of [`Diagnosis`], draft 2020-12, with our `$id`.
///
/// This is what `schema/diagnosis-v1.json` holds; `tests/it/diagnose/contract.rs`
/// fails when the two differ. Same conventions as the report's schema.
pub fn schema() -> serde_json::Value {
    crate::report::publishable_schema(schemars::schema_for!(Diagnosis), SCHEMA_ID)
}
