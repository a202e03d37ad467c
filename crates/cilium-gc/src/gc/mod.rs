//! One scan or delete run, end to end, always ending in a [`Report`].
//!
//! Order matters for safety: connect; preflight (CRDs, cilium-config,
//! permissions) before anything else; usage watchers synced before the first
//! decision; then the list, scanned and decided page by page. When nothing
//! before the first write needs the whole list (`stream`), each page's
//! candidates are deleted while later pages are still being listed, every
//! per-item rule unchanged. Otherwise (a scan, a blast-radius limit, the
//! confirmation, the zero-endpoints check) the whole list is decided first;
//! then those checks; then the marks and deletes. Any stop (signal, lost
//! permission, refusal) still produces a complete report with the exit code
//! it explains.

use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;

use crate::preflight;
use crate::report::{Abort, AbortReason, CheckName, ErrorKind, Mode, Outcome, Report};
use crate::settings::GcSettings;
use crate::sweep::{self, Action};
use cilium_gc_cluster::cilium_config::CiliumSettings;
use cilium_gc_cluster::cluster::{ApiClient, Endpoint};
use cilium_gc_cluster::connect::ConnectSettings;
use cilium_gc_cluster::exit::Exit;
use cilium_gc_cluster::model::Kind;
use cilium_gc_cluster::policy::Policy;
use cilium_gc_cluster::retry::Class;
use cilium_gc_cluster::scan::{self};
use cilium_gc_cluster::stats::Stats;
use cilium_gc_cluster::stop::{Stop, StopReason};
use cilium_gc_cluster::usage::UsageHandle;

mod census;
mod draft;
mod observer;
mod plan;
mod run;
mod stream;

use draft::{options, round_millis, Draft};
pub use observer::{Headless, Observer, PendingWrites, Ui};
use plan::{apply, blast_radius, mark_not_attempted, Plan};
pub use run::TEST_PANIC_ENV;
use run::{
    endpoints_readable_check, policy_of, scan_failed, sweep_settings, test_panic_at,
    writes_stopped, Prepared, Ready, Run,
};

/// Run scan or delete against the cluster the flags name.
///
/// Always returns a report, however the run ends: a signal stops it within
/// a second or two at any phase, and a panic anywhere (caught here for this
/// task, reported through [`Stop::fail`] by the panic hook for others) ends
/// it with `aborted: internal-error` and what was known so far.
pub async fn run(kube: &ConnectSettings, s: &GcSettings, stop: &Stop, ui: &Ui) -> (Report, Exit) {
    let mut run = Run {
        kube,
        settings: s,
        stop,
        ui,
        stats: Arc::new(Stats::default()),
        report: Draft::new(s, kube),
    };
    let executed = AssertUnwindSafe(run.execute()).catch_unwind().await;
    let exit = executed.unwrap_or_else(|payload| {
        stop.fail(panic_text(payload.as_ref()));
        Exit::Unexpected
    });
    run.finish(exit)
}

impl Run<'_> {
    /// The report, however the run ended: what the usage view and the
    /// clock still have to say, and the exit a stop turns the run's into.
    fn finish(mut self, exit: Exit) -> (Report, Exit) {
        self.ui.observer.finish();
        self.report_usage_and_clock();
        let exit = self
            .stop
            .reason()
            .and_then(StopReason::exit)
            .unwrap_or(exit);
        let run = &mut self.report;
        if matches!(exit, Exit::Interrupted | Exit::Terminated) {
            run.interrupted = true;
            if run.aborted.is_none() {
                run.aborted = Some(Abort {
                    reason: AbortReason::Interrupted,
                    message: "stopped by signal: no delete was started after it".into(),
                });
            }
        }
        if self.stop.reason() == Some(StopReason::InternalError) {
            let what = self.stop.panic_message().unwrap_or_default();
            let m = format!(
                "internal error: {what} (a bug: please report it; run with RUST_BACKTRACE=1 for a backtrace)"
            );
            run.error(ErrorKind::Other, m.clone());
            run.abort(AbortReason::InternalError, m, exit);
        }
        (self.report.finish(exit, &self.stats), exit)
    }

    /// Stop the usage view and report its malformed endpoints; say so when
    /// mark ages were judged by the local clock.
    fn report_usage_and_clock(&mut self) {
        let run = &mut self.report;
        if let Some(usage) = run.usage.take() {
            usage.stop();
            for (what, problem) in usage.malformed() {
                run.summary.malformed += 1;
                let effect = if problem == cilium_gc_cluster::usage::NO_NAME {
                    "its identity reference was read"
                } else if self.settings.allow_unreadable_endpoints {
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
    }
}

/// The text of a panic payload (`panic!` with a literal or a format).
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

impl Run<'_> {
    /// Every phase, in order; the exit code of the one the run ended in.
    async fn execute(&mut self) -> Exit {
        // Everything before the first write only reads (and asks): a stop
        // cancels it where it is, a hung request included.
        let stop = self.stop;
        let ready = tokio::select! {
            r = self.prepare_usage() => r,
            _ = stop.wait() => return Exit::Interrupted,
        };
        let ready = match ready {
            ControlFlow::Continue(r) => r,
            ControlFlow::Break(exit) => return exit,
        };
        match stream::listing(self.settings, &self.report.summary, &ready.usage) {
            stream::Listing::Streamed => return self.stream_phase(*ready).await,
            stream::Listing::Whole(Some(why)) => tracing::warn!("{why}"),
            stream::Listing::Whole(None) => {}
        }
        let prepared = tokio::select! {
            p = self.prepare(*ready) => p,
            _ = stop.wait() => return Exit::Interrupted,
        };
        match prepared {
            ControlFlow::Continue(p) => self.write_phase(p).await,
            ControlFlow::Break(exit) => exit,
        }
    }

    /// Connect, preflight, sync usage: reads only. Breaks with the exit
    /// code when the run ends here (a refusal, an error).
    async fn prepare_usage(&mut self) -> ControlFlow<Exit, Box<Ready>> {
        let (api, endpoint) = self.connect().await?;
        let (crds, cilium) = self.check_cluster(&api).await?;
        let usage = self.sync_usage(&api, crds, &cilium).await?;
        ControlFlow::Continue(Box::new(Ready {
            api,
            endpoint,
            cilium,
            usage,
        }))
    }

    /// Scan and decide the whole list, the checks on the plan and the
    /// confirmation: reads only. Breaks with the exit code when the run
    /// ends here (a scan, a refusal, an error).
    async fn prepare(&mut self, ready: Ready) -> ControlFlow<Exit, Box<Prepared>> {
        let Ready {
            api,
            endpoint,
            cilium,
            usage,
        } = ready;
        let (plan, policy) = self.scan_and_plan(&api, &cilium, &usage).await?;
        self.gate_writes(&plan, &usage, &endpoint).await?;
        ControlFlow::Continue(Box::new(Prepared {
            api,
            usage,
            plan,
            rules: policy.rules,
        }))
    }

    /// Connect and check the server answers, recording where we are (never a
    /// credential) and any insecure-connection warning.
    async fn connect(&mut self) -> ControlFlow<Exit, (ApiClient, Endpoint)> {
        let (s, stop) = (self.settings, self.stop);
        let run = &mut self.report;
        let (mut api, endpoint) = match ApiClient::connect(self.kube, self.stats.clone()).await {
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
        &mut self,
        api: &ApiClient,
    ) -> ControlFlow<Exit, (cilium_gc_cluster::discovery::Crds, CiliumSettings)> {
        let (s, kube) = (self.settings, self.kube);
        let run = &mut self.report;
        let crds = match cilium_gc_cluster::discovery::fetch_crds(api, s.pacing.max_retries).await {
            Ok(c) => c,
            Err(e) => {
                return ControlFlow::Break(run.abort(
                    AbortReason::ReadFailed,
                    e.to_string(),
                    Exit::Unexpected,
                ))
            }
        };
        let cilium = Self::read_cilium_config(api, s, run).await;
        run.options = options(s, kube, Some(&cilium));
        let wanted = cilium_gc_cluster::rbac::required(s.writes(), s.mark, crds.slices);
        let (missing, perm_warnings) = cilium_gc_cluster::rbac::fetch_missing_permissions(
            api,
            crds.slices_version(),
            &wanted,
            &s.scan.cilium_namespace,
            s.pacing.max_retries,
        )
        .await;
        for w in perm_warnings {
            run.error(ErrorKind::Preflight, w);
        }
        run.preflight.checks = preflight::evaluate(crds, &cilium, &missing);
        if !s.writes() && !cilium.allocation_mode_known {
            Self::scan_assumes_crd_mode(run);
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
    async fn read_cilium_config(
        api: &ApiClient,
        s: &GcSettings,
        run: &mut Draft,
    ) -> CiliumSettings {
        let config = cilium_gc_cluster::cilium_config::fetch_cilium_config(
            api,
            &s.scan.cilium_namespace,
            s.pacing.max_retries,
        )
        .await;
        let data = config
            .map_err(|problem| run.error(ErrorKind::ConfigUnavailable, problem))
            .ok();
        let mut cilium = cilium_gc_cluster::cilium_config::settings_from_config(
            data.as_ref(),
            s.scan.heartbeat_timeout,
        );
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
    fn scan_assumes_crd_mode(run: &mut Draft) {
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
        &mut self,
        api: &ApiClient,
        crds: cilium_gc_cluster::discovery::Crds,
        cilium: &CiliumSettings,
    ) -> ControlFlow<Exit, UsageHandle> {
        let (ui, stats) = (self.ui, &self.stats);
        let run = &mut self.report;
        let usage = UsageHandle::start(
            api.client(),
            api.watch_tap.clone(),
            cilium_gc_cluster::discovery::usage_sources(crds, cilium),
            stats.clone(),
        );
        run.usage = Some(usage.clone());
        ui.observer.listing("syncing endpoints");
        if let Err(e) = usage.wait_synced().await {
            let m = e.to_string();
            return ControlFlow::Break(run.abort(AbortReason::ReadFailed, m, Exit::Unexpected));
        }
        run.summary.endpoints = usage.object_count(Kind::Endpoint);
        run.summary.endpoint_slices = usage.object_count(Kind::EndpointSlice);
        ControlFlow::Continue(usage)
    }

    /// List every identity and decide each one: the plan. Narrowing (`-l`,
    /// `-n`, `--min-age`) is applied here, once.
    async fn scan_and_plan(
        &mut self,
        api: &ApiClient,
        cilium: &CiliumSettings,
        usage: &UsageHandle,
    ) -> ControlFlow<Exit, (Plan, Policy)> {
        let (s, ui, stop) = (self.settings, self.ui, self.stop);
        let run = &mut self.report;
        let policy = policy_of(cilium, s);
        ui.observer.listing("listing identities");
        let mut plan = Plan::default();
        let scanned = scan::scan_identities(
            api,
            s.scan.page_size,
            s.pacing.max_retries,
            s.selector.is_some(),
            stop,
            |item| {
                ui.observer.listed();
                plan.take(item, usage, &policy, api.clock.now(), s, run);
            },
        )
        .await;
        if let Err(e) = scanned {
            return ControlFlow::Break(scan_failed(run, e, ""));
        }
        run.forecast = Some(plan.census.forecast(cilium, api.clock.now()));
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
        &mut self,
        plan: &Plan,
        usage: &UsageHandle,
        endpoint: &Endpoint,
    ) -> ControlFlow<Exit> {
        let (s, ui) = (self.settings, self.ui);
        let run = &mut self.report;
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
        } else if !plan::confirm(s, plan, endpoint, run.summary.scanned, ui).await {
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
    async fn write_phase(&mut self, p: Box<Prepared>) -> Exit {
        let (s, stop, ui) = (self.settings, self.stop, self.ui);
        let run = &mut self.report;
        let Prepared {
            api,
            usage,
            plan,
            rules,
        } = *p;
        let cfg = sweep_settings(s, rules);
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
            ui.observer.start_phase("marking", to_mark.len() as u64);
            let results = sweep::sweep(
                &api,
                &usage,
                sweep::feed_all(to_mark),
                Action::Mark,
                &cfg,
                stop,
                |_| ui.observer.inc(),
            )
            .await;
            apply(run, &mark_items, results);
        }
        ui.observer.start_phase("deleting", targets.len() as u64);
        let started = Instant::now();
        let results = sweep::sweep(
            &api,
            &usage,
            sweep::feed_all(targets),
            Action::Delete,
            &cfg,
            stop,
            |_| ui.observer.inc(),
        )
        .await;
        let elapsed = started.elapsed().as_secs_f64();
        apply(run, &candidate_items, results);
        if elapsed > 0.0 {
            let written = run.summary.deleted + run.summary.validated;
            run.summary.delete_rate_per_second = round_millis(written as f64 / elapsed);
        }
        match stop.reason() {
            Some(reason) => writes_stopped(run, reason, &usage),
            None if run.summary.failed > 0 => Exit::PartialFailure,
            None => Exit::Success,
        }
    }
}

/// Reach the server (`/version`) so an unreachable server or rejected
/// credentials fail early with a clear message.
async fn reach(
    api: &ApiClient,
    endpoint: &Endpoint,
    s: &GcSettings,
    run: &mut Draft,
) -> Result<(), Exit> {
    let version = api.version(s.pacing.max_retries.min(2)).await;
    let a = version.answer;
    match a.class {
        Class::Success => {
            run.cluster.kubernetes_version = version.git_version;
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
