//! Reading a live cluster for a diagnosis: the server's version, the
//! endpoint usage synced first, every identity listed raw, the optional
//! sample of creations and deletions, and the workloads. The result is
//! plain data ([`Input`](crate::Input)) for the pure analysis.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;

use crate::decode::{decode_record, decode_writes};
use crate::error::DiagnoseError;
use crate::input::{self, IdentityRecord, Input};
use crate::operator_metrics::read_operator_metrics;
use crate::policies;
use crate::settings::{DiagnoseSettings, MAX_RETRIES};
use crate::workloads::fetch_workloads;
use cilium_gc_cluster::cilium_config::{fetch_cilium_config, settings_from_config};
use cilium_gc_cluster::cluster::ApiClient;
use cilium_gc_cluster::discovery::{fetch_crds, usage_sources};
use cilium_gc_cluster::model::Kind;
use cilium_gc_cluster::scan::ScanError;
use cilium_gc_cluster::stats::Stats;
use cilium_gc_cluster::stop::Stop;
use cilium_gc_cluster::usage::UsageHandle;

/// The server's `gitVersion` from `/version`; `None` when it cannot be read
/// (some servers forbid it): the diagnosis goes on without it.
pub(crate) async fn kubernetes_version(api: &ApiClient) -> Option<String> {
    api.version(1).await.git_version
}

/// Everything the analysis needs, read from the cluster. Usage is synced
/// before the identities are listed, so an identity referenced at sync time
/// and missing from the list really is gone (a dangling reference).
#[tracing::instrument(skip_all)]
pub(crate) async fn collect(
    api: &ApiClient,
    args: &DiagnoseSettings,
    stop: &Stop,
    stats: Arc<Stats>,
) -> Result<Input, DiagnoseError> {
    let crds = fetch_crds(api, MAX_RETRIES)
        .await
        .map_err(DiagnoseError::Discovery)?;
    if !crds.identities {
        return Err(DiagnoseError::CrdMissing);
    }
    let mut warnings = Vec::new();
    let config = fetch_cilium_config(api, &args.cilium_namespace, MAX_RETRIES)
        .await
        .map_err(|problem| warnings.push(problem))
        .ok();
    let settings = settings_from_config(config.as_ref(), None);
    let sources = usage_sources(crds, &settings);
    let mut workloads = fetch_workloads(api, &args.cilium_namespace).await;
    read_operator_metrics(
        api,
        &args.cilium_namespace,
        config.as_ref(),
        args.operator_metrics_wait,
        stop,
        &mut workloads,
    )
    .await;

    // Sampled before the usage watchers start and the identities are
    // listed, so the list that ends the sample is the diagnosis' own.
    let before = match args.sample.is_zero() {
        true => None,
        false => Some(sample_start(api, args, stop).await?),
    };
    let usage = UsageHandle::start(api.client(), api.watch_tap.clone(), sources, stats);
    let _watchers = usage.stop_on_drop();
    if sources.endpoints || sources.slices {
        tokio::select! {
            r = usage.wait_synced() => if let Err(e) = r {
                return Err(DiagnoseError::SyncTimeout(e.0));
            },
            _ = stop.wait() => return Err(ScanError::Interrupted.into()),
        }
    }

    let listed = list_identities(api, args.page_size, stop).await?;
    let (identities, writes, malformed) = (listed.identities, listed.writes, listed.malformed);
    let sample = before.map(|(names, started)| {
        let ended = listed
            .first_page_at
            .unwrap_or_else(tokio::time::Instant::now);
        sample_end(
            &names,
            ended.saturating_duration_since(started),
            &identities,
        )
    });
    let refs = usage
        .referenced_ids()
        .into_iter()
        .map(|id| (id, usage.refs(id)))
        .collect();
    Ok(Input {
        identities,
        malformed,
        refs,
        endpoints: usage.object_count(Kind::Endpoint),
        endpoint_slices: usage.object_count(Kind::EndpointSlice),
        crds,
        config,
        warnings,
        server: None,
        context: None,
        redacted: false,
        workloads: Some(workloads),
        writes,
        proposed_labels: args.labels.clone(),
        policies: match args.labels {
            Some(_) => Some(policies::fetch(api).await),
            None => None,
        },
        // Pod logs are not read live (no test cluster here serves them): a
        // sysdump's agent logs give them to `--from`.
        allocation_refusals: None,
        sample,
    })
}

/// The identity names listed now, and when the list's first page arrived;
/// then a wait of `--sample` from then (a signal ends it: the run stops).
async fn sample_start(
    api: &ApiClient,
    args: &DiagnoseSettings,
    stop: &Stop,
) -> Result<(HashSet<String>, tokio::time::Instant), DiagnoseError> {
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(borrow)]
        metadata: Name<'a>,
    }
    #[derive(Deserialize)]
    struct Name<'a> {
        #[serde(borrow)]
        name: Option<std::borrow::Cow<'a, str>>,
    }
    let mut started = None;
    let mut names = HashSet::new();
    cilium_gc_cluster::scan::list_raw(
        api,
        &Kind::Identity.collection_path(),
        args.page_size,
        MAX_RETRIES,
        stop,
        |raw| {
            started.get_or_insert_with(tokio::time::Instant::now);
            if let Ok(Meta {
                metadata: Name { name: Some(n) },
            }) = serde_json::from_str(raw.get())
            {
                names.insert(n.into_owned());
            }
        },
    )
    .await?;
    // The list is a snapshot of when its first page was read.
    let started = started.unwrap_or_else(tokio::time::Instant::now);
    tokio::select! {
        _ = tokio::time::sleep_until(started + args.sample) => {}
        _ = stop.wait() => return Err(ScanError::Interrupted.into()),
    }
    Ok((names, started))
}

/// The names that appeared and disappeared between the two lists, whose
/// first pages were read `elapsed` apart. A paged list is one snapshot, taken
/// when its first page is read: what is created while the later pages are
/// read is not in it, so the sample's time ends there too (else a long list
/// would read the pace low).
fn sample_end(
    before: &HashSet<String>,
    elapsed: std::time::Duration,
    now: &[IdentityRecord],
) -> cilium_gc_documents::forecast::MeasuredRates {
    let after: HashSet<&str> = now.iter().map(|r| r.identity.name.as_str()).collect();
    let created = after.iter().filter(|n| !before.contains(**n)).count() as u64;
    let deleted = before
        .iter()
        .filter(|n| !after.contains(n.as_str()))
        .count() as u64;
    cilium_gc_cluster::forecast::measured(elapsed, created, deleted)
}

/// Every CiliumIdentity, decoded, each name once; the malformed ones as
/// one line each.
async fn list_identities(
    api: &ApiClient,
    page_size: u32,
    stop: &Stop,
) -> Result<IdentityList, ScanError> {
    let mut l = IdentityList::default();
    let mut seen: HashSet<String> = HashSet::new();
    cilium_gc_cluster::scan::list_raw(
        api,
        &Kind::Identity.collection_path(),
        page_size,
        MAX_RETRIES,
        stop,
        |raw| {
            l.first_page_at
                .get_or_insert_with(tokio::time::Instant::now);
            match decode_record(raw) {
                Ok(r) => {
                    if seen.insert(r.identity.name.clone()) {
                        l.writes.insert(r.identity.name.clone(), decode_writes(raw));
                        l.identities.push(r);
                    }
                }
                Err(bad) => {
                    let name = bad.name.unwrap_or_else(|| "<no name>".into());
                    if seen.insert(name.clone()) {
                        l.malformed
                            .push(format!("ciliumidentity {name}: {}", bad.problem));
                    }
                }
            }
        },
    )
    .await?;
    Ok(l)
}

/// Every listed identity, the writes its `managedFields` record (by name),
/// what could not be decoded (named), and when the first page arrived (the
/// list is a snapshot of that moment).
#[derive(Default)]
struct IdentityList {
    identities: Vec<IdentityRecord>,
    writes: BTreeMap<String, Vec<input::Write>>,
    malformed: Vec<String>,
    first_page_at: Option<tokio::time::Instant>,
}
