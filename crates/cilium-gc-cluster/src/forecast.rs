//! The forecast: a pure function of the local identities' creation times,
//! the identities in use, the range, the cluster's GC settings and `now`
//! (plus, live, a watched sample). `diagnose` and every `scan`/`delete`
//! report call it, so the two always agree.
//!
//! The pace is read over the most recent window that holds enough
//! creations to be read: a churn that no GC can keep up with fills the
//! range within one heartbeat timeout plus one GC interval of its start,
//! before the operator deletes anything, so a day's average (which such a
//! churn dilutes for hours) would see it only once pods wait for network.
//! Windows no longer than the heartbeat timeout are exact: GC keeps every
//! unused identity at least that long, so every identity created in them
//! still exists.

use std::time::Duration;

use cilium_gc_documents::forecast::{
    CreationWindow, Fit, Forecast, FullIfGcStops, MeasuredRates, Pace, PaceSource, SteadyState,
};
use jiff::Timestamp;

/// A pace is read from a window only when it holds at least this many
/// creations (a Poisson count of 10 is within about a third of its mean);
/// otherwise the next longer window is read.
pub(crate) const MIN_PACE_CREATIONS: u64 = 10;
/// The share of the range from which it is nearly full: where
/// `identity-space-nearly-full` starts warning, and the share a suggested
/// GC setting aims to stay under.
pub const NEARLY_FULL_PERCENT: f64 = 80.0;
/// The fixed windows, besides the heartbeat timeout's own.
const WINDOWS: [(&str, u64); 4] = [("5m", 300), ("1h", 3600), ("6h", 6 * 3600), ("24h", 86400)];
/// Hours of creations kept for the chart.
pub(crate) const HOURS: usize = 48;

/// What the forecast is computed from. `created` holds the creation times
/// of the identities in the local range only: another cluster's ids do not
/// use up this one.
#[derive(Debug, Clone)]
pub struct ForecastInput<'a> {
    /// When each identity was created.
    pub created: &'a [Timestamp],
    /// Identities in use now.
    pub in_use: u64,
    /// Free ids left in the range.
    pub headroom: u64,
    /// The range's size.
    pub capacity: u64,
    /// The operator's `identity-heartbeat-timeout`.
    pub heartbeat_timeout: Duration,
    /// `None` or zero: GC is disabled.
    pub gc_interval: Option<Duration>,
    /// Watched live (`diagnose --sample`), see [`measured`].
    pub sample: Option<&'a MeasuredRates>,
    /// The time the forecast is made at.
    pub now: Timestamp,
}

/// The forecast of `input`.
pub fn forecast(input: &ForecastInput<'_>) -> Forecast {
    let ages: Vec<i64> = input
        .created
        .iter()
        .map(|c| (input.now.as_second() - c.as_second()).max(0))
        .collect();
    let windows = windows(&ages, input.heartbeat_timeout);
    let pace = pace(&windows, input.sample);
    let per_second = pace.rate_per_hour / 3600.0;
    let full_if_gc_stops = full_if_gc_stops(input.headroom, per_second, input.now);
    let steady_state = input
        .gc_interval
        .filter(|i| !i.is_zero())
        .map(|i| steady_state(input, i, per_second));
    let fit = steady_state
        .as_ref()
        .filter(|s| s.percent_of_range > NEARLY_FULL_PERCENT)
        .map(|s| fit(s, per_second));
    Forecast {
        windows,
        sample: input.sample.cloned(),
        pace,
        full_if_gc_stops,
        steady_state,
        created_per_hour: per_hour(&ages),
        fit,
    }
}

/// Creations per window, shortest first; the heartbeat timeout's own window
/// among them when it is not one of the fixed ones.
fn windows(ages: &[i64], heartbeat_timeout: Duration) -> Vec<CreationWindow> {
    let timeout = heartbeat_timeout.as_secs();
    let mut spans: Vec<(String, u64)> = WINDOWS.iter().map(|(l, s)| ((*l).into(), *s)).collect();
    if timeout > 0 && !spans.iter().any(|(_, s)| *s == timeout) {
        spans.push((crate::humanize::human_duration(timeout as f64), timeout));
    }
    spans.sort_by_key(|(_, s)| *s);
    spans
        .into_iter()
        .map(|(label, seconds)| {
            let created = ages.iter().filter(|a| (**a as u64) < seconds).count() as u64;
            CreationWindow {
                label,
                seconds: seconds as f64,
                created,
                rate_per_hour: round2(created as f64 * 3600.0 / seconds as f64),
                complete: seconds <= timeout,
            }
        })
        .collect()
}

/// The rates of `created` and `deleted` identities seen over `elapsed`.
pub fn measured(elapsed: Duration, created: u64, deleted: u64) -> MeasuredRates {
    let secs = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    let per_hour = |n: u64| round2(n as f64 * 3600.0 / secs);
    MeasuredRates {
        seconds: round2(elapsed.as_secs_f64()),
        created,
        deleted,
        creation_rate_per_hour: per_hour(created),
        deletion_rate_per_hour: per_hour(deleted),
        net_growth_per_hour: round2(per_hour(created) - per_hour(deleted)),
    }
}

/// The sample when it saw enough creations, else the shortest window that
/// did, else the longest window (whatever it holds).
fn pace(windows: &[CreationWindow], sample: Option<&MeasuredRates>) -> Pace {
    if let Some(m) = sample.filter(|m| m.created >= MIN_PACE_CREATIONS) {
        return Pace {
            rate_per_hour: m.creation_rate_per_hour,
            source: PaceSource::Sample,
            window: crate::humanize::human_duration(m.seconds.round()),
            window_seconds: m.seconds,
            created: m.created,
        };
    }
    let w = windows
        .iter()
        .find(|w| w.created >= MIN_PACE_CREATIONS)
        .or(windows.last())
        .expect("the fixed windows are never empty");
    Pace {
        rate_per_hour: w.rate_per_hour,
        source: PaceSource::CreationTimes,
        window: w.label.clone(),
        window_seconds: w.seconds,
        created: w.created,
    }
}

fn full_if_gc_stops(headroom: u64, per_second: f64, now: Timestamp) -> FullIfGcStops {
    let seconds = if headroom == 0 {
        Some(0.0)
    } else if per_second > 0.0 {
        Some((headroom as f64 / per_second).round())
    } else {
        None
    };
    FullIfGcStops {
        headroom,
        seconds,
        at: seconds.and_then(|s| {
            now.checked_add(jiff::SignedDuration::from_secs(s as i64))
                .ok()
        }),
    }
}

fn steady_state(input: &ForecastInput<'_>, interval: Duration, per_second: f64) -> SteadyState {
    let timeout = input.heartbeat_timeout.as_secs_f64();
    let interval = interval.as_secs_f64();
    let held = timeout + interval;
    let stale_held = (per_second * held).round() as u64;
    let needed = stale_held + input.in_use;
    SteadyState {
        heartbeat_timeout_seconds: timeout,
        gc_interval_seconds: interval,
        held_seconds: held,
        stale_held,
        stale_held_max: (per_second * (timeout + 2.0 * interval)).round() as u64,
        in_use: input.in_use,
        needed,
        capacity: input.capacity,
        percent_of_range: percent(needed, input.capacity),
        exceeds_range: needed > input.capacity,
    }
}

/// The longest heartbeat timeout (with an interval of half of it, the
/// ratio of Cilium's defaults) under which the most GC holds, pace ×
/// (timeout + 2 × interval) = pace × 2 × timeout, plus the identities in
/// use stays under the target share of the range; and the pace the current
/// settings would fit at.
fn fit(s: &SteadyState, per_second: f64) -> Fit {
    let budget = s.capacity as f64 * NEARLY_FULL_PERCENT / 100.0 - s.in_use as f64;
    let max_held = s.heartbeat_timeout_seconds + 2.0 * s.gc_interval_seconds;
    // Whole seconds, rounded down: a suggestion must fit, not nearly fit.
    let timeout = (budget > 0.0 && per_second > 0.0)
        .then(|| (budget / per_second / 2.0).floor())
        .filter(|t| *t >= 1.0);
    Fit {
        target_percent: NEARLY_FULL_PERCENT,
        heartbeat_timeout_seconds: timeout,
        gc_interval_seconds: timeout.map(|t| (t / 2.0).floor().max(1.0)),
        fitting_rate_per_hour: round2((budget.max(0.0) / max_held) * 3600.0),
    }
}

/// Creations in each of the last [`HOURS`] hours, oldest first.
fn per_hour(ages: &[i64]) -> Vec<u64> {
    let mut hours = vec![0u64; HOURS];
    for a in ages {
        let h = (*a / 3600) as usize;
        if h < HOURS {
            hours[HOURS - 1 - h] += 1;
        }
    }
    hours
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 * 1000.0 / whole as f64).round() / 10.0
}

#[cfg(test)]
mod tests;
