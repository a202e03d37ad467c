//! Fault injection for client requests: throttling (both 429 shapes, bursts,
//! a server-side delete rate cap), 5xx, connection resets, slow answers and
//! expired continue tokens. Actors write the store directly and never see
//! these. Decisions use a seeded RNG so a run can be replayed.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How a 429 looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThrottleShape {
    /// APF: `text/plain` `Too many requests, please try again later.`
    #[default]
    Apf,
    /// `Status` JSON, reason TooManyRequests, `details.retryAfterSeconds`.
    Status,
    /// Either, at random.
    Mixed,
}

/// How a connection is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetMode {
    /// Right after the response headers.
    AfterHeaders,
    /// After part of the body.
    MidBody,
}

/// Fault settings; all fractions are per request in `0.0..=1.0`, 0 = off.
#[derive(Debug, Clone, PartialEq)]
pub struct Faults {
    /// Share of requests answered 429.
    pub throttle_fraction: f64,
    /// Shape of injected 429s (throttling, bursts and the delete cap).
    pub throttle_shape: ThrottleShape,
    /// `Retry-After` seconds sent with 429s.
    pub retry_after_secs: u64,
    /// Every this long, a throttling burst starts...
    pub burst_every: Option<Duration>,
    /// ...during which every request gets 429.
    pub burst_len: Duration,
    /// When the first burst starts, after the server starts (then one every
    /// [`Self::burst_every`]): where the bursts fall in a client's run, so
    /// that a bench can sweep it over the period rather than depend on it.
    pub burst_offset: Duration,
    /// Deletes per second the server accepts; more get 429.
    pub delete_rate_cap: Option<f64>,
    /// Deletes the server works on at once, like an API Priority and
    /// Fairness level with this many seats and `limitResponse: Reject`: a
    /// delete arriving while every seat is taken gets 429 at once. Each
    /// holds its seat for [`Self::delete_service`]. Its `Retry-After`
    /// follows the level's drops as APF's does ([`ApfRetryAfter`]), from
    /// [`Self::retry_after_secs`] up to 32 s.
    pub delete_seats: Option<usize>,
    /// How long a delete holds its seat before it is served.
    pub delete_service: Duration,
    /// Share answered 500 InternalError.
    pub error_500_fraction: f64,
    /// Share answered 503 ServiceUnavailable.
    pub error_503_fraction: f64,
    /// Share answered 504 Timeout.
    pub error_504_fraction: f64,
    /// Share whose connection is cut after the headers or mid-body.
    pub reset_fraction: f64,
    /// Share answered after [`Self::slow_delay`].
    pub slow_fraction: f64,
    /// Delay of slow answers.
    pub slow_delay: Duration,
    /// Share of continue requests answered 410 Expired (as if compacted).
    pub expire_continue_fraction: f64,
    /// Slow answers take a uniform time in `slow_delay..=slow_delay_max`
    /// (`None`: exactly `slow_delay`).
    pub slow_delay_max: Option<Duration>,
    /// Only list requests are slowed (a struggling server's big reads).
    pub slow_only_lists: bool,
    /// Share of 5xx answers sent *after* the write committed (the client
    /// cannot tell whether it happened).
    pub error_after_commit_share: f64,
    /// Every watch ends within this long, at a random instant: a normal end
    /// (most), a dropped connection, or a 410 ERROR event, per the shares
    /// below.
    pub watch_end_within: Option<Duration>,
    /// Share of those ends that drop the connection.
    pub watch_drop_share: f64,
    /// Share of those ends that are a 410 `ERROR` event (compaction).
    pub watch_expire_share: f64,
    /// From this long after the server started, every list and watch of
    /// CiliumEndpoints and CiliumEndpointSlices is answered 500: endpoint
    /// usage goes dark for good.
    pub endpoint_reads_fail_after: Option<Duration>,
    /// Answers carry no `Date` header (some proxies strip it): the client
    /// must fall back to its own clock and say so.
    pub omit_date_header: bool,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            throttle_fraction: 0.0,
            throttle_shape: ThrottleShape::Apf,
            retry_after_secs: 1,
            burst_every: None,
            burst_len: Duration::from_secs(1),
            burst_offset: Duration::ZERO,
            delete_rate_cap: None,
            delete_seats: None,
            delete_service: Duration::from_millis(20),
            error_500_fraction: 0.0,
            error_503_fraction: 0.0,
            error_504_fraction: 0.0,
            reset_fraction: 0.0,
            slow_fraction: 0.0,
            slow_delay: Duration::from_millis(200),
            expire_continue_fraction: 0.0,
            slow_delay_max: None,
            slow_only_lists: false,
            error_after_commit_share: 0.0,
            watch_end_within: None,
            watch_drop_share: 0.0,
            watch_expire_share: 0.0,
            endpoint_reads_fail_after: None,
            omit_date_header: false,
        }
    }
}

impl Faults {
    /// The `hostile` preset: a struggling API server. 5% random 429s (half
    /// APF `text/plain`, half `Status` with `retryAfterSeconds`), a 3 s
    /// burst of 429s every 20 s, a 50 deletes/s cap answered 429 +
    /// `Retry-After`, 3% 500/503/504 (a third after the write committed),
    /// 1% connection resets, 10% slow list pages (0.2-1.5 s), compaction in
    /// the middle of paginated lists, and watches that end within 20 s
    /// (normally, by a dropped connection, or by a 410 ERROR event).
    pub fn hostile() -> Self {
        Faults {
            throttle_fraction: 0.05,
            throttle_shape: ThrottleShape::Mixed,
            retry_after_secs: 1,
            burst_every: Some(Duration::from_secs(20)),
            burst_len: Duration::from_secs(3),
            delete_rate_cap: Some(50.0),
            error_500_fraction: 0.01,
            error_503_fraction: 0.01,
            error_504_fraction: 0.01,
            reset_fraction: 0.01,
            slow_fraction: 0.1,
            slow_delay: Duration::from_millis(200),
            expire_continue_fraction: 0.1,
            slow_delay_max: Some(Duration::from_millis(1500)),
            slow_only_lists: true,
            error_after_commit_share: 1.0 / 3.0,
            watch_end_within: Some(Duration::from_secs(20)),
            watch_drop_share: 0.25,
            watch_expire_share: 0.25,
            endpoint_reads_fail_after: None,
            omit_date_header: false,
            ..Faults::default()
        }
    }

    /// The `struggling` preset: an API server that admits about 40
    /// deletes/s and says so, nothing more. A 50 deletes/s cap answered
    /// 429 with `Retry-After`, a 3 s burst of 429s (with `Retry-After`)
    /// every 15 s, and 3% 500/503/504 (a third after the write committed). None of
    /// [`Faults::hostile`]'s other noise: no random 429s, no connection
    /// resets, no slow list pages, no expired continue tokens, no watch ends.
    pub fn struggling() -> Self {
        Faults {
            throttle_shape: ThrottleShape::Mixed,
            retry_after_secs: 1,
            burst_every: Some(Duration::from_secs(15)),
            burst_len: Duration::from_secs(3),
            delete_rate_cap: Some(50.0),
            error_500_fraction: 0.01,
            error_503_fraction: 0.01,
            error_504_fraction: 0.01,
            error_after_commit_share: 1.0 / 3.0,
            ..Faults::default()
        }
    }

    /// The `usage-dark` preset: endpoint watches end within 5 s, and from
    /// 8 s on every list and watch of endpoints fails with 500, for good.
    pub fn usage_dark() -> Self {
        Faults {
            watch_end_within: Some(Duration::from_secs(5)),
            endpoint_reads_fail_after: Some(Duration::from_secs(8)),
            ..Faults::default()
        }
    }
}

/// How a watch ends early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchEnd {
    /// The server closes the stream normally (as `timeoutSeconds` would).
    Normal,
    /// The connection drops mid-stream.
    Drop,
    /// A 410 `ERROR` event (the resourceVersion was compacted), then the end.
    Expire,
}

/// What to do to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Verdict {
    /// Wait this long before answering.
    pub delay: Option<Duration>,
    /// Answer with this instead of serving.
    pub reject: Option<Rejection>,
    /// Cut the connection while answering.
    pub reset: Option<ResetMode>,
    /// Treat the continue token as compacted.
    pub expire_continue: bool,
    /// Serve the request (commit it), then answer with `reject` anyway.
    pub after_commit: bool,
}

/// An injected error answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// 429, APF text.
    ThrottleApf(u64),
    /// 429, Status JSON.
    ThrottleStatus(u64),
    /// 500.
    Internal,
    /// 503.
    Unavailable,
    /// 504.
    Timeout,
}

/// Live fault state, changeable at runtime.
pub(crate) struct FaultEngine {
    cfg: Mutex<Faults>,
    rng: Mutex<ChaCha8Rng>,
    started: Instant,
    delete_bucket: Mutex<(f64, Instant)>,
    seats_taken: std::sync::atomic::AtomicUsize,
    seat_drops: Mutex<Option<ApfRetryAfter>>,
}

/// The `Retry-After` an API Priority and Fairness level answers its drops
/// with, as kube-apiserver computes it (`k8s.io/apiserver`'s dropped
/// requests tracker, 1.29+): it starts at its floor (1 s in APF); when a
/// second starts after drops, the drops of the last `Retry-After` seconds
/// are counted: at least 3 × `Retry-After` doubles it (up to 32 s, at most
/// once per `Retry-After` seconds), fewer than `Retry-After` takes a second
/// off. So a level dropping 3 requests a second or more makes every client
/// of it wait longer, where a constant `Retry-After` would not.
#[derive(Debug, Clone)]
pub struct ApfRetryAfter {
    floor: u64,
    retry_after: u64,
    increased_at: Option<u64>,
    /// Drops per whole second, the current one last.
    history: std::collections::VecDeque<(u64, u64)>,
}

/// APF's longest `Retry-After`, in seconds.
const APF_MAX_RETRY_AFTER: u64 = 32;

impl ApfRetryAfter {
    /// A level that has dropped nothing: `Retry-After` is `floor`.
    pub fn new(floor: u64) -> Self {
        let floor = floor.max(1);
        ApfRetryAfter {
            floor,
            retry_after: floor,
            increased_at: None,
            history: std::collections::VecDeque::new(),
        }
    }

    /// The `Retry-After` a drop is answered with now.
    pub fn retry_after(&self) -> u64 {
        self.retry_after
    }

    /// One more drop at whole second `now`.
    pub fn drop_at(&mut self, now: u64) {
        match self.history.back_mut() {
            Some((second, count)) if *second == now => *count += 1,
            _ => {
                // A new second: judge the drops before it first.
                self.update(now);
                self.history.push_back((now, 1));
            }
        }
        let keep = (2 * self.retry_after).max(APF_MAX_RETRY_AFTER);
        while self.history.front().is_some_and(|(s, _)| now - s > keep) {
            self.history.pop_front();
        }
    }

    fn update(&mut self, now: u64) {
        let ra = self.retry_after;
        let dropped: u64 = self
            .history
            .iter()
            .filter(|(s, _)| now - s <= ra)
            .map(|(_, c)| c)
            .sum();
        let waited = self.increased_at.is_none_or(|t| now - t >= ra);
        if waited && dropped >= 3 * ra {
            self.retry_after = (2 * ra).min(APF_MAX_RETRY_AFTER);
            self.increased_at = Some(now);
        } else if dropped < ra && ra > self.floor {
            self.retry_after = ra - 1;
        }
    }
}

/// A delete's seat (see [`Faults::delete_seats`]), given back on drop.
pub(crate) struct Seat<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl FaultEngine {
    /// Start with `faults`, seeded.
    pub(crate) fn new(faults: Faults, seed: u64) -> Self {
        FaultEngine {
            cfg: Mutex::new(faults),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_fa17)),
            started: Instant::now(),
            delete_bucket: Mutex::new((f64::MAX, Instant::now())),
            seats_taken: std::sync::atomic::AtomicUsize::new(0),
            seat_drops: Mutex::new(None),
        }
    }

    /// Current settings.
    pub(crate) fn get(&self) -> Faults {
        self.cfg.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replace the settings.
    pub(crate) fn set(&self, f: Faults) {
        *self.cfg.lock().unwrap_or_else(|e| e.into_inner()) = f;
    }

    /// Decide the fate of one client request: `verb` is the Kubernetes verb
    /// (`list`, `watch`, `delete`, ...), `endpoint_read` whether it lists or
    /// watches CiliumEndpoints/Slices.
    pub(crate) fn judge(&self, verb: &str, endpoint_read: bool, is_continue: bool) -> Verdict {
        let f = self.get();
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        let mut hit = |p: f64| p > 0.0 && rng.random::<f64>() < p;
        let mut v = Verdict::default();
        if (!f.slow_only_lists || verb == "list") && hit(f.slow_fraction) {
            v.delay = Some(f.slow_delay);
        }
        let dark = endpoint_read
            && f.endpoint_reads_fail_after
                .is_some_and(|t| self.started.elapsed() >= t);
        let throttled = self.in_burst(&f)
            || hit(f.throttle_fraction)
            || (verb == "delete" && !self.take_delete_token(&f));
        v.reject = if dark {
            Some(Rejection::Internal)
        } else if throttled {
            let status = match f.throttle_shape {
                ThrottleShape::Apf => false,
                ThrottleShape::Status => true,
                ThrottleShape::Mixed => hit(0.5),
            };
            Some(if status {
                Rejection::ThrottleStatus(f.retry_after_secs)
            } else {
                Rejection::ThrottleApf(f.retry_after_secs)
            })
        } else if hit(f.error_500_fraction) {
            Some(Rejection::Internal)
        } else if hit(f.error_503_fraction) {
            Some(Rejection::Unavailable)
        } else if hit(f.error_504_fraction) {
            Some(Rejection::Timeout)
        } else {
            None
        };
        let server_error = !dark && !throttled && v.reject.is_some();
        v.after_commit = server_error && hit(f.error_after_commit_share);
        if v.reject.is_none() && hit(f.reset_fraction) {
            v.reset = Some(if verb == "watch" || hit(0.5) {
                ResetMode::AfterHeaders
            } else {
                ResetMode::MidBody
            });
        }
        v.expire_continue = is_continue && v.reject.is_none() && hit(f.expire_continue_fraction);
        drop(rng);
        if let (Some(d), Some(max)) = (v.delay, f.slow_delay_max.filter(|m| *m > f.slow_delay)) {
            let extra = (max - d).as_secs_f64() * self.random();
            v.delay = Some(d + Duration::from_secs_f64(extra));
        }
        v
    }

    /// A seat for one delete when seats are limited: `Ok(None)` when they
    /// are not, `Err(retry_after)` when every seat is taken (the delete is
    /// refused at once, as APF's `Reject` does, with the level's current
    /// `Retry-After`, see [`ApfRetryAfter`]).
    pub(crate) fn take_seat(&self) -> Result<Option<(Seat<'_>, Duration)>, u64> {
        use std::sync::atomic::Ordering;
        let f = self.get();
        let Some(seats) = f.delete_seats else {
            return Ok(None);
        };
        let taken = self
            .seats_taken
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < seats).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Some((Seat(&self.seats_taken), f.delete_service))),
            Err(_) => {
                let mut drops = self.seat_drops.lock().unwrap_or_else(|e| e.into_inner());
                let level = drops.get_or_insert_with(|| ApfRetryAfter::new(f.retry_after_secs));
                level.drop_at(self.started.elapsed().as_secs());
                Err(level.retry_after())
            }
        }
    }

    fn random(&self) -> f64 {
        self.rng.lock().unwrap_or_else(|e| e.into_inner()).random()
    }

    /// When and how a new watch ends early, if the faults say it does.
    pub(crate) fn watch_end(&self) -> Option<(Duration, WatchEnd)> {
        let f = self.get();
        let within = f.watch_end_within.filter(|d| !d.is_zero())?;
        let at = within.mul_f64(self.random());
        let r = self.random();
        let how = if r < f.watch_drop_share {
            WatchEnd::Drop
        } else if r < f.watch_drop_share + f.watch_expire_share {
            WatchEnd::Expire
        } else {
            WatchEnd::Normal
        };
        Some((at, how))
    }

    fn in_burst(&self, f: &Faults) -> bool {
        in_burst_at(f, self.started.elapsed())
    }

    /// Token bucket of the delete cap (burst = one second's worth).
    fn take_delete_token(&self, f: &Faults) -> bool {
        let Some(rate) = f.delete_rate_cap.filter(|r| *r > 0.0) else {
            return true;
        };
        let mut b = self.delete_bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(b.1).as_secs_f64() * rate;
        b.0 = (b.0 + refill).min(rate.max(1.0));
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Whether `elapsed` after the server started falls in a burst of 429s:
/// the first starts at [`Faults::burst_offset`], then one every
/// [`Faults::burst_every`], each [`Faults::burst_len`] long.
fn in_burst_at(f: &Faults, elapsed: Duration) -> bool {
    let Some(every) = f.burst_every.filter(|e| !e.is_zero()) else {
        return false;
    };
    // None before the first; then the time since the last one's start.
    elapsed
        .checked_sub(f.burst_offset)
        .is_some_and(|t| t.as_nanos() % every.as_nanos() < f.burst_len.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_faults_means_clean_verdicts() {
        let e = FaultEngine::new(Faults::default(), 1);
        for _ in 0..100 {
            assert_eq!(e.judge("delete", false, true), Verdict::default());
        }
    }

    #[test]
    fn seats_refuse_deletes_beyond_them_until_one_is_given_back() {
        let e = FaultEngine::new(Faults::default(), 1);
        assert!(matches!(e.take_seat(), Ok(None)), "no seats: unlimited");
        e.set(Faults {
            delete_seats: Some(2),
            retry_after_secs: 3,
            ..Faults::default()
        });
        let a = e.take_seat().expect("a seat").expect("limited");
        let b = e.take_seat().expect("a seat").expect("limited");
        assert_eq!(e.take_seat().err(), Some(3), "refused with Retry-After");
        drop(a);
        assert!(e.take_seat().is_ok_and(|s| s.is_some()));
        drop(b);
    }

    /// APF's rule: 3 drops a second double `Retry-After` (at most once per
    /// `Retry-After` seconds, up to 32), fewer than one a second of it
    /// take a second off, down to the floor.
    #[test]
    fn apf_retry_after_follows_the_levels_drops() {
        let mut l = ApfRetryAfter::new(1);
        // Two drops a second: calm.
        for s in 0..10 {
            l.drop_at(s);
            l.drop_at(s);
        }
        assert_eq!(l.retry_after(), 1);
        // Three a second: doubles when the next second starts.
        for _ in 0..3 {
            l.drop_at(10);
        }
        l.drop_at(11);
        assert_eq!(l.retry_after(), 2);
        // Six in the last two seconds, but within 2 s of the increase: held.
        for _ in 0..5 {
            l.drop_at(11);
        }
        l.drop_at(12);
        assert_eq!(l.retry_after(), 2);
        // Sustained: 4, 8, 16, 32 and no further.
        for s in 13..200 {
            for _ in 0..100 {
                l.drop_at(s);
            }
        }
        assert_eq!(l.retry_after(), 32);
        // Quiet again: a drop now and then brings it down a second at a time.
        l.drop_at(300);
        assert_eq!(l.retry_after(), 31);
        for s in (302..500).step_by(2) {
            l.drop_at(s);
        }
        assert_eq!(l.retry_after(), 1);
        // One drop a second is as many as `Retry-After` counts: it stops
        // coming down (about halfway from 32, as in APF).
        let mut l = ApfRetryAfter::new(1);
        for s in 0..100 {
            for _ in 0..100 {
                l.drop_at(s);
            }
        }
        for s in 200..300 {
            l.drop_at(s);
        }
        assert!((10..32).contains(&l.retry_after()), "{}", l.retry_after());
        // A floor above 1 (`retry_after_secs`) holds.
        let mut l = ApfRetryAfter::new(3);
        l.drop_at(0);
        l.drop_at(100);
        assert_eq!(l.retry_after(), 3);
    }

    /// `struggling` throttles and answers a few percent 5xx, and does
    /// nothing else to a request (its bursts left out here: the engine
    /// starts in one).
    #[test]
    fn struggling_is_throttling_and_a_few_percent_5xx_only() {
        let f = Faults {
            burst_every: None,
            ..Faults::struggling()
        };
        let e = FaultEngine::new(f, 7);
        let mut errors = 0;
        for _ in 0..10_000 {
            let v = e.judge("list", false, true);
            assert!(v.delay.is_none() && v.reset.is_none() && !v.expire_continue);
            match v.reject {
                None => {}
                Some(Rejection::Internal | Rejection::Unavailable | Rejection::Timeout) => {
                    errors += 1
                }
                Some(r) => panic!("a list got {r:?}"),
            }
        }
        assert!((200..400).contains(&errors), "{errors} 5xx in 10,000");
        assert!(e.watch_end().is_none());
        assert_eq!(Faults::struggling().delete_rate_cap, Some(50.0));
    }

    /// Bursts start at the offset, then one every period: none before the
    /// first, even when the offset is longer than the period.
    #[test]
    fn bursts_start_at_the_offset_then_every_period() {
        let at = |offset: u64, s: f64| {
            let f = Faults {
                burst_offset: Duration::from_secs(offset),
                ..Faults::hostile()
            };
            in_burst_at(&f, Duration::from_secs_f64(s))
        };
        let bursting = |offset| {
            (0..80)
                .filter(|&i| at(offset, f64::from(i) * 0.5))
                .map(|i| f64::from(i) * 0.5)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            bursting(0),
            [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 20.0, 20.5, 21.0, 21.5, 22.0, 22.5]
        );
        assert_eq!(
            bursting(8),
            [8.0, 8.5, 9.0, 9.5, 10.0, 10.5, 28.0, 28.5, 29.0, 29.5, 30.0, 30.5]
        );
        assert_eq!(
            bursting(30),
            [30.0, 30.5, 31.0, 31.5, 32.0, 32.5],
            "longer than the period: none before it"
        );
        assert!(
            !in_burst_at(&Faults::default(), Duration::ZERO),
            "none set: none"
        );
    }

    #[test]
    fn delete_cap_throttles_excess_deletes_only() {
        let e = FaultEngine::new(
            Faults {
                delete_rate_cap: Some(5.0),
                ..Faults::default()
            },
            1,
        );
        let rejected = (0..50)
            .filter(|_| e.judge("delete", false, false).reject.is_some())
            .count();
        assert!(rejected >= 40, "{rejected}");
        assert!(e.judge("get", false, false).reject.is_none());
    }
}
