//! Run-wide counters, shared by the workers and turned into the report's
//! summary at the end. Atomics, so counting never blocks a request.

use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Objects that could not be decoded.
    pub malformed: AtomicU64,
}

impl Stats {
    /// Add one to a counter.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    /// Read a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
