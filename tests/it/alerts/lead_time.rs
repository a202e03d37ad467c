//! How long before `CiliumIdentitySpaceNearlyFull` the forecast's alert
//! fires, judged by the real promtool on a day of a cluster's life: 18,000
//! identities in use, a trickle of new ones, cilium-operator's identity GC
//! stopped (the outage this plugin exists for), and a job churn of 6,000
//! new identities an hour from the first hour on. The CronJob runs a scan
//! every 15 minutes; each run's metrics are what the plugin's own code
//! makes of the cluster at that moment (`diagnose::analyze`'s forecast, the
//! function every scan report calls, encoded by `views::metrics`); between
//! runs the Pushgateway holds the last push, as Prometheus scrapes it.
//!
//! Prints the lead time, the figure docs/metrics.md quotes
//! (benches/results/forecast-alert-lead-time.txt holds the raw line).

use std::collections::BTreeMap;
use std::path::Path;

use cilium_gc::diagnose::{analyze, IdentityRecord, Input};
use cilium_gc::model::Identity;
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};

use super::{case, fired, promtool, rule_file, JOB};
use crate::support::{repo_path, tools};

/// The series' length, in minutes.
const MINUTES: i64 = 8 * 60;
/// The CronJob's schedule: a run every this many minutes.
const EVERY: i64 = 15;
/// Identities in use throughout.
const IN_USE: u64 = 18_000;
/// New identities per hour before the churn (all left behind: GC stopped).
const TRICKLE_PER_HOUR: i64 = 120;
/// The churn: new identities per hour, from [`CHURN_FROM`] minutes on.
const CHURN_PER_HOUR: i64 = 6_000;
const CHURN_FROM: i64 = 60;
/// The first id of cluster 0's local range, and its size.
const FIRST_ID: u64 = 256;
const CAPACITY: u64 = 65_280;
/// The forecast's alert, and the one it must beat.
const SOON: &str = "CiliumIdentitySpaceFullSoon";
const NEARLY_FULL: &str = "CiliumIdentitySpaceNearlyFull";
/// The raw output docs/metrics.md quotes.
const RESULT: &str = "benches/results/forecast-alert-lead-time.txt";

/// Creation times, in seconds from the series' start, of every identity
/// that is not in use and exists at minute `at`: the trickle since two days
/// before the start, then the churn (GC deletes none of them).
fn unused_created(at: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let trickle_gap = 3600 / TRICKLE_PER_HOUR;
    let mut t = -48 * 3600;
    while t <= at * 60 {
        out.push(t);
        t += trickle_gap;
    }
    let churn_gap = 3600.0 / CHURN_PER_HOUR as f64;
    let mut k = 0.0;
    while CHURN_FROM as f64 * 60.0 + k * churn_gap <= (at * 60) as f64 {
        out.push((CHURN_FROM as f64 * 60.0 + k * churn_gap) as i64);
        k += 1.0;
    }
    // A full range allocates no more.
    out.truncate((CAPACITY - IN_USE) as usize);
    out
}

fn identity(id: u64, created_at: Timestamp) -> IdentityRecord {
    IdentityRecord {
        identity: Identity {
            name: id.to_string(),
            uid: format!("uid-{id}"),
            resource_version: "1".into(),
            created_at: Some(created_at),
            labels: BTreeMap::new(),
            namespace: Some("jobs".into()),
            mark: None,
            last_change: None,
        },
        security_labels: BTreeMap::new(),
    }
}

/// The metrics the scan at minute `at` writes, as (series, value) pairs:
/// the cluster then, its forecast by the plugin's own function, and the
/// report's gauges by the plugin's own encoder.
fn run_at(start: Timestamp, at: i64) -> Vec<(String, f64)> {
    let now = start + SignedDuration::from_mins(at);
    let unused = unused_created(at);
    let mut input = Input {
        config: Some(BTreeMap::new()),
        ..Input::default()
    };
    let old = start - SignedDuration::from_hours(30 * 24);
    for i in 0..IN_USE {
        input.identities.push(identity(FIRST_ID + i, old));
        input.refs.insert(FIRST_ID + i, 1);
    }
    for (i, secs) in unused.iter().enumerate() {
        let id = FIRST_ID + IN_USE + i as u64;
        let created = start + SignedDuration::from_secs(*secs);
        input.identities.push(identity(id, created));
    }
    input.endpoints = IN_USE;
    let diagnosis = analyze(&input, now);
    let mut report = cilium_gc_testkit::samples::report();
    report.exit_code = 0;
    report.aborted = None;
    report.summary.reasons = Default::default();
    report.summary.reasons.in_use = IN_USE;
    report.summary.reasons.unmarked = unused.len() as u64;
    report.forecast = diagnosis.forecast;
    // The times, in promtool's seconds (its clock starts at 0).
    report.span.finished_at = Timestamp::UNIX_EPOCH + SignedDuration::from_mins(at);
    let text = kubectl_cilium_gc::views::metrics::encode(&report, None);
    let scrape =
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parses");
    scrape
        .samples
        .iter()
        .map(|s| {
            let mut labels: Vec<String> = s
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={}", json!(v)))
                .collect();
            labels.push(format!("job={}", json!(JOB)));
            labels.sort();
            let v = match s.value {
                prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
                ref other => panic!("{} is not a gauge: {other:?}", s.metric),
            };
            (format!("{}{{{}}}", s.metric, labels.join(",")), v)
        })
        .collect()
}

/// promtool's `input_series`: each run's values held until the next run.
fn series(start: Timestamp) -> Vec<Value> {
    let mut by_series: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let runs: Vec<Vec<(String, f64)>> = (0..=MINUTES / EVERY)
        .map(|k| run_at(start, k * EVERY))
        .collect();
    for minute in 0..=MINUTES {
        for (name, v) in &runs[(minute / EVERY) as usize] {
            let v = if v.is_infinite() {
                "+Inf".to_owned()
            } else {
                format!("{v}")
            };
            by_series.entry(name.clone()).or_default().push(v);
        }
    }
    by_series
        .into_iter()
        .map(|(series, values)| json!({ "series": series, "values": values.join(" ") }))
        .collect()
}

/// Whether promtool sees `alert` firing at `minute` (and only as the rule
/// file says it fires: labels and annotations).
fn firing(dir: &Path, input: &[Value], alert: &str, minute: i64) -> bool {
    let rules = rule_file(dir);
    let tests = json!({
        "rule_files": [rules.to_str().unwrap()],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": input,
            "alert_rule_test": [{
                "eval_time": format!("{minute}m"),
                "alertname": alert,
                "exp_alerts": [fired(alert, None)],
            }],
        }],
    });
    let file = dir.join(format!("{alert}-{minute}.test.yaml"));
    std::fs::write(&file, tests.to_string()).unwrap();
    promtool(&["test", "rules", file.to_str().unwrap()], None)
        .status
        .success()
}

/// The first minute `alert` fires, by bisection: it must be quiet at the
/// start and fire at the end (asserted), and once firing it stays firing
/// on a range that only fills.
fn first_firing(dir: &Path, input: &[Value], alert: &str) -> i64 {
    let (mut quiet, mut fires) = (0, MINUTES);
    assert!(!firing(dir, input, alert, quiet), "{alert} fires at 0");
    assert!(firing(dir, input, alert, fires), "{alert} never fires");
    while fires - quiet > 1 {
        let mid = (quiet + fires) / 2;
        if firing(dir, input, alert, mid) {
            fires = mid;
        } else {
            quiet = mid;
        }
    }
    fires
}

fn hours_minutes(minutes: i64) -> String {
    format!("{}h{:02}m", minutes / 60, minutes % 60)
}

/// The forecast's alert fires hours before the 80% one on the same series,
/// and promtool proves it at that minute: `CiliumIdentitySpaceFullSoon`
/// firing, `CiliumIdentitySpaceNearlyFull` (and every other alert) quiet.
#[test]
fn full_soon_fires_before_nearly_full_on_a_filling_range() {
    if tools::bin_dir().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let start: Timestamp = "2026-03-02T00:00:00Z".parse().unwrap();
    let input = series(start);
    let soon = first_firing(dir.path(), &input, SOON);
    let nearly_full = first_firing(dir.path(), &input, NEARLY_FULL);
    assert!(
        soon < nearly_full,
        "{SOON} at {soon}m, {NEARLY_FULL} at {nearly_full}m"
    );
    let rules = rule_file(dir.path());
    let tests = json!({
        "rule_files": [rules.to_str().unwrap()],
        "evaluation_interval": "1m",
        "tests": [
            case("churn, GC stopped: before the churn", input.clone(), "50m", &[]),
            case(
                "churn, GC stopped: the forecast's alert alone",
                input.clone(),
                &format!("{soon}m"),
                &[(SOON, None)],
            ),
            case(
                "churn, GC stopped: 80% full too",
                input.clone(),
                &format!("{nearly_full}m"),
                &[(SOON, None), (NEARLY_FULL, None)],
            ),
        ],
    });
    let file = dir.path().join("lead-time.test.yaml");
    std::fs::write(&file, serde_json::to_string_pretty(&tests).unwrap()).unwrap();
    let out = promtool(&["test", "rules", file.to_str().unwrap()], None);
    super::assert_ok(&out, "promtool test rules, lead time");
    let line = format!(
        "lead time: {SOON} fired at {}, {NEARLY_FULL} at {}: {} earlier ({} identities in use, GC stopped, {}/h new from {}, a scan every {EVERY}m)",
        hours_minutes(soon),
        hours_minutes(nearly_full),
        hours_minutes(nearly_full - soon),
        IN_USE,
        CHURN_PER_HOUR,
        hours_minutes(CHURN_FROM),
    );
    println!("{line}");
    for quoted in [RESULT, "docs/metrics.md"] {
        let text = std::fs::read_to_string(repo_path(quoted)).unwrap_or_default();
        assert!(text.contains(&line), "{quoted} does not quote:\n{line}");
    }
}
