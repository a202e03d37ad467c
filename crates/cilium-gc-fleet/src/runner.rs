//! The one per-cluster runner of a fleet: a fleet run and a fleet diagnosis
//! both start a task per context, in selection order as a slot frees, each
//! in a span naming its cluster, and turn a task that panicked outside its
//! run into a failed entry, so the document always has every cluster.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument as _;

use super::document::BuildEntry as _;
use cilium_gc::ConnectSettings;
use cilium_gc_cluster::exit::Exit;
use cilium_gc_cluster::stop::{Stop, StopReason};
use cilium_gc_documents::fleet::{ClusterEntry, ClusterError, ClusterStatus};
use cilium_gc_documents::report::AbortReason;

/// One cluster, handed to its task.
pub(super) struct Cluster {
    /// Its place in the selection.
    pub(super) index: usize,
    /// Its kubeconfig context.
    pub(super) context: String,
    /// The fleet's connection settings with this context's.
    pub(super) kube: ConnectSettings,
    /// Its slot; `None` when the fleet stopped before one was free.
    pub(super) permit: Option<OwnedSemaphorePermit>,
}

/// Run `task` for every context of `contexts` (each replacing `kube`'s,
/// every other connection flag kept), at most as many at a time as `slots`
/// has permits; the entries come back in selection order. `crashed` is
/// applied to the entry of a task that panicked (the fleet run redacts it).
pub(super) async fn each_cluster<Fut>(
    kube: &ConnectSettings,
    contexts: &[String],
    slots: &Arc<Semaphore>,
    stop: &Stop,
    mut task: impl FnMut(Cluster) -> Fut,
    crashed: impl Fn(&mut ClusterEntry),
) -> Vec<ClusterEntry>
where
    Fut: Future<Output = ClusterEntry> + Send + 'static,
{
    let mut handles = Vec::with_capacity(contexts.len());
    for (index, context) in contexts.iter().enumerate() {
        let kube = ConnectSettings {
            context: Some(context.clone()),
            ..kube.clone()
        };
        // Slots are taken here, in selection order, so clusters start in
        // the order they were selected (tasks polling for a slot each would
        // start in whatever order the scheduler polls them).
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.ok(),
            _ = stop.wait() => None,
        };
        let cluster = Cluster {
            index,
            context: context.clone(),
            kube,
            permit,
        };
        // Every log line of the cluster's run says which cluster it is.
        let span = tracing::warn_span!("cluster", context = %context);
        handles.push((
            context.clone(),
            tokio::spawn(task(cluster).instrument(span)),
        ));
    }
    let mut entries = Vec::with_capacity(handles.len());
    for (context, handle) in handles {
        entries.push(handle.await.unwrap_or_else(|e| {
            // gc::run catches its own panics; this is one elsewhere in the task.
            let message = if e.is_panic() {
                cilium_gc::panic_text(e.into_panic().as_ref())
            } else {
                e.to_string()
            };
            let mut entry = crashed_entry(context, message);
            crashed(&mut entry);
            entry
        }));
    }
    entries
}

/// Whether a signal stopped the fleet.
pub(super) fn interrupted(stop: &Stop) -> bool {
    matches!(
        stop.reason(),
        Some(StopReason::Interrupt | StopReason::Terminate)
    )
}

/// The exit of a run the stop ended before it began.
pub(super) fn stop_exit(stop: &Stop) -> Exit {
    stop.reason()
        .and_then(StopReason::exit)
        .unwrap_or(Exit::Unexpected)
}

/// The entry of a cluster whose task panicked outside its run.
fn crashed_entry(context: String, message: String) -> ClusterEntry {
    let mut e = ClusterEntry::not_started(context, Exit::Unexpected);
    e.status = ClusterStatus::Failed;
    e.error = Some(ClusterError {
        reason: AbortReason::InternalError.into(),
        message: format!("internal error: {message} (a bug: please report it)"),
    });
    e
}
