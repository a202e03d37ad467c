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
mod gc_health;
mod input;
mod operator_metrics;
mod policies;
pub mod redact;
mod saved;
mod sysdump_ts;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

pub use analyze::{analyze, FilterDefaults, LabelFilter, ParsedFilter};
pub use cilium_gc_cluster::discovery::Crds;
pub use cilium_gc_cluster::model::Change;
pub use cilium_gc_documents::diagnosis::Diagnosis;
pub use input::{IdentityRecord, Input, Policies, PolicySelectors, Workloads, Write};
// The documents crate's module, by the name this module's parts use.
use cilium_gc_documents::diagnosis as types;

use cilium_gc_cluster::cluster::{ApiClient, ConnectError};
use cilium_gc_cluster::connect::ConnectSettings;
use cilium_gc_cluster::exit::Exit;
use cilium_gc_cluster::model::{decode_identity, Kind, Malformed};
use cilium_gc_cluster::scan::ScanError;
use cilium_gc_cluster::stats::Stats;
use cilium_gc_cluster::stop::Stop;
use cilium_gc_cluster::usage::UsageHandle;

/// What `diagnose` was asked for.
#[derive(Debug, Clone)]
pub struct DiagnoseSettings {
    /// Namespace of the cilium-config ConfigMap.
    pub cilium_namespace: String,
    /// Identities per list request.
    pub page_size: u32,
    /// Replace namespaces, label values and the server URL with hashes.
    pub redact: bool,
    /// Read cilium-operator's metrics a second time this long after the
    /// first (zero: read once, judge against its uptime).
    pub operator_metrics_wait: std::time::Duration,
    /// Watch the identities this long first and count the names that
    /// appear and disappear (zero: no sample).
    pub sample: std::time::Duration,
    /// `--labels`: a proposed Cilium `labels` filter to judge (reads the
    /// network policies, an optional permission).
    pub labels: Option<String>,
}

/// Retries per request for the few reads a diagnosis makes.
pub(crate) const MAX_RETRIES: u32 = 5;

/// Why no diagnosis could be made. Each variant maps to one exit code
/// ([`DiagnoseError::exit`]); none is worth retrying at once.
#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    /// A setting is unusable: a page size out of range, a labels filter
    /// that does not compile (exit 2). The plugin refuses such flags before
    /// the engine sees them; this is the engine's own check.
    #[error("{0}")]
    Settings(String),
    /// The saved objects cannot be read or hold nothing to judge (exit 2).
    #[error("{0}")]
    Saved(String),
    /// The kubeconfig or connection flags are unusable (exit 2).
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Discovery of the cilium.io API failed: server unreachable, or
    /// credentials rejected (exit 2).
    #[error("cannot read the cilium.io API: {0}")]
    Discovery(cilium_gc_cluster::discovery::DiscoveryError),
    /// The CiliumIdentity CRD is not served (exit 3).
    #[error("the CiliumIdentity CRD (ciliumidentities.cilium.io/v2) is not installed: is Cilium running in CRD identity mode?")]
    CrdMissing,
    /// The endpoint watchers did not finish their first list in time (exit 2).
    #[error("{}", cilium_gc_cluster::usage::SyncTimedOut(*.0))]
    SyncTimeout(u64),
    /// The identity list failed (exit 3 when the CRD vanished, else 2).
    #[error(transparent)]
    List(#[from] ScanError),
}

impl DiagnoseError {
    /// This error on one line, safe to print (`cilium_gc_cluster::secrets::describe`):
    /// a connection error from the connection error down, since the
    /// variant is transparent and its chain would start below the part
    /// that names this client's exec plugin.
    pub fn message(&self) -> String {
        match self {
            DiagnoseError::Connect(c) => cilium_gc_cluster::cluster::error_chain(c),
            e => cilium_gc_cluster::cluster::error_chain(e),
        }
    }

    /// The exit code this error ends the process with.
    pub fn exit(&self) -> Exit {
        match self {
            DiagnoseError::CrdMissing | DiagnoseError::List(ScanError::NotInstalled(_)) => {
                Exit::Refused
            }
            DiagnoseError::List(ScanError::Interrupted) => Exit::Interrupted,
            _ => Exit::Usage,
        }
    }
}

#[derive(Deserialize)]
struct SecurityLabels {
    #[serde(rename = "security-labels", default)]
    security_labels: Option<BTreeMap<String, String>>,
}

/// Decode one CiliumIdentity with its full `security-labels` map: what
/// [`decode_identity`] keeps, plus the labels (which `scan` drops).
pub(crate) fn decode_record(raw: &RawValue) -> Result<IdentityRecord, Malformed> {
    let identity = decode_identity(raw)?;
    // decode_identity already read security-labels as a string map, so this
    // cannot fail where it succeeded; be lenient anyway.
    let security_labels = serde_json::from_str::<SecurityLabels>(raw.get())
        .ok()
        .and_then(|s| s.security_labels)
        .unwrap_or_default();
    Ok(IdentityRecord {
        identity,
        security_labels,
    })
}

#[derive(Deserialize)]
struct ManagedOnly<'a> {
    #[serde(default, borrow)]
    metadata: Option<ManagedMeta<'a>>,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedMeta<'a> {
    #[serde(default, borrow)]
    managed_fields: Vec<ManagedEntry<'a>>,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedEntry<'a> {
    #[serde(default)]
    manager: Option<String>,
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    time: Option<String>,
    #[serde(default, borrow, rename = "fieldsV1")]
    fields: Option<&'a RawValue>,
}

/// Every `managedFields` entry of one identity: who wrote it and when, and
/// which entry set the heartbeat mark (its field set names the annotation).
/// Lenient: an unreadable list is no writes, never a malformed identity.
pub(crate) fn decode_writes(raw: &RawValue) -> Vec<input::Write> {
    let owns = format!("\"f:{}\"", cilium_gc_cluster::model::HEARTBEAT_ANNOTATION);
    serde_json::from_str::<ManagedOnly>(raw.get())
        .ok()
        .and_then(|m| m.metadata)
        .map(|m| m.managed_fields)
        .unwrap_or_default()
        .into_iter()
        .map(|e| input::Write {
            manager: e.manager.unwrap_or_default(),
            operation: e.operation.unwrap_or_default(),
            time: e.time.and_then(|t| t.parse().ok()),
            owns_mark: e.fields.is_some_and(|f| f.get().contains(&owns)),
        })
        .collect()
}

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

/// The server's `gitVersion` from `/version`; `None` when it cannot be read
/// (some servers forbid it): the diagnosis goes on without it.
async fn kubernetes_version(api: &ApiClient) -> Option<String> {
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
    let crds = cilium_gc_cluster::discovery::fetch_crds(api, MAX_RETRIES)
        .await
        .map_err(DiagnoseError::Discovery)?;
    if !crds.identities {
        return Err(DiagnoseError::CrdMissing);
    }
    let mut warnings = Vec::new();
    let config = cilium_gc_cluster::cilium_config::fetch_cilium_config(
        api,
        &args.cilium_namespace,
        MAX_RETRIES,
    )
    .await
    .map_err(|problem| warnings.push(problem))
    .ok();
    let settings = cilium_gc_cluster::cilium_config::settings_from_config(config.as_ref(), None);
    let sources = cilium_gc_cluster::discovery::usage_sources(crds, &settings);
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

/// The images of the cilium-operator Deployment and the cilium DaemonSet,
/// and the operator's pods, from the Cilium namespace. Reading them is an
/// optional permission, like `cilium-config`: what cannot be read is said
/// in `problem` and the diagnosis goes on without it.
#[tracing::instrument(skip(api))]
pub(crate) async fn fetch_workloads(api: &ApiClient, namespace: &str) -> input::Workloads {
    use cilium_gc_cluster::retry::Class;
    let mut w = input::Workloads::default();
    let mut problems = Vec::new();
    let mut read = |what: &str, a: &cilium_gc_cluster::cluster::Answer| -> bool {
        match a.class {
            Class::Success => true,
            Class::Forbidden => {
                problems.push(format!("no permission to read {what} (optional)"));
                false
            }
            Class::NotFound => {
                problems.push(format!("{what} not found"));
                false
            }
            _ => {
                problems.push(format!("cannot read {what}: {}", a.message));
                false
            }
        }
    };
    let images = |v: &serde_json::Value| -> Vec<String> {
        let spec = &v["spec"]["template"]["spec"];
        spec["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["image"].as_str().map(str::to_string))
            .collect()
    };
    let deploy = format!("/apis/apps/v1/namespaces/{namespace}/deployments/cilium-operator");
    let a = api.get(&deploy, 1).await;
    if read(&format!("deployment {namespace}/cilium-operator"), &a) {
        w.operator_images = a
            .json::<serde_json::Value>()
            .map(|v| images(&v))
            .unwrap_or_default();
    }
    let ds = format!("/apis/apps/v1/namespaces/{namespace}/daemonsets/cilium");
    let a = api.get(&ds, 1).await;
    if read(&format!("daemonset {namespace}/cilium"), &a) {
        w.agent_images = a
            .json::<serde_json::Value>()
            .map(|v| images(&v))
            .unwrap_or_default();
    }
    let pods =
        format!("/api/v1/namespaces/{namespace}/pods?labelSelector=io.cilium%2Fapp%3Doperator");
    let a = api.get(&pods, 1).await;
    if read(&format!("cilium-operator pods in {namespace}"), &a) {
        let list = a.json::<serde_json::Value>().unwrap_or_default();
        w.operator_pods = operator_pods(&list);
        w.metrics = metrics_targets(&list)
            .into_iter()
            .map(|(pod, port)| types::OperatorMetricsRead {
                pod,
                port: port.unwrap_or(0),
                ..Default::default()
            })
            .collect();
        w.gc_interval_arg = operator_arg(&list, "--identity-gc-interval")
            .and_then(|v| cilium_gc_cluster::connect::parse_duration(&v).ok());
    }
    if !problems.is_empty() {
        w.problem = Some(format!(
            "{}: the operator version, known-defect and restart findings are skipped",
            problems.join("; ")
        ));
    }
    w
}

/// The port of an address like `:9963`, `0.0.0.0:9963` or `[::]:9963`.
fn addr_port(addr: &str) -> Option<u16> {
    addr.trim()
        .trim_matches('"')
        .rsplit_once(':')?
        .1
        .parse()
        .ok()
}

/// The value of `--flag=value` or `--flag value` in any container's
/// command or args of the first pod that has it.
fn operator_arg(list: &serde_json::Value, flag: &str) -> Option<String> {
    let pods = list["items"].as_array()?;
    pods.iter().find_map(|p| {
        let containers = p["spec"]["containers"].as_array()?;
        containers.iter().find_map(|c| {
            let words: Vec<&str> = ["command", "args"]
                .iter()
                .flat_map(|k| c[*k].as_array().into_iter().flatten())
                .filter_map(|w| w.as_str())
                .collect();
            words.iter().enumerate().find_map(|(i, w)| {
                w.strip_prefix(flag)
                    .and_then(|rest| match rest.strip_prefix('=') {
                        Some(v) => Some(v.to_string()),
                        None if rest.is_empty() => words.get(i + 1).map(|v| v.to_string()),
                        None => None,
                    })
            })
        })
    })
}

/// Running operator pods and their metrics port, when the pod says it: a
/// container port named `prometheus` (Cilium's chart), else
/// `--operator-prometheus-serve-addr` in its arguments.
fn metrics_targets(list: &serde_json::Value) -> Vec<(String, Option<u16>)> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["status"]["phase"].as_str() == Some("Running"))
        .filter_map(|p| {
            let name = p["metadata"]["name"].as_str()?.to_string();
            let containers = p["spec"]["containers"].as_array();
            let named = containers
                .into_iter()
                .flatten()
                .flat_map(|c| c["ports"].as_array().into_iter().flatten())
                .find(|port| port["name"].as_str() == Some("prometheus"))
                .and_then(|port| port["containerPort"].as_u64())
                .and_then(|n| u16::try_from(n).ok());
            let single = serde_json::json!({"items": [p]});
            let arg = operator_arg(&single, "--operator-prometheus-serve-addr")
                .and_then(|a| addr_port(&a));
            Some((name, named.or(arg)))
        })
        .collect()
}

/// Read each running operator pod's metrics through the API server's pod
/// proxy, once, or twice `wait` apart. Optional like the other workload
/// reads: a refusal is recorded per pod and the diagnosis falls back on
/// the marks and the version.
#[tracing::instrument(skip_all)]
async fn read_operator_metrics(
    api: &ApiClient,
    namespace: &str,
    config: Option<&BTreeMap<String, String>>,
    wait: std::time::Duration,
    stop: &Stop,
    w: &mut input::Workloads,
) {
    let default_port = config
        .and_then(|c| c.get("operator-prometheus-serve-addr"))
        .and_then(|a| addr_port(a))
        .unwrap_or(cilium_gc_kinds::OPERATOR_METRICS_PORT);
    for r in &mut w.metrics {
        if r.port == 0 {
            r.port = default_port;
        }
    }
    // Only the first few pods: an operator runs one or two replicas.
    w.metrics.truncate(4);
    for r in &mut w.metrics {
        r.first = scrape(api, namespace, r).await;
    }
    if wait.is_zero() || w.metrics.iter().all(|r| r.first.is_none()) {
        return;
    }
    tokio::select! {
        _ = tokio::time::sleep(wait) => {}
        _ = stop.wait() => return,
    }
    for r in &mut w.metrics {
        if r.first.is_some() {
            r.second = scrape(api, namespace, r).await;
        }
    }
}

/// One scrape of `r`'s pod through the pod proxy; a failure goes in
/// `r.problem`.
async fn scrape(
    api: &ApiClient,
    namespace: &str,
    r: &mut types::OperatorMetricsRead,
) -> Option<types::GcCounters> {
    use cilium_gc_cluster::retry::Class;
    let path = format!(
        "/api/v1/namespaces/{namespace}/pods/{}:{}/proxy/metrics",
        r.pod, r.port
    );
    let a = api.get(&path, 1).await;
    match a.class {
        Class::Success => {
            let text = String::from_utf8_lossy(&a.body);
            let samples = operator_metrics::parse_exposition(&text);
            Some(operator_metrics::counters(&samples, api.clock.now()))
        }
        Class::Forbidden => {
            r.problem = Some(format!(
                "no permission to get pods/proxy in {namespace} (optional): the operator's GC metrics were not read"
            ));
            None
        }
        _ => {
            r.problem = Some(format!(
                "cannot read the operator's metrics through the pod proxy (pod {}, port {}): {}",
                r.pod, r.port, a.message
            ));
            None
        }
    }
}

/// Name, restarts and start times of each pod in a PodList.
fn operator_pods(list: &serde_json::Value) -> Vec<types::OperatorPodStatus> {
    let time = |v: &serde_json::Value| v.as_str().and_then(|s| s.parse().ok());
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let statuses = p["status"]["containerStatuses"].as_array();
            let restarts = statuses
                .into_iter()
                .flatten()
                .filter_map(|c| c["restartCount"].as_u64())
                .sum();
            let running_since = statuses
                .into_iter()
                .flatten()
                .filter_map(|c| time(&c["state"]["running"]["startedAt"]))
                .max();
            types::OperatorPodStatus {
                name: p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                restarts,
                started_at: time(&p["status"]["startTime"]),
                running_since,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: u16) -> cilium_gc_cluster::cluster::ServerError {
        cilium_gc_cluster::cluster::ServerError {
            code,
            message: code.to_string(),
        }
    }

    #[test]
    fn errors_map_to_documented_exit_codes() {
        let cases = [
            (DiagnoseError::CrdMissing, 3),
            (DiagnoseError::List(ScanError::NotInstalled(server(404))), 3),
            (DiagnoseError::List(ScanError::Denied(server(403))), 2),
            (DiagnoseError::List(ScanError::Failed(server(503))), 2),
            (
                DiagnoseError::Discovery(cilium_gc_cluster::discovery::DiscoveryError::Request {
                    version: "v2",
                    message: "refused".into(),
                }),
                2,
            ),
            (DiagnoseError::Connect(ConnectError::NoConfig), 2),
            (DiagnoseError::SyncTimeout(120), 2),
            (DiagnoseError::Settings("x".into()), 2),
            (DiagnoseError::Saved("x".into()), 2),
            (DiagnoseError::List(ScanError::Interrupted), 130),
        ];
        for (e, code) in cases {
            assert_eq!(e.exit().code(), code, "{e}");
        }
    }

    #[test]
    fn records_keep_the_whole_security_label_map() {
        let raw = RawValue::from_string(
            r#"{"metadata":{"name":"1000","uid":"u","resourceVersion":"1"},
                "security-labels":{"k8s:job-name":"j1","k8s:app":"a","k8s:io.kubernetes.pod.namespace":"n"}}"#
                .into(),
        )
        .unwrap();
        let r = decode_record(&raw).unwrap();
        assert_eq!(r.security_labels.len(), 3);
        assert_eq!(r.security_labels["k8s:job-name"], "j1");
        assert_eq!(r.identity.namespace.as_deref(), Some("n"));
        let bad = RawValue::from_string(r#"{"metadata":{"name":"7"}}"#.into()).unwrap();
        assert_eq!(decode_record(&bad).unwrap_err().name.as_deref(), Some("7"));
    }
}
