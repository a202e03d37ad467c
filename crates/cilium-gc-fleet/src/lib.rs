//! Many clusters in one run: the same scan or delete on every selected
//! kubeconfig context, at most `parallel` at a time on the one runtime,
//! ending in one [`FleetReport`] that holds each cluster's ordinary report.
//!
//! Each cluster's run is exactly a single-context [`run`](cilium_gc::run)
//! with its own settings, limiter and safety rules (preflight, freshness,
//! blast radius, preconditions, `--max-deletions`): one server is one
//! bound, so `--qps` and `--concurrency` apply per cluster. What the fleet
//! adds is shared only where sharing is the point: one [`Stop`] (Ctrl-C
//! stops every cluster, and the fleet report is still written), one
//! confirmation for every cluster's writes (`gate`), and a diagnosis of
//! each cluster before its run, for the table's verdict.
//!
//! `diagnose` over a fleet ([`diagnose_fleet`]) is the single-cluster
//! diagnosis on every context, gathered the same way into a
//! [`FleetDiagnosis`].
//!
//! This crate stands above both jobs, the writer (`cilium-gc`) and the
//! diagnosis (`cilium-gc-diagnose`); neither knows it.

#![deny(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod diagnosis;
mod document;
mod gate;
mod redact;
mod runner;
mod select;
mod settings;
mod spool;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use jiff::Timestamp;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use cilium_gc_documents::fleet::FleetDiagnosis;
pub use diagnosis::diagnose_fleet;
pub use document::FleetReport;
use document::{fleet_report, BuildEntry as _};
use redact::redact_entry;
use runner::{each_cluster, interrupted, stop_exit, Cluster};
pub use select::{ContextFilter, SelectError};
pub use settings::{FleetObserver, FleetSettings};
pub use spool::Clusters;
use spool::Spool;

use cilium_gc::Ui;
use cilium_gc::{ConnectSettings, GcSettings};
use cilium_gc_cluster::exit::Exit;
use cilium_gc_cluster::stop::Stop;
use cilium_gc_diagnose::redact::Redactor;
use cilium_gc_diagnose::DiagnoseSettings;
use cilium_gc_documents::fleet::ClusterEntry;
use cilium_gc_documents::report::{ErrorKind, Report};
use gate::{Gate, GatedObserver};

/// Run `s` on every context of `fleet`, each as a single-context run would
/// (its kubeconfig context replaced, every other connection flag kept).
/// Always returns the fleet report, however it ended.
pub async fn run_fleet(
    kube: &ConnectSettings,
    s: &GcSettings,
    fleet: &FleetSettings,
    stop: &Stop,
    observer: Arc<dyn FleetObserver>,
) -> (FleetReport, Exit) {
    let (started_at, started) = (Timestamp::now(), Instant::now());
    let parallel = fleet.parallel.max(1);
    let slots = Arc::new(Semaphore::new(parallel as usize));
    let gate = Arc::new(Gate::new(
        fleet.contexts.len(),
        observer.clone(),
        stop.clone(),
    ));
    // Finished entries go to disk (memory follows --parallel); redacted
    // first, with the document's one key.
    let spool = match Spool::new(fleet.contexts.len()) {
        Ok(s) => Some(Arc::new(s)),
        Err(e) => {
            tracing::warn!("no temporary file for finished clusters ({e}): keeping them in memory");
            None
        }
    };
    let redactor = fleet.redact.then(|| Arc::new(Redactor::new()));
    let diagnose = fleet.diagnose.then(|| DiagnoseSettings {
        cilium_namespace: s.scan.cilium_namespace.clone(),
        page_size: s.scan.page_size,
        redact: fleet.redact,
        operator_metrics_wait: std::time::Duration::ZERO,
        sample: std::time::Duration::ZERO,
        labels: None,
    });
    let job = |c: Cluster| {
        let job = Job {
            index: c.index,
            context: c.context,
            kube: c.kube,
            settings: s.clone(),
            diagnose: diagnose.clone(),
            stop: stop.clone(),
            slots: slots.clone(),
            gate: gate.clone(),
            observer: observer.clone(),
            spool: spool.clone(),
            redactor: redactor.clone(),
        };
        job.run(c.permit)
    };
    let redact_crashed = |entry: &mut ClusterEntry| {
        if let Some(r) = &redactor {
            redact_entry(r, entry);
        }
    };
    let entries = each_cluster(kube, &fleet.contexts, &slots, stop, job, redact_crashed).await;
    let interrupted = interrupted(stop);
    let (mut report, exit) = fleet_report(
        Clusters::new(entries, spool),
        s.mode,
        parallel,
        started_at,
        started,
        interrupted,
    );
    report.redacted = fleet.redact;
    (report, exit)
}

/// One cluster of the fleet, owned by its task.
struct Job {
    index: usize,
    context: String,
    kube: ConnectSettings,
    settings: GcSettings,
    diagnose: Option<DiagnoseSettings>,
    stop: Stop,
    slots: Arc<Semaphore>,
    gate: Arc<Gate>,
    observer: Arc<dyn FleetObserver>,
    spool: Option<Arc<Spool>>,
    redactor: Option<Arc<Redactor>>,
}

impl Job {
    /// With its slot (`None`: the fleet stopped before one was free):
    /// probe, diagnose, run.
    async fn run(mut self, permit: Option<OwnedSemaphorePermit>) -> ClusterEntry {
        let stop = self.stop.clone();
        let Some(permit) = permit.filter(|_| stop.reason().is_none()) else {
            self.gate.done(self.index);
            let entry = ClusterEntry::not_started(self.context.clone(), stop_exit(&stop));
            self.observer.cluster_done(&entry);
            return self.keep(entry);
        };
        let display = self.observer.cluster(&self.context);
        let slot = Arc::new(Mutex::new(Some(permit)));
        let ui = Ui {
            observer: Arc::new(GatedObserver {
                index: self.index,
                inner: display.clone(),
                gate: self.gate.clone(),
                slots: self.slots.clone(),
                slot: slot.clone(),
            }),
        };
        // The diagnosis first: the verdict is about the cluster as the run
        // found it (a delete would hide the backlog it explains).
        let diagnosis = match self.diagnose.take() {
            Some(ds) if answers(&self.kube, &stop).await => {
                display.listing("diagnosing");
                Some(cilium_gc_diagnose::diagnose(&self.kube, &ds, &stop).await)
            }
            _ => None,
        };
        let (report, exit) = cilium_gc::run(&self.kube, &self.settings, &stop, &ui).await;
        self.gate.done(self.index);
        let reached = reached(&report);
        let mut entry = ClusterEntry::from_run(self.context.clone(), report, exit);
        match diagnosis {
            Some(Ok(d)) => entry = entry.with_diagnosis(d),
            // An unreachable cluster's report says why; no need to say it twice.
            Some(Err(e)) if reached => entry.diagnosis_error = Some(e.to_string()),
            _ => {}
        }
        drop(slot);
        self.observer.cluster_done(&entry);
        self.keep(entry)
    }

    /// The finished entry, redacted, written to the spool; what stays in
    /// memory is its slim copy (see `spool`).
    fn keep(&self, mut entry: ClusterEntry) -> ClusterEntry {
        if let Some(r) = &self.redactor {
            redact_entry(r, &mut entry);
        }
        match &self.spool {
            Some(s) => s.keep(self.index, entry).0,
            None => entry,
        }
    }
}

/// Whether the cluster's API server answers at all: one `GET /version`, no
/// retry. A server that does not is left to the run, whose report says so;
/// diagnosing it first would spend every one of diagnose's retries (a
/// blackholed address costs `--request-timeout` each) for nothing.
/// A stop answers "no" at once.
async fn answers(kube: &ConnectSettings, stop: &Stop) -> bool {
    let probe = async {
        let stats = Arc::new(cilium_gc_cluster::stats::Stats::default());
        match cilium_gc_cluster::cluster::ApiClient::connect(kube, stats).await {
            Ok((api, _)) => api.get("/version", 0).await.code != 0,
            // A configuration error: the run reports it.
            Err(_) => false,
        }
    };
    tokio::select! {
        answered = probe => answered && stop.reason().is_none(),
        _ = stop.wait() => false,
    }
}

/// Whether the run talked to the cluster's API server at all.
fn reached(report: &Report) -> bool {
    report
        .errors
        .iter()
        .all(|e| e.kind != ErrorKind::Connection)
}
