//! Whether cilium-operator's identity-GC passes complete, from its own
//! metrics: read through the API server's pod proxy
//! (`/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/metrics`, the optional
//! `pods/proxy` permission), parsed and judged here. Pure: text and plain
//! numbers in, [`OperatorGcMetrics`] out.
//!
//! What the metrics can and cannot say, read in cilium/cilium v1.15.6 and
//! v1.19.3 (`operator/identitygc/crd_gc.go`, `metrics.go`):
//! - `cilium_operator_identity_gc_runs{outcome="success"}` counts passes
//!   that reached their end. A pass that meets an error (a 409 on a delete
//!   in 1.15, cilium#33142; a 404 on a delete or any failed mark update in
//!   1.19) `return`s before that line and is counted **nowhere**: `outcome=
//!   "fail"` only counts passes cut by a cancelled context. So an abandoned
//!   pass shows as a success counter that does not keep pace with the
//!   operator's uptime (`cilium_operator_process_start_time_seconds`)
//!   divided by `identity-gc-interval`, or does not move between two reads
//!   a GC interval apart.
//! - `cilium_operator_identity_gc_entries{status="alive"|"deleted"}` is
//!   set at the end of a completed pass: absent until one completes.
//! - The GC logs its mark and delete errors at error level, which the
//!   operator counts in `cilium_operator_errors_warnings_total{level=
//!   "error"}` (`"ERROR"` in 1.19) under its log subsystem
//!   (`identity-heartbeat` in 1.15, seen with the real one).
//! - Only the leader runs GC: a standby replica has no `identity_gc_*`
//!   series at all.
//! - Passes do not start every `identity-gc-interval`: Cilium's controller
//!   waits the interval *after* a pass ends (`pkg/controller`), so a pass
//!   that takes as long as the interval halves the number of passes. 1.16
//!   and later publish the last completed pass's duration
//!   (`cilium_operator_identity_gc_latency{outcome="success"}`, a gauge), and
//!   the expected passes count with it; 1.15 does not, and a long pass there
//!   can look like missed passes (docs/real-cilium.md).

use cilium_gc_cluster::cluster::ApiClient;
use cilium_gc_cluster::stop::Stop;

use crate::input;
use crate::workloads::addr_port;
use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use cilium_gc_cluster::humanize::human_duration;
use cilium_gc_documents::diagnosis::{
    self as types, GcCounters, OperatorGcMetrics, OperatorMetricsRead, PassVerdict,
};

/// Passes needed since the operator started before a single read can judge.
pub(crate) const MIN_EXPECTED_PASSES: f64 = 3.0;
/// A leader that completed fewer than this share of the passes its uptime
/// allows is abandoning them.
pub(crate) const COMPLETED_SHARE: f64 = 0.5;

/// One sample of the text exposition format: name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parse Prometheus text format 0.0.4: comments and malformed lines are
/// skipped (a metric the judgement needs is then simply absent).
pub(crate) fn parse_exposition(text: &str) -> Vec<Sample> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (name, labels, rest) = match line.find('{') {
        Some(open) => {
            let close = open + line[open..].find('}')?;
            (
                &line[..open],
                parse_labels(&line[open + 1..close])?,
                &line[close + 1..],
            )
        }
        None => {
            let (n, r) = line.split_once(char::is_whitespace)?;
            (n, BTreeMap::new(), r)
        }
    };
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.trim().to_string(),
        labels,
        value,
    })
}

/// `a="x",b="y\"z"`: label values are quoted with `\\`, `\"` and `\n` escapes.
fn parse_labels(s: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let after = after.trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        out.insert(key.trim().to_string(), value);
        rest = after[end + 1..].trim_start().trim_start_matches(',').trim();
    }
    Some(out)
}

/// The identity-GC counters in one scrape, read at `at`.
pub(crate) fn counters(samples: &[Sample], at: Timestamp) -> GcCounters {
    let sum = |name: &str, label: &str, value: &str| -> Option<u64> {
        let found: Vec<f64> = samples
            .iter()
            .filter(|s| s.name == name && s.labels.get(label).map(String::as_str) == Some(value))
            // 1.19 adds identity_type (crd or kvstore): this tool is about CRDs.
            .filter(|s| s.labels.get("identity_type").is_none_or(|t| t == "crd"))
            .map(|s| s.value)
            .collect();
        (!found.is_empty()).then(|| found.iter().sum::<f64>().max(0.0) as u64)
    };
    let gc_errors: Vec<f64> = samples
        .iter()
        .filter(|s| {
            // The operator's is `cilium_operator_errors_warnings_total`
            // (1.15 and 1.19 alike); level `error` in 1.15, `ERROR` in 1.19;
            // the GC's errors under `identity-heartbeat` in 1.15.
            (s.name == "cilium_operator_errors_warnings_total"
                || s.name == "cilium_errors_warnings_total")
                && s.labels
                    .get("level")
                    .is_some_and(|l| l.eq_ignore_ascii_case("error"))
                && s.labels
                    .get("subsystem")
                    .is_some_and(|sub| sub.contains("identit"))
        })
        .map(|s| s.value)
        .collect();
    let started = samples
        .iter()
        .find(|s| s.name == "cilium_operator_process_start_time_seconds")
        .and_then(|s| Timestamp::from_millisecond((s.value * 1000.0) as i64).ok());
    let last_pass = samples
        .iter()
        .filter(|s| s.name == "cilium_operator_identity_gc_latency")
        .filter(|s| s.labels.get("outcome").map(String::as_str) == Some("success"))
        .filter(|s| s.labels.get("identity_type").is_none_or(|t| t == "crd"))
        .map(|s| s.value)
        .find(|v| v.is_finite() && *v >= 0.0);
    let runs = "cilium_operator_identity_gc_runs";
    let entries = "cilium_operator_identity_gc_entries";
    GcCounters {
        read_at: at,
        process_started_at: started,
        runs_success: sum(runs, "outcome", "success"),
        runs_fail: sum(runs, "outcome", "fail"),
        entries_alive: sum(entries, "status", "alive"),
        entries_deleted: sum(entries, "status", "deleted"),
        gc_errors: (!gc_errors.is_empty()).then(|| gc_errors.iter().sum::<f64>() as u64),
        last_pass_seconds: last_pass,
    }
}

/// Whether this scrape has any identity-GC series: only the leader's has.
fn collects(c: &GcCounters) -> bool {
    c.runs_success.is_some() || c.runs_fail.is_some() || c.entries_alive.is_some()
}

/// Judge one operator pod's reads: its passes complete, are abandoned, or
/// the reads cannot tell. `interval` is `identity-gc-interval`.
pub(crate) fn judge_pod(read: &mut OperatorMetricsRead, interval: Duration) {
    let Some(first) = &read.first else {
        read.verdict = PassVerdict::Unknown;
        return;
    };
    let last = read.second.as_ref().unwrap_or(first);
    // One pass every interval plus the pass itself, when its length is known.
    let pass_s = last.last_pass_seconds.unwrap_or(0.0);
    let interval_s = interval.as_secs_f64().max(1.0) + pass_s;
    let uptime = last
        .process_started_at
        .map(|s| last.read_at.duration_since(s).as_secs_f64().max(0.0));
    let completed = last.runs_success.unwrap_or(0) + last.runs_fail.unwrap_or(0);
    read.expected_passes = uptime.map(|u| (u / interval_s).floor() + 1.0);
    read.completed_passes = Some(completed);
    let mut why = Vec::new();
    // Two reads at least a GC interval apart: the success counter must move.
    if let (Some(second), Some(s0), Some(s1)) = (
        &read.second,
        first.runs_success,
        read.second.as_ref().and_then(|s| s.runs_success),
    ) {
        let window = second.read_at.duration_since(first.read_at).as_secs_f64();
        if window >= interval_s {
            let moved = s1.saturating_sub(s0);
            read.verdict = if moved == 0 {
                PassVerdict::NotCompleting
            } else {
                PassVerdict::Completing
            };
            why.push(format!(
                "{moved} passes completed in {} between two reads (identity-gc-interval {}{})",
                human_duration(window),
                human_duration(interval.as_secs_f64()),
                pass_clause(pass_s)
            ));
            read.evidence = why;
            return;
        }
    }
    let Some(expected) = read.expected_passes else {
        read.verdict = PassVerdict::Unknown;
        read.evidence =
            vec!["no cilium_operator_process_start_time_seconds: uptime unknown".into()];
        return;
    };
    if !collects(last) {
        read.verdict = if expected >= MIN_EXPECTED_PASSES {
            PassVerdict::NoPasses
        } else {
            PassVerdict::Unknown
        };
        read.evidence = vec![format!(
            "no identity-GC series after {} up: a standby replica (only the leader collects), or no pass has ever completed",
            human_duration(uptime.unwrap_or_default())
        )];
        return;
    }
    why.push(format!(
        "{completed} passes completed in {} up; identity-gc-interval {}{} allows about {expected:.0}",
        human_duration(uptime.unwrap_or_default()),
        human_duration(interval.as_secs_f64()),
        pass_clause(pass_s)
    ));
    read.verdict = if expected < MIN_EXPECTED_PASSES {
        PassVerdict::Unknown
    } else if (completed as f64) < COMPLETED_SHARE * expected {
        PassVerdict::NotCompleting
    } else {
        PassVerdict::Completing
    };
    read.evidence = why;
}

/// ", plus the last pass's 30m" when the operator published its length.
fn pass_clause(pass_s: f64) -> String {
    if pass_s > 0.0 {
        format!(" plus the last pass's {}", human_duration(pass_s))
    } else {
        String::new()
    }
}

/// The verdict over every operator pod read: the leader's (the pod whose
/// scrape has identity-GC series) wins; `Unknown` when nothing was read.
pub(crate) fn summarise(
    mut pods: Vec<OperatorMetricsRead>,
    interval: Duration,
) -> OperatorGcMetrics {
    for p in &mut pods {
        judge_pod(p, interval);
        if let Some(c) = p.second.as_ref().or(p.first.as_ref()) {
            if let Some(e) = c.gc_errors.filter(|e| *e > 0) {
                p.evidence.push(format!(
                    "{e} errors logged by the identity GC (cilium_operator_errors_warnings_total)"
                ));
            }
        }
    }
    let rank = |v: PassVerdict| match v {
        PassVerdict::NotCompleting => 0,
        PassVerdict::Completing => 1,
        PassVerdict::NoPasses => 2,
        PassVerdict::Unknown => 3,
    };
    let collecting = pods
        .iter()
        .filter(|p| p.first.as_ref().is_some_and(collects))
        .map(|p| p.verdict)
        .min_by_key(|v| rank(*v));
    let verdict = collecting.unwrap_or_else(|| {
        if !pods.is_empty() && pods.iter().all(|p| p.verdict == PassVerdict::NoPasses) {
            PassVerdict::NoPasses
        } else {
            PassVerdict::Unknown
        }
    });
    OperatorGcMetrics {
        verdict,
        gc_interval_seconds: interval.as_secs_f64(),
        pods,
    }
}

/// Read each running operator pod's metrics through the API server's pod
/// proxy, once, or twice `wait` apart. Optional like the other workload
/// reads: a refusal is recorded per pod and the diagnosis falls back on
/// the marks and the version.
#[tracing::instrument(skip_all)]
pub(crate) async fn read_operator_metrics(
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
            let samples = parse_exposition(&text);
            Some(counters(&samples, api.clock.now()))
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

#[cfg(test)]
mod tests {
    use super::*;

    const V115: &str = r#"# HELP cilium_operator_identity_gc_runs The number of times identity garbage collector has run
# TYPE cilium_operator_identity_gc_runs gauge
cilium_operator_identity_gc_runs{outcome="success"} 2
# TYPE cilium_operator_identity_gc_entries gauge
cilium_operator_identity_gc_entries{status="alive"} 300
cilium_operator_identity_gc_entries{status="deleted"} 0
cilium_operator_errors_warnings_total{level="error",subsystem="identity-heartbeat"} 7
cilium_operator_errors_warnings_total{level="warning",subsystem="identity-heartbeat"} 1
cilium_operator_process_start_time_seconds 1.7e+09
"#;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn exposition_parses_labels_escapes_and_exponents() {
        let s = parse_exposition(
            "a{x=\"1\",y=\"q\\\"z\"} 3\nb 4.5e1 1700000000\n# c 1\nbroken{ 1\nd{} +Inf\n",
        );
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].labels["y"], "q\"z");
        assert_eq!(s[1].value, 45.0);
        assert!(s[2].value.is_infinite());
    }

    #[test]
    fn counters_read_both_versions_names() {
        let c = counters(&parse_exposition(V115), at(1_700_000_100));
        assert_eq!(c.runs_success, Some(2));
        assert_eq!(c.runs_fail, None);
        assert_eq!(c.entries_alive, Some(300));
        assert_eq!(c.gc_errors, Some(7));
        assert_eq!(c.process_started_at, Some(at(1_700_000_000)));
        // 1.19: identity_type label, kvstore series ignored.
        let v119 = "cilium_operator_identity_gc_runs{identity_type=\"crd\",outcome=\"success\"} 5\ncilium_operator_identity_gc_runs{identity_type=\"kvstore\",outcome=\"success\"} 9\n";
        assert_eq!(
            counters(&parse_exposition(v119), at(0)).runs_success,
            Some(5)
        );
    }

    fn read(first: GcCounters, second: Option<GcCounters>) -> OperatorMetricsRead {
        OperatorMetricsRead {
            pod: "cilium-operator-1".into(),
            port: 9963,
            first: Some(first),
            second,
            ..OperatorMetricsRead::default()
        }
    }

    fn c(read_at: i64, started: i64, success: Option<u64>) -> GcCounters {
        GcCounters {
            read_at: at(read_at),
            process_started_at: Some(at(started)),
            runs_success: success,
            entries_alive: success.map(|_| 10),
            ..GcCounters::default()
        }
    }

    #[test]
    fn passes_are_judged_against_uptime_and_between_reads() {
        let min = Duration::from_secs(60);
        // Up 10 minutes at 1m: ~11 passes, 2 completed: abandoned.
        let mut r = read(c(600, 0, Some(2)), None);
        judge_pod(&mut r, min);
        assert_eq!(r.verdict, PassVerdict::NotCompleting);
        // 10 completed: fine.
        let mut r = read(c(600, 0, Some(10)), None);
        judge_pod(&mut r, min);
        assert_eq!(r.verdict, PassVerdict::Completing);
        // Up 1 minute: too early to tell from one read.
        let mut r = read(c(60, 0, Some(0)), None);
        judge_pod(&mut r, min);
        assert_eq!(r.verdict, PassVerdict::Unknown);
        // Two reads 2 minutes apart, counter still: not completing even if
        // the total looked fine.
        let mut r = read(c(600, 0, Some(10)), Some(c(720, 0, Some(10))));
        judge_pod(&mut r, min);
        assert_eq!(r.verdict, PassVerdict::NotCompleting);
        let mut r = read(c(600, 0, Some(1)), Some(c(720, 0, Some(3))));
        judge_pod(&mut r, min);
        assert_eq!(r.verdict, PassVerdict::Completing);
    }

    #[test]
    fn a_long_pass_is_not_counted_as_missed_passes() {
        let quarter = Duration::from_secs(900);
        // Up 10 hours at 15m, each pass 30m: a pass starts every 45m, so 13
        // completed passes are all there are.
        let long = |read_at, success| GcCounters {
            last_pass_seconds: Some(1800.0),
            ..c(read_at, 0, success)
        };
        let mut r = read(long(36_000, Some(13)), None);
        judge_pod(&mut r, quarter);
        assert_eq!(r.verdict, PassVerdict::Completing, "{:?}", r.evidence);
        assert_eq!(r.expected_passes, Some(14.0));
        assert!(
            r.evidence[0].contains("plus the last pass's 30m"),
            "{:?}",
            r.evidence
        );
        // Without the pass length (1.15), the same counter reads as missed.
        let mut r = read(c(36_000, 0, Some(13)), None);
        judge_pod(&mut r, quarter);
        assert_eq!(r.verdict, PassVerdict::NotCompleting);
        // Two reads 20m apart with a 30m pass: too close to judge by the
        // counter alone, so the uptime decides.
        let mut r = read(long(36_000, Some(13)), Some(long(37_200, Some(13))));
        judge_pod(&mut r, quarter);
        assert_eq!(r.verdict, PassVerdict::Completing, "{:?}", r.evidence);
    }

    #[test]
    fn the_pass_length_is_read_from_the_crd_success_gauge() {
        let text = "cilium_operator_identity_gc_latency{identity_type=\"kvstore\",outcome=\"success\"} 9\ncilium_operator_identity_gc_latency{identity_type=\"crd\",outcome=\"fail\"} 7\ncilium_operator_identity_gc_latency{identity_type=\"crd\",outcome=\"success\"} 12.5\n";
        assert_eq!(
            counters(&parse_exposition(text), at(0)).last_pass_seconds,
            Some(12.5)
        );
        assert_eq!(
            counters(&parse_exposition(V115), at(0)).last_pass_seconds,
            None
        );
    }

    #[test]
    fn the_leader_decides_and_a_standby_does_not() {
        let min = Duration::from_secs(60);
        let standby = read(c(600, 0, None), None);
        let leader = read(c(600, 0, Some(1)), None);
        let m = summarise(vec![standby.clone(), leader], min);
        assert_eq!(m.verdict, PassVerdict::NotCompleting);
        assert_eq!(m.pods[0].verdict, PassVerdict::NoPasses);
        let m = summarise(vec![standby], min);
        assert_eq!(m.verdict, PassVerdict::NoPasses);
        assert_eq!(summarise(vec![], min).verdict, PassVerdict::Unknown);
    }
}
