//! The diagnosis' sections a support ticket needs beyond the live state:
//! where saved evidence came from (`--from`), who writes the identities
//! (`managedFields`), and what a proposed label filter would leave
//! (`--labels`).

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Saved objects a diagnosis was made from (`diagnose --from`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavedSource {
    /// The directory read.
    pub path: String,
    /// The capture time, used as "now" for every age (never the reading machine's clock).
    pub captured_at: Timestamp,
    /// Where the capture time came from.
    pub captured_at_from: CaptureTimeFrom,
    /// Files under the path.
    pub files_read: u64,
    /// Evidence not found among the saved objects; the findings that need it are skipped or say so.
    pub missing: Vec<String>,
}

/// Where a saved diagnosis' capture time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CaptureTimeFrom {
    /// A `cilium sysdump` file name's `<ts>` (`20060102-150405`, read as UTC), or the newest object time if later.
    SysdumpFileName,
    /// The newest time any saved object carries (a managedFields entry, a creation, a mark): a lower bound on the capture time.
    NewestObject,
}

/// A proposed `labels` filter judged against today's identities and policies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelsWhatIf {
    /// The filter as given (Cilium's `labels` syntax: space-separated `[source:][!]regex` patterns).
    pub filter: String,
    /// The Cilium release whose built-in patterns the filter was added to (`v1.15.6` before 1.16, else `v1.19.3`).
    pub defaults_release: String,
    /// Identities judged (decodable ones).
    pub identities: u64,
    /// Distinct security-label sets today.
    pub label_sets_now: u64,
    /// Distinct label sets once the filter drops what it drops: the identities there would be. Labels today's filter already dropped are not in identities, so a wider filter cannot be judged here.
    pub label_sets_after: u64,
    /// Label keys in today's identities that the filter drops, most identities saved first (top 20).
    pub dropped_keys: Vec<DroppedKey>,
    /// Network policies read (CiliumNetworkPolicies, CiliumClusterwideNetworkPolicies, NetworkPolicies).
    pub policies_read: u64,
    /// Policies whose selectors use a key the filter drops and today's filter keeps: they would stop selecting the pods they select now.
    pub policies: Vec<AffectedPolicy>,
    /// Why some policies could not be read (an optional permission), when they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies_problem: Option<String>,
}

/// A label key a proposed filter drops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DroppedKey {
    /// `source:key`, e.g. `k8s:job-name`.
    pub key: String,
    /// Identities that carry it.
    pub identities: u64,
    /// Its distinct values.
    pub distinct_values: u64,
    /// Label sets left if the filter dropped only this key: what this key alone costs.
    pub label_sets_without_it: u64,
}

/// A network policy whose selectors use keys a proposed filter drops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AffectedPolicy {
    /// Which kind of policy.
    pub kind: PolicyKind,
    /// Its namespace (a hash with `--redact`); absent for cluster-wide policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The dropped keys its selectors use, as `source:key`.
    pub keys: Vec<String>,
}

/// The kinds of network policy `--labels` reads.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// cilium.io/v2 CiliumNetworkPolicy.
    CiliumNetworkPolicy,
    /// cilium.io/v2 CiliumClusterwideNetworkPolicy.
    CiliumClusterwideNetworkPolicy,
    /// networking.k8s.io/v1 NetworkPolicy.
    NetworkPolicy,
}

/// Every field manager that wrote CiliumIdentities, from `metadata.managedFields` (a client program, not a user: the audit log names users).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Writers {
    /// "Lately" below: writes at most this many seconds before `generatedAt` (the heartbeat timeout).
    pub window_seconds: f64,
    /// Marked identities (a readable heartbeat mark).
    pub marked_identities: u64,
    /// Marked identities that some manager other than the one holding the mark wrote at or after the mark's second: the operator's delete of each fails with 409 Conflict.
    pub written_after_mark: u64,
    /// One entry per field manager and operation, most identities written after a mark first, then most written lately.
    pub managers: Vec<WriterActivity>,
}

/// What one field manager, in one operation, wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriterActivity {
    /// The field manager (`cilium-agent`, `cilium-operator-generic`, `kubectl-patch`); `<none>` when the entry names none.
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: String,
    /// What the manager is, judged by its name.
    pub role: WriterRole,
    /// Identities with an entry of this manager and operation.
    pub identities: u64,
    /// Of which written within the window.
    pub written_lately: u64,
    /// Marked identities it wrote at or after the mark's second, without holding the mark itself.
    pub written_after_mark: u64,
    /// Identities whose heartbeat mark this manager holds (it set the mark).
    pub marks_held: u64,
    /// Its most recent write, when the entries carry times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<Timestamp>,
}

/// What a field manager is, judged by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WriterRole {
    /// A Cilium agent (`*agent*`): creates identities and strips the marks of those it uses again.
    CiliumAgent,
    /// cilium-operator (`cilium-operator*`): marks unused identities, then deletes them.
    CiliumOperator,
    /// This plugin (`kubectl-cilium-gc`): `delete --mark`.
    ThisTool,
    /// Anything else: a label-syncing controller, a backup or policy tool, a person with kubectl.
    Other,
}
