//! How old identities and heartbeat marks are, in buckets, and how fast
//! identities are allocated.

use std::time::Duration;

use cilium_gc_cluster::policy;
use cilium_gc_documents::diagnosis::{AgeAndRate, AgeBucket, IdentitySpace};
use jiff::Timestamp;

use crate::input::Input;

/// An hour in seconds, the unit of the age buckets' edges.
pub(super) const HOUR: i64 = 3600;
/// A day in seconds.
pub(super) const DAY: i64 = 24 * HOUR;

/// Age in whole seconds; negative when `t` is in the future (clock skew).
/// Whole seconds because saved objects state times in seconds, and every
/// age the diagnosis judges (a bucket's edge, a too-young window) must come
/// out the same for a live cluster and its saved copy.
pub(super) fn age_seconds(now: Timestamp, t: Timestamp) -> i64 {
    now.as_second() - t.as_second()
}

/// Disjoint buckets: `(label, from, to)` in seconds.
pub(super) const CREATED_BUCKETS: [(&str, i64, Option<i64>); 4] = [
    ("< 1h", 0, Some(HOUR)),
    ("1h-24h", HOUR, Some(DAY)),
    ("1d-7d", DAY, Some(7 * DAY)),
    (">= 7d", 7 * DAY, None),
];
pub(super) const MARK_BUCKETS: [(&str, i64, Option<i64>); 5] = [
    ("< 5m", 0, Some(300)),
    ("5m-30m", 300, Some(1800)),
    ("30m-1h", 1800, Some(HOUR)),
    ("1h-24h", HOUR, Some(DAY)),
    (">= 24h", DAY, None),
];

pub(super) fn bucketed(
    spec: &[(&str, i64, Option<i64>)],
    ages: impl Iterator<Item = i64>,
) -> Vec<AgeBucket> {
    let mut counts = vec![0u64; spec.len()];
    for age in ages {
        // A time in the future (skew) counts as brand new.
        let age = age.max(0);
        if let Some(i) = spec
            .iter()
            .position(|(_, from, to)| age >= *from && to.is_none_or(|t| age < t))
        {
            counts[i] += 1;
        }
    }
    spec.iter()
        .zip(counts)
        .map(|((label, from, to), count)| AgeBucket {
            label: (*label).into(),
            from_seconds: *from as f64,
            to_seconds: to.map(|t| t as f64),
            count,
        })
        .collect()
}

pub(super) fn age_and_rate(
    input: &Input,
    space: &IdentitySpace,
    heartbeat_timeout: Duration,
    now: Timestamp,
) -> AgeAndRate {
    let created_ages: Vec<i64> = input
        .identities
        .iter()
        .filter_map(|r| r.identity.created_at)
        .map(|c| age_seconds(now, c))
        .collect();
    let mark_ages: Vec<i64> = input
        .identities
        .iter()
        .filter_map(|r| r.identity.mark.as_deref().and_then(policy::parse_mark))
        .map(|m| age_seconds(now, m))
        .collect();
    // Only local ids use up the local range: another cluster's identity
    // created today says nothing about when this range runs out.
    let local = &space.local_range;
    let created_last24h = input
        .identities
        .iter()
        .filter(|r| {
            r.identity
                .numeric_id()
                .is_some_and(|id| (local.min..=local.max).contains(&id))
        })
        .filter_map(|r| r.identity.created_at)
        .filter(|c| age_seconds(now, *c) < DAY)
        .count() as u64;
    let rate = created_last24h as f64 / 24.0;
    let exhaustion_in_seconds = if space.headroom == 0 {
        Some(0.0)
    } else if created_last24h == 0 {
        None
    } else {
        Some((space.headroom as f64 / rate * 3600.0).round())
    };
    let exhausted_at = exhaustion_in_seconds.and_then(|s| {
        now.checked_add(jiff::SignedDuration::from_secs(s as i64))
            .ok()
    });
    AgeAndRate {
        created: bucketed(&CREATED_BUCKETS, created_ages.iter().copied()),
        created_unknown: (input.identities.len() - created_ages.len()) as u64,
        marks: bucketed(&MARK_BUCKETS, mark_ages.iter().copied()),
        marks_past_timeout: mark_ages
            .iter()
            .filter(|a| **a > heartbeat_timeout.as_secs() as i64)
            .count() as u64,
        created_last24h,
        creation_rate_per_hour: (rate * 100.0).round() / 100.0,
        exhaustion_in_seconds,
        exhausted_at,
    }
}
