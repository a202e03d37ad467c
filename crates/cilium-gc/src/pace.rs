//! The shared write limiter: `governor`'s GCRA at `--qps`, slowed down only
//! while the server throttles us *persistently*.
//!
//! A 429 is first the business of the request that got it: that request
//! waits out its own `Retry-After` (see `sweep`), nobody else does. The
//! shared rate reacts to *sustained* throttling only, by AIMD ([`Aimd`]):
//!
//! - it remembers the outcome of the last [`WINDOW`] writes;
//! - when at least [`DECREASE_SHARE`] of them were throttled, the rate is
//!   cut to what the server admitted over that window: multiplied by the
//!   share that got through (`1 - throttled share`), at most halved (never
//!   below the floor, [`Aimd::floor`]: 5% of `--qps`, at least one write
//!   per second or `--qps` if that is lower), and the window starts afresh,
//!   so one burst of 429s cuts it once per fresh window of evidence (after
//!   a first cut, only a full window of [`WINDOW`] new outcomes is judged);
//! - every successful write adds [`RECOVERY_STEP`] of `--qps` back, up to
//!   `--qps`.
//!
//! A sporadic 429 (5% of writes) never reaches the threshold (12 of 40 at
//! 5% is a one-in-a-million window), so it slows nobody; a server-side cap
//! below `--qps`, or a burst of 429s, does.
//!
//! *Why cut to the admitted share, not halve* (issue 28): the threshold is
//! crossed when we send about 30% more than a server-side cap admits, and
//! 70% of that rate is the cap itself; halving fell to ~65% of the cap and
//! spent the climb back below it (the hostile simulator at `--qps 200`
//! lost a quarter of its cap that way). A burst where everything is
//! throttled still halves, window after window, as before.
//!
//! *At `--qps 0` there is no rate to cut*: what adapts is how many writes
//! are in flight, [`Window`] (issue 28). A server that limits concurrency
//! (API Priority and Fairness: a priority level has a few *seats*; with
//! `Reject`, a request that finds them all taken gets 429 at once) admits
//! as much as it has seats, and every write beyond them only collects a 429
//! in a millisecond, parks its item for `Retry-After`, and takes the next
//! one. APF lengthens `Retry-After` as its drops go on (doubling, up to
//! 32 s, once a level drops 3 per second of `Retry-After`), so those 429s
//! end the run with items parked for half a minute while the seats sit
//! idle, and push the level's other clients into 429s too. So the writes
//! in flight start at one and grow by one per round trip of successes (slow start) until
//! the first 429, which sets them to what the server was holding then;
//! after that, with the same evidence as above (≥ 30 % of the last 40 writes throttled), the
//! writes allowed in flight are cut to those the server was holding when it
//! refused (at most halved, at least one), and grow by one again after a
//! second without sustained throttling. A write added that way is a probe:
//! a 429 before its second is over takes it back at once, and the next
//! probe waits twice as long (up to [`MAX_PROBE`], 30 s; a probe that holds
//! brings back one a second), so once the limit holds, probing costs the
//! server one 429 in half a minute: APF's `Retry-After` (1 s while a level
//! drops fewer than 3 a second) stays at its minimum.
//!
//! *Why swap the limiter rather than weigh cells:* governor's rate is fixed
//! at construction. Charging `n` cells per write (`until_n_ready`) can only
//! express rates of `qps / n`, a coarse ladder, and a weight above the burst
//! is refused outright. A new limiter at the new rate expresses any rate. It
//! starts *empty* (its burst drained), so a swap never releases a burst, and
//! waiters sleeping on the old one move to the new one: when each finished
//! on the limiter it started on, every limiter still in use handed out its
//! own cells, and with swaps coming as fast as the writes they together
//! far exceeded the rate (issue 28, 2026-12-05: at `--qps 200 -c 16`
//! against a 50/s cap, about 180 writes a second went out while the rate
//! said 36–76, three of four refused). A recovering rate swaps only once it
//! has grown by [`SWAP_STEP`], so the waiters are not restarted on every
//! success.
//!
//! *Why the limiter starts empty:* the delete phase then never runs above
//! `--qps` on average, even with the default burst (`ceil(qps)`). The burst
//! is still there to absorb lateness: a worker that wakes late (timer
//! resolution, a busy CPU) does not lose its cell, because GCRA lets the
//! next `burst` cells catch up. With `--burst 1` nothing can catch up: each
//! wake-up's lateness is lost for good, so at a few hundred writes per
//! second and above the achieved rate falls measurably below `--qps` (what
//! `--burst 1` guarantees is spacing: no two writes closer than `1/qps`).

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::time::Instant;

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
    qps: f64,
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
        // second, and the climb back from there cost more than the burst;
        // issue 28). So a further cut waits for a full window of evidence.
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

/// Below this share of throttled writes among the last [`WINDOW`], a
/// second after the last change, the writes in flight grow by one.
pub(crate) const QUIET_SHARE: f64 = 0.1;
/// How long a change of the writes in flight stands before the next
/// increase, and how long a probe is on trial.
pub(crate) const PROBE: Duration = Duration::from_secs(1);
/// The longest a limit stands before the next probe, after refused ones.
/// Each refused probe is a drop on a full priority level, and APF doubles
/// the level's `Retry-After` (up to 32 s) once it drops 3 a second, for
/// every client of the level; a probe a second when the limit holds kept
/// the level near that threshold (issue 28: a 20 s run on 4 `Reject` seats
/// ended with items parked for 8 s). Backing off to one probe in 30 s
/// costs a second of headroom found late when seats free up; a probe that
/// holds brings the pace back to one a second.
pub(crate) const MAX_PROBE: Duration = Duration::from_secs(30);

/// How many writes may be in flight at `--qps 0` (see the module doc).
/// Pure: fed outcomes, how many of our other writes were in flight, and
/// the instant, it answers the limit; tested without a clock.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    max: usize,
    limit: usize,
    /// Slow start: from one write, one more per `limit` successes up to
    /// `max`; it ends at the first 429, which sets the limit (at `max`
    /// too: otherwise the first refusals would wait for sustained evidence,
    /// a burst of a dozen drops).
    starting: bool,
    /// Successes at the current limit during slow start.
    successes: usize,
    lowest: usize,
    changed: Instant,
    probing: bool,
    /// How long a limit stands before the next probe: [`PROBE`], doubled
    /// by each refused probe up to [`MAX_PROBE`], back to [`PROBE`] when a
    /// probe holds.
    probe_every: Duration,
    recent: VecDeque<bool>,
    /// The shortest `Retry-After` seen (the server's calm value).
    shortest_retry_after: Option<Duration>,
    /// When a lengthened `Retry-After` last cut the limit, and its value
    /// (followed down as the server shortens it).
    lengthened: Option<(Instant, Duration)>,
}

impl Window {
    /// Start with `max` (`--concurrency`) writes in flight.
    pub(crate) fn new(max: usize, now: Instant) -> Self {
        let max = max.max(1);
        Window {
            max,
            limit: 1,
            starting: max > 1,
            successes: 0,
            lowest: max,
            changed: now,
            probing: false,
            probe_every: PROBE,
            recent: VecDeque::with_capacity(WINDOW),
            shortest_retry_after: None,
            lengthened: None,
        }
    }

    /// The writes allowed in flight now.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The fewest allowed so far, slow start aside (`max` when never cut).
    pub(crate) fn lowest(&self) -> usize {
        self.lowest
    }

    /// Record one write's outcome; `others` is how many of our writes were
    /// still in flight when it was answered. Returns the new limit when it
    /// changed.
    pub(crate) fn record(&mut self, throttled: bool, others: usize, now: Instant) -> Option<usize> {
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(throttled);
        let before = self.limit;
        if self.starting {
            self.start(throttled, others, now);
            return (self.limit != before).then_some(self.limit);
        }
        let hits = self.recent.iter().filter(|t| **t).count();
        if self.probing && now - self.changed >= PROBE {
            // The probe outlived its trial: the server had room, so there
            // may be more; probe again at the quick pace.
            self.probing = false;
            self.probe_every = PROBE;
        }
        let on_trial = self.probing;
        if throttled && on_trial {
            // The probe found no room: take it back, and wait twice as
            // long before the next (see `MAX_PROBE`).
            self.limit -= 1;
            self.probing = false;
            self.changed = now;
            self.probe_every = (self.probe_every * 2).min(MAX_PROBE);
        } else if hits as f64 >= DECREASE_SHARE * WINDOW as f64 {
            self.cut_to_held(others, now);
        } else if !throttled
            && self.limit < self.max
            && now - self.changed >= self.probe_every
            && (hits as f64) < QUIET_SHARE * WINDOW as f64
        {
            self.limit += 1;
            self.probing = true;
            self.changed = now;
        }
        (self.limit != before).then_some(self.limit)
    }

    /// Slow start: starting at `--concurrency` against a server with fewer
    /// seats costs a burst of 429s before the evidence suffices to cut, and
    /// APF answers a burst of drops with a `Retry-After` that doubles for
    /// the next half minute. Growing from one write until the first 429
    /// costs one: the limit is then what the server held. One more per
    /// `limit` successes (a round trip's worth), not per success: growing
    /// per success doubles the limit each round trip, faster than a server
    /// answers with its first refusal (a 2026-12-05 run on 4 seats went
    /// from 1 to 8 in 30 ms and met 41 refusals at once, which raised the
    /// level's `Retry-After` to 2 s).
    fn start(&mut self, throttled: bool, others: usize, now: Instant) {
        if throttled {
            self.cut_to_held(others, now);
            return;
        }
        if self.limit == self.max {
            return;
        }
        self.successes += 1;
        if self.successes >= self.limit {
            self.successes = 0;
            self.limit += 1;
            self.changed = now;
        }
    }

    /// What the server held when it refused: our writes ahead of the
    /// refused one, at most halving, at least one; the evidence so far is
    /// spent. The only way the limit falls (a refused probe only takes its
    /// own step back), so the only place `lowest` moves.
    fn cut_to_held(&mut self, others: usize, now: Instant) {
        self.limit = others
            .min(self.limit - 1)
            .max(self.limit.div_ceil(2))
            .max(1);
        self.lowest = self.lowest.min(self.limit);
        self.starting = false;
        self.probing = false;
        self.changed = now;
        self.recent.clear();
    }

    /// A 429's `Retry-After`. APF lengthens it for every client of a level
    /// (doubling, up to 32 s) once the level drops 3 × its value within
    /// its value in seconds, and shortens it again as the drops stop. So a
    /// longer one than the shortest seen says the level drops too many,
    /// ours or a neighbour's, even when too few of *our* writes were
    /// refused to count as sustained (a 2026-12-05 run beside a 20 GETs/s
    /// neighbour on 4 seats: 2 % of ours refused, 20 drops a second,
    /// `Retry-After` up to 8 s). One cut to what the server held; the next
    /// lengthening is judged only once the server's evidence window (the
    /// `Retry-After` that cut) has passed, as until then it still counts
    /// drops from before the cut. Returns the new limit when it changed.
    pub(crate) fn retry_after(
        &mut self,
        ra: Duration,
        others: usize,
        now: Instant,
    ) -> Option<usize> {
        let shortest = self.shortest_retry_after.map_or(ra, |s| s.min(ra));
        self.shortest_retry_after = Some(shortest);
        if let Some((_, level)) = &mut self.lengthened {
            // Follow it down, so a new rise is seen.
            *level = (*level).min(ra);
        }
        let judged = match self.lengthened {
            Some((at, level)) => ra > level && now - at >= level,
            None => true,
        };
        if ra <= shortest || !judged {
            return None;
        }
        let before = self.limit;
        self.cut_to_held(others, now);
        self.lengthened = Some((now, ra));
        (self.limit != before).then_some(self.limit)
    }
}

/// What the limiter did over a run, for the report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PaceSummary {
    /// Wall time spent below `--qps` because of sustained throttling.
    pub throttled: Duration,
    /// The lowest rate adaptation reached.
    pub lowest_rate: f64,
}

/// The writes in flight at `--qps 0`, by departure order, so that a 429
/// can tell how many of ours the server was already holding when it
/// refused: those sent before it and not yet answered.
#[derive(Default)]
struct Flight {
    next: u64,
    open: std::collections::BTreeSet<u64>,
}

/// One write in flight (see [`Pace::depart`]); leaves the flight when
/// dropped, answered or not.
pub(crate) struct Ticket<'a> {
    pace: &'a Pace,
    seq: Option<u64>,
}

impl Ticket<'_> {
    /// How many of our writes sent before this one are still unanswered.
    pub(crate) fn ahead(&self) -> usize {
        let (Some(seq), Some(w)) = (self.seq, &self.pace.window) else {
            return 0;
        };
        let w = w.lock().unwrap_or_else(|e| e.into_inner());
        w.1.open.range(..seq).count()
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let (Some(seq), Some(w)) = (self.seq, &self.pace.window) {
            w.lock()
                .unwrap_or_else(|e| e.into_inner())
                .1
                .open
                .remove(&seq);
        }
    }
}

struct State {
    limiter: Arc<DefaultDirectRateLimiter>,
    /// The rate `limiter` was built for.
    limiter_rate: f64,
    aimd: Aimd,
    below_since: Option<Instant>,
    throttled: Duration,
}

/// The shared limiter of a sweep: the rate when `--qps` is set; at
/// `--qps 0` (unlimited) the writes in flight instead, per-request
/// `Retry-After` pacing each throttled item either way.
pub(crate) struct Pace {
    burst: u32,
    state: Option<Mutex<State>>,
    /// Woken when the limiter is swapped.
    swapped: tokio::sync::Notify,
    window: Option<Mutex<(Window, Flight)>>,
}

/// Whether the limiter at `current`/s is replaced for AIMD's new `rate`: on
/// every cut, and on a recovery once it has added [`SWAP_STEP`] (or reached
/// `--qps`), not on every recovering success (664 swaps in a 17 s run at
/// `--qps 100`).
fn swaps(current: f64, rate: f64, qps: f64) -> bool {
    rate < current || rate >= current * (1.0 + SWAP_STEP) || (rate >= qps && current < qps)
}

/// How much a recovering rate must have grown before its limiter is
/// replaced (a share of the current rate): each swap restarts every wait
/// on a drained limiter, so swapping on every success at a low rate (at
/// `--qps 200` one success adds 4/s, a tenth of 40/s) would hold the
/// writes below the rate.
const SWAP_STEP: f64 = 0.25;

/// A governor limiter at `rate`/s with `burst`, drained so it starts empty.
fn limiter(rate: f64, burst: u32) -> Arc<DefaultDirectRateLimiter> {
    let burst = NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN);
    let period = Duration::from_secs_f64(1.0 / rate).max(Duration::from_nanos(1));
    let quota = Quota::with_period(period)
        .expect("period is positive")
        .allow_burst(burst);
    let l = RateLimiter::direct(quota);
    let _ = l.check_n(burst);
    Arc::new(l)
}

impl Pace {
    /// A limiter at `qps` writes per second (0: unlimited) with `burst`.
    /// At `--qps 0`, at most `concurrency` writes in flight, adapted.
    pub(crate) fn new(qps: f64, burst: u32, concurrency: usize) -> Self {
        let burst = burst.max(1);
        Pace {
            burst,
            swapped: tokio::sync::Notify::new(),
            window: (qps <= 0.0)
                .then(|| Mutex::new((Window::new(concurrency, Instant::now()), Flight::default()))),
            state: (qps > 0.0).then(|| {
                Mutex::new(State {
                    limiter: limiter(qps, burst),
                    limiter_rate: qps,
                    aimd: Aimd::new(qps),
                    below_since: None,
                    throttled: Duration::ZERO,
                })
            }),
        }
    }

    fn lock(&self) -> Option<std::sync::MutexGuard<'_, State>> {
        self.state
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Wait for one write's cell, on the limiter current when it comes: a
    /// swap moves every waiter to the new limiter (see the module doc).
    /// Cancelling the wait (a stop) never makes us faster than the rate:
    /// governor takes a cell only when it grants it.
    pub(crate) async fn until_ready(&self) {
        loop {
            let swapped = self.swapped.notified();
            tokio::pin!(swapped);
            // Registered before the limiter is read, so no swap is missed.
            swapped.as_mut().enable();
            let Some(l) = self.lock().map(|s| s.limiter.clone()) else {
                return;
            };
            tokio::select! {
                _ = l.until_ready() => return,
                _ = &mut swapped => {}
            }
        }
    }

    /// How many items may be with a worker now, of `slots`.
    pub(crate) fn slots(&self, slots: usize) -> usize {
        match &self.window {
            Some(w) => slots.min(w.lock().unwrap_or_else(|e| e.into_inner()).0.limit()),
            None => slots,
        }
    }

    /// A write leaves: its ticket tells, when it is answered, how many of
    /// ours were ahead of it.
    pub(crate) fn depart(&self) -> Ticket<'_> {
        let seq = self.window.as_ref().map(|w| {
            let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
            let seq = w.1.next;
            w.1.next += 1;
            w.1.open.insert(seq);
            seq
        });
        Ticket { pace: self, seq }
    }

    /// Record one write's outcome (429 or not, with the 429's
    /// `Retry-After`; `ahead`: our writes still in flight that left before
    /// it) and adapt the rate, or at `--qps 0` the writes in flight.
    pub(crate) fn record(&self, throttled: bool, retry_after: Option<Duration>, ahead: usize) {
        if let Some(w) = &self.window {
            let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let mut changed = w.0.record(throttled, ahead, now);
            if let Some(ra) = retry_after.filter(|_| throttled) {
                changed = w.0.retry_after(ra, ahead, now).or(changed);
            }
            if let Some(limit) = changed {
                tracing::debug!(limit, throttled, ahead, "writes allowed in flight changed");
            }
        }
        let burst = self.burst;
        let Some(mut s) = self.lock() else { return };
        if let Some(rate) = s.aimd.record(throttled) {
            if swaps(s.limiter_rate, rate, s.aimd.qps) {
                tracing::debug!(rate, "write rate changed");
                s.limiter = limiter(rate, burst);
                s.limiter_rate = rate;
                self.swapped.notify_waiters();
            }
            let now = Instant::now();
            if rate < s.aimd.qps {
                s.below_since.get_or_insert(now);
            } else if let Some(t) = s.below_since.take() {
                s.throttled += now - t;
            }
        }
    }

    /// The current rate (`None`: unlimited).
    #[cfg(test)]
    pub(crate) fn rate(&self) -> Option<f64> {
        self.lock().map(|s| s.aimd.rate())
    }

    /// The fewest writes allowed in flight so far (`None`: a rate was set).
    pub(crate) fn lowest_in_flight(&self) -> Option<usize> {
        let w = self.window.as_ref()?;
        Some(w.lock().unwrap_or_else(|e| e.into_inner()).0.lowest())
    }

    /// Throttled time and lowest rate so far (`None`: unlimited).
    pub(crate) fn summary(&self) -> Option<PaceSummary> {
        let s = self.lock()?;
        let open = s.below_since.map_or(Duration::ZERO, |t| t.elapsed());
        Some(PaceSummary {
            throttled: s.throttled + open,
            lowest_rate: s.aimd.lowest(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Issue 28: a server that admits 70% of our rate (a cap below
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

    /// A window past its slow start: `max` writes in flight.
    fn started(max: usize, t0: Instant) -> Window {
        let mut w = Window::new(max, t0);
        while w.limit() < max {
            w.record(false, 0, t0);
        }
        w
    }

    /// Slow start: one more write per `limit` successes until the first
    /// 429, which sets the limit to what the server held then (one 429,
    /// not twelve).
    #[test]
    fn the_window_starts_slow_and_stops_at_the_first_429() {
        let t0 = Instant::now();
        let mut w = Window::new(8, t0);
        assert_eq!(w.limit(), 1);
        for n in 2..=5 {
            for _ in 1..n - 1 {
                assert_eq!(w.record(false, 0, t0), None);
            }
            assert_eq!(w.record(false, 0, t0), Some(n));
        }
        // Five in flight, the fifth refused with four of ours ahead.
        assert_eq!(w.record(true, 4, t0), Some(4));
        assert_eq!((w.limit(), w.lowest()), (4, 4));
        // Slow start is over: successes no longer add within the second.
        assert_eq!(w.record(false, 3, t0), None);
        // Without a 429 it ends at --concurrency, and nothing was cut.
        let w = started(8, t0);
        assert_eq!((w.limit(), w.lowest()), (8, 8));
    }

    /// Issue 28: eight writes in flight against a server that holds four
    /// at once (APF seats, `Reject`): the first 429 cuts the writes in
    /// flight to what the server held, at once, even when slow start has
    /// reached `--concurrency` without one (a 2026-12-05 run on 4 seats met
    /// 25 refusals before sustained evidence cut); after that, sustained
    /// throttling cuts the same way.
    #[test]
    fn the_window_is_cut_to_what_the_server_held() {
        let t0 = Instant::now();
        let mut w = started(8, t0);
        assert_eq!(w.record(true, 4, t0), Some(4));
        assert_eq!((w.limit(), w.lowest()), (4, 4));
        // Then 12 of the last 40 refused with 2 of ours ahead: one cut.
        let mut cuts = Vec::new();
        for i in 0..40 {
            if let Some(n) = w.record(i % 3 == 0, 2, t0) {
                cuts.push(n);
            }
        }
        assert_eq!(cuts, vec![2]);
        // Never cut below half at once, nor below one.
        let mut w = started(8, t0);
        for _ in 0..12 {
            w.record(true, 0, t0);
        }
        assert_eq!(w.limit(), 4);
        let mut w = Window::new(1, t0);
        for _ in 0..40 {
            w.record(true, 0, t0);
        }
        assert_eq!(w.limit(), 1);
    }

    /// A sporadic 429 (5 %) never cuts beyond what the server held at the
    /// first one; probes refused by it back off.
    #[test]
    fn the_window_ignores_sporadic_throttling() {
        let t0 = Instant::now();
        let mut w = started(8, t0);
        for i in 0..2000 {
            w.record(i % 20 == 0, 7, t0 + Duration::from_millis(i));
        }
        assert_eq!((w.limit(), w.lowest()), (7, 7));
    }

    /// APF lengthens `Retry-After` when the level drops too many: that cuts
    /// once, and the next lengthening only after the server's evidence
    /// window (the `Retry-After` that cut) has passed; one back at the
    /// shortest never cuts.
    #[test]
    fn a_lengthened_retry_after_cuts_once_per_evidence_window() {
        let t0 = Instant::now();
        let s = |ms: u64| t0 + Duration::from_millis(ms);
        let secs = Duration::from_secs;
        let mut w = started(8, t0);
        assert_eq!(w.record(true, 7, t0), Some(7));
        assert_eq!(w.retry_after(secs(1), 7, t0), None, "the calm value");
        // 2 s: the level dropped 3 a second.
        assert_eq!(w.retry_after(secs(2), 6, s(100)), Some(6));
        // 4 s within the 2 s window: the same drops, counted later.
        assert_eq!(w.retry_after(secs(4), 5, s(1500)), None);
        // After the window, a further lengthening cuts again.
        assert_eq!(w.retry_after(secs(4), 4, s(2200)), Some(4));
        // Followed down: back at 2 s, then up to 4 s after the window.
        assert_eq!(w.retry_after(secs(2), 3, s(3000)), None);
        assert_eq!(w.retry_after(secs(1), 3, s(7000)), None);
        assert_eq!(w.retry_after(secs(2), 3, s(7100)), Some(3));
        assert_eq!(w.lowest(), 3);
    }

    /// After a cut, one more write in flight per quiet second; a 429
    /// within a second of such a probe takes it back at once (not after
    /// twelve 429s), and the next probe waits twice as long.
    #[test]
    fn the_window_probes_one_write_per_quiet_second() {
        let t0 = Instant::now();
        let s = |ms: u64| t0 + Duration::from_millis(ms);
        let mut w = started(8, t0);
        assert_eq!(w.record(true, 2, t0), Some(4));
        // Within the second: no growth.
        assert_eq!(w.record(false, 3, s(500)), None);
        // A quiet second: one more.
        assert_eq!(w.record(false, 3, s(1000)), Some(5));
        assert_eq!(w.record(false, 4, s(1200)), None);
        // The probe is refused: back to 4 by one 429.
        assert_eq!(w.record(true, 4, s(1300)), Some(4));
        // A 429 outside a probe's trial is just evidence.
        assert_eq!(w.record(true, 4, s(1400)), None);
        // Growth waits a second after the last change, and up to --concurrency.
        assert_eq!(w.record(false, 3, s(2000)), None);
        let mut t = 2300;
        let mut grown = Vec::new();
        for _ in 0..10 {
            if let Some(n) = w.record(false, 3, s(t)) {
                grown.push(n);
            }
            t += 1000;
        }
        assert_eq!(grown, vec![5, 6, 7, 8]);
        assert_eq!(w.lowest(), 4);
    }

    /// A limit that holds is probed less and less often: each refused
    /// probe doubles the wait before the next, up to `MAX_PROBE`, so a
    /// full APF level sees our drops fall from one a second to one in 30 s;
    /// a probe that holds brings the pace back to one a second.
    #[test]
    fn refused_probes_back_off_and_a_held_one_resets_the_pace() {
        let t0 = Instant::now();
        let mut w = started(8, t0);
        assert_eq!(w.record(true, 2, t0), Some(4));
        // Every probe refused at once: the waits between them double.
        let mut t = t0;
        let mut probes = Vec::new();
        while t < t0 + Duration::from_secs(120) {
            t += Duration::from_millis(100);
            if w.record(false, 3, t) == Some(5) {
                probes.push((t - t0).as_secs());
                assert_eq!(w.record(true, 4, t), Some(4));
            }
        }
        assert_eq!(probes, vec![1, 3, 7, 15, 31, 61, 91]);
        // A probe that holds through its second: the next comes a second on.
        t += Duration::from_secs(30);
        assert_eq!(w.record(false, 3, t), Some(5));
        assert_eq!(w.record(false, 4, t + Duration::from_millis(500)), None);
        assert_eq!(w.record(false, 4, t + Duration::from_millis(1000)), Some(6));
    }

    #[tokio::test]
    async fn only_qps_0_adapts_the_writes_in_flight() {
        let p = Pace::new(0.0, 1, 8);
        assert_eq!(p.slots(8), 1, "slow start");
        // One more per round trip: 1 + 2 + ... + 7 successes to reach 8.
        for _ in 0..28 {
            p.record(false, None, 0);
        }
        assert_eq!(p.slots(8), 8);
        let (a, b) = (p.depart(), p.depart());
        assert_eq!((a.ahead(), b.ahead()), (0, 1));
        drop(a);
        assert_eq!(b.ahead(), 0, "an answered write is no longer ahead");
        for _ in 0..12 {
            p.record(true, None, 2);
        }
        assert_eq!(p.slots(8), 4);
        assert_eq!(p.lowest_in_flight(), Some(4));
        let r = Pace::new(100.0, 10, 8);
        for _ in 0..12 {
            r.record(true, None, 2);
        }
        assert_eq!(r.slots(8), 8, "with a rate, the rate adapts instead");
        assert_eq!(r.lowest_in_flight(), None);
        assert_eq!(r.rate(), Some(50.0));
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

    #[tokio::test]
    async fn pace_reports_throttled_time_and_lowest_rate() {
        let p = Pace::new(1000.0, 10, 8);
        for _ in 0..12 {
            p.record(true, None, 0);
        }
        assert_eq!(p.rate(), Some(500.0));
        p.until_ready().await;
        for _ in 0..30 {
            p.record(false, None, 0);
        }
        assert_eq!(p.rate(), Some(1000.0));
        let s = p.summary().unwrap();
        assert_eq!(s.lowest_rate, 500.0);
        assert!(Pace::new(0.0, 1, 8).summary().is_none());
    }
}
