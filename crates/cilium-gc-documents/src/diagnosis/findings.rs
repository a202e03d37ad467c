//! The diagnosis' findings: what is wrong, how urgent, and the evidence.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
