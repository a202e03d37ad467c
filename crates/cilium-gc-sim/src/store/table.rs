//! One kind's objects in key order, with a count of the keys after a page
//! that does not walk them ([`Table::count_after`]).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::object::StoredObject;

/// The current objects of one kind, by table key.
#[derive(Default)]
pub(crate) struct Table {
    objects: BTreeMap<String, Arc<StoredObject>>,
    /// Bumped by every write, so [`Ranks`] know when they are stale.
    generation: u64,
    /// Sorted keys for counting what follows a page.
    ranks: Ranks,
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

impl Table {
    /// The object under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&Arc<StoredObject>> {
        self.objects.get(key)
    }

    /// Store `obj` under `key`, replacing what was there.
    pub(crate) fn insert(&mut self, key: String, obj: Arc<StoredObject>) {
        self.generation += 1;
        self.objects.insert(key, obj);
    }

    /// Remove the object under `key`.
    pub(crate) fn remove(&mut self, key: &str) {
        self.generation += 1;
        self.objects.remove(key);
    }

    /// Keys, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &String> {
        self.objects.keys()
    }

    /// Number of objects.
    pub(crate) fn len(&self) -> usize {
        self.objects.len()
    }

    /// Objects from `lower` on, in key order.
    pub(crate) fn range_from<'a>(
        &'a self,
        lower: Bound<&'a str>,
    ) -> impl Iterator<Item = (&'a String, &'a Arc<StoredObject>)> {
        self.objects.range::<str, _>((lower, Bound::Unbounded))
    }

    /// First entry at or after `from`, wrapping to the first one.
    pub(crate) fn at_or_after(&self, from: &str) -> Option<(&String, &Arc<StoredObject>)> {
        self.objects
            .range::<str, _>((Bound::Included(from), Bound::Unbounded))
            .next()
            .or_else(|| self.objects.iter().next())
    }

    /// Keys after `after` and before `end` (`None`: to the end).
    pub(crate) fn count_after(&mut self, after: &str, end: Option<&str>) -> usize {
        let generation = self.generation;
        let ranks = &mut self.ranks;
        if ranks.built != Some(generation) && ranks.seen == Some(generation) {
            ranks.keys = self.objects.keys().map(|k| k.as_str().into()).collect();
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
        self.objects
            .range::<str, _>((Bound::Excluded(after), upper))
            .count()
    }

    /// Whether the sorted keys are current (counts use them, not a walk).
    #[cfg(test)]
    pub(crate) fn ranked(&self) -> bool {
        self.ranks.built == Some(self.generation)
    }
}
