//! The rate half of the write limiter, when `--qps` is set: AIMD over the
//! outcomes of the last writes ([`Aimd`]), and the governor limiter that
//! enforces the rate it answers (swapped, never reweighed: see [`swaps`]).

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// Writes remembered to judge whether throttling is sustained.
pub(crate) const WINDOW: usize = 40;
/// Share of throttled writes in the window that cuts the rate.
pub(crate) const DECREASE_SHARE: f64 = 0.3;

/// The deepest single cut: half the rate.
pub(crate) const MAX_CUT: f64 = 0.5;
/// Share of `--qps` given back per successful write.
pub(crate) const RECOVERY_STEP: f64 = 0.02;

/// Additive-increase, multiplicative-decrease of the write rate. Pure: fed
/// outcomes, it answers the rate; tested without a clock.
#[derive(Debug, Clone)]
pub(crate) struct Aimd {
    pub(super) qps: f64,
    rate: f64,
    lowest: f64,
    window: VecDeque<bool>,
    /// Whether the rate was cut: from then on only a full window of fresh
    /// outcomes is judged (see [`Aimd::record`]).
    cut: bool,
}

impl Aimd {
    /// Start at `qps` (positive).
    pub(crate) fn new(qps: f64) -> Self {
        Aimd {
            qps,
            rate: qps,
            lowest: qps,
            window: VecDeque::with_capacity(WINDOW),
            cut: false,
        }
    }

    /// The lowest rate adaptation may reach: 5% of `--qps`, at least one
    /// write per second (or `--qps` itself when that is lower).
    pub(crate) fn floor(&self) -> f64 {
        (self.qps * 0.05).max(1.0).min(self.qps)
    }

    /// The current rate.
    #[cfg(test)]
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// The lowest rate so far.
    pub(crate) fn lowest(&self) -> f64 {
        self.lowest
    }

    /// Record one write's outcome; returns the new rate when it changed.
    pub(crate) fn record(&mut self, throttled: bool) -> Option<f64> {
        if self.window.len() == WINDOW {
            self.window.pop_front();
        }
        self.window.push_back(throttled);
        let before = self.rate;
        let hits = self.window.iter().filter(|t| **t).count();
        // After a cut, the writes answered next were mostly sent at the old
        // rate: judging them again would cut twice for one cause (a 3 s
        // burst of 429s at 100/s took the rate to its floor in half a
        // second, and the climb back from there cost more than the burst).
        // So a further cut waits for a full window of evidence.
        let judged = !self.cut || self.window.len() == WINDOW;
        if judged && hits as f64 >= DECREASE_SHARE * WINDOW as f64 {
            // What got through, of the writes remembered (fewer than
            // WINDOW right after a cut: a run of 429s, which halves).
            let admitted = 1.0 - hits as f64 / self.window.len() as f64;
            self.rate = (self.rate * admitted.max(MAX_CUT)).max(self.floor());
            self.window.clear();
            self.cut = true;
        } else if !throttled {
            self.rate = (self.rate + self.qps * RECOVERY_STEP).min(self.qps);
        }
        self.lowest = self.lowest.min(self.rate);
        (self.rate != before).then_some(self.rate)
    }
}

/// Whether the limiter at `current`/s is replaced for AIMD's new `rate`: on
/// every cut, and on a recovery once it has added [`SWAP_STEP`] (or reached
/// `--qps`), not on every recovering success (664 swaps in a 17 s run at
/// `--qps 100`).
pub(super) fn swaps(current: f64, rate: f64, qps: f64) -> bool {
    rate < current || rate >= current * (1.0 + SWAP_STEP) || (rate >= qps && current < qps)
}

/// How much a recovering rate must have grown before its limiter is
/// replaced (a share of the current rate): each swap restarts every wait
/// on a drained limiter, so swapping on every success at a low rate (at
/// `--qps 200` one success adds 4/s, a tenth of 40/s) would hold the
/// writes below the rate.
const SWAP_STEP: f64 = 0.25;

/// A governor limiter at `rate`/s with `burst`, drained so it starts empty.
pub(super) fn limiter(rate: f64, burst: u32) -> Arc<DefaultDirectRateLimiter> {
    let burst = NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN);
    let period = Duration::from_secs_f64(1.0 / rate).max(Duration::from_nanos(1));
    let quota = Quota::with_period(period)
        .expect("period is positive")
        .allow_burst(burst);
    let l = RateLimiter::direct(quota);
    let _ = l.check_n(burst);
    Arc::new(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The limiter's cell is the rate's period: at 10/s, drained, the
    /// next write is due within a tenth of a second (governor's own answer,
    /// no clock waited on), not in ten seconds.
    #[test]
    fn the_limiter_paces_at_the_rate() {
        use governor::clock::{Clock, DefaultClock};
        let l = limiter(10.0, 1);
        let wait = match l.check() {
            Ok(()) => Duration::ZERO,
            Err(not_until) => not_until.wait_time_from(DefaultClock::default().now()),
        };
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
    }

    #[test]
    fn sporadic_throttling_keeps_the_rate() {
        let mut a = Aimd::new(100.0);
        // One 429 in twenty writes, for a long time.
        for i in 0..2000 {
            a.record(i % 20 == 0);
        }
        assert_eq!(a.rate(), 100.0);
        assert_eq!(a.lowest(), 100.0);
    }

    #[test]
    fn sustained_throttling_halves_down_to_the_floor_and_recovers_additively() {
        let mut a = Aimd::new(100.0);
        let mut changes = Vec::new();
        for _ in 0..WINDOW * 10 {
            if let Some(r) = a.record(true) {
                changes.push(r);
            }
        }
        assert_eq!(changes, vec![50.0, 25.0, 12.5, 6.25, 5.0]);
        assert_eq!(a.floor(), 5.0);
        // A server cap at half the rate: half the writes throttled.
        let mut a = Aimd::new(100.0);
        for i in 0..200 {
            a.record(i % 2 == 0);
        }
        assert!(a.rate() < 100.0, "{}", a.rate());
        // Recovery: 2 per success.
        let mut a = Aimd::new(100.0);
        for _ in 0..12 {
            a.record(true);
        }
        assert_eq!(a.rate(), 50.0);
        a.record(false);
        assert_eq!(a.rate(), 52.0);
        for _ in 0..100 {
            a.record(false);
        }
        assert_eq!(a.rate(), 100.0, "capped at --qps");
        assert_eq!(a.lowest(), 50.0);
    }

    /// A server that admits 70% of our rate (a cap below
    /// `--qps`) brings the rate down to that cap, not to half of it.
    #[test]
    fn a_cap_below_the_rate_cuts_to_what_was_admitted() {
        let mut a = Aimd::new(100.0);
        let mut first_cut = None;
        for i in 0..WINDOW {
            if let Some(r) = a.record(i >= 28) {
                first_cut.get_or_insert(r);
            }
        }
        // 12 of the last 40 throttled (the threshold): 70% admitted.
        assert_eq!(first_cut, Some(70.0));
        assert_eq!(a.lowest(), 70.0);
        // A burst (everything throttled) still halves.
        let mut a = Aimd::new(100.0);
        for _ in 0..12 {
            a.record(true);
        }
        assert_eq!(a.rate(), 50.0);
        // ...and halves again only on a full window of fresh evidence: the
        // writes answered right after a cut were sent at the old rate.
        for _ in 0..WINDOW - 1 {
            a.record(true);
        }
        assert_eq!(a.rate(), 50.0);
        a.record(true);
        assert_eq!(a.rate(), 25.0);
    }

    /// The limiter is swapped on every cut, but a recovering rate only
    /// once it has grown by a quarter or reached `--qps`: each swap
    /// restarts every waiter on a drained limiter.
    #[test]
    fn the_limiter_is_swapped_on_cuts_and_on_real_growth() {
        assert!(swaps(50.0, 49.0, 100.0), "any cut");
        assert!(!swaps(40.0, 44.0, 200.0), "one success at --qps 200");
        assert!(!swaps(40.0, 49.9, 200.0));
        assert!(swaps(40.0, 50.0, 200.0), "a quarter more");
        assert!(swaps(90.0, 100.0, 100.0), "back at --qps");
        assert!(!swaps(100.0, 100.0, 100.0));
    }

    #[test]
    fn floor_is_stated() {
        assert_eq!(Aimd::new(1000.0).floor(), 50.0);
        assert_eq!(Aimd::new(10.0).floor(), 1.0);
        assert_eq!(Aimd::new(0.5).floor(), 0.5);
    }
}
