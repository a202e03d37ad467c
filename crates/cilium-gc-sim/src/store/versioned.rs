//! The store itself: the current tables, one global resourceVersion, the
//! event log since the last compaction and the live feed of new events,
//! and the writes that change them (create, modify, delete) with the
//! bookkeeping every write gets. Reads at a past revision are `snapshot`'s;
//! the facts the ledger judges by are `ground_truth`'s, kept under the same
//! lock.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use serde_json::Value;
use tokio::sync::broadcast;

use super::error::StoreError;
use super::event::{Event, EventType, WatchStart};
use super::ground_truth::GroundTruth;
use super::snapshot::{read_page, Page, ReadAt, Span};
use super::table::Table;
use crate::kinds::{api_version, parse_id, Kind};
use crate::object::{changed, seal, set_rv, stamp_write, StoredObject, Writer};

struct Inner {
    rv: u64,
    compacted_rv: u64,
    tables: [Table; 3],
    log: VecDeque<Arc<Event>>,
    truth: GroundTruth,
}

/// The shared store. Cheap operations run under one mutex; serialization of
/// big lists happens outside it.
pub(crate) struct Store {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Arc<Event>>,
}

fn idx(kind: Kind) -> usize {
    match kind {
        Kind::Identity => 0,
        Kind::Endpoint => 1,
        Kind::EndpointSlice => 2,
    }
}

/// Result of a delete.
pub(crate) struct Deleted {
    /// The object as it was deleted.
    pub obj: Arc<StoredObject>,
    /// For identities: whether an endpoint referenced its id at that instant.
    pub referenced: bool,
    /// For identities: whether an actor wrote it after a client last saw it.
    pub actor_changed_since_read: bool,
}

impl Store {
    /// An empty store at revision 1.
    pub(crate) fn new() -> Self {
        let (events, _) = broadcast::channel(16_384);
        Store {
            inner: Mutex::new(Inner {
                rv: 1,
                compacted_rv: 0,
                tables: Default::default(),
                log: VecDeque::new(),
                truth: GroundTruth::default(),
            }),
            events,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Load seed objects without logging them (they predate the history);
    /// `make` gets each object's revision. Compacts to the last seed revision.
    pub(crate) fn seed(
        &self,
        kind: Kind,
        objects: impl IntoIterator<Item = (String, Value)>,
        mut make: impl FnMut(&mut Value, u64),
    ) {
        self.seed_with(kind, objects, |(key, mut v), rv| {
            make(&mut v, rv);
            (key, seal(kind, &v, rv))
        });
    }

    /// Load seed items built by `build` (which gets each item's revision)
    /// without logging them; compacts to the last seed revision.
    pub(crate) fn seed_with<T>(
        &self,
        kind: Kind,
        items: impl IntoIterator<Item = T>,
        mut build: impl FnMut(T, u64) -> (String, Arc<StoredObject>),
    ) {
        let mut g = self.lock();
        for item in items {
            g.rv += 1;
            let (key, obj) = build(item, g.rv);
            g.truth.add_refs(&obj);
            g.tables[idx(kind)].insert(key, obj);
        }
        g.compacted_rv = g.rv;
    }

    /// The newest revision.
    pub(crate) fn rv(&self) -> u64 {
        self.lock().rv
    }

    /// The oldest revision still readable.
    pub(crate) fn compacted_rv(&self) -> u64 {
        self.lock().compacted_rv
    }

    /// Forget history up to `rv` (capped at the newest revision).
    pub(crate) fn compact(&self, rv: u64) {
        let mut g = self.lock();
        let rv = rv.min(g.rv);
        g.compacted_rv = g.compacted_rv.max(rv);
        while g.log.front().is_some_and(|e| e.rv <= rv) {
            g.log.pop_front();
        }
    }

    /// Subscribe to live events and get the logged ones after `after`, in one
    /// step so none falls between; `Err` when `after` is compacted.
    pub(crate) fn watch_from(&self, after: u64) -> Result<WatchStart, u64> {
        let g = self.lock();
        if after < g.compacted_rv {
            return Err(g.compacted_rv);
        }
        let rx = self.events.subscribe();
        let past = g.log.iter().filter(|e| e.rv > after).cloned().collect();
        Ok((past, rx))
    }

    /// Current object.
    pub(crate) fn get(&self, kind: Kind, key: &str) -> Option<Arc<StoredObject>> {
        self.lock().tables[idx(kind)].get(key).cloned()
    }

    /// Remember which RV a client was shown for these identities.
    pub(crate) fn note_client_seen<'a>(&self, items: impl IntoIterator<Item = (&'a str, u64)>) {
        let mut g = self.lock();
        for (name, rv) in items {
            g.truth.note_client_seen(name, rv);
        }
    }

    /// Read a page: items with key after `start` (exclusive), within
    /// `prefix`, passing `keep`, at most `limit`; at `at`, which must not be
    /// compacted.
    pub(crate) fn list(
        &self,
        kind: Kind,
        at: ReadAt,
        prefix: &str,
        start: Option<&str>,
        limit: Option<usize>,
        keep: impl FnMut(&str, &StoredObject) -> bool,
    ) -> Result<Page, StoreError> {
        let mut guard = self.lock();
        let g = &mut *guard;
        let rv = match at {
            ReadAt::Latest => g.rv,
            ReadAt::Exact(rv) if rv < g.compacted_rv => {
                return Err(StoreError::Expired(g.compacted_rv))
            }
            ReadAt::Exact(rv) => rv.min(g.rv),
        };
        let span = Span {
            prefix,
            start,
            limit,
        };
        let table = &mut g.tables[idx(kind)];
        Ok(read_page(table, &g.log, kind, rv, &span, keep))
    }

    /// Create `v` under `key`.
    pub(crate) fn create(
        &self,
        kind: Kind,
        key: &str,
        mut v: Value,
        writer: &Writer,
        now: Timestamp,
        dry_run: bool,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let mut g = self.lock();
        if g.tables[idx(kind)].get(key).is_some() {
            return Err(StoreError::AlreadyExists);
        }
        let rv = g.rv + 1;
        stamp_write(&Value::Null, &mut v, writer, now, rv, &api_version(kind));
        let obj = seal(kind, &v, rv);
        if dry_run {
            return Ok(obj);
        }
        g.rv = rv;
        self.commit(
            &mut g,
            kind,
            key,
            EventType::Added,
            obj.clone(),
            None,
            writer,
        );
        Ok(obj)
    }

    /// Apply `f` to the current object and store the result. `f` sees the
    /// current value and may refuse (preconditions). A result that changes
    /// nothing client-visible is not written: RV and managedFields stay.
    pub(crate) fn modify(
        &self,
        kind: Kind,
        key: &str,
        writer: &Writer,
        now: Timestamp,
        dry_run: bool,
        f: impl FnOnce(&Value) -> Result<Value, StoreError>,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let mut g = self.lock();
        let cur = g.tables[idx(kind)]
            .get(key)
            .cloned()
            .ok_or(StoreError::NotFound)?;
        let old = cur.value();
        let mut new = f(&old)?;
        if !changed(&old, &new) {
            return Ok(cur);
        }
        let rv = g.rv + 1;
        stamp_write(&old, &mut new, writer, now, rv, &api_version(kind));
        let obj = seal(kind, &new, rv);
        if dry_run {
            return Ok(obj);
        }
        g.rv = rv;
        self.commit(
            &mut g,
            kind,
            key,
            EventType::Modified,
            obj.clone(),
            Some(cur),
            writer,
        );
        Ok(obj)
    }

    /// Delete `key` after `check` accepts the current object.
    pub(crate) fn delete(
        &self,
        kind: Kind,
        key: &str,
        writer: &Writer,
        dry_run: bool,
        check: impl FnOnce(&StoredObject) -> Result<(), StoreError>,
    ) -> Result<Deleted, StoreError> {
        let mut g = self.lock();
        let cur = g.tables[idx(kind)]
            .get(key)
            .cloned()
            .ok_or(StoreError::NotFound)?;
        check(&cur)?;
        let id = (kind == Kind::Identity).then(|| parse_id(key)).flatten();
        let referenced = id.is_some_and(|id| g.truth.ref_count(id) > 0);
        let actor_changed_since_read = g.truth.actor_changed_since_read(key);
        if dry_run {
            return Ok(Deleted {
                obj: cur,
                referenced,
                actor_changed_since_read,
            });
        }
        g.rv += 1;
        let rv = g.rv;
        let mut v = cur.value();
        set_rv(&mut v, rv);
        let obj = seal(kind, &v, rv);
        self.commit(
            &mut g,
            kind,
            key,
            EventType::Deleted,
            obj.clone(),
            Some(cur),
            writer,
        );
        Ok(Deleted {
            obj,
            referenced,
            actor_changed_since_read,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        g: &mut Inner,
        kind: Kind,
        key: &str,
        typ: EventType,
        obj: Arc<StoredObject>,
        prev: Option<Arc<StoredObject>>,
        writer: &Writer,
    ) {
        if let Some(p) = &prev {
            g.truth.drop_refs(p);
        }
        let table = &mut g.tables[idx(kind)];
        if typ == EventType::Deleted {
            table.remove(key);
        } else {
            g.truth.add_refs(&obj);
            table.insert(key.to_owned(), obj.clone());
        }
        if kind == Kind::Identity && writer.actor {
            g.truth.note_actor_write(key, obj.rv);
        }
        let ev = Arc::new(Event {
            rv: obj.rv,
            kind,
            key: key.to_owned(),
            typ,
            obj,
            prev,
        });
        g.log.push_back(ev.clone());
        let _ = self.events.send(ev);
    }

    /// Mark identity names as touched by an actor without writing them (a
    /// new endpoint reusing an identity).
    pub(crate) fn note_actor_touch(&self, name: &str) {
        self.lock().truth.note_actor_touch(name);
    }

    /// Store `v` under `key` exactly as given: no validation and no
    /// metadata bookkeeping, but logged and broadcast like any write (chaos
    /// tests serve objects a real server would never hold; see `chaos.rs`).
    pub(crate) fn put_raw(&self, kind: Kind, key: &str, v: &Value) -> Arc<StoredObject> {
        let mut g = self.lock();
        g.rv += 1;
        let obj = seal(kind, v, g.rv);
        let prev = g.tables[idx(kind)].get(key).cloned();
        let typ = match prev {
            Some(_) => EventType::Modified,
            None => EventType::Added,
        };
        let writer = Writer::client("chaos");
        self.commit(&mut g, kind, key, typ, obj.clone(), prev, &writer);
        obj
    }

    /// Identity names actors touched.
    pub(crate) fn actor_touched(&self) -> BTreeSet<String> {
        self.lock().truth.actor_touched().clone()
    }

    /// Identity ids referenced by at least one endpoint or slice now.
    pub(crate) fn referenced_ids(&self) -> BTreeSet<u64> {
        self.lock().truth.referenced_ids()
    }

    /// How many endpoint objects reference identity `id`.
    pub(crate) fn ref_count(&self, id: u64) -> u32 {
        self.lock().truth.ref_count(id)
    }

    /// Keys of a table, in order.
    pub(crate) fn keys(&self, kind: Kind) -> Vec<String> {
        self.lock().tables[idx(kind)].keys().cloned().collect()
    }

    /// Number of objects of a kind.
    pub(crate) fn count(&self, kind: Kind) -> usize {
        self.lock().tables[idx(kind)].len()
    }

    /// First key at or after `from` (wrapping to the start), for random picks.
    pub(crate) fn key_at_or_after(
        &self,
        kind: Kind,
        from: &str,
    ) -> Option<(String, Arc<StoredObject>)> {
        let g = self.lock();
        g.tables[idx(kind)]
            .at_or_after(from)
            .map(|(k, v)| (k.clone(), v.clone()))
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ident(name: &str) -> Value {
        json!({"apiVersion":"cilium.io/v2","kind":"CiliumIdentity","metadata":{"name":name,"uid":format!("u{name}")},"security-labels":{}})
    }

    #[test]
    fn snapshot_list_undoes_later_changes() {
        let s = Store::new();
        s.seed(
            Kind::Identity,
            ["1", "2", "3"].map(|n| (n.to_string(), ident(n))),
            set_rv,
        );
        let snap = s.rv();
        let w = Writer::actor("a");
        s.delete(Kind::Identity, "2", &w, false, |_| Ok(()))
            .unwrap();
        s.create(
            Kind::Identity,
            "0",
            ident("0"),
            &w,
            Timestamp::UNIX_EPOCH,
            false,
        )
        .unwrap();
        s.modify(Kind::Identity, "3", &w, Timestamp::UNIX_EPOCH, false, |v| {
            let mut v = v.clone();
            v["metadata"]["annotations"] = json!({"x":"y"});
            Ok(v)
        })
        .unwrap();
        let page = s
            .list(
                Kind::Identity,
                ReadAt::Exact(snap),
                "",
                None,
                None,
                |_, _| true,
            )
            .unwrap();
        let keys: Vec<_> = page.items.iter().map(|(k, o)| (k.as_str(), o.rv)).collect();
        assert_eq!(keys, vec![("1", 2), ("2", 3), ("3", 4)]);
        let now = s
            .list(Kind::Identity, ReadAt::Latest, "", None, None, |_, _| true)
            .unwrap();
        let keys: Vec<_> = now.items.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, vec!["0", "1", "3"]);
        s.compact(s.rv());
        assert!(matches!(
            s.list(
                Kind::Identity,
                ReadAt::Exact(snap),
                "",
                None,
                None,
                |_, _| true
            ),
            Err(StoreError::Expired(_))
        ));
    }

    #[test]
    fn pages_report_more_and_remaining() {
        let s = Store::new();
        s.seed(
            Kind::Identity,
            ["1", "2", "3", "4"].map(|n| (n.to_string(), ident(n))),
            set_rv,
        );
        let p = s
            .list(Kind::Identity, ReadAt::Latest, "", None, Some(2), |_, _| {
                true
            })
            .unwrap();
        assert_eq!(p.more_after.as_deref(), Some("2"));
        assert_eq!(p.remaining, 2);
        let p = s
            .list(
                Kind::Identity,
                ReadAt::Latest,
                "",
                Some("2"),
                Some(2),
                |_, _| true,
            )
            .unwrap();
        assert!(p.more_after.is_none());
        assert_eq!(p.items.len(), 2);
        // Namespaced: only the namespace's keys are counted.
        s.seed(
            Kind::Endpoint,
            ["a/1", "a/2", "a/3", "a0", "b/1"].map(|n| (n.to_string(), ident(n))),
            set_rv,
        );
        let p = s
            .list(
                Kind::Endpoint,
                ReadAt::Latest,
                "a/",
                None,
                Some(1),
                |_, _| true,
            )
            .unwrap();
        assert_eq!(p.more_after.as_deref(), Some("a/1"));
        assert_eq!(p.remaining, 2);
        let p = s
            .list(Kind::Endpoint, ReadAt::Latest, "", None, Some(3), |_, _| {
                true
            })
            .unwrap();
        assert_eq!(p.remaining, 2);
        // The first lists counted by walking; later ones use the sorted keys.
        for _ in 0..2 {
            let p = s
                .list(
                    Kind::Endpoint,
                    ReadAt::Latest,
                    "a/",
                    None,
                    Some(1),
                    |_, _| true,
                )
                .unwrap();
            assert_eq!(p.remaining, 2);
            let p = s
                .list(
                    Kind::Endpoint,
                    ReadAt::Latest,
                    "",
                    Some("a/1"),
                    Some(2),
                    |_, _| true,
                )
                .unwrap();
            assert_eq!(p.remaining, 2, "a0 and b/1 follow a/2, a/3");
        }
        assert!(s.lock().tables[idx(Kind::Endpoint)].ranked());
    }
}
