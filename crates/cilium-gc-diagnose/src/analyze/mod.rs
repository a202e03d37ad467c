//! The diagnosis itself: plain data in ([`Input`]), a [`Diagnosis`] out.
//! Pure: no I/O, no clock (`now` is passed in), no logging.
//!
//! States reuse [`policy::decide`], so "stale" here means exactly what
//! `scan` and `delete` would act on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use cilium_gc_documents::header::Header;
use jiff::Timestamp;

use cilium_gc_documents::diagnosis::*;

mod ages;
mod churn;
mod evidence;
mod findings;
mod forecast;
mod labels;
#[cfg(test)]
mod tests;
mod what_if;
mod writers;

use crate::input::{IdentityRecord, Input};
use ages::*;
use churn::*;
use cilium_gc_cluster::cilium_config;
use cilium_gc_cluster::model::Change;
use cilium_gc_cluster::policy::{self, decide, Reason, Rules};
use cilium_gc_documents::report::{ConfigSource, ConfigValue, IdRange};
use findings::*;
use labels::*;
pub use labels::{FilterDefaults, LabelFilter, ParsedFilter};

/// A heartbeat timeout under this is flagged: agents get too little time
/// to reclaim an identity before it is deleted under them.
pub(crate) const LOW_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Utilisation from which the space is a warning.
pub(crate) const WARNING_PERCENT: f64 = cilium_gc_cluster::forecast::NEARLY_FULL_PERCENT;
/// Utilisation from which the space is critical.
pub(crate) const CRITICAL_PERCENT: f64 = 95.0;
/// A key needs this many distinct values to be a churn driver.
pub(crate) const MIN_DISTINCT_VALUES: u64 = 10;
/// Exhaustion closer than this (at the current rate) is a finding.
pub(crate) const EXHAUSTION_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;

/// The state of one identity, as the diagnosis counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InUse,
    Stale,
    Marked,
    Unmarked,
    TooYoung,
    NotLocal,
    MalformedMark,
}

impl State {
    fn unused(self) -> bool {
        !matches!(self, State::InUse | State::NotLocal)
    }
}

/// The config keys reported, with Cilium's defaults.
const CONFIG_KEYS: [(&str, &str); 8] = [
    ("identity-allocation-mode", "crd"),
    ("enable-cilium-endpoint-slice", "false"),
    ("disable-endpoint-crd", "false"),
    ("identity-gc-interval", "15m0s"),
    ("identity-heartbeat-timeout", "30m0s"),
    ("identity-gc-rate-limit", "2500"),
    ("identity-gc-rate-interval", "1m0s"),
    ("labels", ""),
];

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
        .map(|r| state_of(r, input, &policy, young_window, now))
        .collect();

    let mut identity_space = identity_space(input, &states, &range);
    identity_space.local_range_from = Some(range_from(input, &settings));
    let age = age_and_rate(input, &identity_space, settings.heartbeat_timeout, now);
    let forecast = forecast::forecast(
        input,
        &identity_space,
        settings.heartbeat_timeout,
        gc_interval,
        now,
    );
    let churn = churn(input, &states);
    let integrity = integrity(input, &states, &range);
    let modifiers = modifiers(input);
    let configuration = configuration(input, &churn, settings.heartbeat_timeout, gc_interval);

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
    d.labels_what_if = labels_what_if(input, &health);
    d.forecast = Some(forecast);
    d.findings = findings(input, &d, &settings, gc_interval);
    let gc_findings = gc_findings(
        &health,
        &d.identity_space,
        settings.heartbeat_timeout,
        gc_interval,
        now,
    );
    d.findings.extend(gc_findings);
    why_not_keeping_up(&mut d.findings);
    d.findings.sort_by_key(|f| f.severity);
    if let Some(p) = &health.workloads_problem {
        d.warnings.push(p.clone());
    }
    d.gc_health = Some(health);
    d
}

/// The refusals' finding names the findings that say why cilium-operator's
/// GC does not free ids as fast as the agents need them, so that the first
/// finding a reader meets says both what happens and why.
fn why_not_keeping_up(findings: &mut [Finding]) {
    const WHY: [FindingCode; 8] = [
        FindingCode::GcPassesFailing,
        FindingCode::GcNotCompleting,
        FindingCode::KnownGcDefect,
        FindingCode::GcDisabled,
        FindingCode::StaleBacklog,
        FindingCode::MarkStripLoop,
        FindingCode::ConflictWriters,
        FindingCode::OperatorRestarts,
    ];
    let why: Vec<String> = WHY
        .iter()
        .filter_map(|code| findings.iter().find(|f| f.code == *code))
        .map(|f| {
            format!(
                "why GC is not keeping up: {} ({}): {}",
                f.code.as_str(),
                f.severity.as_str(),
                f.message
            )
        })
        .collect();
    if let Some(f) = findings
        .iter_mut()
        .find(|f| f.code == FindingCode::IdentityAllocationRefused)
    {
        if why.is_empty() {
            f.evidence.push(
                "why GC is not keeping up: no finding below says (no stale backlog, no failing pass seen): the churn outruns the range"
                    .into(),
            );
        }
        f.evidence.extend(why);
    }
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

/// What a proposed label filter (`--labels`) would leave, judged with the
/// default patterns of the agents' own release.
fn labels_what_if(input: &Input, health: &GcHealth) -> Option<LabelsWhatIf> {
    let proposal = input.proposed_labels.as_ref()?;
    let agent = health
        .cilium
        .as_ref()
        .and_then(|c| c.agent_version.as_deref());
    let defaults = FilterDefaults::for_version(agent.and_then(parse_version));
    let current =
        LabelFilter::with_defaults(config_value(input, "labels").unwrap_or(""), defaults).filter;
    Some(what_if::what_if(input, proposal, defaults, &current))
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

fn config_value<'a>(input: &'a Input, key: &str) -> Option<&'a str> {
    input
        .config
        .as_ref()
        .and_then(|c| c.get(key))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
}

fn state_of(
    r: &IdentityRecord,
    input: &Input,
    policy: &Rules,
    young_window: Duration,
    now: Timestamp,
) -> State {
    let refs = r
        .identity
        .numeric_id()
        .and_then(|id| input.refs.get(&id).copied())
        .unwrap_or(0);
    match decide(&r.identity, refs, policy, now).reason {
        Reason::InUse => State::InUse,
        Reason::NotLocal => State::NotLocal,
        Reason::Stale => State::Stale,
        Reason::MarkTooRecent => State::Marked,
        Reason::MalformedMark => State::MalformedMark,
        // No filters are set, so Filtered cannot happen; count it as young.
        Reason::Filtered => State::TooYoung,
        Reason::Unmarked => {
            let young = r
                .identity
                .created_at
                .is_some_and(|c| age_seconds(now, c) < young_window.as_secs() as i64);
            if young {
                State::TooYoung
            } else {
                State::Unmarked
            }
        }
    }
}

/// Age in whole seconds; negative when `t` is in the future (clock skew).
fn age_seconds(now: Timestamp, t: Timestamp) -> i64 {
    now.as_second() - t.as_second()
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 * 1000.0 / whole as f64).round() / 10.0
}

fn identity_space(
    input: &Input,
    states: &[State],
    range: &std::ops::RangeInclusive<u64>,
) -> IdentitySpace {
    let mut c = StateCounts::default();
    for s in states {
        *match s {
            State::InUse => &mut c.in_use,
            State::Stale => &mut c.stale_candidates,
            State::Marked => &mut c.unused_marked,
            State::Unmarked => &mut c.unused_unmarked,
            State::TooYoung => &mut c.too_young,
            State::NotLocal => &mut c.not_local,
            State::MalformedMark => &mut c.malformed_mark,
        } += 1;
    }
    let capacity = range.end() - range.start() + 1;
    let allocated = input
        .identities
        .iter()
        .filter(|r| {
            r.identity
                .numeric_id()
                .is_some_and(|id| range.contains(&id))
        })
        .count() as u64;
    // Exact comparison, not the rounded percent: 94.96% is not critical.
    let level = if allocated as f64 >= capacity as f64 * CRITICAL_PERCENT / 100.0 {
        Level::Critical
    } else if allocated as f64 >= capacity as f64 * WARNING_PERCENT / 100.0 {
        Level::Warning
    } else {
        Level::Ok
    };
    IdentitySpace {
        total: input.identities.len() as u64,
        states: c,
        local_range: IdRange {
            min: *range.start(),
            max: *range.end(),
        },
        capacity,
        allocated,
        utilisation_percent: percent(allocated, capacity),
        headroom: capacity.saturating_sub(allocated),
        level,
        local_range_from: None,
    }
}

/// The settings the range follows from, and whether cilium-config set them
/// or Cilium's defaults (cluster 0, 255 clusters) stand in.
fn range_from(input: &Input, settings: &cilium_config::CiliumSettings) -> LocalRangeFrom {
    let source = |key: &str| match config_value(input, key) {
        Some(_) => ConfigSource::CiliumConfig,
        None => ConfigSource::Default,
    };
    LocalRangeFrom {
        cluster_id: settings.cluster_id,
        cluster_id_source: source("cluster-id"),
        max_connected_clusters: settings.max_connected_clusters,
        max_connected_clusters_source: source("max-connected-clusters"),
    }
}
