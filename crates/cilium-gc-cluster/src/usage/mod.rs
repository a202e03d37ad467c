//! Which identities are in use, kept live for the whole run.
//!
//! kube-runtime watchers over CiliumEndpoints (and CiliumEndpointSlices when
//! that CRD exists) feed an index of id → reference count. Nothing is decided
//! before the first full list of every source (`UsageHandle::wait_ready`).
//!
//! *Freshness:* per source we know the instant up to which its index is
//! complete (`UsageHandle::complete_as_of`). While its watch stream is open
//! (seen on the wire by `crate::watch_tap`) that is now: the server sends
//! every change, and bookmarks (requested) keep a quiet stream alive. Once
//! the stream ends or fails, it is the instant it ended; a watch resumed
//! from its resourceVersion replays what came after, so a normal end and a
//! quick resume cost nothing. After a full (re-)list, it is when that list
//! started. A write is sent only while every source is complete as of at
//! most [`FRESHNESS_LIMIT`] ago (`UsageHandle::wait_fresh`); once one has
//! been unknown for the stall limit, the run stops writing. The stall clock
//! *is* the freshness instant, shared by every waiter: nobody can reset it.
//!
//! During a re-list (after a 410), an id referenced by the previous index
//! *or* by the part of the new list read so far counts as in use.
//!
//! *Memory:* only counts are held: per endpoint a 128-bit hash of its key and
//! its ids, per id a counter; never the objects. Decoding reads only
//! `metadata.{name,namespace,resourceVersion}`, `status.identity.id` and
//! `endpoints[].id`, and is lenient: a wrong type yields "no id", never an
//! error that would stall the watcher.

mod decode;
mod index;
mod watch;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::model::Kind;
use crate::watch_tap::WatchTap;
pub use decode::{UsageObject, NO_NAME};
use index::Source;

/// Endpoints per page of the watchers' initial list. Independent of the
/// identity `--page-size`: a watcher restarts its whole list on any error, so
/// few, large pages make it sync sooner on a struggling API server.
pub(crate) const PAGE_SIZE: u32 = 500;

/// How old the usage index may be known complete and a write still go out.
/// The heartbeat handshake covers the rest: an identity is only a candidate
/// after its mark has aged past the heartbeat timeout (30 min) with no agent
/// removing it, and an agent that starts using it removes the mark first,
/// which changes its resourceVersion so our precondition fails. What the
/// handshake cannot cover is an endpoint that appears *without* an identity
/// write (an operator marking from a stale view); only live usage protects
/// that one, and 10 s bounds how late we may learn of it.
pub const FRESHNESS_LIMIT: Duration = Duration::from_secs(10);

/// How long usage may stay unknown (not complete as of [`FRESHNESS_LIMIT`])
/// before the run stops writing: past this, the watchers are not coming back
/// soon (list forbidden, server gone), and waiting longer would only hang
/// the run.
pub const USAGE_STALL_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct Shared {
    sources: Mutex<HashMap<Kind, Source>>,
    changed: Notify,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Open watch streams, seen on the wire.
    tap: WatchTap,
    /// Malformed endpoints seen, as (what, uid, problem), at most
    /// [`MAX_MALFORMED`].
    malformed: Mutex<BTreeMap<(String, String, &'static str), ()>>,
}

/// Take `m` even when a thread panicked holding it. A panic anywhere stops
/// the run's writes (`StopReason::InternalError`, set by the plugin's panic
/// hook), so what a panicking watcher left half-updated is only read for
/// the report's counts; refusing the lock would turn one panic into a
/// panic in every reader, and the report would be lost.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Malformed endpoint objects remembered for the report.
pub(crate) const MAX_MALFORMED: usize = 1000;

/// A live view of identity usage. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct UsageHandle {
    shared: Arc<Shared>,
}

/// How long the endpoint watchers may take to list fully once before a
/// run or a diagnosis gives up.
pub(crate) const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// The endpoint watchers did not complete their first list in time (the
/// seconds waited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncTimedOut(pub u64);

impl std::fmt::Display for SyncTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the endpoint watchers did not complete their first list within {}s",
            self.0
        )
    }
}

/// Stops the watchers when dropped; see [`UsageHandle::stop_on_drop`].
pub struct WatchersGuard<'a>(&'a UsageHandle);

impl Drop for WatchersGuard<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// What to watch.
#[derive(Debug, Clone, Copy)]
pub struct Sources {
    /// Watch CiliumEndpoints.
    pub endpoints: bool,
    /// Watch CiliumEndpointSlices.
    pub slices: bool,
    /// The version CiliumEndpointSlices are read at (`v2` where served,
    /// else `v2alpha1`).
    pub slices_version: &'static str,
}

impl UsageHandle {
    /// A guard that stops the watchers when the caller's scope ends, however
    /// it ends (early return, error, signal).
    pub fn stop_on_drop(&self) -> WatchersGuard<'_> {
        WatchersGuard(self)
    }

    /// Stop the watchers (the run is over). Counts stay readable.
    pub fn stop(&self) {
        for t in lock(&self.shared.tasks).drain(..) {
            t.abort();
        }
    }

    /// Malformed endpoint objects seen so far, as (what, problem), e.g.
    /// ("ciliumendpoint ns/name", "status.identity.id is not an identity id").
    pub fn malformed(&self) -> Vec<(String, &'static str)> {
        let g = lock(&self.shared.malformed);
        g.keys().map(|(what, _, p)| (what.clone(), *p)).collect()
    }

    /// Endpoints whose identity reference cannot be read (a malformed
    /// `status.identity.id`, slice entry, ...), as (what, problem). We cannot
    /// know which identity such an endpoint protects, so its presence blocks
    /// deletes unless overridden. An endpoint with no identity yet is normal
    /// and not listed.
    pub fn unreadable(&self) -> Vec<(String, &'static str)> {
        self.malformed()
            .into_iter()
            .filter(|(_, p)| *p != NO_NAME)
            .collect()
    }

    /// How many endpoints [`UsageHandle::unreadable`] would list.
    pub fn unreadable_count(&self) -> usize {
        let g = lock(&self.shared.malformed);
        g.keys().filter(|(_, _, p)| *p != NO_NAME).count()
    }

    /// `UsageHandle::wait_ready`, for at most `SYNC_TIMEOUT`: what a
    /// run and a diagnosis both wait for before they judge anything.
    pub async fn wait_synced(&self) -> Result<(), SyncTimedOut> {
        tokio::time::timeout(SYNC_TIMEOUT, self.wait_ready())
            .await
            .map_err(|_| SyncTimedOut(SYNC_TIMEOUT.as_secs()))
    }

    /// Wait until every source has listed fully once (before the first
    /// decision of a run).
    pub(crate) async fn wait_ready(&self) {
        loop {
            let notified = self.shared.changed.notified();
            if lock(&self.shared.sources).values().all(|s| s.synced_once) {
                return;
            }
            notified.await;
        }
    }

    /// Per source, the instant up to which its index is known complete
    /// (`None`: not listed yet).
    pub(crate) fn complete_as_of(&self, now: Instant) -> Vec<(Kind, Option<Instant>)> {
        let sources = lock(&self.shared.sources);
        sources
            .iter()
            .map(|(k, s)| (*k, s.complete_as_of(self.shared.tap.state(*k), now)))
            .collect()
    }

    /// The oldest completeness instant over all sources: `Err(())` while
    /// some source has never listed, `Ok(None)` with no sources at all.
    fn oldest(&self, now: Instant) -> Result<Option<Instant>, ()> {
        let mut oldest = None;
        for (_, t) in self.complete_as_of(now) {
            let t = t.ok_or(())?;
            oldest = Some(oldest.map_or(t, |o: Instant| o.min(t)));
        }
        Ok(oldest)
    }

    /// Whether every source is known complete as of at most
    /// [`FRESHNESS_LIMIT`] ago. Checked right before each write.
    pub fn is_fresh(&self) -> bool {
        let now = Instant::now();
        match self.oldest(now) {
            Ok(None) => true,
            Ok(Some(t)) => now.saturating_duration_since(t) <= FRESHNESS_LIMIT,
            Err(()) => false,
        }
    }

    /// Wait until [`Self::is_fresh`]; `false` once some source has been
    /// known complete only as of more than `stall` ago (usage lost). The
    /// stall clock is the freshness instant itself, the same for every
    /// waiter, so no waiter can restart it.
    pub async fn wait_fresh(&self, stall: Duration) -> bool {
        loop {
            let notified = self.shared.changed.notified();
            let tapped = self.shared.tap.changed();
            let now = Instant::now();
            let deadline = match self.oldest(now) {
                Ok(None) => return true,
                Ok(Some(t)) if now.saturating_duration_since(t) <= FRESHNESS_LIMIT => return true,
                Ok(Some(t)) if now.saturating_duration_since(t) >= stall => return false,
                Ok(Some(t)) => Some(t + stall),
                Err(()) => None,
            };
            match deadline {
                Some(d) => tokio::select! {
                    _ = notified => {}
                    _ = tapped => {}
                    _ = tokio::time::sleep_until(d) => {}
                },
                None => tokio::select! {
                    _ = notified => {}
                    _ = tapped => {}
                },
            }
        }
    }

    /// Endpoints referencing `id` right now (over all sources).
    pub fn refs(&self, id: u64) -> u32 {
        let sources = lock(&self.shared.sources);
        // A re-list in progress: the previous index or the part of the new
        // list read so far; either one referencing it keeps it in use.
        sources
            .values()
            .flat_map(|s| std::iter::once(&s.live).chain(s.relisting.as_ref()))
            .map(|ix| ix.refs.get(&id).copied().unwrap_or(0))
            .sum()
    }

    /// Number of objects per source right now.
    pub fn object_count(&self, kind: Kind) -> u64 {
        let sources = lock(&self.shared.sources);
        sources.get(&kind).map_or(0, |s| s.live.len() as u64)
    }

    /// Distinct identity ids referenced right now.
    pub fn referenced_ids(&self) -> Vec<u64> {
        let sources = lock(&self.shared.sources);
        let mut ids: Vec<u64> = sources
            .values()
            .flat_map(|s| s.live.refs.keys().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

impl UsageHandle {
    /// A handle whose CiliumEndpoints (listed, complete) reference `ids`,
    /// one endpoint each, with no watch behind it: fixed usage to decide
    /// against (the writer's unit tests of its plan use it).
    pub fn referencing(ids: &[u64]) -> UsageHandle {
        use kube::runtime::watcher::Event;
        let h = UsageHandle::with_tap(WatchTap::default());
        lock(&h.shared.sources).insert(Kind::Endpoint, Source::default());
        let stats = crate::stats::Stats::default();
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        for (n, id) in ids.iter().enumerate() {
            let cep = serde_json::json!({"metadata": {"name": format!("pod-{n}"), "namespace": "n"},
            "status": {"identity": {"id": id}}});
            let cep = serde_json::from_value(cep).expect("an endpoint");
            h.on_event(Kind::Endpoint, Event::InitApply(cep), &stats);
        }
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Stats;
    use kube::runtime::watcher::Event;

    fn obj(json: &str) -> UsageObject {
        serde_json::from_str(json).unwrap()
    }

    fn handle_with_endpoints() -> (UsageHandle, WatchTap, Stats) {
        let tap = WatchTap::default();
        let h = UsageHandle::with_tap(tap.clone());
        h.shared
            .sources
            .lock()
            .unwrap()
            .insert(Kind::Endpoint, Source::default());
        (h, tap, Stats::default())
    }

    fn cep(name: &str, id: u64) -> UsageObject {
        obj(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"n"}},"status":{{"identity":{{"id":{id}}}}}}}"#
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn freshness_follows_the_watch_stream() {
        let (h, tap, stats) = handle_with_endpoints();
        assert!(!h.is_fresh(), "never listed");
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        assert!(h.is_fresh(), "just listed");
        let stream = tap.opened(Kind::Endpoint);
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert!(h.is_fresh(), "an open stream is complete up to now");
        // A normal end and a quick resume: no pause.
        drop(stream);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(h.is_fresh());
        let stream = tap.opened(Kind::Endpoint);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(h.is_fresh());
        // The stream ends and nothing resumes: fresh for 10 s, then not.
        drop(stream);
        let ended = Instant::now();
        tokio::time::sleep(FRESHNESS_LIMIT).await;
        assert!(h.is_fresh());
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(!h.is_fresh());
        // A waiter waits for the resume...
        let waiter = tokio::spawn({
            let h = h.clone();
            async move { h.wait_fresh(USAGE_STALL_LIMIT).await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        let _stream = tap.opened(Kind::Endpoint);
        assert!(waiter.await.unwrap());
        assert!(Instant::now() - ended < USAGE_STALL_LIMIT);
    }

    #[tokio::test(start_paused = true)]
    async fn every_waiter_gives_up_at_the_same_stall_deadline() {
        let (h, tap, stats) = handle_with_endpoints();
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        drop(tap.opened(Kind::Endpoint));
        let ended = Instant::now();
        tokio::time::sleep(FRESHNESS_LIMIT * 2).await;
        let first = tokio::spawn({
            let h = h.clone();
            async move { h.wait_fresh(USAGE_STALL_LIMIT).await }
        });
        // Waiters coming and going (each seeing "not fresh") cannot move
        // the deadline: it is the stream's end plus the limit.
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(10)).await;
            let _ = tokio::time::timeout(Duration::from_millis(1), h.wait_fresh(USAGE_STALL_LIMIT))
                .await;
        }
        // Within an hour of the paused clock: a wait that never ends (no
        // source ever complete) fails here instead of hanging the test.
        let hour = Duration::from_secs(3600);
        let gave_up = tokio::time::timeout(hour, h.wait_fresh(USAGE_STALL_LIMIT)).await;
        assert_eq!(gave_up, Ok(false), "gives up");
        assert_eq!(Instant::now() - ended, USAGE_STALL_LIMIT);
        assert!(!first.await.unwrap());
        // Usage back: a fresh start.
        let _s = tap.opened(Kind::Endpoint);
        assert!(h.wait_fresh(USAGE_STALL_LIMIT).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_relist_counts_old_and_partial_new_references() {
        let (h, tap, stats) = handle_with_endpoints();
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(Kind::Endpoint, Event::InitApply(cep("a", 10)), &stats);
        assert!(!h.is_fresh());
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        assert_eq!(h.refs(10), 1);
        let s = tap.opened(Kind::Endpoint);
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(s); // a 410 ERROR event ends the stream; a re-list starts
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(Kind::Endpoint, Event::InitApply(cep("b", 11)), &stats);
        assert_eq!((h.refs(10), h.refs(11)), (1, 1), "old or partial new");
        tokio::time::sleep(FRESHNESS_LIMIT * 2).await;
        assert!(!h.is_fresh(), "complete only up to the stream's end");
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        assert_eq!((h.refs(10), h.refs(11)), (0, 1), "the new list alone");
        assert!(!h.is_fresh(), "complete as of the list's start, 20 s ago");
        let _s = tap.opened(Kind::Endpoint);
        assert!(h.is_fresh(), "watching from the list's resourceVersion");
        drop(_s);
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        assert!(h.is_fresh(), "a quick re-list is complete as of its start");
        assert_eq!(Stats::get(&stats.watcher_restarts), 2);
    }
}
