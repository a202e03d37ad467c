//! What the diagnosis reads: everything collected from the cluster, as
//! plain data. Its own module so that both the analysis (`analyze`) and the
//! GC-health checks (`gc_health`) read it without reading each other.

use std::collections::BTreeMap;

use cilium_gc_cluster::discovery::Crds;
use cilium_gc_cluster::model::Identity;

use cilium_gc_documents::diagnosis::{OperatorMetricsRead, OperatorPodStatus};

/// One CiliumIdentity as the diagnosis needs it: what `scan` decodes, plus
/// the full `security-labels` map (label keys and values drive churn).
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityRecord {
    /// The identity as [`cilium_gc_cluster::model::decode_identity`] reads it.
    pub identity: Identity,
    /// `security-labels`: `source:key` → value.
    pub security_labels: BTreeMap<String, String>,
}

/// Everything collected from the cluster. Built by the shell in `mod.rs`
/// (or by tests), then only read.
#[derive(Debug, Clone, Default)]
pub struct Input {
    /// Every decodable identity.
    pub identities: Vec<IdentityRecord>,
    /// Identities that could not be decoded (name and problem), already one line each.
    pub malformed: Vec<String>,
    /// Identity id → endpoint references to it, from CEPs and CESs.
    pub refs: BTreeMap<u64, u32>,
    /// CiliumEndpoints seen.
    pub endpoints: u64,
    /// CiliumEndpointSlices seen.
    pub endpoint_slices: u64,
    /// Which CRDs are served.
    pub crds: Crds,
    /// `cilium-config` data, `None` when it could not be read.
    pub config: Option<BTreeMap<String, String>>,
    /// Problems met while collecting.
    pub warnings: Vec<String>,
    /// API server URL.
    pub server: Option<String>,
    /// kubeconfig context.
    pub context: Option<String>,
    /// Whether `--redact` was applied to this input.
    pub redacted: bool,
    /// The Cilium workloads (images, operator pods); `None` when not collected.
    pub workloads: Option<Workloads>,
    /// Identity name → every `managedFields` entry of it (the model keeps
    /// only the newest; "who writes" needs them all). Empty when not read.
    pub writes: BTreeMap<String, Vec<Write>>,
    /// `--labels`: a proposed Cilium `labels` filter to judge, if any.
    pub proposed_labels: Option<String>,
    /// The network policies' selector keys, read only for `--labels`.
    pub policies: Option<Policies>,
    /// The allocator's refusals the agents' logs record; `None` when no
    /// agent log was read (live, or no log among the saved files).
    pub allocation_refusals: Option<cilium_gc_documents::diagnosis::AllocationRefusals>,
    /// Identities watched live for a while (`--sample`): how many appeared
    /// and disappeared. `None` when not watched (`--from`, or no sample).
    pub sample: Option<cilium_gc_documents::forecast::MeasuredRates>,
}

/// The selector keys of every network policy read, and why some could not
/// be read (the permission is optional).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policies {
    /// One per policy.
    pub items: Vec<PolicySelectors>,
    /// Why some kinds could not be read.
    pub problems: Vec<String>,
}

/// The label keys one policy's selectors use, as identity labels
/// (`source:key`; see `policies::selector_keys`).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySelectors {
    /// Which kind.
    pub kind: cilium_gc_documents::diagnosis::PolicyKind,
    /// Namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Selector keys as identity labels, sorted, distinct.
    pub keys: Vec<String>,
}

/// One `managedFields` entry of an identity: a field manager's last write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The field manager (empty when the entry names none).
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: String,
    /// When the manager last changed a field it owns (second precision).
    pub time: Option<jiff::Timestamp>,
    /// Its field set holds the `io.cilium.heartbeat` annotation: it set the mark.
    pub owns_mark: bool,
}

/// What `diagnose` read of the Cilium workloads; `problem` says why not,
/// when it could not (the permission is optional).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Workloads {
    /// Images of the cilium-operator Deployment.
    pub operator_images: Vec<String>,
    /// Images of the cilium DaemonSet.
    pub agent_images: Vec<String>,
    /// The operator's pods.
    pub operator_pods: Vec<OperatorPodStatus>,
    /// Why some of it could not be read.
    pub problem: Option<String>,
    /// The operator pods' metrics as read through the pod proxy, not yet
    /// judged; empty when no running operator pod was found.
    pub metrics: Vec<OperatorMetricsRead>,
    /// `--identity-gc-interval` from the operator pods' arguments, which
    /// wins over cilium-config's.
    pub gc_interval_arg: Option<std::time::Duration>,
}

/// Whether a field manager is a Cilium agent. Agents write as `cilium-agent`
/// (and forks as `*-agent`); the operator as `cilium-operator*`.
pub(crate) fn agent_like(manager: &str) -> bool {
    manager.to_ascii_lowercase().contains("agent")
}
