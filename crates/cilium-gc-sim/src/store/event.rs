//! One logged change of the store's history: what watches replay and
//! stream, and what a snapshot read undoes (each event keeps the object
//! as it was before, `prev`).

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::kinds::Kind;
use crate::object::StoredObject;

/// Kind of change a watch reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Deleted (the object carries the deletion revision).
    Deleted,
}

impl EventType {
    /// The watch wire name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One logged change.
#[derive(Debug)]
pub(crate) struct Event {
    /// Revision of the change.
    pub rv: u64,
    /// Resource changed.
    pub kind: Kind,
    /// Table key (`name` or `namespace/name`).
    pub key: String,
    /// What happened.
    pub typ: EventType,
    /// The object after the change (for a delete: as deleted, at `rv`).
    pub obj: Arc<StoredObject>,
    /// The object before the change, if it existed.
    pub prev: Option<Arc<StoredObject>>,
}

/// Logged events to replay, and the live feed after them.
pub(crate) type WatchStart = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);
