//! The shared write limiter of a sweep. Each rule, and why:
//!
//! - **A 429 is first the business of the request that got it**: that
//!   request waits out its own `Retry-After`, parked off the workers (see
//!   `sweep`); nobody else waits. The shared pace reacts only to
//!   *sustained* throttling: at least [`DECREASE_SHARE`](rate::DECREASE_SHARE) of the last
//!   [`WINDOW`](rate::WINDOW) writes refused. A sporadic 429 (5 % of writes) almost never
//!   reaches that (12 of 40 at 5 % is a one-in-a-million window), so it
//!   slows nobody; a server-side cap or a burst of 429s does.
//! - **With `--qps`, the rate adapts** ([`Aimd`], in `rate`): cut to what
//!   the server admitted over the window (the share that got through, at
//!   most halved, never below a floor), then one full window of fresh
//!   evidence before the next cut, since the writes answered right after a
//!   cut were sent at the old rate; each success gives back a step of
//!   `--qps`. Cutting to the admitted share rather than halving: the
//!   threshold is crossed when we send about 30 % more than a cap admits,
//!   and 70 % of that is the cap itself, while halving falls well below it
//!   and spends the climb back there.
//! - **The limiter is swapped, not reweighed**: governor's rate is fixed at
//!   construction, and charging `n` cells per write can only express
//!   `qps / n` (a weight above the burst is refused). A new limiter starts
//!   *empty*, so a swap never releases a burst, and every waiter moves to
//!   it: waiters finishing on the limiters they started on would together
//!   let out several times the rate. A recovering rate swaps only once it
//!   has grown by a quarter, so waiters are not restarted on every success.
//! - **The limiter starts empty**, so a sweep never runs above `--qps` on
//!   average, even with the default burst (`ceil(qps)`); the burst then
//!   only absorbs lateness (a worker that wakes late keeps its cell). With
//!   `--burst 1` lateness is lost for good, and at a few hundred writes a
//!   second the achieved rate falls measurably below `--qps`; what it
//!   guarantees is spacing.
//! - **A 429 with none of our writes ahead holds every write back**: the
//!   server's seat was taken by someone else (our own list pages or
//!   watches, or another client), so a write sent at once would meet the
//!   same refusal, and so would the next (16 refusals in 0.26 s under one
//!   APF seat). The writes wait a short probe window instead, doubling
//!   while such refusals follow each other, never past the server's
//!   `Retry-After` (1 s without one); a success ends the run of doubling.
//!   The first window of a run is 250 ms; after that it is learned: a
//!   refusal that a success follows (the seat was free again within the
//!   window, or the 429 was a random one) shortens the next first window
//!   by a quarter, down to 25 ms, about a loaded server's round trip; a
//!   second such refusal before any success (the window was too short,
//!   or a burst of 429s) doubles it again, once per run of them, up to
//!   250 ms. A server that answers 429 at random (5 % of
//!   writes, 2 a second) would otherwise hold every write for half of
//!   each second. A refusal with ours ahead is the window's business
//!   (below).
//! - **The writes in flight adapt too, with or without a rate**
//!   ([`Window`], in `window`): a server that limits concurrency (API
//!   Priority and Fairness: a level's few seats; with `Reject`, a request
//!   finding them taken gets 429 at once) admits as many writes as it has
//!   seats, whatever the rate, and every write beyond them only collects
//!   a 429. APF lengthens `Retry-After` for the whole level once it drops
//!   3 a second, so excess writes would leave items parked for half a
//!   minute while seats sit idle, and push the level's other clients into
//!   429s too. Cutting only the rate does not help there: 32 workers at
//!   `--qps 1000` on a real server's one `Reject` seat kept 32 writes
//!   out at a slower rate, collected more 429s than deletes, and 200
//!   deletes outlasted CI's five-minute limit (`tests/e2e/apf.rs`). So: slow start from one write, one
//!   more per round trip of successes, until `--concurrency` or the first
//!   429, which sets the limit to what the server was holding then; after
//!   that, sustained throttling or a lengthened `Retry-After` cuts it to
//!   what the server held (at most halved, at least one), and a quiet
//!   second adds one write as a probe. A probe refused within its second,
//!   with all we had out before it still in flight, is taken back at once
//!   and the next waits twice as long (up to 30 s),
//!   so a limit that holds costs the server one 429 in half a minute and
//!   APF's `Retry-After` stays at its minimum. A server that limits the
//!   rate instead (a proxy's token bucket) cuts the window too, at most
//!   by half per window of evidence and at worst to one write in flight,
//!   which at a round trip of a few milliseconds still carries several
//!   times the default `--qps`; it grows back by a probe a second.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::DefaultDirectRateLimiter;
use tokio::time::Instant;

mod rate;
mod window;

use rate::{limiter, swaps, Aimd};
use window::Window;

pub(crate) use cilium_gc_cluster::stats::PaceSummary;

/// The writes in flight, by departure order, so that a 429
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
    seq: u64,
}

impl Ticket<'_> {
    /// How many of our writes sent before this one are still unanswered.
    pub(crate) fn ahead(&self) -> usize {
        self.pace.window().1.open.range(..self.seq).count()
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.pace.window().1.open.remove(&self.seq);
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

/// The first hold after a 429 with none of ours ahead, at the start of a
/// run, and the longest first hold learned later (see the module doc).
const FIRST_HOLD: Duration = Duration::from_millis(250);
/// The shortest first hold learned: about a loaded server's round trip.
const MIN_HOLD: Duration = Duration::from_millis(25);
/// How recent a success tells that the server is answering (see
/// [`Pace::answering`]).
const ANSWERING: Duration = Duration::from_secs(1);
/// The longest hold when the 429 carried no `Retry-After`.
const MAX_HOLD: Duration = Duration::from_secs(1);

/// Every write held back until `until`, after a 429 with none of ours
/// ahead; `next` is the hold the next such refusal brings.
struct Hold {
    until: Option<Instant>,
    next: Duration,
    /// The hold a refusal after a success brings: learned from how the
    /// last ones ended (see the module doc).
    first: Duration,
    /// Refusals with none of ours ahead since the last success.
    refused: u32,
}

/// The shared limiter of a sweep: the rate when `--qps` is set, and the
/// writes in flight always, per-request `Retry-After` pacing each
/// throttled item.
pub(crate) struct Pace {
    burst: u32,
    hold: Mutex<Hold>,
    /// When a write last succeeded (see [`Pace::answering`]).
    last_success: Mutex<Option<Instant>>,
    state: Option<Mutex<State>>,
    /// Woken when the limiter is swapped.
    swapped: tokio::sync::Notify,
    window: Mutex<(Window, Flight)>,
}

impl Pace {
    /// A limiter at `qps` writes per second (0: unlimited) with `burst`,
    /// and at most `concurrency` writes in flight, adapted.
    pub(crate) fn new(qps: f64, burst: u32, concurrency: usize) -> Self {
        let burst = burst.max(1);
        Pace {
            burst,
            hold: Mutex::new(Hold {
                until: None,
                next: FIRST_HOLD,
                first: FIRST_HOLD,
                refused: 0,
            }),
            last_success: Mutex::new(None),
            swapped: tokio::sync::Notify::new(),
            window: Mutex::new((Window::new(concurrency, Instant::now()), Flight::default())),
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

    fn window(&self) -> std::sync::MutexGuard<'_, (Window, Flight)> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
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
        self.until_released().await;
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

    /// Wait out a hold (a hold set or lengthened while waiting is waited out
    /// too).
    async fn until_released(&self) {
        loop {
            let until = self.hold.lock().unwrap_or_else(|e| e.into_inner()).until;
            match until {
                Some(t) if t > Instant::now() => tokio::time::sleep_until(t).await,
                _ => return,
            }
        }
    }

    /// A 429 with none of ours ahead holds every write back; a success ends
    /// the doubling of the holds, and teaches the first hold (see the
    /// module doc).
    fn hold_after(&self, throttled: bool, retry_after: Option<Duration>, ahead: usize) {
        let mut h = self.hold.lock().unwrap_or_else(|e| e.into_inner());
        if !throttled {
            if h.refused > 0 {
                // The seat was free again: the next first hold is shorter.
                // In whole milliseconds, as the timer counts them.
                let shorter = Duration::from_millis(h.first.as_millis() as u64 * 3 / 4);
                h.first = shorter.max(MIN_HOLD);
                h.refused = 0;
            }
            h.next = h.first;
            return;
        }
        if ahead > 0 {
            return;
        }
        if h.refused == 1 {
            // Refused again before any success: the first hold was too
            // short (or a burst began). Once per run of refusals, so a
            // burst of them costs one doubling.
            h.first = (h.first * 2).min(FIRST_HOLD);
        }
        h.refused = h.refused.saturating_add(1);
        let wait = h.next.min(retry_after.unwrap_or(MAX_HOLD));
        let until = Instant::now() + wait;
        h.until = Some(h.until.map_or(until, |u| u.max(until)));
        h.next = (h.next * 2).min(retry_after.unwrap_or(MAX_HOLD).max(FIRST_HOLD));
    }

    /// Whether the server is answering our writes: one succeeded within
    /// the last [`ANSWERING`]. A 5xx's `Retry-After` says how long the
    /// server expects to be unavailable; while other writes get through,
    /// that 5xx was a sporadic failure and its item waits only its backoff
    /// (a struggling server's 503s asked for 5 s, and the last of them
    /// made up a fifth of a 23 s run).
    pub(crate) fn answering(&self) -> bool {
        self.last_success
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|t| t.elapsed() <= ANSWERING)
    }

    /// How many items may be with a worker now, of `slots`.
    pub(crate) fn slots(&self, slots: usize) -> usize {
        slots.min(self.window().0.limit())
    }

    /// A write leaves: its ticket tells, when it is answered, how many of
    /// ours were ahead of it.
    pub(crate) fn depart(&self) -> Ticket<'_> {
        let mut w = self.window();
        let seq = w.1.next;
        w.1.next += 1;
        w.1.open.insert(seq);
        Ticket { pace: self, seq }
    }

    /// Record one write's outcome (429 or not, with the 429's
    /// `Retry-After`; `ahead`: our writes still in flight that left before
    /// it) and adapt the writes in flight, and the rate when one is set.
    pub(crate) fn record(&self, throttled: bool, retry_after: Option<Duration>, ahead: usize) {
        if !throttled {
            *self.last_success.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        }
        self.hold_after(throttled, retry_after, ahead);
        {
            let mut w = self.window();
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

    /// The fewest writes allowed in flight so far.
    pub(crate) fn lowest_in_flight(&self) -> usize {
        self.window().0.lowest()
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

    #[tokio::test]
    async fn the_writes_in_flight_adapt_with_or_without_a_rate() {
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
        assert_eq!(p.lowest_in_flight(), 4);
        // With a rate, both adapt: a server with seats for two is not
        // helped by a slower rate alone (halved at most per cut).
        let r = Pace::new(100.0, 10, 8);
        for _ in 0..28 {
            r.record(false, None, 0);
        }
        assert_eq!(r.slots(8), 8);
        for _ in 0..12 {
            r.record(true, None, 2);
        }
        assert_eq!(r.slots(8), 4);
        assert_eq!(r.lowest_in_flight(), 4);
        assert_eq!(r.rate(), Some(70.0), "the share admitted: 28 of 40");
    }

    /// The limiter holds a write back: at 1/s the bucket starts empty (no
    /// burst at the start), so a write is not ready at once (polled once,
    /// no clock read), while an unlimited pace never waits.
    #[tokio::test]
    async fn until_ready_holds_the_write_until_its_cell() {
        use futures::FutureExt;
        let p = Pace::new(1.0, 1, 8);
        assert!(p.until_ready().now_or_never().is_none(), "held back");
        let unlimited = Pace::new(0.0, 1, 8);
        for _ in 0..100 {
            assert!(unlimited.until_ready().now_or_never().is_some());
        }
    }

    /// Throttled time counts from the rate's drop below the one set to its
    /// return: open while below (it grows), closed once back (it stays).
    #[test]
    fn throttled_time_runs_while_below_the_set_rate_and_stops_when_back() {
        let p = Pace::new(1000.0, 10, 8);
        assert_eq!(p.summary().unwrap().throttled, Duration::ZERO);
        for _ in 0..12 {
            p.record(true, None, 0);
        }
        let open = p.summary().unwrap().throttled;
        std::thread::sleep(Duration::from_millis(2));
        assert!(p.summary().unwrap().throttled > open, "open: it grows");
        for _ in 0..30 {
            p.record(false, None, 0);
        }
        assert_eq!(p.rate(), Some(1000.0));
        let closed = p.summary().unwrap().throttled;
        assert!(closed >= Duration::from_millis(2), "{closed:?}");
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(p.summary().unwrap().throttled, closed, "closed: it stays");
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

    /// The server is answering while a write succeeded within the last
    /// second: not before any, not a second after the last.
    #[tokio::test(start_paused = true)]
    async fn the_server_is_answering_within_a_second_of_a_success() {
        let p = Pace::new(0.0, 1, 8);
        assert!(!p.answering(), "no success yet");
        p.record(true, Some(Duration::from_secs(1)), 0);
        assert!(!p.answering(), "a 429 is no answer");
        p.record(false, None, 0);
        assert!(p.answering());
        tokio::time::advance(ANSWERING).await;
        assert!(p.answering(), "a second after: still");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!p.answering(), "past it");
    }

    /// A 429 with none of ours ahead holds every write for a probe window,
    /// doubling while such refusals follow each other, never past the
    /// server's `Retry-After`; one with ours ahead holds nobody, and a
    /// success starts the doubling over.
    #[tokio::test(start_paused = true)]
    async fn a_refusal_with_none_of_ours_ahead_holds_the_next_write() {
        let p = Pace::new(0.0, 1, 8);
        let waited = || async {
            let t = Instant::now();
            p.until_ready().await;
            t.elapsed()
        };
        p.record(true, Some(Duration::from_secs(1)), 3);
        assert_eq!(
            waited().await,
            Duration::ZERO,
            "ours ahead: the window's business"
        );
        p.record(true, Some(Duration::from_secs(1)), 0);
        assert_eq!(waited().await, FIRST_HOLD);
        p.record(true, Some(Duration::from_secs(1)), 0);
        assert_eq!(waited().await, 2 * FIRST_HOLD, "doubled");
        for _ in 0..5 {
            p.record(true, Some(Duration::from_secs(1)), 0);
        }
        assert_eq!(
            waited().await,
            Duration::from_secs(1),
            "never past Retry-After"
        );
        p.record(true, None, 0);
        assert_eq!(waited().await, MAX_HOLD, "no Retry-After: at most a second");
        p.record(false, None, 0);
        p.record(true, Some(Duration::from_secs(5)), 0);
        assert_eq!(
            waited().await,
            Duration::from_millis(187),
            "a success starts over, a quarter shorter"
        );
    }

    /// The first hold is learned: refusals that a success follows (random
    /// 429s) shorten it by a quarter each, down to [`MIN_HOLD`]; a second
    /// refusal before a success doubles it, once per run of refusals, up to
    /// [`FIRST_HOLD`].
    #[tokio::test(start_paused = true)]
    async fn the_first_hold_shortens_after_random_refusals_and_grows_when_too_short() {
        let p = Pace::new(0.0, 1, 8);
        let ra = Some(Duration::from_secs(1));
        let first_hold = || async {
            p.record(true, ra, 0);
            let t = Instant::now();
            p.until_ready().await;
            t.elapsed()
        };
        // Successes with no refusal before them teach nothing.
        for _ in 0..5 {
            p.record(false, None, 0);
        }
        let mut holds = Vec::new();
        for _ in 0..10 {
            holds.push(first_hold().await.as_millis());
            p.record(false, None, 0);
        }
        assert_eq!(holds, [250, 187, 140, 105, 78, 58, 43, 32, 25, 25]);
        // Refused again after the hold, and again: doubled once (25 to 50),
        // while the holds of the run double as before.
        assert_eq!(first_hold().await, MIN_HOLD);
        assert_eq!(first_hold().await, 2 * MIN_HOLD);
        assert_eq!(first_hold().await, 4 * MIN_HOLD);
        p.record(false, None, 0);
        assert_eq!(first_hold().await, Duration::from_millis(37));
        // Never past FIRST_HOLD.
        for _ in 0..20 {
            first_hold().await;
            first_hold().await;
            p.record(false, None, 0);
        }
        assert_eq!(first_hold().await, Duration::from_millis(187));
    }
}
