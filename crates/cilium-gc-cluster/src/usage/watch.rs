//! The watchers: kube-runtime watchers over CiliumEndpoints and
//! CiliumEndpointSlices feeding the index, with a short backoff so a
//! flapping watch is back within seconds.

use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use futures::StreamExt;
use kube::api::{Api, ApiResource};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use tokio::time::Instant;

use super::decode::UsageObject;
use super::index::{Index, Source};
use super::{lock, Shared, Sources, UsageHandle, MAX_MALFORMED, PAGE_SIZE};
use crate::model::{Kind, CILIUM_GROUP};
use crate::stats::Stats;
use crate::watch_tap::WatchTap;

/// The watchers' backoff after an error: jittered exponential from 250 ms,
/// capped at 3 s, so a flapping watch is back within a few seconds (kube's
/// default grows to 30 s, during which no write could go out). Reset by
/// every event received, as kube-runtime's `StreamBackoff` does.
#[derive(Debug, Clone)]
pub(crate) struct WatchBackoff {
    attempt: u32,
    policy: crate::retry::Backoff,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            attempt: 0,
            policy: crate::retry::Backoff {
                base: Duration::from_millis(250),
                cap: Duration::from_secs(3),
            },
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let d = self.policy.delay(self.attempt, None, &mut rand::rng());
        self.attempt = self.attempt.saturating_add(1);
        Some(d)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.attempt = 0;
    }
}

fn api_resource(kind: Kind, version: &str) -> ApiResource {
    ApiResource {
        group: CILIUM_GROUP.into(),
        version: version.into(),
        api_version: format!("{CILIUM_GROUP}/{version}"),
        kind: kind.kind().into(),
        plural: kind.plural().into(),
    }
}

impl UsageHandle {
    /// Start the watchers. Returns at once; call `UsageHandle::wait_ready`.
    pub fn start(client: kube::Client, tap: WatchTap, sources: Sources, stats: Arc<Stats>) -> Self {
        let handle = UsageHandle::with_tap(tap);
        let kinds = [
            (Kind::Endpoint, sources.endpoints),
            (Kind::EndpointSlice, sources.slices),
        ];
        for (kind, on) in kinds {
            if !on {
                continue;
            }
            lock(&handle.shared.sources).insert(kind, Source::default());
            let h = handle.clone();
            let client = client.clone();
            let stats = stats.clone();
            let version = match kind {
                Kind::EndpointSlice => sources.slices_version,
                _ => kind.version(),
            };
            // In the caller's span: a fleet run's logs say which cluster.
            let task = tokio::spawn(
                async move { h.run(kind, version, client, stats).await }.in_current_span(),
            );
            lock(&handle.shared.tasks).push(task);
        }
        handle
    }

    /// A handle (no watchers yet) reading stream state from `tap`.
    pub(super) fn with_tap(tap: WatchTap) -> Self {
        UsageHandle {
            shared: Arc::new(Shared {
                tap,
                ..Shared::default()
            }),
        }
    }

    async fn run(self, kind: Kind, version: &'static str, client: kube::Client, stats: Arc<Stats>) {
        let api: Api<UsageObject> = Api::all_with(client, &api_resource(kind, version));
        let mut config = watcher::Config::default().page_size(PAGE_SIZE);
        // Bookmarks keep a quiet stream alive and its resourceVersion
        // current, so a resume after a normal end replays little.
        config.bookmarks = true;
        let mut stream = watcher::watcher(api, config)
            .backoff(WatchBackoff::default())
            .boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => self.on_event(kind, ev, &stats),
                Err(e) => {
                    // Freshness follows the stream itself (`watch_tap`):
                    // nothing to record here but the restart. Restarts are
                    // routine on a busy server and counted in the report
                    // (`watcherRestarts`); usage that stays dark stops the
                    // run with its own error. So -v, not a warning per drop.
                    tracing::info!(kind = kind.plural(), "watcher error, restarting: {e}");
                    Stats::bump(&stats.watcher_restarts);
                }
            }
        }
    }

    fn with(&self, kind: Kind, f: impl FnOnce(&mut Source)) {
        self.update(kind, f);
        self.shared.changed.notify_waiters();
    }

    fn update(&self, kind: Kind, f: impl FnOnce(&mut Source)) {
        if let Some(s) = lock(&self.shared.sources).get_mut(&kind) {
            f(s);
        }
    }

    pub(super) fn on_event(&self, kind: Kind, ev: Event<UsageObject>, stats: &Stats) {
        if let Event::InitApply(o) | Event::Apply(o) = &ev {
            self.note_malformed(kind, o);
        }
        // Only Init and InitDone change readiness; waking `wait_ready` for
        // each of 150k listed objects cost a cross-thread wake-up apiece.
        let wake = matches!(ev, Event::Init | Event::InitDone);
        let apply = |s: &mut Source| match ev {
            Event::Init => {
                if s.synced_once {
                    Stats::bump(&stats.watcher_restarts);
                }
                s.relisting = Some(Index::default());
                s.list_started = Some(Instant::now());
            }
            Event::InitApply(o) => s.relisting.get_or_insert_with(Index::default).apply(&o),
            Event::InitDone => {
                if let Some(fresh) = s.relisting.take() {
                    s.live = fresh;
                }
                s.listed_from = s.list_started;
                s.synced_once = true;
            }
            Event::Apply(o) => s.live.apply(&o),
            Event::Delete(o) => s.live.delete(&o),
        };
        if wake {
            self.with(kind, apply);
        } else {
            self.update(kind, apply);
        }
    }

    fn note_malformed(&self, kind: Kind, o: &UsageObject) {
        let Some(problem) = o.problem else { return };
        let m = &o.meta;
        let name = match (&m.namespace, &m.name) {
            (Some(ns), Some(n)) => format!("{ns}/{n}"),
            (None, Some(n)) => n.clone(),
            (_, None) => "<no name>".into(),
        };
        let what = format!("{} {name}", kind.kind().to_lowercase());
        let key = (what, m.uid.clone().unwrap_or_default(), problem);
        let mut g = lock(&self.shared.malformed);
        if g.len() < MAX_MALFORMED {
            g.insert(key, ());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::runtime::utils::Backoff as _;
    use kube::runtime::watcher::Event;
    use tokio::time::Instant;

    use super::*;
    use crate::watch_tap::StreamState;

    fn cep(name: &str, id: &str) -> UsageObject {
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"n","uid":"{name}"}},"status":{{"identity":{{"id":{id}}}}}}}"#
        ))
        .unwrap()
    }

    fn endpoints_only() -> UsageHandle {
        let h = UsageHandle::with_tap(WatchTap::default());
        h.shared
            .sources
            .lock()
            .unwrap()
            .insert(Kind::Endpoint, Source::default());
        h
    }

    #[test]
    fn backoff_is_capped_and_reset_by_an_event() {
        let mut b = WatchBackoff::default();
        let delays: Vec<Duration> = (&mut b).take(20).collect();
        assert!(
            delays.iter().all(|d| *d <= Duration::from_secs(3)),
            "{delays:?}"
        );
        assert_eq!(b.attempt, 20);
        b.reset();
        assert_eq!(b.attempt, 0);
        assert!(b.next().unwrap() <= Duration::from_millis(250));
    }

    #[test]
    fn only_a_relist_after_the_first_counts_as_a_restart() {
        let h = endpoints_only();
        let stats = Stats::default();
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        assert_eq!(Stats::get(&stats.watcher_restarts), 0, "the first list");
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        assert_eq!(Stats::get(&stats.watcher_restarts), 1);
    }

    #[test]
    fn events_for_an_unwatched_kind_are_ignored() {
        let h = endpoints_only();
        let stats = Stats::default();
        h.on_event(Kind::EndpointSlice, Event::Init, &stats);
        h.on_event(Kind::EndpointSlice, Event::Apply(cep("a", "7")), &stats);
        assert_eq!(h.refs(7), 0);
        assert_eq!(h.object_count(Kind::EndpointSlice), 0);
    }

    #[test]
    fn malformed_endpoints_are_remembered_once_and_capped() {
        let h = endpoints_only();
        let stats = Stats::default();
        h.on_event(Kind::Endpoint, Event::Init, &stats);
        h.on_event(Kind::Endpoint, Event::InitApply(cep("a", "\"x\"")), &stats);
        h.on_event(Kind::Endpoint, Event::InitDone, &stats);
        h.on_event(Kind::Endpoint, Event::Apply(cep("a", "\"x\"")), &stats);
        assert_eq!(h.unreadable_count(), 1, "the same endpoint once");
        assert_eq!(h.unreadable()[0].0, "ciliumendpoint n/a");
        for i in 0..MAX_MALFORMED + 5 {
            h.on_event(
                Kind::Endpoint,
                Event::Apply(cep(&format!("e{i}"), "-1")),
                &stats,
            );
        }
        assert_eq!(h.malformed().len(), MAX_MALFORMED);
    }

    /// The freshness rules, one source at a time (`Source::complete_as_of`).
    #[tokio::test(start_paused = true)]
    async fn freshness_rules() {
        let t0 = Instant::now();
        tokio::time::advance(Duration::from_secs(100)).await;
        let now = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let open = StreamState {
            open: 1,
            last_end: None,
        };
        let ended = |s| StreamState {
            open: 0,
            last_end: Some(at(s)),
        };
        let listed = |s| Source {
            synced_once: true,
            list_started: Some(at(s)),
            listed_from: Some(at(s)),
            ..Source::default()
        };
        // Never listed: unknown, whatever the stream.
        assert_eq!(Source::default().complete_as_of(open, now), None);
        // Listed and a stream open: complete up to now.
        assert_eq!(listed(10).complete_as_of(open, now), Some(now));
        // Stream ended: up to its end, or the list's start if later.
        assert_eq!(listed(10).complete_as_of(ended(50), now), Some(at(50)));
        assert_eq!(listed(60).complete_as_of(ended(50), now), Some(at(60)));
        // Listed, no stream yet: as of the list's start.
        assert_eq!(
            listed(10).complete_as_of(StreamState::default(), now),
            Some(at(10))
        );
        // During a re-list, an open stream adds nothing: the old index is
        // complete up to the last stream's end (else its list's start).
        let relisting = |s| Source {
            relisting: Some(Index::default()),
            ..listed(s)
        };
        assert_eq!(relisting(10).complete_as_of(ended(50), now), Some(at(50)));
        assert_eq!(
            relisting(10).complete_as_of(
                StreamState {
                    open: 1,
                    last_end: None
                },
                now
            ),
            Some(at(10))
        );
    }
}
