//! The items of a sweep that no worker holds, and the loop that hands
//! them to workers: fresh ones as the feed brings them, parked ones once
//! the server's wait (a 429's `Retry-After`, a 5xx's backoff) is over.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::StreamExt;

use crate::pace::Pace;
use crate::report::Outcome;
use cilium_gc_cluster::model::Identity;
use cilium_gc_cluster::stats::Stats;
use cilium_gc_cluster::stop::Stop;

use super::item::{stopped, Action, Feed, ItemResult, Target, Tries};

/// One item between its turns with a worker: the identity as last read,
/// its result so far and the retries it has spent. Boxed while parked, so
/// the queue of throttled items stays cheap to reorder.
pub(super) struct Item {
    pub(super) ident: Identity,
    pub(super) r: ItemResult,
    pub(super) tries: Tries,
}

impl Item {
    fn new(ident: Identity, action: Action) -> Box<Item> {
        Box::new(Item {
            ident,
            r: ItemResult {
                outcome: Outcome::NotAttempted,
                reason: action.wanted(),
                attempts: 0,
                conflicts: Vec::new(),
                last_error: None,
            },
            tries: Tries::default(),
        })
    }
}

/// How an item's turn with a worker ends.
pub(super) enum Turn {
    /// In its report state.
    Done(ItemResult),
    /// Waiting on the server: not to be sent again before `not_before` (a
    /// 429's `Retry-After`, else backoff).
    Park {
        /// The item, with its tries so far.
        item: Box<Item>,
        /// When it may be sent again.
        not_before: tokio::time::Instant,
        /// The part of the wait the report counts as `Retry-After` (a
        /// 429's; zero for a 5xx's backoff).
        retry_after: Duration,
    },
}

/// An item waiting out a 429's `Retry-After` or a 5xx's backoff off the
/// workers.
struct Parked {
    item: Box<Item>,
    since: tokio::time::Instant,
    /// What of the wait counts as `Retry-After` (see [`Turn::Park`]).
    counted: Duration,
}

/// The items of a sweep that no worker holds: those not started yet (in
/// the order the feed brings them) and those parked, keyed by their
/// not-before instant. A parked item whose instant has passed goes before
/// any fresh one, so a parked item is not overtaken indefinitely by new
/// work.
pub(super) struct Queue {
    feed: Feed,
    /// Received from the feed while no worker was free.
    waiting: Option<Target>,
    /// The feed is closed and drained: no fresh item will come.
    feed_done: bool,
    received: usize,
    parked: BTreeMap<(tokio::time::Instant, usize), Parked>,
    action: Action,
}

impl Queue {
    pub(super) fn new(feed: Feed, action: Action) -> Self {
        Queue {
            feed,
            waiting: None,
            feed_done: false,
            received: 0,
            parked: BTreeMap::new(),
            action,
        }
    }

    /// The next item a free worker may write now: a parked one whose
    /// not-before has passed, else the next fresh one the feed holds.
    /// Counts the parked item's `Retry-After` wait (at most what it was
    /// asked for: the rest was spent waiting for a worker, not for the
    /// server).
    fn next_ready(&mut self, stats: &Stats) -> Option<(usize, Box<Item>)> {
        let now = tokio::time::Instant::now();
        if let Some(e) = self.parked.first_entry().filter(|e| e.key().0 <= now) {
            let i = e.key().1;
            let p = e.remove();
            stats.add_retry_after_wait((now - p.since).min(p.counted));
            return Some((i, p.item));
        }
        let fresh = self.waiting.take().or_else(|| match self.feed.try_recv() {
            Ok(t) => Some(t),
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => None,
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                self.feed_done = true;
                None
            }
        })?;
        Some(self.number(fresh))
    }

    /// A fresh item gets the next index (the order of the results).
    fn number(&mut self, target: Target) -> (usize, Box<Item>) {
        let i = self.received;
        self.received += 1;
        (i, Item::new(target.into_identity(), self.action))
    }

    /// Every item received has its report state and no more will come.
    fn finished(&self) -> bool {
        self.feed_done && self.waiting.is_none() && self.parked.is_empty()
    }

    fn park(
        &mut self,
        i: usize,
        item: Box<Item>,
        not_before: tokio::time::Instant,
        counted: Duration,
    ) {
        let since = tokio::time::Instant::now();
        self.parked.insert(
            (not_before, i),
            Parked {
                item,
                since,
                counted,
            },
        );
    }

    /// The earliest instant a parked item becomes ready.
    fn next_wake(&self) -> Option<tokio::time::Instant> {
        self.parked.keys().next().map(|k| k.0)
    }

    /// On a stop: every parked item ends now (its wait is cut short and
    /// counted as far as it went).
    fn drain_parked(&mut self, stats: &Stats) -> Vec<(usize, ItemResult)> {
        let now = tokio::time::Instant::now();
        std::mem::take(&mut self.parked)
            .into_iter()
            .map(|((_, i), p)| {
                stats.add_retry_after_wait((now - p.since).min(p.counted));
                let it = *p.item;
                (i, stopped(it.r, &it.tries))
            })
            .collect()
    }
}

/// Keep up to `slots` items being written (fewer while the server
/// refuses more: `pace::Window`); an item the server makes wait (a
/// 429, a 5xx) gives its worker back at once and is parked until its
/// not-before instant, so the writes in flight follow what the server
/// admits instead of sleeping. Fresh items are taken from the feed as they
/// come. Ends when the feed is closed and every item has its report state;
/// a stop ends parked waits at once (items not started then end at the
/// gate, as not attempted). `turn` is one item's turn with a worker.
pub(super) async fn drive<F, Fut>(
    pace: &Pace,
    stop: &Stop,
    stats: &Stats,
    mut queue: Queue,
    slots: usize,
    on_done: &impl Fn(&ItemResult),
    turn: F,
) -> Vec<(usize, ItemResult)>
where
    F: Fn(usize, Box<Item>) -> Fut,
    Fut: std::future::Future<Output = (usize, Turn)>,
{
    let mut done = Vec::new();
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < pace.slots(slots) {
            let Some((i, item)) = queue.next_ready(stats) else {
                break;
            };
            running.push(turn(i, item));
        }
        if running.is_empty() && queue.finished() {
            return done;
        }
        // Only wake for a parked or fresh item when a worker is free to take it.
        let room = running.len() < pace.slots(slots);
        let wake = queue.next_wake().filter(|_| room);
        let sleep = tokio::time::sleep_until(wake.unwrap_or_else(tokio::time::Instant::now));
        let listen = room && !queue.feed_done && queue.waiting.is_none();
        tokio::select! {
            Some((i, t)) = running.next(), if !running.is_empty() => match t {
                Turn::Done(r) => {
                    tracing::trace!(outcome = ?r.outcome, attempts = r.attempts, "item done");
                    on_done(&r);
                    done.push((i, r));
                }
                Turn::Park {
                    item,
                    not_before,
                    retry_after,
                } => queue.park(i, item, not_before, retry_after),
            },
            fresh = queue.feed.recv(), if listen => match fresh {
                Some(t) => queue.waiting = Some(t),
                None => queue.feed_done = true,
            },
            _ = sleep, if wake.is_some() => {}
            _ = stop.wait(), if !queue.parked.is_empty() => {
                for (i, r) in queue.drain_parked(stats) {
                    on_done(&r);
                    done.push((i, r));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Mutex;

    use super::*;
    use cilium_gc_cluster::stop::StopReason;

    fn ident(name: &str) -> Identity {
        Identity {
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: "1".into(),
            created_at: None,
            labels: Default::default(),
            namespace: None,
            mark: None,
            last_change: None,
        }
    }

    /// Three targets at `--qps 0 --concurrency 1`: the first one's first
    /// write gets a 5xx and a `backoff`, every other write succeeds in
    /// 10 ms. Returns the order the items ended in, their results, and the
    /// most turns that were in flight at once; fails if the loop waits for
    /// ever.
    async fn one_5xx_at_qps_0(
        stop: &Stop,
        backoff: Duration,
    ) -> (Vec<usize>, Vec<(usize, ItemResult)>, Stats, usize) {
        let pace = Pace::new(0.0, 1, 1);
        assert_eq!(pace.slots(1), 1, "the premise: one write slot");
        let stats = Stats::default();
        let feed = super::super::feed_all(vec![ident("1001"), ident("1002"), ident("1003")]);
        let ended = Mutex::new(Vec::new());
        let (in_flight, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        // An hour of the paused clock: it passes only once every task waits
        // with none to wake it, so a loop that waits for ever fails here
        // instead of hanging the test.
        let results = tokio::time::timeout(
            Duration::from_secs(3600),
            drive(
                &pace,
                stop,
                &stats,
                Queue::new(feed, Action::Delete),
                1,
                &|_| {},
                |i, mut item: Box<Item>| {
                    let (ended, in_flight, most) = (&ended, &in_flight, &most);
                    async move {
                        most.fetch_max(in_flight.fetch_add(1, SeqCst) + 1, SeqCst);
                        item.r.attempts += 1;
                        if i == 0 && item.r.attempts == 1 {
                            // What `on_transient` does with a 5xx.
                            item.tries.lost_answers += 1;
                            item.r.last_error = Some("503".into());
                            let until = tokio::time::Instant::now() + backoff;
                            let park = Turn::Park {
                                item,
                                not_before: until,
                                retry_after: Duration::ZERO,
                            };
                            in_flight.fetch_sub(1, SeqCst);
                            return (i, park);
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        ended.lock().unwrap().push(i);
                        in_flight.fetch_sub(1, SeqCst);
                        let mut r = item.r;
                        r.outcome = Outcome::Deleted;
                        (i, Turn::Done(r))
                    }
                },
            ),
        )
        .await
        .expect("the loop ends");
        let most = most.into_inner();
        (ended.into_inner().unwrap(), results, stats, most)
    }

    /// A 5xx's backoff is waited out parked, not in the only write slot:
    /// the other items are written meanwhile, and the parked one after its
    /// backoff. Its wait is not counted as `Retry-After`. One slot is one
    /// turn at a time: never a second write in flight beside it.
    #[tokio::test(start_paused = true)]
    async fn a_5xx_backoff_does_not_hold_the_only_write_slot() {
        let t0 = tokio::time::Instant::now();
        let (ended, results, stats, most) =
            one_5xx_at_qps_0(&Stop::default(), Duration::from_secs(5)).await;
        assert_eq!(ended, vec![1, 2, 0]);
        assert_eq!(most, 1, "turns in flight at once");
        assert!(tokio::time::Instant::now() - t0 >= Duration::from_secs(5));
        assert!(results.iter().all(|(_, r)| r.outcome == Outcome::Deleted));
        let first = results.iter().find(|(i, _)| *i == 0).unwrap();
        assert_eq!(first.1.attempts, 2);
        assert_eq!(Stats::get(&stats.retry_after_wait_ms), 0);
    }

    /// A parked item whose wait is over goes before fresh ones: its 5 ms
    /// backoff ends while the only slot is busy, and it is written next,
    /// ahead of the item the feed still holds.
    #[tokio::test(start_paused = true)]
    async fn a_parked_item_due_goes_before_fresh_ones() {
        let backoff = Duration::from_millis(5);
        let (ended, results, _, most) = one_5xx_at_qps_0(&Stop::default(), backoff).await;
        assert_eq!(ended, vec![1, 0, 2]);
        assert_eq!(most, 1, "turns in flight at once");
        assert!(results.iter().all(|(_, r)| r.outcome == Outcome::Deleted));
    }

    /// A stop during a 5xx's backoff ends the parked item at once, failed
    /// (the 5xx may have been applied), with its last error kept.
    #[tokio::test(start_paused = true)]
    async fn a_stop_ends_a_5xx_backoff_as_failed() {
        let stop = Stop::default();
        let stopper = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            stopper.trigger(StopReason::Interrupt);
        });
        let (ended, results, _, _) = one_5xx_at_qps_0(&stop, Duration::from_secs(5)).await;
        assert_eq!(ended, vec![1, 2]);
        let first = &results.iter().find(|(i, _)| *i == 0).unwrap().1;
        assert_eq!(first.outcome, Outcome::Failed);
        assert_eq!(first.last_error.as_deref(), Some("503"));
    }

    /// The loop sleeps until the earliest parked item is due, whatever the
    /// order they were parked in; with none parked there is nothing to wake
    /// for.
    #[tokio::test(start_paused = true)]
    async fn the_next_wake_is_the_earliest_parked_item() {
        let mut q = Queue::new(
            super::super::feed_all(Vec::<Identity>::new()),
            Action::Delete,
        );
        assert_eq!(q.next_wake(), None);
        let t0 = tokio::time::Instant::now();
        for (i, secs) in [(0, 5), (1, 2), (2, 9)] {
            let item = Item::new(ident("1001"), Action::Delete);
            q.park(i, item, t0 + Duration::from_secs(secs), Duration::ZERO);
        }
        assert_eq!(q.next_wake(), Some(t0 + Duration::from_secs(2)));
    }

    /// A stop ends every parked item at once, by its index: failed when a
    /// write may have been applied (an answer lost), else not attempted;
    /// each `Retry-After` counted as far as it was waited, not as asked,
    /// and nothing is left parked.
    #[tokio::test(start_paused = true)]
    async fn draining_ends_every_parked_item_and_counts_the_wait_so_far() {
        let stats = Stats::default();
        let mut q = Queue::new(
            super::super::feed_all(Vec::<Identity>::new()),
            Action::Delete,
        );
        let due = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut lost = Item::new(ident("1001"), Action::Delete);
        lost.tries.lost_answers = 1;
        lost.r.last_error = Some("503".into());
        q.park(3, lost, due, Duration::ZERO);
        let throttled = Item::new(ident("1002"), Action::Delete);
        q.park(7, throttled, due, Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(4)).await;
        let mut ended = q.drain_parked(&stats);
        ended.sort_by_key(|(i, _)| *i);
        let ended: Vec<(usize, Outcome)> = ended.iter().map(|(i, r)| (*i, r.outcome)).collect();
        assert_eq!(ended, [(3, Outcome::Failed), (7, Outcome::NotAttempted)]);
        assert_eq!(Stats::get(&stats.retry_after_wait_ms), 4000);
        assert_eq!(q.next_wake(), None, "nothing left parked");
    }

    /// Fresh items are taken as the feed brings them: one sent while the
    /// loop has nothing else to do wakes it, and the sweep ends once the
    /// feed closes, every item written, in the order received.
    #[tokio::test(start_paused = true)]
    async fn items_the_feed_brings_later_are_taken_as_they_come() {
        let pace = Pace::new(0.0, 1, 1);
        let stats = Stats::default();
        let (tx, feed) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            for name in ["1001", "1002"] {
                tokio::time::sleep(Duration::from_secs(1)).await;
                tx.send(ident(name).into()).unwrap();
            }
        });
        let (queue, stop) = (Queue::new(feed, Action::Delete), Stop::default());
        let sweep = drive(
            &pace,
            &stop,
            &stats,
            queue,
            1,
            &|_| {},
            |i, item: Box<Item>| async move {
                let mut r = item.r;
                r.outcome = Outcome::Deleted;
                (i, Turn::Done(r))
            },
        );
        let results = tokio::time::timeout(Duration::from_secs(3600), sweep)
            .await
            .expect("the loop ends");
        let results: Vec<(usize, Outcome)> = results.iter().map(|(i, r)| (*i, r.outcome)).collect();
        assert_eq!(results, [(0, Outcome::Deleted), (1, Outcome::Deleted)]);
    }
}
