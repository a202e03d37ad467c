//! What the store knows that no client is told: which identity ids the
//! endpoints reference now, which identities cluster actors wrote (and at
//! which revision), and which revision of an identity a client last saw.
//! The ledger judges a client's deletes by these facts, so they are kept
//! under the store's lock, changed in the same step as the tables: a delete
//! is judged at the instant it happens, not a moment before or after.

use std::collections::{BTreeSet, HashMap};

use crate::object::StoredObject;

/// The facts behind the ledger's verdicts.
#[derive(Default)]
pub(crate) struct GroundTruth {
    /// Identity id -> number of endpoint objects referencing it.
    refs: HashMap<u64, u32>,
    /// Identity name -> newest RV a client GET/LIST showed.
    client_seen: HashMap<String, u64>,
    /// Identity name -> RV of the newest actor write.
    actor_rv: HashMap<String, u64>,
    /// Identity names actors ever touched.
    actor_touched: BTreeSet<String>,
}

impl GroundTruth {
    /// Count the references `obj` (an endpoint or slice) holds.
    pub(crate) fn add_refs(&mut self, obj: &StoredObject) {
        for id in obj.ids.iter() {
            *self.refs.entry(*id).or_default() += 1;
        }
    }

    /// Forget the references `obj` held (it was replaced or deleted).
    pub(crate) fn drop_refs(&mut self, obj: &StoredObject) {
        for id in obj.ids.iter() {
            if let Some(n) = self.refs.get_mut(id) {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// How many endpoint objects reference identity `id`.
    pub(crate) fn ref_count(&self, id: u64) -> u32 {
        self.refs.get(&id).copied().unwrap_or(0)
    }

    /// Identity ids referenced by at least one endpoint or slice.
    pub(crate) fn referenced_ids(&self) -> BTreeSet<u64> {
        self.refs
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(id, _)| *id)
            .collect()
    }

    /// A client was shown identity `name` at `rv`.
    pub(crate) fn note_client_seen(&mut self, name: &str, rv: u64) {
        self.client_seen.insert(name.to_owned(), rv);
    }

    /// A cluster actor wrote identity `name`, making revision `rv`.
    pub(crate) fn note_actor_write(&mut self, name: &str, rv: u64) {
        self.actor_rv.insert(name.to_owned(), rv);
        self.actor_touched.insert(name.to_owned());
    }

    /// A cluster actor used identity `name` without writing it (a new
    /// endpoint reusing an identity).
    pub(crate) fn note_actor_touch(&mut self, name: &str) {
        self.actor_touched.insert(name.to_owned());
    }

    /// Whether an actor wrote identity `name` after a client last saw it:
    /// a client deleting it then acts on a stale read.
    pub(crate) fn actor_changed_since_read(&self, name: &str) -> bool {
        let seen = self.client_seen.get(name).copied().unwrap_or(0);
        self.actor_rv.get(name).is_some_and(|a| *a > seen)
    }

    /// Identity names actors touched.
    pub(crate) fn actor_touched(&self) -> &BTreeSet<String> {
        &self.actor_touched
    }
}
