//! How long before `CiliumIdentitySpaceNearlyFull` the forecast's alert
//! fires, judged by the real promtool on two days of a cluster's life: 18,000
//! identities in use, a trickle of new ones, then a job churn. On the first,
//! cilium-operator's identity GC has stopped (the outage this plugin exists
//! for) and the churn is 6,000 new identities an hour; on the second, GC
//! works (an unused identity is marked on the next 15-minute pass and
//! deleted three passes later, once the mark is over 30 minutes old) and the
//! churn, 70,000 an hour, is more than it holds. The CronJob runs a scan
//! every 15 minutes; each run's metrics are what the plugin's own code
//! makes of the cluster at that moment (`diagnose::analyze`'s forecast, the
//! function every scan report calls, encoded by `views::metrics`); between
//! runs the Pushgateway holds the last push, as Prometheus scrapes it.
//!
//! Prints the lead times, the figures docs/metrics.md quotes
//! (benches/results/forecast-alert-lead-time.txt holds the raw output).

use std::collections::BTreeMap;
use std::path::Path;

use cilium_gc_cluster::model::Identity;
use cilium_gc_diagnose::{analyze, IdentityRecord, Input};
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
/// New identities per hour before the churn, since two days before.
const TRICKLE_PER_HOUR: i64 = 120;
/// The first id of cluster 0's local range, and its size.
const FIRST_ID: u64 = 256;
const CAPACITY: u64 = 65_280;
/// cilium-operator's GC passes, and its heartbeat timeout, in seconds.
const GC_INTERVAL: i64 = 900;
const HEARTBEAT_TIMEOUT: i64 = 1800;
/// The operator's passes run at 7 past the quarter: not in step with the
/// CronJob's runs (on the quarter), as two independent schedules are not.
const GC_OFFSET: i64 = 420;
/// The forecast's alert, and the one it must beat.
const SOON: &str = "CiliumIdentitySpaceFullSoon";
const NEARLY_FULL: &str = "CiliumIdentitySpaceNearlyFull";
/// The raw output docs/metrics.md quotes.
const RESULT: &str = "benches/results/forecast-alert-lead-time.txt";

/// One day of the cluster: the churn and whether GC works.
#[derive(Clone, Copy)]
struct Day {
    /// New identities per hour from `churn_from` (minutes) on.
    churn_per_hour: i64,
    churn_from: i64,
    gc_works: bool,
}

impl Day {
    /// When cilium-operator deletes an identity created (unused) at `t`:
    /// marked on the first pass at or after it, deleted on the first pass
    /// once the mark is older than the timeout; never when GC has stopped.
    fn deleted_at(self, t: i64) -> i64 {
        if !self.gc_works {
            return i64::MAX;
        }
        let since = t - GC_OFFSET;
        let marked = GC_OFFSET
            + since.div_euclid(GC_INTERVAL) * GC_INTERVAL
            + if since.rem_euclid(GC_INTERVAL) == 0 {
                0
            } else {
                GC_INTERVAL
            };
        // Passes at marked + 15m (mark 15m old) and + 30m (30m: not over
        // the timeout) keep it; the one at + 45m deletes it.
        marked + HEARTBEAT_TIMEOUT + GC_INTERVAL
    }

    /// Every creation attempt up to `at` seconds, in time order: the
    /// trickle since two days before the start, then the churn.
    fn attempts(self, at: i64) -> Vec<i64> {
        let mut out: Vec<i64> = (0..)
            .map(|k| -48 * 3600 + k * 3600 / TRICKLE_PER_HOUR)
            .take_while(|t| *t <= at)
            .collect();
        out.extend(
            (0..)
                .map(|k| self.churn_from * 60 + k * 3600 / self.churn_per_hour)
                .take_while(|t| *t <= at),
        );
        out.sort_unstable();
        out
    }

    /// Creation times, in seconds from the series' start, of the unused
    /// identities that exist at `at` seconds. A creation fails while the
    /// range is full; GC deletes in creation order.
    fn unused_at(self, at: i64) -> Vec<i64> {
        let mut live = std::collections::VecDeque::new();
        for t in self.attempts(at) {
            while live.front().is_some_and(|c| self.deleted_at(*c) <= t) {
                live.pop_front();
            }
            if (live.len() as u64) < CAPACITY - IN_USE {
                live.push_back(t);
            }
        }
        while live.front().is_some_and(|c| self.deleted_at(*c) <= at) {
            live.pop_front();
        }
        live.into()
    }
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
fn run_at(day: Day, start: Timestamp, at: i64) -> Vec<(String, f64)> {
    let now = start + SignedDuration::from_mins(at);
    let unused = day.unused_at(at * 60);
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
fn series(day: Day, start: Timestamp) -> Vec<Value> {
    let mut by_series: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let runs: Vec<Vec<(String, f64)>> = (0..=MINUTES / EVERY)
        .map(|k| run_at(day, start, k * EVERY))
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

/// The first minute the forecast's alert and the 80% one fire on `day`,
/// and promtool's proof at the first: `CiliumIdentitySpaceFullSoon`
/// firing, `CiliumIdentitySpaceNearlyFull` (and every other alert) quiet.
fn lead_time(dir: &Path, day: Day, what: &str) -> String {
    let start: Timestamp = "2026-03-02T00:00:00Z".parse().unwrap();
    let input = series(day, start);
    let soon = first_firing(dir, &input, SOON);
    let nearly_full = first_firing(dir, &input, NEARLY_FULL);
    assert!(
        soon < nearly_full,
        "{what}: {SOON} at {soon}m, {NEARLY_FULL} at {nearly_full}m"
    );
    let at_soon = [(SOON, None)];
    let rules = rule_file(dir);
    let tests = json!({
        "rule_files": [rules.to_str().unwrap()],
        "evaluation_interval": "1m",
        "tests": [
            case(&format!("{what}: before the churn"), input.clone(), &format!("{}m", day.churn_from - 5), &[]),
            case(&format!("{what}: the forecast's alert alone"), input.clone(), &format!("{soon}m"), &at_soon),
        ],
    });
    let file = dir.join("lead-time.test.yaml");
    std::fs::write(&file, serde_json::to_string_pretty(&tests).unwrap()).unwrap();
    let out = promtool(&["test", "rules", file.to_str().unwrap()], None);
    super::assert_ok(&out, &format!("promtool test rules, {what}"));
    format!(
        "lead time, {what}: {SOON} fired at {}, {NEARLY_FULL} at {}: {} earlier ({IN_USE} identities in use, {}/h new from {}, a scan every {EVERY}m)",
        hours_minutes(soon),
        hours_minutes(nearly_full),
        hours_minutes(nearly_full - soon),
        day.churn_per_hour,
        hours_minutes(day.churn_from),
    )
}

/// The forecast's alert fires before the 80% one: hours before when GC has
/// stopped, minutes before when GC works but cannot hold the churn (the
/// range then fills within about one heartbeat timeout).
#[test]
fn full_soon_fires_before_nearly_full_on_a_filling_range() {
    if tools::bin_dir().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let stopped = Day {
        churn_per_hour: 6_000,
        churn_from: 60,
        gc_works: false,
    };
    let working = Day {
        churn_per_hour: 70_000,
        churn_from: 65,
        gc_works: true,
    };
    // Premise: the working GC's model deletes (marked at the next pass,
    // deleted once the mark is over 30m old), the stopped one never does.
    assert_eq!(working.deleted_at(1), 420 + 2700);
    assert_eq!(working.deleted_at(420), 420 + 2700);
    assert_eq!(working.deleted_at(421), 1320 + 2700);
    assert_eq!(stopped.deleted_at(1), i64::MAX);
    let lines = [
        lead_time(dir.path(), stopped, "GC stopped"),
        lead_time(dir.path(), working, "GC working"),
    ];
    for line in &lines {
        println!("{line}");
    }
    for quoted in [RESULT, "docs/metrics.md"] {
        let text = std::fs::read_to_string(repo_path(quoted)).unwrap_or_default();
        for line in &lines {
            assert!(
                text.contains(line.as_str()),
                "{quoted} does not quote:\n{line}"
            );
        }
    }
}
