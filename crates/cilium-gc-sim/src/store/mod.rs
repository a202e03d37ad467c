//! A versioned store with history, like etcd behind the apiserver: one
//! global resourceVersion, an event log since the last compaction, and lists
//! at any retained revision (consistent snapshots for paginated lists).
//!
//! A snapshot at revision `X` is the current table with every change after
//! `X` undone, using the `prev` each logged event keeps. Compaction drops the
//! log up to a revision; a list or watch older than that gets 410 Expired.
//!
//! `versioned` holds the [`Store`] and its writes; `snapshot` reads a page
//! at a revision out of a `table` and the `event` log; `ground_truth` keeps
//! what the ledger judges by; `error` says why an operation failed.

mod error;
mod event;
mod ground_truth;
mod snapshot;
mod table;
mod versioned;

pub(crate) use error::StoreError;
pub(crate) use event::Event;
pub(crate) use snapshot::ReadAt;
pub(crate) use versioned::Store;
