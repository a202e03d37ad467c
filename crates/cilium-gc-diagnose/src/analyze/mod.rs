//! The diagnosis itself: plain data in ([`Input`]), a [`Diagnosis`] out.
//! Pure: no I/O, no clock (`now` is passed in), no logging.
//!
//! This file puts the sections together, in the order each needs the ones
//! before it, and hands the crate its few public names. The children never
//! import it, only each other, downward: `ages`, `labels` and `evidence` at
//! the bottom; `states` (each identity's state, judged by
//! [`policy::decide`], and the counts every section starts from) and
//! `config` above them; then the sections (`churn`, `writers`, `what_if`,
//! `forecast`); on top `findings`, which judges the finished diagnosis.

use std::time::Duration;

use cilium_gc_cluster::cilium_config;
use cilium_gc_cluster::policy::{self, Rules};
use cilium_gc_documents::diagnosis::{
    DiagnosedCluster, Diagnosis, Finding, FindingCode, GcHealth, IdentitySpace,
};
use cilium_gc_documents::header::Header;
use jiff::Timestamp;

use crate::input::Input;

mod ages;
mod churn;
mod config;
mod evidence;
mod findings;
mod forecast;
mod labels;
mod states;
#[cfg(test)]
mod tests;
mod what_if;
mod writers;

pub use labels::{FilterDefaults, LabelFilter, ParsedFilter};

use states::State;

/// Build the diagnosis of `input` as of `now` (the server's clock), judged
/// at its whole second: saved objects state their capture time in seconds
/// (a sysdump's `<ts>`), so a live diagnosis and `--from` on objects saved
/// at that moment judge every age alike (a mark's age in an evidence line,
/// an age bucket's edge), and a sub-second says nothing about GC anyway.
pub fn analyze(input: &Input, now: Timestamp) -> Diagnosis {
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
    let settings = cilium_config::settings_from_config(input.config.as_ref(), None);
    let mut warnings = input.warnings.clone();
    warnings.extend(settings.warnings.iter().cloned());
    // Its warning, when unreadable, is among `settings.warnings`.
    let gc_interval = Some(settings.gc_interval);
    let range = policy::local_range(settings.cluster_id, settings.max_connected_clusters);
    let policy = Rules {
        local_range: range.clone(),
        heartbeat_timeout: settings.heartbeat_timeout,
    };
    // An unmarked unused identity is only overdue once the operator has had
    // a GC pass since it was created.
    let young_window = match gc_interval {
        Some(d) if !d.is_zero() => d,
        _ => settings.heartbeat_timeout,
    };

    let states: Vec<State> = input
        .identities
        .iter()
        .map(|r| states::state_of(r, input, &policy, young_window, now))
        .collect();

    let mut identity_space = states::identity_space(input, &states, &range);
    identity_space.local_range_from = Some(config::range_from(input, &settings));
    let age = ages::age_and_rate(input, &identity_space, settings.heartbeat_timeout, now);
    let forecast = forecast::forecast(
        input,
        &identity_space,
        settings.heartbeat_timeout,
        gc_interval,
        now,
    );
    let churn = churn::churn(input, &states);
    let integrity = churn::integrity(input, &states, &range);
    let modifiers = churn::modifiers(input);
    let configuration =
        config::configuration(input, &churn, settings.heartbeat_timeout, gc_interval);

    let mut d = Diagnosis {
        header: Header::new(cilium_gc_documents::report::Tool::current()),
        cluster: diagnosed_cluster(input),
        generated_at: now,
        redacted: input.redacted,
        findings: Vec::new(),
        identity_space,
        age,
        churn,
        integrity,
        modifiers,
        configuration,
        warnings,
        gc_health: None,
        writers: (!input.writes.is_empty())
            .then(|| writers::writers(input, settings.heartbeat_timeout, now)),
        labels_what_if: None,
        source: None,
        allocation_refusals: input.allocation_refusals.clone(),
        forecast: None,
    };
    let health = gc_health(input, &states, settings.heartbeat_timeout, gc_interval, now);
    d.labels_what_if = what_if::labels_what_if(input, &health);
    d.forecast = Some(forecast);
    d.findings = findings::findings(input, &d, &settings, gc_interval);
    let gc_findings = gc_findings(
        &health,
        &d.identity_space,
        settings.heartbeat_timeout,
        gc_interval,
        now,
    );
    d.findings.extend(gc_findings);
    findings::why_not_keeping_up(&mut d.findings);
    d.findings.sort_by_key(|f| f.severity);
    if let Some(p) = &health.workloads_problem {
        d.warnings.push(p.clone());
    }
    d.gc_health = Some(health);
    d
}

/// The cluster as the input saw it.
fn diagnosed_cluster(input: &Input) -> DiagnosedCluster {
    DiagnosedCluster {
        server: input.server.clone(),
        context: input.context.clone(),
        kubernetes_version: None,
        endpoint_crd: input.crds.endpoints,
        endpoint_slice_crd: input.crds.slices,
        endpoints: input.endpoints,
        endpoint_slices: input.endpoint_slices,
    }
}

/// What the operator's GC health says, over the identity space's counts.
fn gc_findings(
    health: &GcHealth,
    space: &IdentitySpace,
    heartbeat_timeout: Duration,
    gc_interval: Option<Duration>,
    now: Timestamp,
) -> Vec<Finding> {
    let gc_enabled = gc_interval.is_some_and(|d| !d.is_zero());
    crate::gc_health::findings(
        health,
        crate::gc_health::IdentityCounts {
            total: space.total,
            overdue: space.states.stale_candidates + space.states.unused_unmarked,
            marked: space.states.unused_marked,
            too_young: space.states.too_young,
        },
        heartbeat_timeout,
        now,
    )
    .into_iter()
    // GC disabled (gc-disabled says so): marks cannot be "overdue".
    .filter(|f| gc_enabled || f.code != FindingCode::GcNotCompleting)
    .collect()
}

/// Whether the operator's GC keeps up: the stale identities' marks and the
/// unused unmarked ones, judged by `gc_health`.
fn gc_health(
    input: &Input,
    states: &[State],
    heartbeat_timeout: Duration,
    gc_interval: Option<Duration>,
    now: Timestamp,
) -> GcHealth {
    let stale_marks: Vec<(usize, Timestamp)> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == State::Stale)
        .filter_map(|(i, _)| {
            let mark = input.identities[i].identity.mark.as_deref()?;
            Some((i, policy::parse_mark(mark)?))
        })
        .collect();
    let unused_unmarked: Vec<usize> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, State::Unmarked | State::TooYoung))
        .map(|(i, _)| i)
        .collect();
    crate::gc_health::gc_health(
        &input.identities,
        &stale_marks,
        &unused_unmarked,
        input.workloads.as_ref(),
        heartbeat_timeout,
        gc_interval.filter(|d| !d.is_zero()),
        now,
    )
}
