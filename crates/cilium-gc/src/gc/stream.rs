//! Deletes from the first page: once endpoint usage is known complete, each
//! listed page's candidates go to the sweep while later pages are still
//! being listed, so the first id is freed a round trip after the first
//! page, not after the last (listing 65k identities alone takes seconds).
//!
//! Nothing per item changes: every delete still waits for fresh usage,
//! re-decides on the live usage right before it is sent, carries
//! `{uid, resourceVersion}` preconditions and handles a 409 by re-reading.
//! What cannot stream is whatever needs the whole list before the first
//! write ([`listing`] says which): then the run lists everything first.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::preflight;
use crate::report::{self, Mode, Summary};
use crate::settings::GcSettings;
use crate::sweep::{self, Action, SweepSettings};
use cilium_gc_cluster::cluster::ApiClient;
use cilium_gc_cluster::exit::Exit;
use cilium_gc_cluster::policy::Policy;
use cilium_gc_cluster::scan;
use cilium_gc_cluster::usage::UsageHandle;

use super::draft::{round_millis, Draft};
use super::observer::Ui;
use super::plan::{apply, Plan};
use super::run::{
    endpoints_readable_check, policy_of, scan_failed, sweep_settings, test_panic_at,
    writes_stopped, Ready, Run, TEST_PANIC_ENV,
};

/// Whether the deletes may start during the list.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Listing {
    /// Each page's candidates are deleted while later pages are listed.
    Streamed,
    /// The whole list is decided before the first write; why, when the
    /// user asked for what costs it (a blast-radius limit), to be said.
    Whole(Option<String>),
}

/// What needs the whole list before the first write: a scan (it writes
/// nothing); a blast-radius limit (`--max-deletions`, `--max-percent`:
/// judged over every candidate, or every identity listed); the
/// confirmation (it shows the whole plan); zero endpoints without
/// `--force` (refused as soon as any identity exists); an unreadable
/// endpoint without `--allow-unreadable-endpoints` (refused before the
/// list is used). Only the limits are said: the others refuse, or ask.
pub(super) fn listing(s: &GcSettings, summary: &Summary, usage: &UsageHandle) -> Listing {
    if let Some(why) = limits_need_the_list(s) {
        return Listing::Whole(Some(why));
    }
    let asks = !s.yes && s.mode == Mode::Delete;
    let no_endpoints = summary.endpoints + summary.endpoint_slices == 0 && !s.force;
    let unreadable = !s.allow_unreadable_endpoints && usage.unreadable_count() > 0;
    if !s.writes() || asks || no_endpoints || unreadable {
        return Listing::Whole(None);
    }
    Listing::Streamed
}

/// Why the deletes wait for the whole list, when a blast-radius limit
/// (`--max-deletions`, `--max-percent`) is set on a run that writes.
fn limits_need_the_list(s: &GcSettings) -> Option<String> {
    let mut limits = Vec::new();
    if s.max_deletions.is_some() {
        limits.push("--max-deletions");
    }
    if s.max_percent.is_some() {
        limits.push("--max-percent");
    }
    if limits.is_empty() || !s.writes() {
        return None;
    }
    let one = limits.len() == 1;
    Some(format!(
        "{} {} judged over the whole list, so no delete starts before every identity is listed (without {}, deletes start with the first page)",
        limits.join(" and "),
        if one { "is" } else { "are" },
        if one { "it" } else { "them" },
    ))
}

/// The progress of a streamed run: the list counts on the display while
/// it runs; the deletes done meanwhile are shown once it is over and their
/// total is known.
#[derive(Default)]
struct Progress {
    listed: AtomicBool,
    early: AtomicU64,
}

/// What the list and the deletes during it leave: the list's outcome, the
/// plan (its candidates' results, in its order), and how long the deletes
/// ran from the first candidate.
struct Listed {
    scanned: Result<(), scan::ScanError>,
    /// The run's clock when the list ended: what the forecast is as of.
    listed_at: jiff::Timestamp,
    plan: Plan,
    results: Vec<sweep::ItemResult>,
    deleting: Option<std::time::Duration>,
}

impl Run<'_> {
    /// The list and the deletes at once, then the marks (`--mark`), which
    /// need no limit but come after the deletes here. Always has usage
    /// known complete (`ready`).
    pub(super) async fn stream_phase(&mut self, ready: Ready) -> Exit {
        let (s, stop) = (self.settings, self.stop);
        let Ready {
            api, cilium, usage, ..
        } = ready;
        let readable = endpoints_readable_check(&usage, s.allow_unreadable_endpoints);
        let policy = policy_of(&cilium, s);
        let cfg = sweep_settings(s, policy.rules.clone());
        let listed = self.list_and_delete(&api, &usage, &policy, &cfg).await;
        let run = &mut self.report;
        let Listed {
            scanned,
            listed_at,
            mut plan,
            results,
            deleting,
        } = listed;
        close_list(run, s, &plan, readable);
        if scanned.is_ok() {
            run.forecast = Some(plan.census.forecast(&cilium, listed_at));
        }
        apply(run, &plan.candidate_items, results);
        if let Some(elapsed) = deleting.map(|d| d.as_secs_f64()).filter(|e| *e > 0.0) {
            let written = run.summary.deleted + run.summary.validated;
            run.summary.delete_rate_per_second = round_millis(written as f64 / elapsed);
        }
        if test_panic_at("plan") {
            panic!("injected by {TEST_PANIC_ENV}=plan");
        }
        if let Some(reason) = stop.reason() {
            return writes_stopped(run, reason, &usage);
        }
        if let Err(e) = scanned {
            let after = format!(
                " (the {} candidates listed before it were handled, each as its item says)",
                run.summary.candidates
            );
            return scan_failed(run, e, &after);
        }
        if s.mark && !plan.to_mark.is_empty() {
            let ui = self.ui;
            ui.observer
                .start_phase("marking", plan.to_mark.len() as u64);
            let marks = sweep::feed_all(std::mem::take(&mut plan.to_mark));
            let results = sweep::sweep(&api, &usage, marks, Action::Mark, &cfg, stop, |_| {
                ui.observer.inc()
            })
            .await;
            apply(run, &plan.mark_items, results);
            if let Some(reason) = stop.reason() {
                return writes_stopped(run, reason, &usage);
            }
        }
        if run.summary.failed > 0 {
            Exit::PartialFailure
        } else {
            Exit::Success
        }
    }

    /// List every identity, deciding each as it comes, while a sweep
    /// deletes the candidates already decided. The sweep ends when the list
    /// has ended (or failed, or was stopped) and every candidate it handed
    /// on has its result.
    async fn list_and_delete(
        &mut self,
        api: &ApiClient,
        usage: &UsageHandle,
        policy: &Policy,
        cfg: &SweepSettings,
    ) -> Listed {
        let (s, ui, stop) = (self.settings, self.ui, self.stop);
        let run = &mut self.report;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut plan = Plan {
            feed: Some(tx),
            ..Plan::default()
        };
        let progress = Progress::default();
        let first_candidate = std::sync::OnceLock::new();
        ui.observer.listing("listing identities");
        let list = async {
            let scanned = tokio::select! {
                r = scan::scan_identities(
                    api,
                    s.scan.page_size,
                    s.pacing.max_retries,
                    s.selector.is_some(),
                    stop,
                    |item| {
                        ui.observer.listed();
                        let before = plan.candidate_items.len();
                        plan.take(item, usage, policy, api.clock.now(), s, run);
                        if plan.candidate_items.len() > before {
                            first_candidate.get_or_init(Instant::now);
                        }
                    },
                ) => r,
                _ = stop.wait() => Err(scan::ScanError::Interrupted),
            };
            let listed_at = api.clock.now();
            // The sweep ends once the feed is closed and drained.
            plan.feed = None;
            if test_panic_at("background") {
                tokio::spawn(async { panic!("injected by {TEST_PANIC_ENV}=background") });
            }
            progress.listed(ui, plan.candidate_items.len() as u64);
            (scanned, listed_at)
        };
        let on_done = |_: &sweep::ItemResult| progress.done(ui);
        let sweep = sweep::sweep(api, usage, rx, Action::Delete, cfg, stop, on_done);
        let ((scanned, listed_at), results) = tokio::join!(list, sweep);
        Listed {
            scanned,
            listed_at,
            plan,
            results,
            deleting: first_candidate.get().map(Instant::elapsed),
        }
    }
}

impl Progress {
    /// The list is over: the deletes' phase, with those done meanwhile.
    fn listed(&self, ui: &Ui, total: u64) {
        self.listed.store(true, Ordering::SeqCst);
        ui.observer.start_phase("deleting", total);
        for _ in 0..self.early.load(Ordering::SeqCst) {
            ui.observer.inc();
        }
    }

    /// One delete done.
    fn done(&self, ui: &Ui) {
        if self.listed.load(Ordering::SeqCst) {
            ui.observer.inc();
        } else {
            self.early.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The list is over: the candidates counted, and the checks the gates
/// would have judged (they passed before the list, see [`listing`]) in the
/// report, as a run that listed first reports them.
fn close_list(run: &mut Draft, s: &GcSettings, plan: &Plan, readable: report::Check) {
    run.summary.candidates = plan.candidate_items.len() as u64;
    let ep = preflight::endpoints_check(
        run.summary.endpoints,
        run.summary.endpoint_slices,
        run.summary.scanned,
        s.force,
    );
    run.preflight.forced = s.force
        && run.summary.endpoints + run.summary.endpoint_slices == 0
        && run.summary.scanned > 0;
    run.preflight.checks.push(ep);
    run.preflight.checks.push(readable);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{ScanSettings, WriteSettings};

    fn delete(max_deletions: Option<u64>, max_percent: Option<f64>) -> GcSettings {
        let w = WriteSettings {
            max_deletions,
            max_percent,
            yes: true,
            ..WriteSettings::default()
        };
        GcSettings::for_delete(ScanSettings::default(), w).unwrap()
    }

    /// The line said on stderr when a limit holds the deletes back, and
    /// only then.
    #[test]
    fn only_a_blast_radius_limit_is_said_to_wait_for_the_list() {
        assert_eq!(limits_need_the_list(&delete(None, None)), None);
        let why = limits_need_the_list(&delete(None, Some(10.0))).unwrap();
        assert!(
            why.starts_with("--max-percent is judged over the whole list"),
            "{why}"
        );
        let why = limits_need_the_list(&delete(Some(5), Some(10.0))).unwrap();
        assert!(
            why.starts_with("--max-deletions and --max-percent are"),
            "{why}"
        );
        let scan = GcSettings::for_scan(ScanSettings::default()).unwrap();
        assert_eq!(limits_need_the_list(&scan), None);
    }
}
