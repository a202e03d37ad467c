//! Prometheus metrics of a `scan`/`delete` run, for scheduled runs: a CronJob
//! that silently stops deleting is how the original outage happens again.
//!
//! Every metric is derived from the finished [`Report`], so the metrics and
//! the report never disagree. They are gauges describing *the last run*
//! (Prometheus' convention for batch jobs): a Pushgateway or a textfile holds
//! exactly one run's values, so a counter would only ever show one run.
//!
//! Two sinks:
//! - [`write_textfile`]: node-exporter's textfile-collector format, written
//!   atomically (the collector must never read half a file);
//! - [`push`]: an HTTP `POST` to a Pushgateway under `job=<name>`. `POST`
//!   (not `PUT`) replaces only the metric names pushed, which is what keeps
//!   `cilium_gc_last_success_timestamp_seconds` from the last good run when
//!   a failed run pushes without it.
//!
//! [`encode`] is pure; only the two sinks do I/O.

use std::path::Path;
use std::time::Duration;

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

mod forecast;

pub use forecast::{FULL_IF_GC_STOPS, STEADY_STATE_RATIO};

use cilium_gc::policy::Reason;
use cilium_gc::report::Report;
use cilium_gc_documents::report::Mode;

/// Prefix of every metric name.
pub const PREFIX: &str = "cilium_gc";
/// Name of the metric an alert uses to see that GC stopped succeeding.
pub const LAST_SUCCESS: &str = "cilium_gc_last_success_timestamp_seconds";
/// `Content-Type` of the Prometheus text format (0.0.4) we write and push.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
/// The Pushgateway job label when `--pushgateway-job` is not given.
pub const DEFAULT_JOB: &str = "kubectl-cilium-gc";
/// The label that tells a fleet run's clusters apart.
pub const CLUSTER_LABEL: &str = "cluster";
/// How long a push may take before it is reported as failed.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(15);

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

/// Writes the metrics of `report` to `path` for node-exporter's textfile
/// collector, atomically. A failed run keeps the previous file's
/// [`LAST_SUCCESS`], so an alert on it fires when runs keep failing.
///
/// Errs when the directory is not writable; not worth retrying.
pub fn write_textfile(path: &Path, report: &Report) -> std::io::Result<()> {
    let previous = if succeeded(report) {
        None
    } else {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| last_success_in(&t))
    };
    crate::views::format::write_atomically(path, encode(report, previous).as_bytes())
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

/// Writes a fleet run's metrics to `path` (see [`write_textfile`]): each
/// cluster that failed keeps its own previous last success.
pub fn write_fleet_textfile(path: &Path, clusters: &[(&str, &Report)]) -> std::io::Result<()> {
    let previous = std::fs::read_to_string(path).unwrap_or_default();
    let with_previous: Vec<(&str, &Report, Option<f64>)> = clusters
        .iter()
        .map(|(label, report)| {
            let prev = (!succeeded(report))
                .then(|| last_success_of(&previous, label))
                .flatten();
            (*label, *report, prev)
        })
        .collect();
    crate::views::format::write_atomically(path, encode_fleet(&with_previous).as_bytes())
}

/// Why a push to the Pushgateway failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The URL is not an http(s) URL.
    #[error("invalid Pushgateway URL {url:?}: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No TLS roots could be loaded for an https URL.
    #[error("cannot set up TLS for the Pushgateway")]
    Tls(#[source] std::io::Error),
    /// The request could not be sent or got no answer.
    #[error("cannot reach the Pushgateway at {url}")]
    Send {
        /// Where we pushed.
        url: String,
        /// The transport error.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// No answer within [`PUSH_TIMEOUT`].
    #[error("the Pushgateway at {url} did not answer within {}s", PUSH_TIMEOUT.as_secs())]
    Timeout {
        /// Where we pushed.
        url: String,
    },
    /// The Pushgateway answered with an error status.
    #[error("the Pushgateway at {url} answered {status}: {body}")]
    Status {
        /// Where we pushed.
        url: String,
        /// The HTTP status.
        status: http::StatusCode,
        /// The start of its answer.
        body: String,
    },
}

/// Checks a `--pushgateway` value: an `http://` or `https://` URL.
pub fn parse_pushgateway_url(s: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = s.parse().map_err(|e| format!("{e}"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") if uri.host().is_some() => Ok(uri),
        _ => Err("expected an http:// or https:// URL, e.g. http://pushgateway:9091".into()),
    }
}

/// The Pushgateway URL of `job`'s group: `<base>/metrics/job/<job>`. A job
/// name with characters a path segment cannot carry is sent in the
/// Pushgateway's `job@base64/<base64url>` form.
pub fn push_url(base: &http::Uri, job: &str) -> String {
    let base = base.to_string();
    let base = base.trim_end_matches('/');
    format!("{base}/metrics{}", grouping_segment("job", job))
}

/// Pushes `report`'s metrics to the Pushgateway at `base` under `job`
/// (`POST`: only the pushed names are replaced; see the module doc).
///
/// Errs when the Pushgateway cannot be reached, is too slow, or refuses the
/// body; the caller reports it and keeps the run's exit code. Not retried:
/// the next scheduled run pushes again.
#[tracing::instrument(skip(report))]
pub async fn push(base: &http::Uri, job: &str, report: &Report) -> Result<(), PushError> {
    push_to(push_url(base, job), report).await
}

/// As [`push`], into the group `job=<job>, cluster=<cluster>`: each
/// cluster of a fleet its own group, so one cluster's failed run never
/// replaces another's `last_success_timestamp_seconds`.
pub async fn push_cluster(
    base: &http::Uri,
    job: &str,
    cluster: &str,
    report: &Report,
) -> Result<(), PushError> {
    let url = format!(
        "{}{}",
        push_url(base, job),
        grouping_segment(CLUSTER_LABEL, cluster)
    );
    push_to(url, report).await
}

/// `/<name>/<value>` of a Pushgateway grouping key, in the
/// `<name>@base64/<value>` form when the value has characters a path
/// segment cannot carry (or is empty).
pub fn grouping_segment(name: &str, value: &str) -> String {
    use base64::Engine as _;
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b));
    if plain {
        format!("/{name}/{value}")
    } else {
        let enc = base64::engine::general_purpose::URL_SAFE.encode(value);
        format!("/{name}@base64/{enc}")
    }
}

async fn push_to(url: String, report: &Report) -> Result<(), PushError> {
    use http_body_util::{BodyExt, Full};
    let bad_url = |reason: String| PushError::BadUrl {
        url: url.clone(),
        reason,
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(PushError::Tls)?
        .https_or_http()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, Full<bytes::Bytes>>(connector);
    let request = http::Request::post(&url)
        .header(http::header::CONTENT_TYPE, CONTENT_TYPE)
        .body(Full::new(bytes::Bytes::from(encode(report, None))))
        .map_err(|e| bad_url(e.to_string()))?;
    let answer = async {
        let response = client
            .request(request)
            .await
            .map_err(|source| PushError::Send {
                url: url.clone(),
                source,
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        let body: String = body.trim().chars().take(200).collect();
        Err(PushError::Status {
            url: url.clone(),
            status,
            body,
        })
    };
    match tokio::time::timeout(PUSH_TIMEOUT, answer).await {
        Ok(r) => r,
        Err(_) => Err(PushError::Timeout { url: url.clone() }),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use cilium_gc_documents::report::{Abort, AbortReason};
    use cilium_gc_testkit::samples::report as sample;

    pub(super) fn parsed(text: &str) -> prometheus_parse::Scrape {
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .expect("valid Prometheus text format")
    }

    pub(super) fn value(scrape: &prometheus_parse::Scrape, name: &str) -> Option<f64> {
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

    /// A fleet's textfile: one family per metric, every cluster's sample
    /// labelled, and a failed cluster keeps its own last success (not
    /// another cluster's) across runs.
    #[test]
    fn fleet_textfile_keeps_each_clusters_last_success() {
        let mut ok = sample();
        ok.exit_code = 0;
        ok.aborted = None;
        let mut failed = sample();
        failed.exit_code = 2;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gc.prom");
        // First run: "a" fails, "b \"x\"" succeeds.
        write_fleet_textfile(&path, &[("a", &failed), ("b \"x\"", &ok)]).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert_eq!(last_success_of(&first, "a"), None);
        let b_success = ok.span.finished_at.as_millisecond() as f64 / 1000.0;
        assert_eq!(last_success_of(&first, "b \"x\""), Some(b_success));
        assert_eq!(first.matches("# HELP cilium_gc_run_exit_code ").count(), 1);
        // One registry: every metric has one `# HELP` and one `# TYPE`.
        for kind in ["# HELP ", "# TYPE "] {
            let mut names: Vec<_> = first
                .lines()
                .filter_map(|l| l.strip_prefix(kind)?.split(' ').next())
                .collect();
            let all = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), all, "{kind}repeated:\n{first}");
        }
        let s = parsed(&first);
        let exit = |cluster: &str| {
            s.samples
                .iter()
                .find(|x| {
                    x.metric == "cilium_gc_run_exit_code"
                        && x.labels.get("cluster") == Some(cluster)
                })
                .map(|x| match x.value {
                    prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
                    _ => f64::NAN,
                })
        };
        // (prometheus-parse cuts a label value at an escaped quote, so the
        // quoted label is checked by `last_success_of` above only.)
        assert_eq!(exit("a"), Some(2.0));
        let samples = s
            .samples
            .iter()
            .filter(|x| x.metric == "cilium_gc_run_exit_code");
        assert_eq!(samples.count(), 2);
        // Second run: "b" fails too, and keeps the first run's success.
        write_fleet_textfile(&path, &[("a", &failed), ("b \"x\"", &failed)]).unwrap();
        let second = std::fs::read_to_string(&path).unwrap();
        assert_eq!(last_success_of(&second, "b \"x\""), Some(b_success));
        assert_eq!(last_success_of(&second, "a"), None);
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

    #[test]
    fn textfile_is_replaced_and_keeps_the_last_success_across_failures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cilium_gc.prom");
        let mut r = sample();
        r.exit_code = 0;
        r.aborted = None;
        write_textfile(&path, &r).unwrap();
        let first = last_success_in(&std::fs::read_to_string(&path).unwrap()).unwrap();
        r.exit_code = 4;
        r.span.finished_at += jiff::SignedDuration::from_hours(1);
        write_textfile(&path, &r).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(last_success_in(&text), Some(first));
        assert_eq!(value(&parsed(&text), "cilium_gc_run_exit_code"), Some(4.0));
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file left behind");
    }

    #[test]
    fn push_urls_and_bad_urls() {
        let base = parse_pushgateway_url("http://pg:9091/").unwrap();
        assert_eq!(
            push_url(&base, "kubectl-cilium-gc"),
            "http://pg:9091/metrics/job/kubectl-cilium-gc"
        );
        assert_eq!(
            push_url(&base, "a/b"),
            "http://pg:9091/metrics/job@base64/YS9i"
        );
        assert!(parse_pushgateway_url("pg:9091").is_err());
        assert!(parse_pushgateway_url("ftp://pg").is_err());
        assert!(parse_pushgateway_url("https://pg.example").is_ok());
    }
}
