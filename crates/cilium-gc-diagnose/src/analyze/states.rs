//! Each identity's state, and the identity space counted from them: the
//! counts every later section and finding of the diagnosis is computed
//! from, so they stand at the bottom and import no other part of it.
//!
//! States reuse the reading layer's [`decide`], so "stale" here means
//! exactly what `scan` and `delete` would act on.

use std::ops::RangeInclusive;
use std::time::Duration;

use cilium_gc_cluster::policy::{decide, Reason, Rules};
use cilium_gc_documents::diagnosis::{IdentitySpace, Level, StateCounts};
use cilium_gc_documents::report::IdRange;
use jiff::Timestamp;

use super::ages::age_seconds;
use crate::input::{IdentityRecord, Input};

/// Utilisation from which the space is a warning.
pub(super) const WARNING_PERCENT: f64 = cilium_gc_cluster::forecast::NEARLY_FULL_PERCENT;
/// Utilisation from which the space is critical.
pub(super) const CRITICAL_PERCENT: f64 = 95.0;

/// The state of one identity, as the diagnosis counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    InUse,
    Stale,
    Marked,
    Unmarked,
    TooYoung,
    NotLocal,
    MalformedMark,
}

impl State {
    /// No endpoint references it, and it is this cluster's to collect.
    pub(super) fn unused(self) -> bool {
        !matches!(self, State::InUse | State::NotLocal)
    }
}

/// The state of `r` under `policy`; an unmarked unused identity younger
/// than `young_window` is too young: the operator has not had a GC pass
/// since it was created, so its missing mark says nothing yet.
pub(super) fn state_of(
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

/// `part` of `whole` in percent, to one decimal; 0 of nothing.
pub(super) fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 * 1000.0 / whole as f64).round() / 10.0
}

/// The identities counted by state, and how full the local `range` is.
/// `local_range_from` is left for the caller, who knows the settings.
pub(super) fn identity_space(
    input: &Input,
    states: &[State],
    range: &RangeInclusive<u64>,
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
