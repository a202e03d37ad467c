//! The report under construction: what a run accumulated, and how it
//! becomes the [`Report`] however the run ended.

use std::sync::Arc;
use std::time::Instant;

use cilium_gc_documents::forecast::Forecast;
use cilium_gc_documents::header::{Header, Span};
use jiff::Timestamp;

use crate::report::{
    Abort, AbortReason, ClusterInfo, ErrorKind, IdRange, Item, Mode, Options, Preflight, Report,
    RunError, Summary, Tool,
};
use crate::settings::GcSettings;
use cilium_gc_cluster::cilium_config::CiliumSettings;
use cilium_gc_cluster::connect::ConnectSettings;
use cilium_gc_cluster::exit::Exit;
use cilium_gc_cluster::policy;
use cilium_gc_cluster::stats::Stats;
use cilium_gc_cluster::usage::UsageHandle;

/// Run-level errors kept in the report; the rest are counted.
pub(crate) const MAX_REPORTED_ERRORS: usize = 1000;
/// What the run accumulated; becomes the report.
pub(super) struct Draft {
    pub(super) started: Timestamp,
    pub(super) clock: Instant,
    pub(super) mode: Mode,
    pub(super) options: Options,
    pub(super) cluster: ClusterInfo,
    pub(super) preflight: Preflight,
    pub(super) summary: Summary,
    pub(super) items: Vec<Item>,
    pub(super) errors: Vec<RunError>,
    pub(super) dropped_errors: u64,
    pub(super) aborted: Option<Abort>,
    pub(super) interrupted: bool,
    /// The live usage view, once started: its malformed endpoints are
    /// reported when the run ends, however it ends.
    pub(super) usage: Option<UsageHandle>,
    /// The server's clock, once connected: whether mark ages were judged
    /// by the local clock instead is said when the run ends.
    pub(super) server_clock: Option<Arc<cilium_gc_cluster::cluster::ServerClock>>,
    /// Where the local range is heading, once the list is complete.
    pub(super) forecast: Option<Forecast>,
}

impl Draft {
    pub(super) fn new(s: &GcSettings, kube: &ConnectSettings) -> Self {
        Draft {
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
            forecast: None,
        }
    }

    pub(super) fn error(&mut self, kind: ErrorKind, message: impl Into<String>) {
        if self.errors.len() < MAX_REPORTED_ERRORS {
            let message = one_line(&message.into());
            self.errors.push(RunError { kind, message });
        } else {
            self.dropped_errors += 1;
        }
    }

    pub(super) fn abort(
        &mut self,
        reason: AbortReason,
        message: impl Into<String>,
        exit: Exit,
    ) -> Exit {
        let message = one_line(&message.into());
        self.aborted = Some(Abort { reason, message });
        exit
    }

    pub(super) fn finish(mut self, exit: Exit, stats: &Stats) -> Report {
        let s = &mut self.summary;
        s.conflicts = Stats::get(&stats.conflicts);
        s.retries = Stats::get(&stats.retries);
        s.throttled = Stats::get(&stats.throttled);
        s.server_errors = Stats::get(&stats.server_errors);
        s.list_pages = Stats::get(&stats.list_pages);
        s.list_restarts = Stats::get(&stats.list_restarts);
        s.watcher_restarts = Stats::get(&stats.watcher_restarts);
        if let Some(p) = stats.pace() {
            s.throttled_seconds = Some(round_millis(p.throttled.as_secs_f64()));
            s.lowest_rate_per_second = Some(round_millis(p.lowest_rate));
        }
        s.lowest_in_flight = stats.in_flight().map(|n| n as u64);
        let waited = Stats::get(&stats.retry_after_wait_ms);
        if waited > 0 {
            s.retry_after_wait_seconds = Some(round_millis(waited as f64 / 1000.0));
        }
        if self.dropped_errors > 0 {
            self.errors.push(RunError {
                kind: ErrorKind::Other,
                message: format!("{} more errors not listed", self.dropped_errors),
            });
        }
        let finished = Timestamp::now();
        Report {
            header: Header::new(Tool::current()),
            cluster: self.cluster,
            span: Span::new(self.started, finished, self.clock.elapsed()),
            mode: self.mode,
            options: self.options,
            exit_code: exit.code(),
            interrupted: self.interrupted,
            aborted: self.aborted,
            preflight: self.preflight,
            summary: self.summary,
            items: self.items,
            errors: self.errors,
            next_steps: Vec::new(),
            forecast: self.forecast,
        }
    }
}

/// Messages in the report and on stderr are one line: multi-line library
/// errors (YAML parsers draw pictures) keep their first line.
/// Registered credentials are scrubbed here too: every report and stderr
/// message passes through.
pub(super) fn one_line(s: &str) -> String {
    cilium_gc_cluster::secrets::scrub(s.lines().next().unwrap_or_default().trim_end())
}

pub(super) fn round_millis(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub(super) fn options(
    s: &GcSettings,
    kube: &ConnectSettings,
    cilium: Option<&CiliumSettings>,
) -> Options {
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
            .unwrap_or(cilium_gc_cluster::cilium_config::DEFAULT_HEARTBEAT_TIMEOUT)
            .as_secs_f64(),
        local_range: IdRange {
            min: *range.start(),
            max: *range.end(),
        },
        page_size: s.scan.page_size,
        pacing: s.pacing,
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
