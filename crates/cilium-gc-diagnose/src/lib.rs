//! `diagnose`: a ticket-ready report on the health of the identity space.
//! Read-only by construction: this crate stands on the reading layer
//! (`cilium-gc-cluster`) and does not link the writer (`cilium-gc`); a test
//! over `cargo metadata` fails if it ever does. It lists and watches, never
//! writes.
//!
//! This file is the I/O shell: connect, discover the CRDs, read
//! `cilium-config`, sync the endpoint watchers, list every identity raw, and
//! hand plain data ([`Input`]) to the pure [`fn@analyze`]; `redact` and the
//! text view (`text`) are pure too.
//!
//! *Exit codes:* 0 when a diagnosis was written, whatever it found —
//! findings never change the exit code, so a CronJob can archive the
//! output without treating a full identity space as its own failure; 2 for
//! flag, kubeconfig, connection and permission problems; 3 when the
//! CiliumIdentity CRD is not installed; 130/143 on SIGINT/SIGTERM.

#![deny(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod agent_logs;
mod analyze;
mod collect;
mod decode;
mod error;
mod gc_health;
mod input;
mod operator_metrics;
mod policies;
pub mod redact;
mod saved;
mod settings;
mod sysdump_ts;
mod workloads;

pub use analyze::{analyze, FilterDefaults, LabelFilter, ParsedFilter};
pub use cilium_gc_cluster::discovery::Crds;
pub use cilium_gc_cluster::model::Change;
pub use cilium_gc_documents::diagnosis::Diagnosis;
pub use error::DiagnoseError;
pub use input::{IdentityRecord, Input, Policies, PolicySelectors, Workloads, Write};
pub use settings::DiagnoseSettings;

use std::sync::Arc;

use crate::collect::{collect, kubernetes_version};
use cilium_gc_cluster::cluster::ApiClient;
use cilium_gc_cluster::connect::ConnectSettings;
use cilium_gc_cluster::stats::Stats;
use cilium_gc_cluster::stop::Stop;
use cilium_gc_documents::diagnosis as types;

/// Connect, collect, redact when asked, analyse.
#[tracing::instrument(skip_all)]
pub async fn diagnose(
    kube: &ConnectSettings,
    args: &DiagnoseSettings,
    stop: &Stop,
) -> Result<Diagnosis, DiagnoseError> {
    if args.page_size == 0 || args.page_size > 10_000 {
        return Err(DiagnoseError::Settings(format!(
            "the page size must be between 1 and 10000, not {}",
            args.page_size
        )));
    }
    check_labels(args)?;
    let stats = Arc::new(Stats::default());
    let (mut api, endpoint) = ApiClient::connect(kube, stats.clone()).await?;
    api.stop = stop.clone();
    for w in &endpoint.warnings {
        tracing::warn!("{w}");
    }
    let mut input = collect(&api, args, stop, stats).await?;
    input.server = Some(endpoint.server);
    input.context = endpoint.context;
    if args.redact {
        redact::redact(&mut input, &[&args.cilium_namespace]);
    }
    let mut d = analyze(&input, api.clock.now());
    d.cluster.kubernetes_version = kubernetes_version(&api).await;
    Ok(d)
}

/// A `--labels` what-if whose patterns do not compile is refused before
/// anything is read: cilium-agent would refuse to start on it.
fn check_labels(args: &DiagnoseSettings) -> Result<(), DiagnoseError> {
    let problems = args
        .labels
        .as_deref()
        .map(|l| LabelFilter::parse(l).problems);
    match problems.as_deref().and_then(<[String]>::first) {
        Some(problem) => Err(DiagnoseError::Settings(format!(
            "the labels filter: {problem} (cilium-agent would refuse to start on it)"
        ))),
        None => Ok(()),
    }
}

/// `--from PATH`: the diagnosis of saved objects. No client
/// exists on this path, so nothing can be written; "now" is the capture
/// time the files carry, and the diagnosis says what it rests on.
pub fn diagnose_saved(
    path: &std::path::Path,
    args: &DiagnoseSettings,
) -> Result<Diagnosis, DiagnoseError> {
    check_labels(args)?;
    let (mut input, now, mut source) = saved::collect(path, args.labels.as_deref())?;
    if args.redact {
        let r = redact::redact(&mut input, &[&args.cilium_namespace]);
        source.path = r.token("path", &source.path);
    }
    let mut d = analyze(&input, now);
    d.warnings.insert(
        0,
        format!(
            "source: saved objects, captured at {now} ({}): every finding rests on them, not on a live cluster",
            match source.captured_at_from {
                types::CaptureTimeFrom::SysdumpFileName => "from the sysdump's file names, read as UTC",
                types::CaptureTimeFrom::NewestObject => "the newest time the objects carry: a lower bound",
            }
        ),
    );
    if !source.missing.is_empty() {
        d.warnings.push(format!(
            "not among the saved objects: {}",
            source.missing.join(", ")
        ));
    }
    d.source = Some(source);
    Ok(d)
}
