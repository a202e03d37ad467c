//! `--labels`: what a proposed Cilium `labels` filter would
//! do to today's identities and policies, judged by [`LabelFilter`], which
//! a test holds to Cilium's own `pkg/labelsfilter` of 1.15.6 and 1.19.3.
//!
//! Identities carry only the labels today's filter kept, so a proposal can
//! only be judged where it narrows: it collapses the label sets that differ
//! only in keys it drops. Policies break where a selector uses a key the
//! proposal drops and today's filter keeps.

use std::collections::{BTreeMap, HashSet};

use cilium_gc_cluster::humanize::thousands;
use cilium_gc_documents::diagnosis::{
    AffectedPolicy, DroppedKey, FindingCode, GcHealth, LabelsWhatIf, Severity,
};

use super::config::config_value;
use super::evidence::{Evidence, Findings};
use super::labels::{FilterDefaults, LabelFilter};
use crate::input::Input;

/// Keys reported, most identities saved first.
const TOP_KEYS: usize = 20;

/// What a proposed label filter (`--labels`) would leave, judged with the
/// default patterns of the agents' own release.
pub(super) fn labels_what_if(input: &Input, health: &GcHealth) -> Option<LabelsWhatIf> {
    let proposal = input.proposed_labels.as_ref()?;
    let agent = health
        .cilium
        .as_ref()
        .and_then(|c| c.agent_version.as_deref());
    let defaults = FilterDefaults::for_version(agent.and_then(parse_version));
    let current =
        LabelFilter::with_defaults(config_value(input, "labels").unwrap_or(""), defaults).filter;
    Some(what_if(input, proposal, defaults, &current))
}

/// `1.15.6` as numbers.
fn parse_version(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

/// Distinct label sets of the identities, each reduced to the labels `keep`
/// accepts.
fn label_sets(input: &Input, keep: impl Fn(&str) -> bool) -> u64 {
    let mut sets: HashSet<Vec<(&str, &str)>> = HashSet::new();
    for r in &input.identities {
        let set: Vec<(&str, &str)> = r
            .security_labels
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        sets.insert(set);
    }
    sets.len() as u64
}

/// The what-if of `proposal` (already checked to parse), on top of the
/// defaults of `defaults`, against today's `current` filter.
pub(super) fn what_if(
    input: &Input,
    proposal: &str,
    defaults: FilterDefaults,
    current: &LabelFilter,
) -> LabelsWhatIf {
    let proposed = LabelFilter::with_defaults(proposal, defaults).filter;
    let mut keys: BTreeMap<&str, (u64, HashSet<&str>)> = BTreeMap::new();
    for r in &input.identities {
        for (k, v) in &r.security_labels {
            if !proposed.accepts(k) {
                let e = keys.entry(k).or_default();
                e.0 += 1;
                e.1.insert(v);
            }
        }
    }
    let mut dropped: Vec<DroppedKey> = keys
        .iter()
        .map(|(k, (n, values))| DroppedKey {
            key: (*k).to_string(),
            identities: *n,
            distinct_values: values.len() as u64,
            label_sets_without_it: 0,
        })
        .collect();
    // The costliest keys first, by distinct values, then each judged alone.
    dropped.sort_by(|a, b| (b.distinct_values, &a.key).cmp(&(a.distinct_values, &b.key)));
    dropped.truncate(TOP_KEYS);
    for d in &mut dropped {
        d.label_sets_without_it = label_sets(input, |k| k != d.key);
    }
    dropped
        .sort_by(|a, b| (a.label_sets_without_it, &a.key).cmp(&(b.label_sets_without_it, &b.key)));
    let policies = input.policies.as_ref();
    let affected = policies
        .into_iter()
        .flat_map(|p| &p.items)
        .filter_map(|p| {
            let keys: Vec<String> = p
                .keys
                .iter()
                .filter(|k| !proposed.accepts(k) && current.accepts(k))
                .cloned()
                .collect();
            (!keys.is_empty()).then(|| AffectedPolicy {
                kind: p.kind,
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                keys,
            })
        })
        .collect();
    LabelsWhatIf {
        filter: proposal.to_string(),
        defaults_release: defaults.release().to_string(),
        identities: input.identities.len() as u64,
        label_sets_now: label_sets(input, |_| true),
        label_sets_after: label_sets(input, |k| proposed.accepts(k)),
        dropped_keys: dropped,
        policies_read: policies.map_or(0, |p| p.items.len() as u64),
        policies: affected,
        policies_problem: policies
            .filter(|p| !p.problems.is_empty())
            .map(|p| p.problems.join("; ")),
    }
}

/// `labels-filter-breaks-policies`: the proposal drops keys policies select on.
pub(super) fn breaks_policies(c: &Evidence, out: &mut Findings) {
    let Some(w) = &c.d.labels_what_if else { return };
    if w.policies.is_empty() {
        return;
    }
    let evidence = w
        .policies
        .iter()
        .take(10)
        .map(|p| {
            let at = p
                .namespace
                .as_ref()
                .map_or(String::new(), |n| format!("{n}/"));
            format!(
                "{:?} {at}{} selects on {}",
                p.kind,
                p.name,
                p.keys.join(", ")
            )
        })
        .collect();
    out.add(
        Severity::Warning,
        FindingCode::LabelsFilterBreaksPolicies,
        format!(
            "the proposed labels filter drops keys that {} network policies select on: they would stop selecting those pods",
            thousands(w.policies.len() as u64)
        ),
        evidence,
        Some("keep those keys in the filter (an inclusive pattern that matches them further than the exclusion), or change the policies to select on keys the filter keeps, before rolling it out".into()),
    );
}
