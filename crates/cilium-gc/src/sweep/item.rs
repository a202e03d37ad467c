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
pub(crate) type Feed = tokio::sync::mpsc::UnboundedReceiver<Target>;

/// A feed holding `targets`, already closed: a sweep of a known plan.
pub(crate) fn feed_all<T: Into<Target>>(targets: impl IntoIterator<Item = T>) -> Feed {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for t in targets {
        let _ = tx.send(t.into());
    }
    rx
}

/// An identity waiting for its turn in a sweep: only what its write and
/// its re-decision read (the name, the `{uid, resourceVersion}`
/// preconditions, the mark), without spare capacity.
///
/// A paced run holds nearly every candidate of the list at once (64k
/// identities wait minutes for their turn at 40 deletes/s): kept as the
/// listed [`Identity`], with its namespace, managedFields entry and
/// inline room for labels, they were most of the run's memory.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Target {
    name: Box<str>,
    uid: Box<str>,
    resource_version: Box<str>,
    mark: Option<Box<str>>,
}

impl From<Identity> for Target {
    fn from(i: Identity) -> Self {
        Target {
            name: i.name.into_boxed_str(),
            uid: i.uid.into_boxed_str(),
            resource_version: i.resource_version.into_boxed_str(),
            mark: i.mark.map(String::into_boxed_str),
        }
    }
}

impl Target {
    /// `metadata.name`.
    #[cfg(test)]
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The identity as its turn needs it: what the decision and the write
    /// read; the rest (labels, namespace, managedFields) was judged at
    /// plan time or comes with a re-read.
    pub(super) fn into_identity(self) -> Identity {
        Identity {
            name: self.name.into(),
            uid: self.uid.into(),
            resource_version: self.resource_version.into(),
            created_at: None,
            labels: Default::default(),
            namespace: None,
            mark: self.mark.map(Into::into),
            last_change: None,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use cilium_gc_cluster::model::Change;

    /// What waits in the feed keeps exactly what the write and the
    /// re-decision read: the name, the preconditions and the mark.
    #[test]
    fn a_target_keeps_the_name_the_preconditions_and_the_mark() {
        let listed = Identity {
            name: "60021".into(),
            uid: "4b1c1ab6-5d0e-4a39-a6b5-3f3c1d1a2b3c".into(),
            resource_version: "812345".into(),
            created_at: Some("2026-12-01T10:00:00Z".parse().unwrap()),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            namespace: Some("shop".into()),
            mark: Some("2026-12-06T09:00:00.123456789Z".into()),
            last_change: Some(Change {
                manager: "cilium-operator-generic".into(),
                operation: "Update".into(),
                time: None,
            }),
        };
        let back = Target::from(listed.clone()).into_identity();
        assert_eq!(back.name, listed.name);
        assert_eq!(back.uid, listed.uid);
        assert_eq!(back.resource_version, listed.resource_version);
        assert_eq!(back.mark, listed.mark);
        assert_eq!(back.numeric_id(), Some(60021));
        assert!(back.labels.is_empty() && back.namespace.is_none() && back.last_change.is_none());
        let unmarked = Identity {
            mark: None,
            ..listed
        };
        assert_eq!(Target::from(unmarked).into_identity().mark, None);
        // Four boxed strings: the channel's slot is a quarter of what an
        // `Identity` took.
        assert!(std::mem::size_of::<Target>() * 3 < std::mem::size_of::<Identity>());
    }
}
