//! The diagnosis document: what `diagnose -o json|yaml` prints.
//!
//! Like the GC report these types are the contract: `schema/diagnosis-v1.json`
//! is generated from them ([`schema`]) and a test fails when it drifts.
//! v1 only gains optional fields. camelCase fields, RFC 3339 UTC times,
//! durations in seconds as numbers, lower-kebab enums.

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::header::{Document, Header};
use crate::report::ConfigValue;

mod findings;
mod gc_health;
mod identity_space;
mod ticket;

pub use findings::{Finding, FindingCode, Level, Severity};
pub use gc_health::{
    AllocationRefusals, CiliumWorkloads, DefectStatus, GcCounters, GcHealth, KnownDefect,
    NamespaceCount, OperatorGcMetrics, OperatorMetricsRead, OperatorPodStatus, PassEvidence,
    PassVerdict, PodRefusals,
};
pub use identity_space::{
    AgeAndRate, AgeBucket, Churn, DuplicateGroup, Duplicates, IdentitySpace, Integrity,
    LabelKeyStat, LocalRangeFrom, ManagerActivity, Modifiers, NamespaceStat, StateCounts,
    StripExample,
};
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
