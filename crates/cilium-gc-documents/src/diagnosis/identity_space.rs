//! The diagnosis' picture of the identity space: the range, the states of
//! the identities in it, their ages and churn, their labels, and who wrote
//! them.

use std::collections::BTreeMap;

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::report::IdRange;

use super::findings::Level;

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
