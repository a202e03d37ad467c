//! A versioned store with history, like etcd behind the apiserver: one
//! global resourceVersion, an event log since the last compaction, and lists
//! at any retained revision (consistent snapshots for paginated lists).
//!
//! A snapshot at revision `X` is the current table with every change after
//! `X` undone, using the `prev` each logged event keeps. Compaction drops the
//! log up to a revision; a list or watch older than that gets 410 Expired.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use serde_json::Value;
use tokio::sync::broadcast;

use super::object::{changed, seal, stamp_write, StoredObject, Writer};
use crate::kinds::Kind;

/// Why a store operation failed; the HTTP layer turns these into `Status`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// No object with that key.
    #[error("not found")]
    NotFound,
    /// Create of a key that exists.
    #[error("already exists")]
    AlreadyExists,
    /// An optimistic-concurrency or precondition failure; the message is the
    /// full `Status.message`.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A delete precondition (uid or resourceVersion) did not hold; the
    /// message is the full `Status.message`.
    #[error("precondition failed: {0}")]
    Precondition(String),
    /// The request itself was invalid (422); full message.
    #[error("invalid: {0}")]
    Invalid(String),
    /// The revision asked for has been compacted away.
    #[error("revision {0} compacted")]
    Expired(u64),
}

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

/// Which revision a list reads.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ReadAt {
    /// The newest revision.
    Latest,
    /// Exactly this revision (410 if compacted).
    Exact(u64),
}

/// One page of a list.
pub(crate) struct Page {
    /// Revision the page was read at.
    pub rv: u64,
    /// Items, in key order.
    pub items: Vec<(String, Arc<StoredObject>)>,
    /// Key of the last item when more matching items follow.
    pub more_after: Option<String>,
    /// How many items follow (all, unfiltered); only meaningful with `more_after`.
    pub remaining: usize,
}

struct Inner {
    rv: u64,
    compacted_rv: u64,
    tables: [BTreeMap<String, Arc<StoredObject>>; 3],
    log: VecDeque<Arc<Event>>,
    /// Identity id -> number of endpoint objects referencing it.
    refs: HashMap<u64, u32>,
    /// Identity name -> newest RV a client GET/LIST showed.
    client_seen: HashMap<String, u64>,
    /// Identity name -> RV of the newest actor write.
    actor_rv: HashMap<String, u64>,
    /// Identity names actors ever touched.
    actor_touched: BTreeSet<String>,
    /// Per table: bumped by every write, so [`Ranks`] know when they are stale.
    generations: [u64; 3],
    /// Per table: sorted keys for counting what follows a page.
    ranks: [Ranks; 3],
}

/// A table's keys in order, for counting the keys after a page by binary
/// search: walking the rest of a 650k-item table for every 500-item page
/// made a full list quadratic (68 s of simulator CPU). Rebuilt only when two
/// lists in a row find the table unchanged, so a table that actors keep
/// writing is counted by walking, as before.
#[derive(Default)]
struct Ranks {
    /// Generation `keys` were taken at.
    built: Option<u64>,
    /// Generation the last count saw.
    seen: Option<u64>,
    keys: Vec<Box<str>>,
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

/// `apiVersion` of a kind's objects.
pub(crate) fn api_version(kind: Kind) -> String {
    format!("{}/{}", crate::kinds::CILIUM_GROUP, kind.version())
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
                refs: HashMap::new(),
                client_seen: HashMap::new(),
                actor_rv: HashMap::new(),
                actor_touched: BTreeSet::new(),
                generations: [0; 3],
                ranks: Default::default(),
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
            for id in obj.ids.iter() {
                *g.refs.entry(*id).or_default() += 1;
            }
            g.tables[idx(kind)].insert(key, obj);
        }
        g.generations[idx(kind)] += 1;
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
            g.client_seen.insert(name.to_owned(), rv);
        }
    }

    /// Read a page: items with key after `start` (exclusive), within
    /// `prefix`, passing `keep`, at most `limit`.
    pub(crate) fn list(
        &self,
        kind: Kind,
        at: ReadAt,
        prefix: &str,
        start: Option<&str>,
        limit: Option<usize>,
        mut keep: impl FnMut(&str, &StoredObject) -> bool,
    ) -> Result<Page, StoreError> {
        let mut g = self.lock();
        let rv = match at {
            ReadAt::Latest => g.rv,
            ReadAt::Exact(rv) if rv < g.compacted_rv => {
                return Err(StoreError::Expired(g.compacted_rv))
            }
            ReadAt::Exact(rv) => rv.min(g.rv),
        };
        let mut overrides: BTreeMap<&str, Option<&Arc<StoredObject>>> = BTreeMap::new();
        for e in g.log.iter().rev().take_while(|e| e.rv > rv) {
            if e.kind == kind {
                overrides.insert(&e.key, e.prev.as_ref());
            }
        }
        let lower = match start {
            Some(s) => Bound::Excluded(s),
            None => Bound::Included(prefix),
        };
        let table = &g.tables[idx(kind)];
        let current = table
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|(k, v)| (k.as_str(), Some(v)));
        let past = overrides
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|(k, v)| (*k, *v));
        let mut items = Vec::new();
        let mut more_after = None;
        let mut remaining = 0;
        let mut tail = None;
        for (key, obj) in merge_sorted(current, past, |k| overrides.contains_key(k)) {
            if !key.starts_with(prefix) {
                break;
            }
            let Some(obj) = obj else { continue };
            if more_after.is_some() {
                remaining += 1;
                continue;
            }
            if !keep(key, obj) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                more_after = items.last().map(|(k, _): &(String, _)| k.clone());
                remaining = 1;
                if let (true, Some(end)) = (overrides.is_empty(), prefix_end(prefix)) {
                    // Nothing changed since `rv`: the rest is the table's,
                    // counted below without walking the merge.
                    tail = Some((key.to_owned(), end));
                    break;
                }
                continue;
            }
            items.push((key.to_owned(), obj.clone()));
        }
        drop(overrides);
        if let Some((after, end)) = tail {
            remaining += g.count_after(kind, &after, end.as_deref());
        }
        Ok(Page {
            rv,
            items,
            more_after,
            remaining,
        })
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
        if g.tables[idx(kind)].contains_key(key) {
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
        let id = (kind == Kind::Identity)
            .then(|| crate::kinds::parse_id(key))
            .flatten();
        let referenced = id.is_some_and(|id| g.refs.get(&id).is_some_and(|n| *n > 0));
        let actor_changed_since_read = g
            .actor_rv
            .get(key)
            .is_some_and(|a| *a > g.client_seen.get(key).copied().unwrap_or(0));
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
        super::object::set_rv(&mut v, rv);
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
            for id in p.ids.iter() {
                if let Some(n) = g.refs.get_mut(id) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        g.generations[idx(kind)] += 1;
        let table = &mut g.tables[idx(kind)];
        if typ == EventType::Deleted {
            table.remove(key);
        } else {
            for id in obj.ids.iter() {
                *g.refs.entry(*id).or_default() += 1;
            }
            table.insert(key.to_owned(), obj.clone());
        }
        if kind == Kind::Identity && writer.actor {
            g.actor_rv.insert(key.to_owned(), obj.rv);
            g.actor_touched.insert(key.to_owned());
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
        self.lock().actor_touched.insert(name.to_owned());
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
        self.lock().actor_touched.clone()
    }

    /// Identity ids referenced by at least one endpoint or slice now.
    pub(crate) fn referenced_ids(&self) -> BTreeSet<u64> {
        self.lock()
            .refs
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(id, _)| *id)
            .collect()
    }

    /// How many endpoint objects reference identity `id`.
    pub(crate) fn ref_count(&self, id: u64) -> u32 {
        self.lock().refs.get(&id).copied().unwrap_or(0)
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
        let t = &g.tables[idx(kind)];
        t.range::<str, _>((Bound::Included(from), Bound::Unbounded))
            .next()
            .or_else(|| t.iter().next())
            .map(|(k, v)| (k.clone(), v.clone()))
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

impl Inner {
    /// Keys of `kind` after `after` and before `end` (`None`: to the end).
    fn count_after(&mut self, kind: Kind, after: &str, end: Option<&str>) -> usize {
        let i = idx(kind);
        let generation = self.generations[i];
        let ranks = &mut self.ranks[i];
        if ranks.built != Some(generation) && ranks.seen == Some(generation) {
            ranks.keys = self.tables[i].keys().map(|k| k.as_str().into()).collect();
            ranks.built = Some(generation);
        }
        ranks.seen = Some(generation);
        if ranks.built == Some(generation) {
            let keys = &ranks.keys;
            let lo = keys.partition_point(|k| **k <= *after);
            let hi = end.map_or(keys.len(), |e| keys.partition_point(|k| **k < *e));
            return hi.saturating_sub(lo);
        }
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        self.tables[i]
            .range::<str, _>((Bound::Excluded(after), upper))
            .count()
    }
}

/// The end of the key range `prefix` covers: `Some(None)` for all keys,
/// `Some(Some(end))` for a namespace prefix `ns/` (every key in
/// `["ns/", "ns0")` starts with it), `None` for any other prefix.
fn prefix_end(prefix: &str) -> Option<Option<String>> {
    match prefix.strip_suffix('/') {
        _ if prefix.is_empty() => Some(None),
        Some(ns) => Some(Some(format!("{ns}0"))),
        None => None,
    }
}

/// Merge the current table with snapshot overrides, both in key order: an
/// override replaces the current entry of the same key.
fn merge_sorted<'a>(
    current: impl Iterator<Item = (&'a str, Option<&'a Arc<StoredObject>>)>,
    past: impl Iterator<Item = (&'a str, Option<&'a Arc<StoredObject>>)>,
    overridden: impl Fn(&str) -> bool,
) -> impl Iterator<Item = (&'a str, Option<&'a Arc<StoredObject>>)> {
    let mut current = current.filter(move |(k, _)| !overridden(k)).peekable();
    let mut past = past.peekable();
    std::iter::from_fn(move || match (current.peek(), past.peek()) {
        (Some(c), Some(p)) if c.0 < p.0 => current.next(),
        (Some(_), Some(_)) | (None, Some(_)) => past.next(),
        (Some(_), None) => current.next(),
        (None, None) => None,
    })
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
            super::super::object::set_rv,
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
            super::super::object::set_rv,
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
            super::super::object::set_rv,
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
        assert!(s.lock().ranks[idx(Kind::Endpoint)].built.is_some());
    }
}
