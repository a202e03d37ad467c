//! Reading a page of a table as it was at a past revision: the table now,
//! with every change logged after that revision undone through the `prev`
//! each event keeps. This is how one paginated list stays consistent while
//! actors write between its pages, as etcd's reads at a revision keep it
//! for the real apiserver.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use super::event::Event;
use super::table::Table;
use crate::kinds::Kind;
use crate::object::StoredObject;

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

/// Which keys a page covers: those within `prefix` after `start`
/// (exclusive), at most `limit` of them.
pub(crate) struct Span<'a> {
    /// A namespace's `ns/`, or empty for all keys.
    pub prefix: &'a str,
    /// The last key of the page before.
    pub start: Option<&'a str>,
    /// Page size.
    pub limit: Option<usize>,
}

/// Read a page of `table` (of `kind`) at revision `rv`, undoing the events
/// of `log` after it; items must pass `keep`.
pub(crate) fn read_page(
    table: &mut Table,
    log: &VecDeque<Arc<Event>>,
    kind: Kind,
    rv: u64,
    span: &Span<'_>,
    mut keep: impl FnMut(&str, &StoredObject) -> bool,
) -> Page {
    let Span {
        prefix,
        start,
        limit,
    } = *span;
    let mut overrides: BTreeMap<&str, Option<&Arc<StoredObject>>> = BTreeMap::new();
    for e in log.iter().rev().take_while(|e| e.rv > rv) {
        if e.kind == kind {
            overrides.insert(&e.key, e.prev.as_ref());
        }
    }
    let lower = match start {
        Some(s) => Bound::Excluded(s),
        None => Bound::Included(prefix),
    };
    let current = table.range_from(lower).map(|(k, v)| (k.as_str(), Some(v)));
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
        remaining += table.count_after(&after, end.as_deref());
    }
    Page {
        rv,
        items,
        more_after,
        remaining,
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
