//! One confirmation for a fleet delete: every cluster's run stops at its
//! gate (after its own preflight, scan and blast-radius checks) until every
//! other cluster has either reached its own or ended; then the person is
//! asked once, with the table of what will be deleted where, and the answer
//! goes to all of them.
//!
//! A cluster waiting here gives its `--parallel` slot back, so clusters
//! still queued can reach the gate too, and takes one again before it
//! writes.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::settings::FleetObserver;
use cilium_gc::{Observer, PendingWrites};
use cilium_gc_cluster::stop::Stop;

/// The meeting point of a fleet's runs before their first write.
pub(super) struct Gate {
    state: Mutex<State>,
    answered: Condvar,
    observer: Arc<dyn FleetObserver>,
    stop: Stop,
}

struct State {
    /// Per cluster: at the gate, or ended without needing it.
    arrived: Vec<bool>,
    /// What each cluster at the gate is about to write.
    pending: Vec<(usize, PendingWrites)>,
    /// Whether one thread is asking the person now.
    asking: bool,
    /// The answer, once given (`None` inside: nobody could be asked).
    answer: Option<Option<bool>>,
}

impl Gate {
    pub(super) fn new(clusters: usize, observer: Arc<dyn FleetObserver>, stop: Stop) -> Self {
        Gate {
            state: Mutex::new(State {
                arrived: vec![false; clusters],
                pending: Vec::new(),
                asking: false,
                answer: None,
            }),
            answered: Condvar::new(),
            observer,
            stop,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cluster `index`'s run is over: it holds nobody up any more (a no-op
    /// when it reached the gate before).
    pub(super) fn done(&self, index: usize) {
        let mut st = self.lock();
        if !st.arrived[index] {
            st.arrived[index] = true;
            self.ask_when_all_arrived(st);
        }
    }

    /// Blocks until every cluster has arrived and the person answered.
    fn ask(&self, index: usize, pending: PendingWrites) -> Option<bool> {
        let mut st = self.lock();
        st.arrived[index] = true;
        st.pending.push((index, pending));
        self.ask_when_all_arrived(st);
        let mut st = self.lock();
        while st.answer.is_none() {
            st = self.answered.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.answer.flatten()
    }

    /// The last arrival asks, without holding the lock while the person
    /// thinks; a stopped fleet is answered "no" without asking.
    fn ask_when_all_arrived(&self, mut st: MutexGuard<'_, State>) {
        if st.asking || st.answer.is_some() || !st.arrived.iter().all(|a| *a) {
            return;
        }
        st.asking = true;
        let mut pending = std::mem::take(&mut st.pending);
        drop(st);
        pending.sort_by_key(|(i, _)| *i);
        let answer = if self.stop.reason().is_some() {
            Some(false)
        } else if pending.is_empty() {
            None
        } else {
            let all: Vec<PendingWrites> = pending.into_iter().map(|(_, p)| p).collect();
            self.observer.confirm_all(&all)
        };
        let mut st = self.lock();
        st.answer = Some(answer);
        self.answered.notify_all();
    }
}

/// One cluster's observer in a fleet run: progress goes to the cluster's
/// own display, the confirmation to the [`Gate`].
pub(super) struct GatedObserver {
    pub(super) index: usize,
    pub(super) inner: Arc<dyn Observer>,
    pub(super) gate: Arc<Gate>,
    pub(super) slots: Arc<Semaphore>,
    pub(super) slot: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
}

impl Observer for GatedObserver {
    fn listing(&self, what: &str) {
        self.inner.listing(what);
    }
    fn listed(&self) {
        self.inner.listed();
    }
    fn start_phase(&self, label: &str, total: u64) {
        self.inner.start_phase(label, total);
    }
    fn inc(&self) {
        self.inner.inc();
    }
    fn finish(&self) {
        self.inner.finish();
    }
    fn confirm_writes(&self, pending: &PendingWrites) -> Option<bool> {
        self.inner.listing("waiting for the confirmation");
        drop(self.slot.lock().unwrap_or_else(|e| e.into_inner()).take());
        let answer = self.gate.ask(self.index, pending.clone());
        if answer == Some(true) {
            // Called on a thread of its own (see `gc::plan::confirm`): block.
            if let Ok(permit) = futures::executor::block_on(self.slots.clone().acquire_owned()) {
                *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(permit);
            }
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread;

    use super::*;
    use cilium_gc_cluster::stop::StopReason;

    /// Answers `answer` and remembers every question.
    struct Asker {
        answer: Option<bool>,
        asked: Mutex<Vec<Vec<PendingWrites>>>,
        calls: AtomicUsize,
    }

    impl FleetObserver for Asker {
        fn confirm_all(&self, pending: &[PendingWrites]) -> Option<bool> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.asked.lock().unwrap().push(pending.to_vec());
            self.answer
        }
    }

    fn asker(answer: Option<bool>) -> Arc<Asker> {
        Arc::new(Asker {
            answer,
            asked: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
        })
    }

    fn pending(context: &str, deletes: u64) -> PendingWrites {
        PendingWrites {
            server: format!("https://{context}.invalid"),
            context: Some(context.into()),
            scanned: 10,
            deletes,
            marks: 0,
        }
    }

    /// Cluster `i` asks on a thread of its own, as `gc::plan::confirm` does.
    fn ask_on_thread(
        gate: &Arc<Gate>,
        i: usize,
        p: PendingWrites,
    ) -> thread::JoinHandle<Option<bool>> {
        let gate = gate.clone();
        thread::spawn(move || gate.ask(i, p))
    }

    #[test]
    fn everyone_waits_for_the_last_and_is_asked_once_in_cluster_order() {
        let obs = asker(Some(true));
        let gate = Arc::new(Gate::new(3, obs.clone(), Stop::default()));
        // Cluster 2 arrives first, cluster 1 ends without writing, 0 last.
        let two = ask_on_thread(&gate, 2, pending("c", 3));
        gate.done(1);
        let zero = ask_on_thread(&gate, 0, pending("a", 1));
        assert_eq!(two.join().unwrap(), Some(true));
        assert_eq!(zero.join().unwrap(), Some(true));
        assert_eq!(obs.calls.load(Ordering::SeqCst), 1, "asked once");
        let asked = obs.asked.lock().unwrap();
        let contexts: Vec<_> = asked[0]
            .iter()
            .map(|p| p.context.clone().unwrap())
            .collect();
        assert_eq!(
            contexts,
            ["a", "c"],
            "in the order selected, not of arrival"
        );
        // A late `done` from a cluster already at the gate changes nothing.
        gate.done(0);
        assert_eq!(obs.calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_no_goes_to_every_cluster() {
        let obs = asker(Some(false));
        let gate = Arc::new(Gate::new(2, obs.clone(), Stop::default()));
        let a = ask_on_thread(&gate, 0, pending("a", 1));
        let b = ask_on_thread(&gate, 1, pending("b", 2));
        assert_eq!(
            (a.join().unwrap(), b.join().unwrap()),
            (Some(false), Some(false))
        );
        assert_eq!(obs.calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn nobody_to_ask_means_nobody_writes() {
        let gate = Arc::new(Gate::new(2, asker(None), Stop::default()));
        let a = ask_on_thread(&gate, 0, pending("a", 1));
        gate.done(1);
        assert_eq!(a.join().unwrap(), None);
    }

    #[test]
    fn a_stopped_fleet_is_answered_no_without_asking() {
        let obs = asker(Some(true));
        let stop = Stop::default();
        let gate = Arc::new(Gate::new(2, obs.clone(), stop.clone()));
        let a = ask_on_thread(&gate, 0, pending("a", 1));
        stop.trigger(StopReason::Interrupt);
        gate.done(1);
        assert_eq!(a.join().unwrap(), Some(false));
        assert_eq!(obs.calls.load(Ordering::SeqCst), 0, "not asked");
    }

    #[test]
    fn clusters_that_all_end_without_writing_ask_nobody() {
        let obs = asker(Some(true));
        let gate = Gate::new(2, obs.clone(), Stop::default());
        gate.done(0);
        gate.done(1);
        assert_eq!(obs.calls.load(Ordering::SeqCst), 0);
    }
}
