//! One scan or delete run, end to end, always ending in a [`Report`].
//!
//! Order matters for safety: connect; preflight (CRDs, cilium-config,
//! permissions) before anything else; usage watchers synced before the first
//! decision; the list scanned and decided; the zero-endpoints and
//! blast-radius checks and the confirmation before the first write; then the
//! marks and deletes. Any stop (signal, lost permission, refusal) still
//! produces a complete report with the exit code it explains.

use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use jiff::Timestamp;

use crate::cluster::{Api, Endpoint};
use crate::exit::Exit;
use crate::model::{Identity, Kind, Malformed};
use crate::policy::{self, Narrowing, Policy, Reason, Rules};
use crate::preflight::{self, CiliumSettings};
use crate::report::{
    self, Abort, AbortReason, CheckName, ClusterInfo, ErrorKind, IdRange, Item, ItemsMode, Mode,
    Options, Outcome, Preflight, Report, RunError, Summary, Tool,
};
use crate::retry::Class;
use crate::scan::{self, ScanError};
use crate::settings::{ConnectOptions, GcSettings};
use crate::stats::Stats;
use crate::stop::{Stop, StopReason};
use crate::sweep::{self, Action, ItemResult, SweepConfig};
use crate::usage::UsageHandle;

/// How long to wait for the endpoint watchers' first full list.
pub(crate) const SYNC_TIMEOUT: Duration = Duration::from_secs(120);
/// Run-level errors kept in the report; the rest are counted.
pub(crate) const MAX_REPORTED_ERRORS: usize = 1000;

/// What a run reports to the person watching, and asks them: progress and
/// the confirmation before the first write. The engine has no terminal;
/// the plugin implements this on stderr and stdin.
pub trait Observer: Send + Sync {
    /// A list starts (`what`: "listing identities", ...).
    fn listing(&self, _what: &str) {}
    /// One more object listed.
    fn listed(&self) {}
    /// A write phase starts with `total` items.
    fn start_phase(&self, _label: &str, _total: u64) {}
    /// One more item of the phase done.
    fn inc(&self) {}
    /// The run is over: clear any display.
    fn finish(&self) {}
    /// Ask to go ahead with `question`; `None` when nobody can be asked.
    fn confirm(&self, _question: &str) -> Option<bool> {
        None
    }
}

/// Nobody watching: no progress, no one to ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct Headless;

impl Observer for Headless {}

/// How the run talks to the person at the terminal, if any.
#[derive(Clone)]
pub struct Ui {
    /// Progress display and the confirmation prompt.
    pub progress: std::sync::Arc<dyn Observer>,
}

impl std::fmt::Debug for Ui {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ui").finish_non_exhaustive()
    }
}

impl Ui {
    /// Report to and ask `observer`.
    pub fn new(observer: impl Observer + 'static) -> Self {
        Ui {
            progress: std::sync::Arc::new(observer),
        }
    }
    /// No terminal at all (tests, demo in CI).
    pub fn headless() -> Self {
        Ui::new(Headless)
    }
}

/// The tool's version and commit.
pub fn tool() -> Tool {
    Tool {
        name: "kubectl-cilium-gc".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        commit: option_env!("KUBECTL_CILIUM_GC_COMMIT")
            .map(str::to_owned)
            .filter(|c| !c.is_empty()),
    }
}

/// What the run accumulated; becomes the report.
struct Run {
    started: Timestamp,
    clock: Instant,
    mode: Mode,
    options: Options,
    cluster: ClusterInfo,
    preflight: Preflight,
    summary: Summary,
    items: Vec<Item>,
    errors: Vec<RunError>,
    dropped_errors: u64,
    aborted: Option<Abort>,
    interrupted: bool,
    /// The live usage view, once started: its malformed endpoints are
    /// reported when the run ends, however it ends.
    usage: Option<UsageHandle>,
    /// The server's clock, once connected: whether mark ages were judged
    /// by the local clock instead is said when the run ends.
    server_clock: Option<Arc<crate::cluster::ServerClock>>,
}

impl Run {
    fn new(s: &GcSettings, kube: &ConnectOptions) -> Self {
        Run {
            started: Timestamp::now(),
            clock: Instant::now(),
            server_clock: None,
            mode: s.mode,
            options: options(s, kube, None),
            cluster: ClusterInfo::default(),
            preflight: Preflight::default(),
            summary: Summary::default(),
            items: Vec::new(),
            errors: Vec::new(),
            dropped_errors: 0,
            aborted: None,
            interrupted: false,
            usage: None,
        }
    }

    fn error(&mut self, kind: ErrorKind, message: impl Into<String>) {
        if self.errors.len() < MAX_REPORTED_ERRORS {
            let message = one_line(&message.into());
            self.errors.push(RunError { kind, message });
        } else {
            self.dropped_errors += 1;
        }
    }

    fn abort(&mut self, reason: AbortReason, message: impl Into<String>, exit: Exit) -> Exit {
        let message = one_line(&message.into());
        self.aborted = Some(Abort { reason, message });
        exit
    }

    fn finish(mut self, exit: Exit, stats: &Stats) -> Report {
        let s = &mut self.summary;
        s.conflicts = Stats::get(&stats.conflicts);
        s.retries = Stats::get(&stats.retries);
        s.throttled = Stats::get(&stats.throttled);
        s.server_errors = Stats::get(&stats.server_errors);
        s.list_pages = Stats::get(&stats.list_pages);
        s.list_restarts = Stats::get(&stats.list_restarts);
        s.watcher_restarts = Stats::get(&stats.watcher_restarts);
        if let Some(p) = stats.pace() {
            s.throttled_seconds = Some(round3(p.throttled.as_secs_f64()));
            s.lowest_rate_per_second = Some(round3(p.lowest_rate));
        }
        let waited = Stats::get(&stats.retry_after_wait_ms);
        if waited > 0 {
            s.retry_after_wait_seconds = Some(round3(waited as f64 / 1000.0));
        }
        if self.dropped_errors > 0 {
            self.errors.push(RunError {
                kind: ErrorKind::Other,
                message: format!("{} more errors not listed", self.dropped_errors),
            });
        }
        let finished = Timestamp::now();
        Report {
            schema: report::SCHEMA_ID.into(),
            api_version: report::API_VERSION.into(),
            kind: report::KIND.into(),
            tool: tool(),
            cluster: self.cluster,
            started_at: self.started,
            finished_at: finished,
            duration_seconds: round3(self.clock.elapsed().as_secs_f64()),
            mode: self.mode,
            options: self.options,
            exit_code: exit.code(),
            interrupted: self.interrupted,
            aborted: self.aborted,
            preflight: self.preflight,
            summary: self.summary,
            items: self.items,
            errors: self.errors,
        }
    }
}

/// Messages in the report and on stderr are one line: multi-line library
/// errors (YAML parsers draw pictures) keep their first line.
/// Registered credentials are scrubbed here too: every report and stderr
/// message passes through.
fn one_line(s: &str) -> String {
    crate::secrets::scrub(s.lines().next().unwrap_or_default().trim_end())
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn options(s: &GcSettings, kube: &ConnectOptions, cilium: Option<&CiliumSettings>) -> Options {
    let range = cilium.map_or(policy::local_range(0, 255), |c| {
        policy::local_range(c.cluster_id, c.max_connected_clusters)
    });
    Options {
        cilium_namespace: s.scan.cilium_namespace.clone(),
        selector: s.scan.selector.clone(),
        namespaces: s.scan.namespaces.clone(),
        min_age_seconds: s.scan.min_age.map(|d| d.as_secs_f64()),
        heartbeat_timeout_seconds: cilium
            .map(|c| c.heartbeat_timeout)
            .or(s.scan.heartbeat_timeout)
            .unwrap_or(preflight::DEFAULT_HEARTBEAT_TIMEOUT)
            .as_secs_f64(),
        local_range: IdRange {
            min: *range.start(),
            max: *range.end(),
        },
        page_size: s.scan.page_size,
        concurrency: s.concurrency,
        qps: s.qps,
        burst: s.burst,
        max_conflict_retries: s.max_conflict_retries,
        max_retries: s.max_retries,
        max_deletions: s.max_deletions,
        max_percent: s.max_percent,
        mark: s.mark,
        force: s.force,
        items: s.scan.items,
        request_timeout_seconds: kube.request_timeout.map(|d| d.as_secs_f64()),
        identity_allocation_mode: s.scan.identity_allocation_mode.clone(),
        allow_short_heartbeat_timeout: s.scan.allow_short_heartbeat_timeout,
        allow_unreadable_endpoints: s.allow_unreadable_endpoints,
    }
}

/// Run scan or delete against the cluster the flags name.
///
/// Always returns a report, however the run ends: a signal stops it within
/// a second or two at any phase, and a panic anywhere (caught here for this
/// task, reported through [`Stop::fail`] by the panic hook for others) ends
/// it with `aborted: internal-error` and what was known so far.
pub async fn run(kube: &ConnectOptions, s: &GcSettings, stop: &Stop, ui: &Ui) -> (Report, Exit) {
    let stats = Arc::new(Stats::default());
    let mut run = Run::new(s, kube);
    let executed = AssertUnwindSafe(execute(kube, s, stop, ui, &mut run, &stats))
        .catch_unwind()
        .await;
    let exit = executed.unwrap_or_else(|payload| {
        stop.fail(panic_text(payload.as_ref()));
        Exit::Unexpected
    });
    ui.progress.finish();
    if let Some(usage) = run.usage.take() {
        usage.stop();
        for (what, problem) in usage.malformed() {
            run.summary.malformed += 1;
            let effect = if problem == crate::usage::NO_NAME {
                "its identity reference was read"
            } else if s.allow_unreadable_endpoints {
                "which identity it uses is unknown; deletes went on because of --allow-unreadable-endpoints"
            } else {
                "which identity it uses is unknown, so it blocks deletes"
            };
            run.error(
                ErrorKind::MalformedObject,
                format!("{what}: {problem} ({effect})"),
            );
        }
    }
    if let Some(clock) = run.server_clock.take() {
        if clock.local_clock_used() && run.summary.scanned > 0 {
            let m = "the API server sent no usable Date header: heartbeat mark ages were judged by this machine's clock, which may be skewed from the cluster's";
            tracing::warn!("{m}");
            run.error(ErrorKind::Warning, m);
        }
    }
    let exit = match stop.reason() {
        Some(StopReason::Interrupt) => Exit::Interrupted,
        Some(StopReason::Terminate) => Exit::Terminated,
        Some(StopReason::InternalError) => Exit::Unexpected,
        _ => exit,
    };
    if matches!(exit, Exit::Interrupted | Exit::Terminated) {
        run.interrupted = true;
        if run.aborted.is_none() {
            run.aborted = Some(Abort {
                reason: AbortReason::Interrupted,
                message: "stopped by signal: no delete was started after it".into(),
            });
        }
    }
    if stop.reason() == Some(StopReason::InternalError) {
        let what = stop.panic_message().unwrap_or_default();
        let m = format!(
            "internal error: {what} (a bug: please report it; run with RUST_BACKTRACE=1 for a backtrace)"
        );
        run.error(ErrorKind::Other, m.clone());
        run.abort(AbortReason::InternalError, m, exit);
    }
    (run.finish(exit, &stats), exit)
}

/// The text of a panic payload (`panic!` with a literal or a format).
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Test-only: `KUBECTL_CILIUM_GC_TEST_PANIC=<place>` makes the run panic at
/// `place` (`plan`: in the run's own task, after the scan; `background`: in
/// another task, as a watcher bug would), so tests can prove that a bug
/// still ends in a report. Honoured here and nowhere else.
pub const TEST_PANIC_ENV: &str = "KUBECTL_CILIUM_GC_TEST_PANIC";

fn test_panic_at(place: &str) -> bool {
    std::env::var(TEST_PANIC_ENV).is_ok_and(|p| p == place)
}

/// What the read-only phases hand to the write phase.
struct Prepared {
    api: Api,
    usage: UsageHandle,
    plan: Plan,
    rules: Rules,
}

async fn execute(
    kube: &ConnectOptions,
    s: &GcSettings,
    stop: &Stop,
    ui: &Ui,
    run: &mut Run,
    stats: &Arc<Stats>,
) -> Exit {
    // Everything before the first write only reads (and asks): a stop
    // cancels it where it is, a hung request included.
    let prepared = tokio::select! {
        p = prepare(kube, s, ui, run, stats, stop) => p,
        _ = stop.wait() => return Exit::Interrupted,
    };
    match prepared {
        ControlFlow::Continue(p) => write_phase(s, stop, ui, run, p).await,
        ControlFlow::Break(exit) => exit,
    }
}

/// Connect, preflight, sync usage, scan and decide, the checks on the plan
/// and the confirmation: reads only. Breaks with the exit code when the run
/// ends here (a scan, a refusal, an error).
async fn prepare(
    kube: &ConnectOptions,
    s: &GcSettings,
    ui: &Ui,
    run: &mut Run,
    stats: &Arc<Stats>,
    stop: &Stop,
) -> ControlFlow<Exit, Box<Prepared>> {
    let (api, endpoint) = connect(kube, s, run, stats, stop).await?;
    let (crds, cilium) = check_cluster(&api, kube, s, run).await?;
    let usage = sync_usage(&api, crds, &cilium, ui, run, stats).await?;
    let (plan, policy) = scan_and_plan(&api, &cilium, &usage, s, ui, run, stop).await?;
    gate_writes(s, &plan, &usage, &endpoint, ui, run).await?;
    ControlFlow::Continue(Box::new(Prepared {
        api,
        usage,
        plan,
        rules: policy.rules,
    }))
}

/// Connect and check the server answers, recording where we are (never a
/// credential) and any insecure-connection warning.
async fn connect(
    kube: &ConnectOptions,
    s: &GcSettings,
    run: &mut Run,
    stats: &Arc<Stats>,
    stop: &Stop,
) -> ControlFlow<Exit, (Api, Endpoint)> {
    let (mut api, endpoint) = match Api::connect(kube, stats.clone()).await {
        Ok(x) => x,
        Err(e) => {
            run.error(ErrorKind::Connection, e.to_string());
            return ControlFlow::Break(run.abort(
                AbortReason::ReadFailed,
                e.to_string(),
                Exit::Usage,
            ));
        }
    };
    api.stop = stop.clone();
    run.server_clock = Some(api.clock.clone());
    for w in &endpoint.warnings {
        tracing::warn!("{w}");
        run.error(ErrorKind::Insecure, w.clone());
    }
    run.cluster.server = Some(endpoint.server.clone());
    run.cluster.context = endpoint.context.clone();
    match reach(&api, &endpoint, s, run).await {
        Ok(()) => ControlFlow::Continue((api, endpoint)),
        Err(exit) => ControlFlow::Break(exit),
    }
}

/// Preflight, before anything is written: the CRDs, cilium-config, our
/// permissions, cluster id and heartbeat timeout. A failed check refuses
/// the run.
async fn check_cluster(
    api: &Api,
    kube: &ConnectOptions,
    s: &GcSettings,
    run: &mut Run,
) -> ControlFlow<Exit, (preflight::Crds, CiliumSettings)> {
    let crds = match preflight::fetch_crds(api, s.max_retries).await {
        Ok(c) => c,
        Err(e) => {
            return ControlFlow::Break(run.abort(
                AbortReason::ReadFailed,
                e.to_string(),
                Exit::Unexpected,
            ))
        }
    };
    let cilium = read_cilium_config(api, s, run).await;
    run.options = options(s, kube, Some(&cilium));
    let wanted = crate::rbac::required(s.writes(), s.mark, crds.slices);
    let (missing, perm_warnings) = preflight::fetch_missing_permissions(
        api,
        crds,
        &wanted,
        &s.scan.cilium_namespace,
        s.max_retries,
    )
    .await;
    for w in perm_warnings {
        run.error(ErrorKind::Preflight, w);
    }
    run.preflight.checks = preflight::evaluate(crds, &cilium, &missing);
    if !s.writes() && !cilium.allocation_mode_known {
        scan_assumes_crd_mode(run);
    }
    run.preflight
        .checks
        .push(preflight::cluster_id_check(&cilium));
    let hb = preflight::heartbeat_check(
        &cilium,
        s.scan.heartbeat_timeout,
        s.scan.allow_short_heartbeat_timeout,
        s.writes(),
    );
    if !s.writes() && hb.message.contains("shorter") {
        run.error(ErrorKind::Preflight, hb.message.clone());
    }
    run.preflight.checks.push(hb);
    if let Some(failed) = run.preflight.checks.iter().find(|c| !c.passed).cloned() {
        run.error(ErrorKind::Preflight, failed.message.clone());
        return ControlFlow::Break(run.abort(
            AbortReason::PreflightRefused,
            failed.message,
            Exit::Refused,
        ));
    }
    ControlFlow::Continue((crds, cilium))
}

/// cilium-config (read, or stated by flags), with what could not be read
/// recorded as warnings.
async fn read_cilium_config(api: &Api, s: &GcSettings, run: &mut Run) -> CiliumSettings {
    let (data, config_problem) =
        preflight::fetch_cilium_config(api, &s.scan.cilium_namespace, s.max_retries).await;
    if let Some(p) = config_problem {
        run.error(ErrorKind::ConfigUnavailable, p);
    }
    let mut cilium = preflight::settings_from_config(data.as_ref(), s.scan.heartbeat_timeout);
    cilium.state_allocation_mode(s.scan.identity_allocation_mode.as_deref());
    for w in &cilium.warnings {
        tracing::warn!("{w}");
        run.error(ErrorKind::ConfigUnavailable, w.clone());
    }
    run.cluster.cilium_config = cilium.values.clone();
    cilium
}

/// A scan writes nothing: with the allocation mode unknown it says so and
/// goes on (a delete refuses).
fn scan_assumes_crd_mode(run: &mut Run) {
    if let Some(c) = run
        .preflight
        .checks
        .iter_mut()
        .find(|c| c.name == CheckName::AllocationMode)
    {
        c.passed = true;
        c.message = "cilium-config could not be read, so the identity allocation mode is unknown: this scan assumes crd (delete would refuse without --identity-allocation-mode crd)".into();
        tracing::warn!("{}", c.message);
        let m = c.message.clone();
        run.error(ErrorKind::ConfigUnavailable, m);
    }
}

/// Start the endpoint watchers (live for the rest of the run, stopped in
/// `run`) and wait for their first full list: nothing is decided before.
async fn sync_usage(
    api: &Api,
    crds: preflight::Crds,
    cilium: &CiliumSettings,
    ui: &Ui,
    run: &mut Run,
    stats: &Arc<Stats>,
) -> ControlFlow<Exit, UsageHandle> {
    let usage = UsageHandle::start(
        api.client(),
        api.watch_tap.clone(),
        preflight::usage_sources(crds, cilium),
        stats.clone(),
    );
    run.usage = Some(usage.clone());
    ui.progress.listing("syncing endpoints");
    if tokio::time::timeout(SYNC_TIMEOUT, usage.wait_ready())
        .await
        .is_err()
    {
        let m = format!(
            "the endpoint watchers did not complete their first list within {}s",
            SYNC_TIMEOUT.as_secs()
        );
        return ControlFlow::Break(run.abort(AbortReason::ReadFailed, m, Exit::Unexpected));
    }
    run.summary.endpoints = usage.object_count(Kind::Endpoint);
    run.summary.endpoint_slices = usage.object_count(Kind::EndpointSlice);
    ControlFlow::Continue(usage)
}

/// List every identity and decide each one: the plan. Narrowing (`-l`,
/// `-n`, `--min-age`) is applied here, once.
async fn scan_and_plan(
    api: &Api,
    cilium: &CiliumSettings,
    usage: &UsageHandle,
    s: &GcSettings,
    ui: &Ui,
    run: &mut Run,
    stop: &Stop,
) -> ControlFlow<Exit, (Plan, Policy)> {
    let policy = Policy {
        rules: Rules {
            local_range: policy::local_range(cilium.cluster_id, cilium.max_connected_clusters),
            heartbeat_timeout: cilium.heartbeat_timeout,
        },
        narrowing: Narrowing {
            selector: s.selector.clone(),
            namespaces: s.scan.namespaces.clone(),
            min_age: s.scan.min_age,
        },
    };
    ui.progress.listing("listing identities");
    let mut plan = Plan::default();
    let scanned = scan::scan_identities(
        api,
        s.scan.page_size,
        s.max_retries,
        s.selector.is_some(),
        stop,
        |item| {
            ui.progress.listed();
            plan.take(item, usage, &policy, api.clock.now(), s, run);
        },
    )
    .await;
    if let Err(e) = scanned {
        return ControlFlow::Break(match e {
            ScanError::Interrupted => Exit::Interrupted,
            ScanError::Denied(_) => {
                run.abort(AbortReason::PermissionLost, e.to_string(), Exit::Refused)
            }
            ScanError::NotInstalled(_) => {
                run.abort(AbortReason::PreflightRefused, e.to_string(), Exit::Refused)
            }
            _ => run.abort(AbortReason::ReadFailed, e.to_string(), Exit::Unexpected),
        });
    }
    if test_panic_at("plan") {
        panic!("injected by {TEST_PANIC_ENV}=plan");
    }
    run.summary.candidates = plan.candidates.len() as u64;
    ControlFlow::Continue((plan, policy))
}

/// The checks that need the scan, then the limits and the confirmation. A
/// `scan` ends here (its candidates become `wouldDelete`); a `delete` goes
/// on to write only if every gate passes.
async fn gate_writes(
    s: &GcSettings,
    plan: &Plan,
    usage: &UsageHandle,
    endpoint: &Endpoint,
    ui: &Ui,
    run: &mut Run,
) -> ControlFlow<Exit> {
    let candidates = run.summary.candidates;
    let ep = preflight::endpoints_check(
        run.summary.endpoints,
        run.summary.endpoint_slices,
        run.summary.scanned,
        s.force,
    );
    let ep_failed = !ep.passed;
    run.preflight.forced = s.force
        && run.summary.endpoints + run.summary.endpoint_slices == 0
        && run.summary.scanned > 0;
    run.preflight.checks.push(ep.clone());
    if s.mode == Mode::Scan {
        if ep_failed {
            run.error(ErrorKind::Preflight, ep.message);
        }
        for &i in &plan.candidate_items {
            if let Some(i) = i {
                run.items[i].outcome = Outcome::WouldDelete;
            }
        }
        return ControlFlow::Break(Exit::Success);
    }
    if ep_failed {
        mark_not_attempted(run, plan);
        return ControlFlow::Break(run.abort(
            AbortReason::PreflightRefused,
            ep.message,
            Exit::Refused,
        ));
    }
    let readable = endpoints_readable_check(usage, s.allow_unreadable_endpoints);
    run.preflight.checks.push(readable.clone());
    let refusal = if !readable.passed {
        Some((
            AbortReason::PreflightRefused,
            readable.message,
            Exit::Refused,
        ))
    } else if let Some(why) = blast_radius(candidates, run.summary.scanned, s) {
        Some((AbortReason::BlastRadius, why, Exit::BlastRadius))
    } else if !confirm(s, plan, endpoint, ui).await {
        Some((
            AbortReason::NotConfirmed,
            "not confirmed: nothing was changed".to_owned(),
            Exit::Usage,
        ))
    } else {
        None
    };
    match refusal {
        Some((reason, why, exit)) => {
            mark_not_attempted(run, plan);
            run.summary.not_attempted = candidates;
            ControlFlow::Break(run.abort(reason, why, exit))
        }
        None => ControlFlow::Continue(()),
    }
}

/// The marks and the deletes. Stop-aware item by item (see `sweep`), so a
/// signal lets the writes in flight be answered and reported.
async fn write_phase(
    s: &GcSettings,
    stop: &Stop,
    ui: &Ui,
    run: &mut Run,
    p: Box<Prepared>,
) -> Exit {
    let Prepared {
        api,
        usage,
        plan,
        rules,
    } = *p;
    let cfg = SweepConfig {
        concurrency: s.concurrency,
        qps: s.qps,
        burst: s.burst,
        max_conflict_retries: s.max_conflict_retries,
        max_retries: s.max_retries,
        dry_run: s.mode == Mode::DryRunServer,
        allow_unreadable_endpoints: s.allow_unreadable_endpoints,
        rules,
    };
    if test_panic_at("background") {
        tokio::spawn(async { panic!("injected by {TEST_PANIC_ENV}=background") });
    }
    let Plan {
        candidates: targets,
        candidate_items,
        to_mark,
        mark_items,
        ..
    } = plan;
    if s.mark && !to_mark.is_empty() {
        ui.progress.start_phase("marking", to_mark.len() as u64);
        let results = sweep::sweep(&api, &usage, to_mark, Action::Mark, &cfg, stop, |_| {
            ui.progress.inc()
        })
        .await;
        apply(run, &mark_items, results);
    }
    ui.progress.start_phase("deleting", targets.len() as u64);
    let started = Instant::now();
    let results = sweep::sweep(&api, &usage, targets, Action::Delete, &cfg, stop, |_| {
        ui.progress.inc()
    })
    .await;
    let elapsed = started.elapsed().as_secs_f64();
    apply(run, &candidate_items, results);
    if elapsed > 0.0 {
        run.summary.delete_rate_per_second = round3(run.summary.deleted as f64 / elapsed);
    }
    match stop.reason() {
        Some(StopReason::PermissionLost) => {
            return run.abort(
                AbortReason::PermissionLost,
                "permission lost during the run (401/403): no further writes were started",
                Exit::Refused,
            )
        }
        Some(StopReason::UsageLost) => {
            let m = format!(
                "endpoint usage was not known complete for {}s (the endpoint watchers could not list or watch CiliumEndpoints/Slices), so which identities are in use is unknown: no further writes were started",
                crate::usage::USAGE_STALL_LIMIT.as_secs()
            );
            run.error(ErrorKind::Watcher, m.clone());
            return run.abort(AbortReason::UsageLost, m, Exit::Unexpected);
        }
        Some(StopReason::UnreadableEndpoint) => {
            let c = endpoints_readable_check(&usage, false);
            run.preflight.checks.push(c.clone());
            let m = format!(
                "{} (appeared during the deletes: no further writes were started)",
                c.message
            );
            return run.abort(AbortReason::PreflightRefused, m, Exit::Refused);
        }
        Some(_) => return Exit::Interrupted,
        None => {}
    }
    if run.summary.failed > 0 {
        Exit::PartialFailure
    } else {
        Exit::Success
    }
}

/// Endpoints whose identity reference cannot be read block deletes: such
/// an endpoint may protect any identity. Names the first few.
fn endpoints_readable_check(usage: &UsageHandle, allow: bool) -> report::Check {
    const SHOWN: usize = 5;
    let bad = usage.unreadable();
    let mut names: Vec<String> = bad
        .iter()
        .take(SHOWN)
        .map(|(what, problem)| format!("{what} ({problem})"))
        .collect();
    if bad.len() > SHOWN {
        names.push(format!("and {} more", bad.len() - SHOWN));
    }
    let list = names.join(", ");
    report::Check {
        name: CheckName::EndpointsReadable,
        passed: bad.is_empty() || allow,
        message: if bad.is_empty() {
            "every endpoint's identity reference is readable".into()
        } else if allow {
            format!("{} endpoints have an unreadable identity reference: {list}; deleting anyway because of --allow-unreadable-endpoints", bad.len())
        } else {
            format!("{} endpoints have an unreadable identity reference, so the identities they use are unknown: {list}; refusing to delete. Fix them, or pass --allow-unreadable-endpoints", bad.len())
        },
    }
}

/// Reach the server (`/version`) so an unreachable server or rejected
/// credentials fail early with a clear message.
async fn reach(api: &Api, endpoint: &Endpoint, s: &GcSettings, run: &mut Run) -> Result<(), Exit> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Version {
        git_version: Option<String>,
    }
    let a = api.get("/version", s.max_retries.min(2)).await;
    match a.class {
        Class::Success => {
            run.cluster.kubernetes_version = a.json::<Version>().ok().and_then(|v| v.git_version);
            Ok(())
        }
        Class::Unauthorized => {
            let m = format!(
                "the API server at {} rejected the credentials (401 Unauthorized)",
                endpoint.server
            );
            run.error(ErrorKind::Forbidden, m.clone());
            Err(run.abort(AbortReason::PreflightRefused, m, Exit::Refused))
        }
        // Some servers forbid /version to unprivileged users: not fatal.
        Class::Forbidden | Class::NotFound => Ok(()),
        _ => {
            let m = format!(
                "cannot reach the API server at {}: {}",
                endpoint.server, a.message
            );
            run.error(ErrorKind::Connection, m.clone());
            Err(run.abort(AbortReason::ReadFailed, m, Exit::Usage))
        }
    }
}

/// What the scan decided: counts, items, and what to write.
#[derive(Default)]
struct Plan {
    candidates: Vec<Identity>,
    candidate_items: Vec<Option<usize>>,
    to_mark: Vec<Identity>,
    mark_items: Vec<Option<usize>>,
}

impl Plan {
    fn take(
        &mut self,
        item: Result<Identity, Malformed>,
        usage: &UsageHandle,
        policy: &Policy,
        now: Timestamp,
        s: &GcSettings,
        run: &mut Run,
    ) {
        let mut identity = match item {
            Ok(i) => i,
            Err(bad) => {
                run.summary.malformed += 1;
                let name = bad.name.as_deref().unwrap_or("<no name>");
                run.error(
                    ErrorKind::MalformedObject,
                    format!("ciliumidentity {name}: {} (skipped)", bad.problem),
                );
                return;
            }
        };
        run.summary.scanned += 1;
        let refs = identity.numeric_id().map_or(0, |id| usage.refs(id));
        // Narrowing is judged here, once; the sweep re-judges only usage
        // and the mark (`policy::decide`), so the labels can go.
        let d = policy::plan(&identity, refs, policy, now);
        run.summary.reasons.add(d.reason);
        identity.labels = Default::default();
        let candidate = d.is_candidate();
        let markable = s.mark && d.reason == Reason::Unmarked;
        let keep = match s.scan.items {
            ItemsMode::All => true,
            ItemsMode::Unused => d.reason != Reason::InUse,
            ItemsMode::Actionable => candidate || markable,
            ItemsMode::None => false,
        };
        let index = keep.then(|| {
            run.items.push(Item {
                name: identity.name.clone(),
                id: identity.numeric_id(),
                namespace: identity.namespace.clone(),
                created_at: identity.created_at,
                marked_at: d.marked_at,
                reason: d.reason,
                outcome: Outcome::Skipped,
                attempts: 0,
                conflicts: Vec::new(),
                last_error: None,
            });
            run.items.len() - 1
        });
        if candidate {
            self.candidates.push(identity);
            self.candidate_items.push(index);
        } else if markable {
            self.to_mark.push(identity);
            self.mark_items.push(index);
        }
    }
}

fn mark_not_attempted(run: &mut Run, plan: &Plan) {
    for i in plan
        .candidate_items
        .iter()
        .chain(&plan.mark_items)
        .flatten()
    {
        run.items[*i].outcome = Outcome::NotAttempted;
    }
}

/// `--max-deletions` / `--max-percent`: why the plan is too big, if it is.
pub(crate) fn blast_radius(candidates: u64, scanned: u64, s: &GcSettings) -> Option<String> {
    if let Some(max) = s.max_deletions {
        if candidates > max {
            return Some(format!(
                "{candidates} identities would be deleted, more than --max-deletions {max}: nothing was deleted"
            ));
        }
    }
    if let Some(p) = s.max_percent {
        let share = if scanned == 0 {
            0.0
        } else {
            candidates as f64 * 100.0 / scanned as f64
        };
        if share > p {
            return Some(format!(
                "{candidates} of {scanned} identities ({share:.1}%) would be deleted, more than --max-percent {p}: nothing was deleted"
            ));
        }
    }
    None
}

/// Ask the person watching unless `--yes` (or a dry run, which changes
/// nothing); without anyone to ask, the answer is no. The observer is asked
/// on a thread of its own, so a signal at the prompt stops the run at once
/// (that thread is left blocked on its input and ends with the process).
async fn confirm(s: &GcSettings, plan: &Plan, endpoint: &Endpoint, ui: &Ui) -> bool {
    if s.yes
        || s.mode == Mode::DryRunServer
        || (plan.candidates.is_empty() && plan.to_mark.is_empty())
    {
        return true;
    }
    let question = format!(
        "About to delete {} stale identities{} on {}{}.",
        plan.candidates.len(),
        if s.mark {
            format!(" and mark {} unmarked ones", plan.to_mark.len())
        } else {
            String::new()
        },
        endpoint.server,
        endpoint
            .context
            .as_deref()
            .map(|c| format!(" (context {c})"))
            .unwrap_or_default(),
    );
    let (tx, rx) = tokio::sync::oneshot::channel();
    let observer = ui.progress.clone();
    let asked = std::thread::Builder::new()
        .name("confirm".into())
        .spawn(move || {
            let _ = tx.send(observer.confirm(&question));
        });
    if asked.is_err() {
        return false;
    }
    matches!(rx.await, Ok(Some(true)))
}

fn apply(run: &mut Run, indices: &[Option<usize>], results: Vec<ItemResult>) {
    for (index, r) in indices.iter().zip(results) {
        let s = &mut run.summary;
        match r.outcome {
            Outcome::Deleted => s.deleted += 1,
            Outcome::AlreadyGone => s.already_gone += 1,
            Outcome::Reclaimed => s.reclaimed += 1,
            Outcome::Failed => s.failed += 1,
            Outcome::Marked => s.marked += 1,
            Outcome::NotAttempted => s.not_attempted += 1,
            Outcome::Skipped | Outcome::WouldDelete => {}
        }
        if let Some(i) = index {
            let item = &mut run.items[*i];
            item.outcome = r.outcome;
            item.reason = r.reason;
            item.attempts = r.attempts;
            item.conflicts = r.conflicts;
            item.last_error = r.last_error;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{ScanSettings, WriteSettings};

    fn limits(max_deletions: Option<u64>, max_percent: Option<f64>) -> GcSettings {
        let w = WriteSettings {
            max_deletions,
            max_percent,
            ..WriteSettings::default()
        };
        GcSettings::for_delete(ScanSettings::default(), w).unwrap()
    }

    #[test]
    fn blast_radius_limits() {
        assert!(blast_radius(10, 100, &limits(None, None)).is_none());
        assert!(blast_radius(10, 100, &limits(Some(10), None)).is_none());
        assert!(blast_radius(11, 100, &limits(Some(10), None))
            .unwrap()
            .contains("--max-deletions 10"));
        assert!(blast_radius(50, 100, &limits(None, Some(50.0))).is_none());
        assert!(blast_radius(51, 100, &limits(None, Some(50.0)))
            .unwrap()
            .contains("51.0%"));
        assert!(blast_radius(0, 0, &limits(None, Some(1.0))).is_none());
    }
}
