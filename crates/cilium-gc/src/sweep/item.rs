//! What one item carries through a sweep: the action, its tries per kind
//! of failure, and its result; and the feed the items arrive on.

use std::time::Instant;

use crate::report::{Conflict, Outcome};
use cilium_gc_cluster::model::Identity;
use cilium_gc_cluster::policy::Reason;

/// What to do to each target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Delete a stale identity.
    Delete,
    /// Annotate an unmarked unused identity with a heartbeat mark.
    Mark,
}

impl Action {
    /// The reason an identity must still have for the action to go ahead.
    pub(super) fn wanted(self) -> Reason {
        match self {
            Action::Delete => Reason::Stale,
            Action::Mark => Reason::Unmarked,
        }
    }
}

/// The result for one identity.
#[derive(Debug, Clone)]
pub(crate) struct ItemResult {
    /// What happened.
    pub outcome: Outcome,
    /// The last decision made on it.
    pub reason: Reason,
    /// Writes sent.
    pub attempts: u32,
    /// Conflicts met.
    pub conflicts: Vec<Conflict>,
    /// The last error.
    pub last_error: Option<String>,
}

/// The targets of a sweep as they are decided, in the order their results
/// are returned; the sweep ends once it is closed and every item received
/// has its report state.
pub(crate) type Feed = tokio::sync::mpsc::UnboundedReceiver<Identity>;

/// A feed holding `targets`, already closed: a sweep of a known plan.
pub(crate) fn feed_all(targets: Vec<Identity>) -> Feed {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for t in targets {
        let _ = tx.send(t);
    }
    rx
}

pub(super) fn finish(mut r: ItemResult, outcome: Outcome, error: Option<String>) -> ItemResult {
    r.outcome = outcome;
    if error.is_some() {
        r.last_error = error;
    }
    r
}

/// Retry counts of one item, per kind of failure.
#[derive(Default)]
pub(super) struct Tries {
    pub(super) transient: u32,
    pub(super) throttled: u32,
    /// Connections refused, and since when (no retry spent on them).
    pub(super) unreachable: u32,
    pub(super) unreachable_since: Option<Instant>,
    /// 401/403 answers the server's own review then allowed.
    pub(super) forbidden: u32,
    /// Answers lost or 5xx: an earlier attempt may have been applied.
    pub(super) lost_answers: u32,
}

/// An item the stop reached. `not-attempted` when none of its writes can
/// have taken effect (never sent, or answered only with 429, 409, 403 or a
/// refused connection: the server applied nothing), its last answer kept;
/// `failed` when one may have (an answer lost, a 5xx).
pub(super) fn stopped(r: ItemResult, tries: &Tries) -> ItemResult {
    if tries.lost_answers == 0 {
        finish(r, Outcome::NotAttempted, None)
    } else {
        let e = r
            .last_error
            .clone()
            .or_else(|| Some("run stopped before this item finished".into()));
        finish(r, Outcome::Failed, e)
    }
}
