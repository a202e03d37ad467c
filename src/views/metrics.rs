//! Prometheus metrics of a `scan`/`delete` run, for scheduled runs: a CronJob
//! that silently stops deleting is how the original outage happens again.
//!
//! Every metric is derived from the finished [`Report`], so the metrics and
//! the report never disagree. They are gauges describing *the last run*
//! (Prometheus' convention for batch jobs): a Pushgateway or a textfile holds
//! exactly one run's values, so a counter would only ever show one run.
//!
//! This view is pure: [`encode`] and [`encode_fleet`] turn reports into
//! the Prometheus text format. Its two sinks, node-exporter's textfile and
//! a Pushgateway, are I/O and live in `crate::output::metrics`.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use cilium_gc::report::Report;
use cilium_gc_cluster::policy::Reason;
use cilium_gc_documents::report::Mode;

/// Prefix of every metric name.
pub const PREFIX: &str = "cilium_gc";
/// Name of the metric an alert uses to see that GC stopped succeeding.
pub const LAST_SUCCESS: &str = "cilium_gc_last_success_timestamp_seconds";
/// `Content-Type` of the Prometheus text format (0.0.4) we write and push.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
/// The label that tells a fleet run's clusters apart.
pub const CLUSTER_LABEL: &str = "cluster";

/// A series' labels: `cluster` first (in a fleet), then the metric's own.
type Labels = Vec<(String, String)>;
/// A gauge family with a float value per label set.
type Gauges = Family<Labels, Gauge<f64, AtomicU64>>;

/// The metrics of one or more runs, every series of a fleet's cluster
/// labelled `cluster="<label>"`: one family per metric (so one `# HELP` and
/// one `# TYPE`), whatever the number of clusters. Families with no sample
/// (`last_success_timestamp_seconds` before any success) are left out by
/// prometheus-client.
#[derive(Default)]
struct Metrics {
    /// `run_info`: an integer gauge, always 1.
    info: Family<Labels, Gauge>,
    /// The other families, in the order first set.
    gauges: Vec<(&'static str, &'static str, Gauges)>,
}

impl Metrics {
    /// Adds one run's series, labelled with `cluster` when given.
    fn add(&mut self, report: &Report, previous_success: Option<f64>, cluster: Option<&str>) {
        let labels: Labels = cluster
            .map(|c| (CLUSTER_LABEL.to_owned(), c.to_owned()))
            .into_iter()
            .collect();
        let mut run = Run {
            metrics: self,
            labels,
        };
        run.info(report);
        run.identities(report);
        run.counts(&report.summary);
        run.outcome(report, previous_success);
        run.forecast(report);
    }

    /// The registry holding every family, named `cilium_gc_<name>`.
    fn registry(self) -> Registry {
        let mut reg = Registry::with_prefix(PREFIX);
        reg.register(
            "run_info",
            "The last run's mode (scan, delete, dry-run-server) and tool version; always 1",
            self.info,
        );
        for (name, help, family) in self.gauges {
            reg.register(name, help, family);
        }
        reg
    }

    /// The text format (0.0.4) of every family.
    fn encode(self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry())
            .expect("writing to a String cannot fail");
        out
    }
}

/// One run's series being added to [`Metrics`].
struct Run<'a> {
    metrics: &'a mut Metrics,
    /// The run's own labels (`cluster`, or none).
    labels: Labels,
}

impl Run<'_> {
    /// Sets `name`'s sample for this run, with `extra` labels after the run's.
    fn set(&mut self, name: &'static str, help: &'static str, extra: &[(&str, &str)], v: f64) {
        let gauges = &mut self.metrics.gauges;
        let i = match gauges.iter().position(|(n, _, _)| *n == name) {
            Some(i) => i,
            None => {
                gauges.push((name, help, Gauges::default()));
                gauges.len() - 1
            }
        };
        let mut labels = self.labels.clone();
        labels.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        gauges[i].2.get_or_create(&labels).set(v);
    }

    /// `run_info`: the mode and the tool version.
    fn info(&mut self, report: &Report) {
        let mut labels = self.labels.clone();
        labels.push(("mode".into(), mode_name(report.mode).into()));
        labels.push(("version".into(), report.header.tool.version.clone()));
        self.metrics.info.get_or_create(&labels).set(1);
    }

    /// Identities by decision reason, and how full the local range is.
    fn identities(&mut self, report: &Report) {
        let s = &report.summary;
        for r in Reason::ALL {
            self.set(
                "identities",
                "CiliumIdentities seen by the last run, by decision reason",
                &[("reason", r.as_str())],
                s.reasons.get(r) as f64,
            );
        }
        let capacity = report
            .options
            .local_range
            .max
            .saturating_sub(report.options.local_range.min)
            + 1;
        // Every identity has exactly one reason; all but not-local occupy the range.
        let local = Reason::ALL
            .iter()
            .filter(|r| **r != Reason::NotLocal)
            .map(|r| s.reasons.get(*r))
            .sum::<u64>();
        self.set(
            "identity_space_capacity",
            "Identity ids in the cluster-local range (65280 for cluster 0)",
            &[],
            capacity as f64,
        );
        self.set(
            "identity_space_used_ratio",
            "Share of the local identity range in use by CiliumIdentity objects (0-1)",
            &[],
            local as f64 / capacity as f64,
        );
    }

    /// What the run found and did, one gauge per count.
    fn counts(&mut self, s: &cilium_gc_documents::report::Summary) {
        for (name, help, v) in [
            (
                "candidate_identities",
                "Deletion candidates found by the last run",
                s.candidates,
            ),
            (
                "deleted_identities",
                "Identities deleted by the last run (validated, with --dry-run=server)",
                s.deleted + s.validated,
            ),
            (
                "failed_identities",
                "Candidates the last run could not delete",
                s.failed,
            ),
            (
                "reclaimed_identities",
                "Candidates reclaimed by an agent or reused during the last run, left alone",
                s.reclaimed,
            ),
            (
                "not_attempted_identities",
                "Candidates the last run stopped before attempting",
                s.not_attempted,
            ),
            (
                "marked_identities",
                "Identities the last run annotated with a heartbeat mark (--mark)",
                s.marked,
            ),
            (
                "conflicts",
                "409 Conflict answers the last run met (each re-read and re-decided)",
                s.conflicts,
            ),
            (
                "throttled_requests",
                "429 Too Many Requests answers the last run met",
                s.throttled,
            ),
            (
                "retried_requests",
                "Requests the last run sent again after a retryable failure",
                s.retries,
            ),
        ] {
            self.set(name, help, &[], v as f64);
        }
    }

    /// How the run went: duration, rate, exit code, success and when.
    fn outcome(&mut self, report: &Report, previous_success: Option<f64>) {
        let s = &report.summary;
        self.set(
            "run_duration_seconds",
            "Wall time of the last run",
            &[],
            report.span.duration_seconds,
        );
        self.set(
            "delete_rate_per_second",
            "Effective deletions per second during the last run's delete phase",
            &[],
            s.delete_rate_per_second,
        );
        self.set(
            "run_exit_code",
            "Exit code of the last run (0 success, 4 some deletes failed, ...)",
            &[],
            f64::from(report.exit_code),
        );
        self.set(
            "run_success",
            "1 when the last run did everything it was asked (exit 0), else 0",
            &[],
            if succeeded(report) { 1.0 } else { 0.0 },
        );
        let finished = seconds(report.span.finished_at);
        self.set(
            "last_run_timestamp_seconds",
            "When the last run finished, in seconds since the epoch",
            &[],
            finished,
        );
        let last_success = if succeeded(report) {
            Some(finished)
        } else {
            previous_success
        };
        if let Some(t) = last_success {
            self.set(
                "last_success_timestamp_seconds",
                "When a run last succeeded (exit 0), in seconds since the epoch",
                &[],
                t,
            );
        }
    }
}

/// Whether the run counts as a success for `last_success_timestamp_seconds`:
/// it finished everything it was asked to do (exit 0).
pub fn succeeded(report: &Report) -> bool {
    report.exit_code == 0 && report.aborted.is_none()
}

/// The metrics of `report` in the Prometheus text format (0.0.4).
///
/// `previous_success` is the last successful run's time (seconds since the
/// epoch) when this run failed: it is carried forward so the textfile keeps
/// saying when GC last worked. A successful run writes its own finish time.
pub fn encode(report: &Report, previous_success: Option<f64>) -> String {
    let mut metrics = Metrics::default();
    metrics.add(report, previous_success, None);
    metrics.encode()
}

/// The value of [`LAST_SUCCESS`] in a previous exposition, if any.
pub fn last_success_in(text: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| l.strip_prefix(LAST_SUCCESS))
        .filter_map(|rest| rest.strip_prefix(' '))
        .find_map(|v| v.split_whitespace().next()?.parse().ok())
}

/// The metrics of a fleet run from one registry: every cluster's series
/// (see [`encode`]) labelled `cluster="<label>"`, one family per metric as
/// the text format requires (one `# HELP`/`# TYPE`, then every cluster's
/// samples). `clusters` holds each cluster's label, report and previous
/// last success.
pub fn encode_fleet(clusters: &[(&str, &Report, Option<f64>)]) -> String {
    let mut metrics = Metrics::default();
    for (label, report, previous) in clusters {
        metrics.add(report, *previous, Some(label));
    }
    metrics.encode()
}

/// The value of [`LAST_SUCCESS`] for `cluster` in a previous fleet
/// exposition, if any.
pub fn last_success_of(text: &str, cluster: &str) -> Option<f64> {
    let label = format!("{CLUSTER_LABEL}=\"{}\"", escape_label(cluster));
    text.lines()
        .filter_map(|l| l.strip_prefix(LAST_SUCCESS))
        .filter(|rest| rest.starts_with('{') && rest.contains(&label))
        .find_map(|rest| {
            rest.rsplit_once("} ")?
                .1
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
}

/// A label value as the text format escapes it.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn seconds(t: jiff::Timestamp) -> f64 {
    t.as_millisecond() as f64 / 1000.0
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Scan => "scan",
        Mode::Delete => "delete",
        Mode::DryRunServer => "dry-run-server",
    }
}

// ---- The forecast's gauges ----
//
// The forecast's gauges: where the local identity range is heading at the
// recent creation pace (the report's `forecast`, the same numbers
// `diagnose` shows). They let an alert fire hours before the range is 80%
// full, when the pace says it will be (see `examples/prometheusrule.yaml`).
//
// Left out when the run's list did not complete (the report then has no
// forecast). A value that means "never" is `+Inf`, not a missing sample:
// a Pushgateway `POST` replaces only the names pushed, so a gauge left out
// would keep an earlier run's "full in 2 hours" and its alert firing.

/// `full_if_gc_stops_seconds`: the name an alert reads.
pub const FULL_IF_GC_STOPS: &str = "cilium_gc_identity_full_if_gc_stops_seconds";
/// `steady_state_ratio`: the name an alert reads.
pub const STEADY_STATE_RATIO: &str = "cilium_gc_identity_steady_state_ratio";

impl Run<'_> {
    /// The forecast's gauges, when the report has a forecast.
    pub(super) fn forecast(&mut self, report: &Report) {
        let Some(f) = &report.forecast else { return };
        self.set(
            "identity_creation_rate_per_hour",
            "New local identities per hour at the recent pace (over the shortest recent window holding ten creations)",
            &[],
            f.pace.rate_per_hour,
        );
        self.set(
            "identity_full_if_gc_stops_seconds",
            "Seconds until the local identity range is full at that pace if no identity is deleted from now on; 0 when full, +Inf when nothing is being created",
            &[],
            f.full_if_gc_stops.seconds.unwrap_or(f64::INFINITY),
        );
        if let Some(s) = &f.steady_state {
            self.set(
                "identity_steady_state_ratio",
                "Identities a working GC holds at that pace (stale ones kept heartbeat timeout plus GC interval, plus those in use) over the local range; above 1 no GC keeps up. Absent when GC is disabled",
                &[],
                s.needed as f64 / s.capacity.max(1) as f64,
            );
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cilium_gc_documents::report::{Abort, AbortReason};
    use cilium_gc_testkit::samples::report as sample;

    pub(crate) fn parsed(text: &str) -> prometheus_parse::Scrape {
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .expect("valid Prometheus text format")
    }

    pub(crate) fn value(scrape: &prometheus_parse::Scrape, name: &str) -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name)
            .map(|s| match s.value {
                prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
                ref other => panic!("{name} is not a gauge: {other:?}"),
            })
    }

    #[test]
    fn a_successful_run_is_its_own_last_success() {
        let mut r = sample();
        r.exit_code = 0;
        r.aborted = None;
        let text = encode(&r, Some(1.0));
        let s = parsed(&text);
        let finished = r.span.finished_at.as_millisecond() as f64 / 1000.0;
        assert_eq!(value(&s, LAST_SUCCESS), Some(finished));
        assert_eq!(
            value(&s, "cilium_gc_last_run_timestamp_seconds"),
            Some(finished)
        );
        assert_eq!(value(&s, "cilium_gc_run_success"), Some(1.0));
        assert_eq!(
            value(&s, "cilium_gc_deleted_identities"),
            Some(r.summary.deleted as f64)
        );
        assert_eq!(
            value(&s, "cilium_gc_conflicts"),
            Some(r.summary.conflicts as f64)
        );
        assert_eq!(
            value(&s, "cilium_gc_run_duration_seconds"),
            Some(r.span.duration_seconds)
        );
        // Every reason is present, so a POST replaces them all.
        let reasons: Vec<_> = s
            .samples
            .iter()
            .filter(|x| x.metric == "cilium_gc_identities")
            .map(|x| x.labels.get("reason").unwrap().to_string())
            .collect();
        assert_eq!(reasons.len(), 7, "{reasons:?}");
        assert!(reasons.contains(&"mark-too-recent".to_string()));
        let stale = s
            .samples
            .iter()
            .find(|x| x.metric == "cilium_gc_identities" && x.labels.get("reason") == Some("stale"))
            .unwrap();
        assert!(
            matches!(stale.value, prometheus_parse::Value::Gauge(v) if v == r.summary.reasons.stale as f64)
        );
        // Every family is typed and documented.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(
                text.contains(&format!("# TYPE {name} gauge")),
                "{name} untyped"
            );
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} undocumented"
            );
            assert!(name.starts_with("cilium_gc_"), "{name}");
        }
    }

    #[test]
    fn a_failed_run_carries_the_previous_success_or_omits_it() {
        let mut r = sample();
        r.exit_code = 4;
        let s = parsed(&encode(&r, None));
        assert_eq!(value(&s, LAST_SUCCESS), None);
        assert_eq!(value(&s, "cilium_gc_run_success"), Some(0.0));
        assert_eq!(value(&s, "cilium_gc_run_exit_code"), Some(4.0));
        let text = encode(&r, Some(1_700_000_000.5));
        assert_eq!(value(&parsed(&text), LAST_SUCCESS), Some(1_700_000_000.5));
        assert_eq!(last_success_in(&text), Some(1_700_000_000.5));
        r.exit_code = 0;
        r.aborted = Some(Abort {
            reason: AbortReason::Interrupted,
            message: "x".into(),
        });
        assert!(!succeeded(&r));
    }
}

#[cfg(test)]
mod forecast_tests {
    use cilium_gc_documents::forecast::{Forecast, FullIfGcStops, Pace, PaceSource, SteadyState};
    use cilium_gc_testkit::samples::report as sample;

    use super::tests::{parsed, value};
    use super::*;

    fn forecast(seconds: Option<f64>, steady: Option<(u64, u64)>) -> Forecast {
        Forecast {
            windows: Vec::new(),
            sample: None,
            pace: Pace {
                rate_per_hour: 1200.0,
                source: PaceSource::CreationTimes,
                window: "5m".into(),
                window_seconds: 300.0,
                created: 100,
            },
            full_if_gc_stops: FullIfGcStops {
                headroom: 6528,
                seconds,
                at: None,
            },
            steady_state: steady.map(|(needed, capacity)| SteadyState {
                heartbeat_timeout_seconds: 1800.0,
                gc_interval_seconds: 900.0,
                held_seconds: 2700.0,
                stale_held: 900,
                stale_held_max: 1200,
                in_use: needed - 900,
                needed,
                capacity,
                percent_of_range: needed as f64 * 100.0 / capacity as f64,
                exceeds_range: needed > capacity,
            }),
            created_per_hour: vec![0; 48],
            fit: None,
        }
    }

    #[test]
    fn the_forecast_gauges_say_the_reports_numbers() {
        let mut r = sample();
        r.forecast = Some(forecast(Some(19_584.0), Some((71_808, 65_280))));
        let text = encode(&r, None);
        let s = parsed(&text);
        assert_eq!(value(&s, FULL_IF_GC_STOPS), Some(19_584.0));
        assert_eq!(value(&s, STEADY_STATE_RATIO), Some(1.1));
        assert_eq!(
            value(&s, "cilium_gc_identity_creation_rate_per_hour"),
            Some(1200.0)
        );
        for name in [FULL_IF_GC_STOPS, STEADY_STATE_RATIO] {
            assert!(text.contains(&format!("# TYPE {name} gauge")), "{text}");
        }
    }

    /// Nothing created: never full, said as +Inf (a missing sample would
    /// leave the previous push's value in a Pushgateway). Full: 0. GC
    /// disabled: no steady state. No forecast (the list did not complete):
    /// none of the three, and every other metric unchanged.
    #[test]
    fn never_full_is_infinite_and_no_forecast_no_gauges() {
        let mut r = sample();
        r.forecast = Some(forecast(None, None));
        let s = parsed(&encode(&r, None));
        assert_eq!(value(&s, FULL_IF_GC_STOPS), Some(f64::INFINITY));
        assert_eq!(value(&s, STEADY_STATE_RATIO), None);
        r.forecast = Some(forecast(Some(0.0), Some((1000, 65_280))));
        assert_eq!(
            value(&parsed(&encode(&r, None)), FULL_IF_GC_STOPS),
            Some(0.0)
        );
        let with = encode(&r, None);
        r.forecast = None;
        let without = encode(&r, None);
        assert!(!without.contains("cilium_gc_identity_creation_rate_per_hour"));
        assert!(!without.contains(FULL_IF_GC_STOPS) && !without.contains(STEADY_STATE_RATIO));
        // (A family's samples come in no fixed order: compare sorted.)
        let mut kept: Vec<&str> = with
            .lines()
            .filter(|l| {
                !["rate_per_hour", "full_if_gc", "steady_state"]
                    .iter()
                    .any(|g| l.contains(g))
            })
            .collect();
        let mut unchanged: Vec<&str> = without.lines().collect();
        kept.sort_unstable();
        unchanged.sort_unstable();
        assert_eq!(kept, unchanged);
    }
}
