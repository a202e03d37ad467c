//! The forecast's findings: when the range is full if GC stops
//! (`exhaustion-soon`), and whether a working GC can keep up at all
//! (`gc-cannot-keep-up`). The numbers come from [`cilium_gc_cluster::forecast`], which
//! every `scan` and `delete` report shares.

use std::time::Duration;

use cilium_gc_cluster::humanize::{human_duration, thousands};
use cilium_gc_documents::diagnosis::{Diagnosis, FindingCode, IdentitySpace, Severity};
use cilium_gc_documents::forecast::{Forecast, Pace, PaceSource, SteadyState};
use jiff::Timestamp;

use super::ages::DAY;
use super::config::LOW_HEARTBEAT_TIMEOUT;
use super::evidence::{Evidence, Findings};
use crate::input::Input;

/// Exhaustion closer than this (at the current rate) is a finding.
const EXHAUSTION_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

/// The forecast of the diagnosis' input: local creation times, the
/// identities in use, and the cluster's GC settings.
pub(super) fn forecast(
    input: &Input,
    space: &IdentitySpace,
    heartbeat_timeout: Duration,
    gc_interval: Option<Duration>,
    now: Timestamp,
) -> Forecast {
    let local = &space.local_range;
    let created: Vec<Timestamp> = input
        .identities
        .iter()
        .filter(|r| {
            r.identity
                .numeric_id()
                .is_some_and(|id| (local.min..=local.max).contains(&id))
        })
        .filter_map(|r| r.identity.created_at)
        .collect();
    cilium_gc_cluster::forecast::forecast(&cilium_gc_cluster::forecast::ForecastInput {
        created: &created,
        in_use: space.states.in_use,
        headroom: space.headroom,
        capacity: space.capacity,
        heartbeat_timeout,
        gc_interval,
        sample: input.sample.as_ref(),
        now,
    })
}

/// "1,212/h over the last 5m (101 created)", or "... watched for 5m".
pub(super) fn pace_phrase(p: &Pace) -> String {
    let rate = thousands(p.rate_per_hour.round() as u64);
    match p.source {
        PaceSource::Sample => format!(
            "{rate}/h, watched for {} ({} created)",
            p.window,
            thousands(p.created)
        ),
        PaceSource::CreationTimes => format!(
            "{rate}/h over the last {} ({} created)",
            p.window,
            thousands(p.created)
        ),
    }
}

/// Every window's creations, and the watched sample: one line.
fn windows_line(f: &Forecast) -> String {
    let windows: Vec<String> = f
        .windows
        .iter()
        .map(|w| {
            format!(
                "{}: {} ({}/h{})",
                w.label,
                thousands(w.created),
                thousands(w.rate_per_hour.round() as u64),
                if w.complete { "" } else { ", lower bound" }
            )
        })
        .collect();
    let mut line = format!(
        "local identities created in the last {}",
        windows.join(", ")
    );
    if let Some(s) = &f.sample {
        line.push_str(&format!(
            "; watched for {}: {} created, {} deleted (net {}/h)",
            human_duration(s.seconds),
            thousands(s.created),
            thousands(s.deleted),
            s.net_growth_per_hour.round()
        ));
    }
    line
}

/// At the recent pace the range is full within a week if GC stops.
pub(super) fn exhaustion_soon(c: &Evidence, out: &mut Findings) {
    let d = c.d;
    let sp = &d.identity_space;
    let Some(f) = &d.forecast else { return };
    let Some(secs) = f.full_if_gc_stops.seconds else {
        return;
    };
    if secs >= EXHAUSTION_HORIZON.as_secs_f64() || sp.headroom == 0 {
        return;
    }
    out.add(
        if secs < DAY as f64 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        FindingCode::ExhaustionSoon,
        format!(
            "at the recent pace the local range is full in {} if GC stops",
            human_duration(secs)
        ),
        vec![
            format!("pace: {}", pace_phrase(&f.pace)),
            windows_line(f),
            format!(
                "{} identities created in the last 24h ({}/h)",
                thousands(d.age.created_last24h),
                d.age.creation_rate_per_hour
            ),
            c.space_line.clone(),
        ],
        Some("reduce churn (see high-cardinality labels) and keep GC running".into()),
    );
}

/// What a working GC holds at the pace exceeds the range (critical) or its
/// nearly-full share (warning).
pub(super) fn gc_cannot_keep_up(c: &Evidence, out: &mut Findings) {
    let d = c.d;
    let Some(f) = &d.forecast else { return };
    let Some(s) = &f.steady_state else { return };
    let severity = if s.exceeds_range {
        Severity::Critical
    } else if s.percent_of_range > cilium_gc_cluster::forecast::NEARLY_FULL_PERCENT {
        Severity::Warning
    } else {
        return;
    };
    let mut evidence = vec![
        format!("pace: {}", pace_phrase(&f.pace)),
        steady_line(s),
        windows_line(f),
        c.space_line.clone(),
    ];
    if let Some(secs) = f.full_if_gc_stops.seconds {
        evidence.push(format!(
            "if GC stops, the range is full in {}",
            human_duration(secs)
        ));
    }
    evidence.extend(churn_keys(d));
    evidence.extend(what_if_line(d));
    out.add(
        severity,
        FindingCode::GcCannotKeepUp,
        format!(
            "at the recent pace a working GC holds about {} stale identities; with {} in use that is {}% of the local range{}",
            thousands(s.stale_held),
            thousands(s.in_use),
            s.percent_of_range,
            if s.exceeds_range {
                ": no GC pass can keep up, the range runs out while GC works"
            } else {
                ": little room is left for a burst"
            }
        ),
        evidence,
        Some(fit_suggestion(f, s)),
    );
}

fn steady_line(s: &SteadyState) -> String {
    format!(
        "GC keeps an unused identity {} to {} (heartbeat timeout {} + 1 to 2 GC intervals of {}): {} to {} stale held at this pace, plus {} in use, against {} local ids",
        human_duration(s.held_seconds),
        human_duration(s.heartbeat_timeout_seconds + 2.0 * s.gc_interval_seconds),
        human_duration(s.heartbeat_timeout_seconds),
        human_duration(s.gc_interval_seconds),
        thousands(s.stale_held),
        thousands(s.stale_held_max),
        thousands(s.in_use),
        thousands(s.capacity)
    )
}

/// The label keys that drive the churn (high cardinality), one line.
fn churn_keys(d: &Diagnosis) -> Option<String> {
    let keys: Vec<String> = d
        .churn
        .label_keys
        .iter()
        .filter(|k| k.high_cardinality)
        .map(|k| format!("{} ({} values)", k.key, thousands(k.distinct_values)))
        .collect();
    (!keys.is_empty()).then(|| format!("churn driven by: {}", keys.join(", ")))
}

/// What the `--labels` filter asked about would leave, one line.
fn what_if_line(d: &Diagnosis) -> Option<String> {
    let w = d.labels_what_if.as_ref()?;
    Some(format!(
        "with labels {:?}, {} identities would be {} label sets; {} of {} policies read select on a key it drops",
        w.filter,
        thousands(w.identities),
        thousands(w.label_sets_after),
        w.policies.len(),
        w.policies_read
    ))
}

/// What would make it fit: settings, with their trade-off, or less churn.
fn fit_suggestion(f: &Forecast, s: &SteadyState) -> String {
    let Some(fit) = &f.fit else {
        return "reduce churn (see the churn drivers)".into();
    };
    let settings = match (fit.heartbeat_timeout_seconds, fit.gc_interval_seconds) {
        (Some(t), Some(i)) => format!(
            "identity-heartbeat-timeout {} with identity-gc-interval {} keeps what GC holds under {}% of the range at this pace (shorter: an agent has less time to reuse an identity before it is deleted, and the operator lists every identity more often{})",
            human_duration(t),
            human_duration(i),
            fit.target_percent,
            if t < LOW_HEARTBEAT_TIMEOUT.as_secs_f64() {
                "; under 5m, pods restarting slowly may get new identities"
            } else {
                ""
            }
        ),
        _ => format!(
            "no GC setting fits: {} identities in use leave no room under {}% of the range",
            thousands(s.in_use),
            fit.target_percent
        ),
    };
    format!(
        "reduce churn to under {}/h (drop the churn-driving label keys with Cilium's `labels` setting; try one with `diagnose --labels`), or {settings}",
        thousands(fit.fitting_rate_per_hour.round() as u64)
    )
}
