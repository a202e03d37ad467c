//! What drives identity churn (label keys with many values, duplicates),
//! the integrity of marks and references, and who modifies identities.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::RangeInclusive;

use cilium_gc_cluster::model::Change;
use cilium_gc_documents::diagnosis::{
    Churn, DuplicateGroup, Duplicates, Integrity, LabelKeyStat, ManagerActivity, Modifiers,
    NamespaceStat, StripExample,
};
use jiff::Timestamp;

use super::states::{percent, State};
use crate::input::{agent_like, IdentityRecord, Input};

/// A key needs this many distinct values to be a churn driver.
const MIN_DISTINCT_VALUES: u64 = 10;

/// Keys policies depend on: never suggested for exclusion, never a churn
/// driver (their values are namespaces, service accounts, the cluster, or
/// the workload names network policies select on: excluding `app` would
/// make every policy that selects `app: x` match nothing).
pub(super) fn protected_key(key: &str) -> bool {
    let (source, name) = key.split_once(':').unwrap_or(("", key));
    source == "reserved"
        || name == cilium_gc_cluster::model::NAMESPACE_LABEL
        || name.starts_with("io.cilium.k8s.policy.")
        || name.starts_with("io.cilium.k8s.namespace.labels.")
        || WORKLOAD_KEYS.contains(&name)
        || name.starts_with("app.kubernetes.io/")
}

/// Labels that name a workload, by convention; policies select on them.
pub(super) const WORKLOAD_KEYS: &[&str] = &["app", "k8s-app", "name", "component", "tier", "role"];

pub(super) fn churn(input: &Input, states: &[State]) -> Churn {
    let (namespaces_by_identities, namespaces_by_stale) = namespaces(input, states);
    Churn {
        label_keys: label_keys(input),
        namespaces_by_identities,
        namespaces_by_stale,
        duplicates: duplicates(input),
    }
}

/// Each label key: on how many identities, with how many distinct values,
/// and whether it drives churn. The top 20, and every high-cardinality one.
fn label_keys(input: &Input) -> Vec<LabelKeyStat> {
    let total = input.identities.len() as u64;
    let mut keys: HashMap<&str, (u64, HashSet<&str>)> = HashMap::new();
    for r in &input.identities {
        for (k, v) in &r.security_labels {
            let e = keys.entry(k).or_default();
            e.0 += 1;
            e.1.insert(v);
        }
    }
    let mut label_keys: Vec<LabelKeyStat> = keys
        .into_iter()
        .map(|(key, (identities, values))| {
            let distinct = values.len() as u64;
            LabelKeyStat {
                key: key.into(),
                distinct_values: distinct,
                identities,
                share_percent: percent(identities, total),
                high_cardinality: distinct >= MIN_DISTINCT_VALUES
                    && distinct * 2 >= identities
                    && !protected_key(key),
            }
        })
        .collect();
    label_keys.sort_by(|a, b| {
        b.distinct_values
            .cmp(&a.distinct_values)
            .then_with(|| a.key.cmp(&b.key))
    });
    let mut i = 0;
    label_keys.retain(|k| {
        i += 1;
        i <= 20 || k.high_cardinality
    });
    label_keys
}

/// The namespaces with the most identities, and with the most stale ones
/// (ten each).
fn namespaces(input: &Input, states: &[State]) -> (Vec<NamespaceStat>, Vec<NamespaceStat>) {
    let mut ns: BTreeMap<&str, NamespaceStat> = BTreeMap::new();
    for (r, s) in input.identities.iter().zip(states) {
        let Some(name) = r.identity.namespace.as_deref() else {
            continue;
        };
        let e = ns.entry(name).or_insert_with(|| NamespaceStat {
            namespace: name.into(),
            identities: 0,
            stale: 0,
            unused: 0,
        });
        e.identities += 1;
        e.stale += u64::from(*s == State::Stale);
        e.unused += u64::from(s.unused());
    }
    let mut by_identities: Vec<NamespaceStat> = ns.values().cloned().collect();
    by_identities.sort_by_key(|n| std::cmp::Reverse(n.identities));
    by_identities.truncate(10);
    let mut by_stale: Vec<NamespaceStat> = ns.into_values().filter(|n| n.stale > 0).collect();
    by_stale.sort_by_key(|n| std::cmp::Reverse(n.stale));
    by_stale.truncate(10);
    (by_identities, by_stale)
}

/// Identities with exactly the same security labels: each group beyond its
/// first member is surplus.
fn duplicates(input: &Input) -> Duplicates {
    let mut groups: HashMap<&BTreeMap<String, String>, Vec<&str>> = HashMap::new();
    for r in &input.identities {
        if !r.security_labels.is_empty() {
            groups
                .entry(&r.security_labels)
                .or_default()
                .push(&r.identity.name);
        }
    }
    let mut dup: Vec<DuplicateGroup> = groups
        .into_iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|(labels, names)| {
            let mut identities: Vec<String> = names.into_iter().map(str::to_owned).collect();
            identities.sort_by_key(|n| (n.len(), n.clone()));
            DuplicateGroup {
                identities,
                labels: labels.clone(),
            }
        })
        .collect();
    dup.sort_by(|a, b| {
        b.identities
            .len()
            .cmp(&a.identities.len())
            .then_with(|| a.identities.cmp(&b.identities))
    });
    Duplicates {
        groups: dup.len() as u64,
        surplus: dup.iter().map(|g| g.identities.len() as u64 - 1).sum(),
        examples: dup.into_iter().take(10).collect(),
    }
}

/// The mark-strip loop: an unused identity without a heartbeat mark whose
/// newest managedFields entry is an agent's, written after the identity was
/// created.
///
/// Why this means a leak: cilium-operator marks every unused identity and
/// deletes it once the mark is older than the heartbeat timeout; an agent
/// removes the mark when it (re)uses the identity. If an agent keeps
/// removing marks of identities no endpoint references (an agent whose
/// allocator still holds a reference for an endpoint that is gone, or that
/// runs with a different view of endpoints), the mark never gets old and
/// the identity is never collected: GC never catches up. One such identity
/// is normal (an agent may just have released it again); many are the leak.
/// managedFields keep one entry per manager, and the time is the manager's
/// last write, so this sees the last strip only, not how often it happened.
pub(super) fn strip_looped(r: &IdentityRecord, state: State) -> Option<&Change> {
    if !matches!(state, State::Unmarked | State::TooYoung) {
        return None;
    }
    let change = r.identity.last_change.as_ref()?;
    let (time, created) = (change.time?, r.identity.created_at?);
    (agent_like(&change.manager) && time > created).then_some(change)
}

pub(super) fn integrity(input: &Input, states: &[State], range: &RangeInclusive<u64>) -> Integrity {
    let existing: HashSet<u64> = input
        .identities
        .iter()
        .filter_map(|r| r.identity.numeric_id())
        .collect();
    // Only local ids: reserved ids (1-255: host, world, health...) never
    // have objects, and other clusters' ids live in their own API servers.
    let dangling: Vec<(u64, u32)> = input
        .refs
        .iter()
        .filter(|(id, n)| **n > 0 && range.contains(id) && !existing.contains(id))
        .map(|(id, n)| (*id, *n))
        .collect();
    let mut strips: Vec<StripExample> = input
        .identities
        .iter()
        .zip(states)
        .filter_map(|(r, s)| {
            let c = strip_looped(r, *s)?;
            Some(StripExample {
                name: r.identity.name.clone(),
                namespace: r.identity.namespace.clone(),
                manager: c.manager.clone(),
                time: c.time?,
            })
        })
        .collect();
    strips.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| a.name.cmp(&b.name)));
    Integrity {
        dangling_ids: dangling.len() as u64,
        dangling_references: dangling.iter().map(|(_, n)| u64::from(*n)).sum(),
        dangling_examples: dangling.iter().take(20).map(|(id, _)| *id).collect(),
        strip_loop: strips.len() as u64,
        strip_loop_examples: strips.into_iter().take(20).collect(),
    }
}

pub(super) fn modifiers(input: &Input) -> Modifiers {
    let mut by: BTreeMap<&str, (u64, Timestamp)> = BTreeMap::new();
    let mut changed = 0;
    for r in &input.identities {
        let Some(c) = &r.identity.last_change else {
            continue;
        };
        let (Some(time), Some(created)) = (c.time, r.identity.created_at) else {
            continue;
        };
        if time <= created {
            continue;
        }
        changed += 1;
        let e = by.entry(&c.manager).or_insert((0, time));
        e.0 += 1;
        e.1 = e.1.max(time);
    }
    let mut managers: Vec<ManagerActivity> = by
        .into_iter()
        .map(|(m, (n, latest))| ManagerActivity {
            manager: if m.is_empty() { "<none>" } else { m }.into(),
            identities: n,
            latest,
        })
        .collect();
    managers.sort_by_key(|m| std::cmp::Reverse(m.identities));
    Modifiers {
        changed_identities: changed,
        managers,
    }
}
