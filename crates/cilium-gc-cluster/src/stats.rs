//! Run-wide counters, shared by the workers and turned into the report's
//! summary at the end. Atomics, so counting never blocks a request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// What the writer's limiter did over a run, for the report (kept here
/// with the other counters; the writer fills it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaceSummary {
    /// Wall time spent below `--qps` because of sustained throttling.
    pub throttled: Duration,
    /// The lowest rate adaptation reached.
    pub lowest_rate: f64,
}

/// Counters of everything the report counts that is not per item.
#[derive(Debug, Default)]
pub struct Stats {
    /// 409 answers.
    pub conflicts: AtomicU64,
    /// Requests sent again after a retryable failure.
    pub retries: AtomicU64,
    /// 429 answers.
    pub throttled: AtomicU64,
    /// 5xx answers, timeouts, connection failures.
    pub server_errors: AtomicU64,
    /// Identity list pages fetched.
    pub list_pages: AtomicU64,
    /// Identity list restarts or inconsistent continuations after 410.
    pub list_restarts: AtomicU64,
    /// Endpoint watcher restarts after the initial sync.
    pub watcher_restarts: AtomicU64,
    /// Time writes spent waiting out their own `Retry-After`, in ms, summed.
    pub retry_after_wait_ms: AtomicU64,
    /// What the shared write limiter did, over every sweep of the run.
    pub pace: Mutex<Option<PaceSummary>>,
    /// The fewest writes allowed in flight, over every sweep.
    pub in_flight: Mutex<Option<usize>>,
}

impl Stats {
    /// Add one to a counter.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    /// Add one request's wait for its `Retry-After`.
    pub fn add_retry_after_wait(&self, d: Duration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.retry_after_wait_ms.fetch_add(ms, Ordering::Relaxed);
    }
    /// Merge one sweep's limiter summary (marks, then deletes).
    pub fn add_pace(&self, p: PaceSummary) {
        let mut g = self.pace.lock().unwrap_or_else(|e| e.into_inner());
        *g = Some(match *g {
            None => p,
            Some(q) => PaceSummary {
                throttled: q.throttled + p.throttled,
                lowest_rate: q.lowest_rate.min(p.lowest_rate),
            },
        });
    }
    /// Merge one sweep's fewest writes in flight.
    pub fn add_in_flight(&self, n: usize) {
        let mut g = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        *g = Some(g.map_or(n, |m| m.min(n)));
    }
    /// The fewest writes allowed in flight, if a sweep ran.
    pub fn in_flight(&self) -> Option<usize> {
        *self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// The merged limiter summary, if any sweep was rate limited.
    pub fn pace(&self) -> Option<PaceSummary> {
        *self.pace.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// Read a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
