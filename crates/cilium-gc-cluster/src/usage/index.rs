//! What usage knows: per source (CEPs or CESs), a reference count per
//! identity id, the ids each endpoint holds (so a change or a delete takes
//! its old references away), and how complete that index is.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use tokio::time::Instant;

use super::decode::UsageObject;
use crate::watch_tap::StreamState;

/// A 128-bit hash of an endpoint's `namespace/name`, as two words: 8-byte
/// aligned, so an entry keyed by it with one id packs into 24 bytes (a
/// `u128` key would pad the same entry to 32).
pub(super) type Key = [u64; 2];

/// Counts for one source (CEPs or CESs).
///
/// Per endpoint we keep its key and ids, so that an update moving it to
/// another identity, or its deletion, takes the old reference away. An
/// endpoint with at most one id (every CEP) is stored inline in `single`
/// (0 meaning none: id 0 is never an identity); only slices with several
/// ids get a boxed slice in `multi`.
#[derive(Debug, Default)]
pub(super) struct Index {
    pub(super) single: HashMap<Key, u64>,
    pub(super) multi: HashMap<Key, Box<[u64]>>,
    pub(super) refs: HashMap<u64, u32>,
    /// Keys handed to endpoints that have neither a readable name nor a uid.
    pub(super) anonymous: u64,
}

impl Index {
    /// The key of an endpoint: namespace and name, else its uid. Endpoints
    /// with an unreadable name must not share a key, or one's update would
    /// release the other's references. `None` when there is neither.
    pub(super) fn key(obj: &UsageObject) -> Option<Key> {
        let m = &obj.meta;
        let id = match (&m.name, &m.uid) {
            (Some(name), _) => (0u8, name),
            (None, Some(uid)) => (1u8, uid),
            (None, None) => return None,
        };
        let mut lo = DefaultHasher::new();
        let mut hi = DefaultHasher::new();
        (0u8, &m.namespace, id).hash(&mut lo);
        (1u8, &m.namespace, id).hash(&mut hi);
        Some([hi.finish(), lo.finish()])
    }
    pub(super) fn apply(&mut self, obj: &UsageObject) {
        // An endpoint we cannot key keeps its references until the next
        // full re-list: never released early, so never unsafe.
        let key = Self::key(obj).unwrap_or_else(|| {
            self.anonymous += 1;
            [u64::MAX, self.anonymous]
        });
        self.remove(&key);
        match obj.ids.as_slice() {
            [] => {
                self.single.insert(key, 0);
            }
            [id] => {
                self.single.insert(key, *id);
            }
            ids => {
                self.multi.insert(key, ids.into());
            }
        }
        for id in obj.ids.iter() {
            *self.refs.entry(*id).or_insert(0) += 1;
        }
    }
    pub(super) fn delete(&mut self, obj: &UsageObject) {
        if let Some(k) = Self::key(obj) {
            self.remove(&k);
        }
    }
    pub(super) fn len(&self) -> usize {
        self.single.len() + self.multi.len()
    }
    /// Forget an endpoint and release its references.
    pub(super) fn remove(&mut self, key: &Key) {
        if let Some(id) = self.single.remove(key) {
            self.release(&[id]);
        }
        if let Some(ids) = self.multi.remove(key) {
            self.release(&ids);
        }
    }
    pub(super) fn release(&mut self, ids: &[u64]) {
        for id in ids.iter().filter(|id| **id != 0) {
            if let Some(c) = self.refs.get_mut(id) {
                *c -= 1;
                if *c == 0 {
                    self.refs.remove(id);
                }
            }
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Source {
    pub(super) live: Index,
    /// Filled between `Init` and `InitDone`.
    pub(super) relisting: Option<Index>,
    pub(super) synced_once: bool,
    /// When the current (or last) full list started: the index it builds is
    /// complete as of then.
    pub(super) list_started: Option<Instant>,
    /// When the last full list completed.
    pub(super) listed_from: Option<Instant>,
}

impl Source {
    /// The instant up to which this source's index is known complete, given
    /// its watch streams; `None` before its first full list.
    pub(super) fn complete_as_of(&self, stream: StreamState, now: Instant) -> Option<Instant> {
        if !self.synced_once {
            return None;
        }
        if self.relisting.is_some() {
            // The old index is complete up to the end of its stream; the
            // partial new list adds no completeness until it is done.
            return stream.last_end.or(self.listed_from);
        }
        if stream.open > 0 {
            return Some(now);
        }
        [stream.last_end, self.listed_from]
            .into_iter()
            .flatten()
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(json: &str) -> UsageObject {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn endpoints_with_unreadable_names_do_not_share_a_key() {
        let mut ix = Index::default();
        let a = obj(
            r#"{"metadata":{"name":1,"namespace":"n","uid":"a"},"status":{"identity":{"id":10}}}"#,
        );
        let b = obj(
            r#"{"metadata":{"name":2,"namespace":"n","uid":"b"},"status":{"identity":{"id":11}}}"#,
        );
        ix.apply(&a);
        ix.apply(&b);
        assert_eq!((ix.refs.get(&10), ix.refs.get(&11)), (Some(&1), Some(&1)));
        ix.delete(&b);
        assert_eq!((ix.refs.get(&10), ix.refs.get(&11)), (Some(&1), None));
        // Neither name nor uid: the references stay until the next re-list.
        let c = obj(r#"{"metadata":"x","status":{"identity":{"id":12}}}"#);
        let d = obj(r#"{"metadata":"y","status":{"identity":{"id":13}}}"#);
        ix.apply(&c);
        ix.apply(&d);
        ix.delete(&c);
        assert_eq!((ix.refs.get(&12), ix.refs.get(&13)), (Some(&1), Some(&1)));
    }

    #[test]
    fn index_counts_references_through_changes() {
        let mut ix = Index::default();
        let a = obj(r#"{"metadata":{"name":"a","namespace":"n"},"status":{"identity":{"id":10}}}"#);
        let b = obj(r#"{"metadata":{"name":"b","namespace":"n"},"status":{"identity":{"id":10}}}"#);
        let a2 =
            obj(r#"{"metadata":{"name":"a","namespace":"n"},"status":{"identity":{"id":11}}}"#);
        ix.apply(&a);
        ix.apply(&b);
        assert_eq!(ix.refs.get(&10), Some(&2));
        ix.apply(&a2); // a moved to identity 11
        assert_eq!(ix.refs.get(&10), Some(&1));
        assert_eq!(ix.refs.get(&11), Some(&1));
        ix.delete(&b);
        assert_eq!(ix.refs.get(&10), None);
        ix.delete(&b); // a repeated delete is harmless
        assert_eq!(ix.refs.get(&11), Some(&1));
        // same name in another namespace is another endpoint
        let other =
            obj(r#"{"metadata":{"name":"a","namespace":"m"},"status":{"identity":{"id":11}}}"#);
        ix.apply(&other);
        assert_eq!(ix.refs.get(&11), Some(&2));
        // A slice going from several ids to one and to none.
        let ces = |ids: &str| {
            obj(&format!(
                r#"{{"metadata":{{"name":"ces"}},"endpoints":[{ids}]}}"#
            ))
        };
        ix.apply(&ces(r#"{"id":20},{"id":21}"#));
        assert_eq!((ix.refs.get(&20), ix.refs.get(&21)), (Some(&1), Some(&1)));
        // Counted once whether it holds one id or several.
        assert_eq!(ix.len(), 3, "a in n, a in m, ces with two ids");
        ix.apply(&ces(r#"{"id":21}"#));
        assert_eq!((ix.refs.get(&20), ix.refs.get(&21)), (None, Some(&1)));
        ix.apply(&ces(""));
        assert_eq!(ix.refs.get(&21), None);
        assert_eq!(ix.len(), 3, "a in n, a in m, ces (b is gone)");
        ix.delete(&ces(""));
        assert_eq!(ix.len(), 2);
    }
}
