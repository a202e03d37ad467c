//! The metrics' two sinks, the I/O around the pure view
//! (`crate::views::metrics`):
//! - [`write_textfile`]: node-exporter's textfile-collector format, written
//!   atomically (the collector must never read half a file);
//! - [`push`]: an HTTP `POST` to a Pushgateway under `job=<name>`. `POST`
//!   (not `PUT`) replaces only the metric names pushed, which is what keeps
//!   `cilium_gc_last_success_timestamp_seconds` from the last good run when
//!   a failed run pushes without it.

use std::path::Path;
use std::time::Duration;

use cilium_gc::report::Report;

use crate::views::metrics::{
    encode, encode_fleet, last_success_in, last_success_of, succeeded, CLUSTER_LABEL, CONTENT_TYPE,
};

/// The Pushgateway job label when `--pushgateway-job` is not given.
pub const DEFAULT_JOB: &str = "kubectl-cilium-gc";
/// How long a push may take before it is reported as failed.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(15);

/// Writes the metrics of `report` to `path` for node-exporter's textfile
/// collector, atomically. A failed run keeps the previous file's
/// [`LAST_SUCCESS`](crate::views::metrics::LAST_SUCCESS), so an alert on it fires when runs keep failing.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::metrics::tests::{parsed, value};
    use cilium_gc_testkit::samples::report as sample;

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
