//! Why a run stops starting new work: a signal, or lost permission.
//!
//! Workers check [`Stop`] before every write and wait on it while they wait
//! for the rate limiter, so no delete starts after SIGINT/SIGTERM; requests
//! already in flight finish and are reported.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// The reason to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// 401/403 on a write: the permission was lost mid-run.
    PermissionLost,
    /// The endpoint watchers could not re-list for too long: which
    /// identities are in use is unknown, so nothing more may be deleted.
    UsageLost,
    /// An endpoint whose identity reference cannot be read appeared: which
    /// identity it protects is unknown, so nothing more may be deleted.
    UnreadableEndpoint,
}

/// A shared stop flag. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    inner: Arc<(AtomicU8, Notify)>,
}

impl Stop {
    /// Request a stop; the first reason wins.
    pub fn trigger(&self, why: StopReason) {
        let code = match why {
            StopReason::Interrupt => 1,
            StopReason::Terminate => 2,
            StopReason::PermissionLost => 3,
            StopReason::UsageLost => 4,
            StopReason::UnreadableEndpoint => 5,
        };
        let _ = self
            .inner
            .0
            .compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
        self.inner.1.notify_waiters();
    }

    /// Why we stopped, if we did.
    pub fn reason(&self) -> Option<StopReason> {
        match self.inner.0.load(Ordering::SeqCst) {
            1 => Some(StopReason::Interrupt),
            2 => Some(StopReason::Terminate),
            3 => Some(StopReason::PermissionLost),
            4 => Some(StopReason::UsageLost),
            5 => Some(StopReason::UnreadableEndpoint),
            _ => None,
        }
    }

    /// Whether a stop was requested.
    pub fn is_stopped(&self) -> bool {
        self.reason().is_some()
    }

    /// Resolves once a stop is requested.
    pub async fn wait(&self) {
        loop {
            let notified = self.inner.1.notified();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_reason_wins_and_waiters_wake() {
        let s = Stop::default();
        let w = s.clone();
        let waiter = tokio::spawn(async move { w.wait().await });
        s.trigger(StopReason::Terminate);
        s.trigger(StopReason::Interrupt);
        waiter.await.unwrap();
        assert_eq!(s.reason(), Some(StopReason::Terminate));
    }
}
