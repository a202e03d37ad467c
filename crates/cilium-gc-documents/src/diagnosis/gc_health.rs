//! The diagnosis' account of cilium-operator's identity GC: whether its
//! passes end, what its metrics and the agents' refusals say, and the known
//! defect of the release it runs.

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::identity_space::AgeBucket;

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
