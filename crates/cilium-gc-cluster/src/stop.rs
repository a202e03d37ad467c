//! Why a run stops starting new work: a signal, lost permission, or a bug.
//!
//! Everything before the first write is reads, and a stop cancels it at
//! once. Workers check [`Stop`] before every write and wait on it while they
//! wait for the rate limiter, so no delete starts after SIGINT/SIGTERM;
//! writes already in flight get `IN_FLIGHT_GRACE` to be answered, and are
//! reported either way. A second SIGINT/SIGTERM exits the process at once,
//! as people expect of command-line tools: no report then.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// A bug (a panic) anywhere in the process: nothing more is started and
    /// the report says `internal-error`.
    InternalError,
}

impl StopReason {
    /// The exit this stop imposes on whatever was running: a signal's, or
    /// a bug's. `None` for the stops a run reports as its own outcome
    /// (permission lost, usage lost, an unreadable endpoint): it keeps its
    /// exit then. The one mapping for the run, the fleet and diagnose.
    pub fn exit(self) -> Option<crate::exit::Exit> {
        use crate::exit::Exit;
        match self {
            StopReason::Interrupt => Some(Exit::Interrupted),
            StopReason::Terminate => Some(Exit::Terminated),
            StopReason::InternalError => Some(Exit::Unexpected),
            StopReason::PermissionLost | StopReason::UsageLost | StopReason::UnreadableEndpoint => {
                None
            }
        }
    }
}

/// How long a write already sent when the run stops may take to be
/// answered before it is given up (and reported as possibly applied).
pub(crate) const IN_FLIGHT_GRACE: Duration = Duration::from_millis(1500);

/// A shared stop flag. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    reason: AtomicU8,
    notify: Notify,
    /// What the panic said, for [`StopReason::InternalError`].
    panic: Mutex<Option<String>>,
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
            StopReason::InternalError => 6,
        };
        let _ = self
            .inner
            .reason
            .compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// Stop because of a bug; `message` says what panicked, and where.
    pub fn fail(&self, message: String) {
        let mut m = self.inner.panic.lock().unwrap_or_else(|e| e.into_inner());
        m.get_or_insert(message);
        drop(m);
        self.trigger(StopReason::InternalError);
    }

    /// What the first panic said, if there was one.
    pub fn panic_message(&self) -> Option<String> {
        self.inner
            .panic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Why we stopped, if we did.
    pub fn reason(&self) -> Option<StopReason> {
        match self.inner.reason.load(Ordering::SeqCst) {
            1 => Some(StopReason::Interrupt),
            2 => Some(StopReason::Terminate),
            3 => Some(StopReason::PermissionLost),
            4 => Some(StopReason::UsageLost),
            5 => Some(StopReason::UnreadableEndpoint),
            6 => Some(StopReason::InternalError),
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
            let notified = self.inner.notify.notified();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }

    /// Resolves `IN_FLIGHT_GRACE` after a stop is requested: how long a
    /// write already sent may still take.
    pub async fn grace_elapsed(&self) {
        self.wait().await;
        tokio::time::sleep(IN_FLIGHT_GRACE).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Exit;

    #[test]
    fn only_signals_and_bugs_impose_an_exit() {
        assert_eq!(StopReason::Interrupt.exit(), Some(Exit::Interrupted));
        assert_eq!(StopReason::Terminate.exit(), Some(Exit::Terminated));
        assert_eq!(StopReason::InternalError.exit(), Some(Exit::Unexpected));
        for r in [
            StopReason::PermissionLost,
            StopReason::UsageLost,
            StopReason::UnreadableEndpoint,
        ] {
            assert_eq!(r.exit(), None, "{r:?}");
        }
    }

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

    #[test]
    fn a_panic_message_is_kept_and_the_first_reason_still_wins() {
        let s = Stop::default();
        s.fail("boom at x.rs:1".into());
        s.fail("second".into());
        assert_eq!(s.reason(), Some(StopReason::InternalError));
        assert_eq!(s.panic_message().as_deref(), Some("boom at x.rs:1"));
        let t = Stop::default();
        t.trigger(StopReason::Interrupt);
        t.fail("late".into());
        assert_eq!(t.reason(), Some(StopReason::Interrupt));
    }
}
