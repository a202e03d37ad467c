//! The rate half of the write limiter: AIMD over the outcomes of the last
//! writes ([`Aimd`]), from `--qps`, or at `--qps 0` from the rate the writes
//! were sent at once throttling is sustained, and the governor limiter that
//! enforces the rate it answers (swapped, never reweighed: see [`swaps`]).

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::time::Instant;

/// Writes remembered to judge whether throttling is sustained.
pub(crate) const WINDOW: usize = 40;
/// Share of throttled writes in the window that cuts the rate.
pub(crate) const DECREASE_SHARE: f64 = 0.3;

/// The deepest single cut: half the rate.
pub(crate) const MAX_CUT: f64 = 0.5;
/// Share of the ceiling (`--qps`) given back per successful write.
pub(crate) const RECOVERY_STEP: f64 = 0.02;

/// Additive-increase, multiplicative-decrease of the write rate. Pure: fed
/// outcomes and their times, it answers the rate; tested without a clock.
#[derive(Debug, Clone)]
pub(crate) struct Aimd {
    /// `--qps`; `None` at `--qps 0`, where a rate is set only while
    /// throttling is sustained (see [`Aimd::record`]).
    qps: Option<f64>,
    /// What the rate recovers to: `--qps`, or at `--qps 0` the rate the
    /// writes were sent at when throttling became sustained; infinite
    /// while unlimited.
    pub(super) ceiling: f64,
    /// The current rate; infinite while unlimited.
    rate: f64,
    lowest: f64,
    /// The last outcomes (throttled or not), with when each was answered.
    window: VecDeque<(bool, Instant)>,
    /// Whether the rate was cut: from then on only a full window of fresh
    /// outcomes is judged (see [`Aimd::record`]).
    cut: bool,
    /// At `--qps 0`: writes answered since the rate got back to its
    /// ceiling (see [`Aimd::lift`]).
    at_ceiling: usize,
}

impl Aimd {
    /// Start at `qps`; `0` (or less): unlimited until throttling is
    /// sustained.
    pub(crate) fn new(qps: f64) -> Self {
        let qps = (qps > 0.0).then_some(qps);
        let start = qps.unwrap_or(f64::INFINITY);
        Aimd {
            qps,
            ceiling: start,
            rate: start,
            lowest: start,
            window: VecDeque::with_capacity(WINDOW),
            cut: false,
            at_ceiling: 0,
        }
    }

    /// The lowest rate adaptation may reach: 5% of the ceiling, at least
    /// one write per second (or the ceiling itself when that is lower).
    pub(crate) fn floor(&self) -> f64 {
        (self.ceiling * 0.05).max(1.0).min(self.ceiling)
    }

    /// The current rate (infinite: unlimited).
    #[cfg(test)]
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// The lowest rate so far (infinite: never limited).
    pub(crate) fn lowest(&self) -> f64 {
        self.lowest
    }

    /// Whether the rate is below the one asked for (`--qps`, or unlimited).
    pub(crate) fn below(&self) -> bool {
        self.rate < self.qps.unwrap_or(f64::INFINITY)
    }

    /// The rate the remembered writes were answered at: what they were
    /// sent at, whatever held them (the rate, the writes in flight, a
    /// hold). `n` answers span `n - 1` intervals.
    fn sent(&self, now: Instant) -> f64 {
        let oldest = self.window.front().map_or(now, |(_, t)| *t);
        let span = now.saturating_duration_since(oldest).max(MIN_SPAN);
        self.window.len().saturating_sub(1) as f64 / span.as_secs_f64()
    }

    /// Record one write's outcome, answered at `now`; returns the new rate
    /// when it changed (infinite: the rate is lifted).
    pub(crate) fn record(&mut self, throttled: bool, now: Instant) -> Option<f64> {
        if self.window.len() == WINDOW {
            self.window.pop_front();
        }
        self.window.push_back((throttled, now));
        let before = self.rate;
        let hits = self.window.iter().filter(|(t, _)| *t).count();
        // After a cut, the writes answered next were mostly sent at the old
        // rate: judging them again would cut twice for one cause (a 3 s
        // burst of 429s at 100/s took the rate to its floor in half a
        // second, and the climb back from there cost more than the burst).
        // So a further cut waits for a full window of evidence.
        let judged = !self.cut || self.window.len() == WINDOW;
        if judged && hits as f64 >= DECREASE_SHARE * WINDOW as f64 {
            // What got through, of the writes remembered (fewer than
            // WINDOW right after a cut: a run of 429s, which halves), of
            // what was sent: the rate, or less when the writes in flight
            // held them below it (a rate they never reached says nothing).
            let admitted = 1.0 - hits as f64 / self.window.len() as f64;
            let sent = self.sent(now);
            if self.ceiling.is_infinite() {
                // At `--qps 0`: what we were sending at becomes the ceiling.
                self.ceiling = sent;
            }
            self.rate = (self.rate.min(sent) * admitted.max(MAX_CUT)).max(self.floor());
            self.window.clear();
            self.cut = true;
        } else if !throttled && self.rate.is_finite() {
            self.rate = (self.rate + self.ceiling * RECOVERY_STEP).min(self.ceiling);
        }
        self.lift();
        self.lowest = self.lowest.min(self.rate);
        (self.rate != before).then_some(self.rate)
    }
}

impl Aimd {
    /// At `--qps 0`: a rate back at its ceiling for a full window of
    /// writes without sustained throttling is lifted (the server admits
    /// what we sent unlimited again: a burst of 429s ended, or a cap was
    /// raised). A cap still there cuts the rate before that.
    fn lift(&mut self) {
        if self.qps.is_some() || self.rate.is_infinite() || self.rate < self.ceiling {
            self.at_ceiling = 0;
            return;
        }
        self.at_ceiling += 1;
        if self.at_ceiling >= WINDOW {
            self.rate = f64::INFINITY;
            self.ceiling = f64::INFINITY;
            self.window.clear();
            self.cut = false;
            self.at_ceiling = 0;
        }
    }
}

/// The shortest span the send rate is measured over: answers that came
/// together say little about a rate.
const MIN_SPAN: Duration = Duration::from_millis(1);

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

    /// One instant for writes whose times do not matter: answered
    /// together, their send rate is measured over [`MIN_SPAN`], far above
    /// any rate here, so only the rate counts.
    fn at() -> Instant {
        static AT: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *AT.get_or_init(Instant::now)
    }

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
            a.record(i % 20 == 0, at());
        }
        assert_eq!(a.rate(), 100.0);
        assert_eq!(a.lowest(), 100.0);
    }

    #[test]
    fn sustained_throttling_halves_down_to_the_floor_and_recovers_additively() {
        let mut a = Aimd::new(100.0);
        let mut changes = Vec::new();
        for _ in 0..WINDOW * 10 {
            if let Some(r) = a.record(true, at()) {
                changes.push(r);
            }
        }
        assert_eq!(changes, vec![50.0, 25.0, 12.5, 6.25, 5.0]);
        assert_eq!(a.floor(), 5.0);
        // A server cap at half the rate: half the writes throttled.
        let mut a = Aimd::new(100.0);
        for i in 0..200 {
            a.record(i % 2 == 0, at());
        }
        assert!(a.rate() < 100.0, "{}", a.rate());
        // Recovery: 2 per success.
        let mut a = Aimd::new(100.0);
        for _ in 0..12 {
            a.record(true, at());
        }
        assert_eq!(a.rate(), 50.0);
        a.record(false, at());
        assert_eq!(a.rate(), 52.0);
        for _ in 0..100 {
            a.record(false, at());
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
            if let Some(r) = a.record(i >= 28, at()) {
                first_cut.get_or_insert(r);
            }
        }
        // 12 of the last 40 throttled (the threshold): 70% admitted.
        assert_eq!(first_cut, Some(70.0));
        assert_eq!(a.lowest(), 70.0);
        // A burst (everything throttled) still halves.
        let mut a = Aimd::new(100.0);
        for _ in 0..12 {
            a.record(true, at());
        }
        assert_eq!(a.rate(), 50.0);
        // ...and halves again only on a full window of fresh evidence: the
        // writes answered right after a cut were sent at the old rate.
        for _ in 0..WINDOW - 1 {
            a.record(true, at());
        }
        assert_eq!(a.rate(), 50.0);
        a.record(true, at());
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

    /// Writes answered `every` apart from `t0`, the `i`th throttled when
    /// `throttled(i)`; the rate changes they brought.
    fn answered(
        a: &mut Aimd,
        t0: Instant,
        every: Duration,
        n: u32,
        throttled: impl Fn(u32) -> bool,
    ) -> Vec<f64> {
        (0..n)
            .filter_map(|i| a.record(throttled(i), t0 + every * i))
            .collect()
    }

    /// At `--qps 0` the rate the writes were sent at, once throttling is
    /// sustained, is cut to what the server admitted and becomes the
    /// ceiling; back at it for a full window, the rate is lifted.
    #[test]
    fn at_qps_0_sustained_throttling_sets_a_rate_from_what_was_sent() {
        let t0 = at();
        let ms10 = Duration::from_millis(10);
        let mut a = Aimd::new(0.0);
        assert_eq!(a.rate(), f64::INFINITY, "unlimited");
        assert!(!a.below());
        // 100 answers a second, the last 12 of 40 refused: 70 % admitted.
        assert_eq!(answered(&mut a, t0, ms10, 40, |i| i >= 28), vec![70.0]);
        assert_eq!((a.ceiling, a.floor(), a.lowest()), (100.0, 5.0, 70.0));
        assert!(a.below());
        // Each success gives back 2 % of the ceiling, up to it.
        let t1 = t0 + ms10 * 40;
        let up = answered(&mut a, t1, ms10, 15, |_| false);
        assert_eq!(up.last(), Some(&100.0));
        assert_eq!(a.rate(), 100.0);
        // At the ceiling for a full window of writes without sustained
        // throttling (11 refused of 40 is not): lifted.
        let t2 = t1 + ms10 * 15;
        let lifted = answered(&mut a, t2, ms10, WINDOW as u32, |i| i % 4 == 0 && i < 44);
        assert_eq!(lifted, vec![f64::INFINITY]);
        assert!(!a.below());
        assert_eq!(a.lowest(), 70.0, "the lowest stays");
        // A cap still there cuts before that.
        let mut b = Aimd::new(0.0);
        answered(&mut b, t0, ms10, 40, |i| i >= 28);
        let capped = answered(&mut b, t1, ms10, 200, |i| i % 2 == 0);
        assert!(capped.iter().all(|r| r.is_finite()), "{capped:?}");
        assert!(b.rate() < 100.0, "{}", b.rate());
    }

    /// A rate the writes never reached (held below it by the writes in
    /// flight) is cut from what they were sent at, not from itself.
    #[test]
    fn a_rate_never_reached_is_cut_from_what_was_sent() {
        let mut a = Aimd::new(1000.0);
        let cuts = answered(&mut a, at(), Duration::from_millis(10), 40, |i| i >= 28);
        assert_eq!(cuts, vec![70.0]);
        assert_eq!(a.ceiling, 1000.0, "--qps stays the ceiling");
        assert_eq!(a.floor(), 50.0);
    }
}
