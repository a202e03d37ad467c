//! What a fleet run covers, beyond each cluster's settings, and who
//! watches it.

use std::sync::Arc;

use cilium_gc::{Headless, Observer, PendingWrites};
use cilium_gc_documents::fleet::ClusterEntry;

/// Who watches a fleet run: a display per cluster, and the one question
/// before any cluster writes. The plugin implements it on the terminal.
pub trait FleetObserver: Send + Sync {
    /// The observer of `context`'s run (its progress line).
    fn cluster(&self, _context: &str) -> Arc<dyn Observer> {
        Arc::new(Headless)
    }
    /// `entry`'s cluster is done (its run and its diagnosis).
    fn cluster_done(&self, _entry: &ClusterEntry) {}
    /// Every cluster that is about to write has said what; ask once.
    /// Called on a thread of its own, so it may block; `None` when nobody
    /// can be asked (then nothing is written anywhere).
    fn confirm_all(&self, _pending: &[PendingWrites]) -> Option<bool> {
        None
    }
}

/// Nobody watching a fleet run.
impl FleetObserver for Headless {}

/// What a fleet run covers, beyond each cluster's settings.
#[derive(Debug, Clone)]
pub struct FleetSettings {
    /// The contexts, in the order selected (see [`ContextFilter::select`](crate::ContextFilter::select)).
    pub contexts: Vec<String>,
    /// Clusters run at the same time; at least 1.
    pub parallel: u32,
    /// Diagnose each cluster before its run (read-only; the table's GC
    /// verdict and worst finding come from it).
    pub diagnose: bool,
    /// Replace contexts and servers by keyed hashes in the document.
    pub redact: bool,
}
