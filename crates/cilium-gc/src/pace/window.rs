//! The in-flight half of the write limiter: how many writes
//! may be in flight ([`Window`]), adapted to what the server holds.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::rate::{DECREASE_SHARE, WINDOW};

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
/// the level near that threshold (a 20 s run on 4 `Reject` seats ended
/// with items parked for 8 s). Backing off to one probe in 30 s
/// costs a second of headroom found late when seats free up; a probe that
/// holds brings the pace back to one a second.
pub(crate) const MAX_PROBE: Duration = Duration::from_secs(30);

/// How many writes may be in flight (see the module doc).
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
        // A refusal judges the probe only when the server held all we had
        // out before it (`limit - 1` of ours ahead): with fewer ahead, the
        // seat was not the probe's to take, and the 429 was someone
        // else's (a random one, a rate cap's, a neighbour's), evidence
        // like any other. Taking the probe back for those kept a run on
        // a server answering 5 % of writes 429 one write below what it
        // held, the next probe ever later.
        let on_trial = self.probing && others + 1 >= self.limit;
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
    /// answers with its first refusal (a run on 4 seats went from 1 to 8
    /// in 30 ms and met 41 refusals at once, which raised the
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
    /// refused to count as sustained (a run beside a 20 GETs/s neighbour on 4 seats: 2 % of ours refused, 20 drops a second,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A window past its slow start: `max` writes in flight (a window that
    /// never gets there fails here rather than hanging the test).
    fn started(max: usize, t0: Instant) -> Window {
        let mut w = Window::new(max, t0);
        for _ in 0..max * max {
            if w.limit() >= max {
                break;
            }
            w.record(false, 0, t0);
        }
        assert_eq!(w.limit(), max, "slow start reaches --concurrency");
        w
    }

    /// The writes in flight grow only in a quiet window: under a tenth of
    /// the last [`WINDOW`] refused, and not within [`PROBE`] of the last
    /// change. At exactly a tenth (4 of 40), or between a tenth and the
    /// share that cuts (8 of 40), the limit stands however long after;
    /// at 3 of 40 it grows by one.
    #[test]
    fn the_window_grows_only_when_fewer_than_a_tenth_were_refused() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(2);
        for (refused, grows) in [(3, Some(5)), (4, None), (8, None)] {
            let mut w = started(8, t0);
            assert_eq!(w.record(true, 4, t0), Some(4), "the first 429 cuts");
            // A window of 40: successes first, the refusals last, so the
            // next record pushes a success out and keeps them all.
            for i in 0..WINDOW {
                w.record(i >= WINDOW - refused, 3, t0);
            }
            assert_eq!(w.limit(), 4);
            assert_eq!(w.record(false, 3, later), grows, "{refused} of 40 refused");
        }
    }

    /// A refusal with all of ours (or more) still in flight says the
    /// server held one fewer than we sent: the limit steps down by one.
    /// A `Retry-After` back at the level that cut, once that level's
    /// window has passed, does not cut again.
    #[test]
    fn a_refusal_with_all_ours_ahead_steps_down_one_and_an_equal_retry_after_does_not_cut() {
        let t0 = Instant::now();
        let mut w = started(8, t0);
        assert_eq!(w.record(true, 10, t0), Some(7));
        let mut w = started(8, t0);
        let secs = Duration::from_secs;
        assert_eq!(w.record(true, 7, t0), Some(7));
        assert_eq!(w.retry_after(secs(1), 7, t0), None, "the calm value");
        assert_eq!(w.retry_after(secs(2), 6, t0), Some(6), "lengthened: cut");
        assert_eq!(
            w.retry_after(secs(2), 5, t0 + secs(3)),
            None,
            "the same level"
        );
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

    /// Eight writes in flight against a server that holds four
    /// at once (APF seats, `Reject`): the first 429 cuts the writes in
    /// flight to what the server held, at once, even when slow start has
    /// reached `--concurrency` without one (a run on 4 seats met 25
    /// refusals before sustained evidence cut); after that, sustained
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

    /// A probe is judged only by a refusal with all we had out before it
    /// still in flight: one with fewer of ours ahead (a random 429, a rate
    /// cap's) leaves it standing, and the next probe comes when its second is out.
    #[test]
    fn a_refusal_with_fewer_of_ours_ahead_does_not_take_the_probe_back() {
        let t0 = Instant::now();
        let s = |ms: u64| t0 + Duration::from_millis(ms);
        let mut w = started(8, t0);
        assert_eq!(w.record(true, 3, t0), Some(4));
        assert_eq!(w.record(false, 3, s(1000)), Some(5), "the probe");
        assert_eq!(w.record(true, 0, s(1100)), None, "none ahead");
        assert_eq!(w.record(true, 3, s(1200)), None, "three ahead, of five");
        assert_eq!(w.record(false, 3, s(2000)), Some(6), "it held: the next");
        assert_eq!(w.record(true, 5, s(2100)), Some(5), "five ahead: no room");
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
}
