//! `--metrics-file` and `--pushgateway` (issue 15): what a scheduled run
//! leaves for Prometheus, checked against a small in-process Pushgateway
//! stand-in that records every request.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use prometheus_parse::{Scrape, Value};

use crate::support::calm;
use crate::support::world::World;

/// One request the stand-in Pushgateway received.
#[derive(Debug, Clone)]
struct Pushed {
    method: String,
    path: String,
    content_type: String,
    body: String,
}

/// A Pushgateway stand-in on 127.0.0.1:0 answering `status` to everything.
async fn receiver(status: StatusCode) -> (String, Arc<Mutex<Vec<Pushed>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app =
        axum::Router::new()
            .fallback(
                |State((seen, status)): State<(Arc<Mutex<Vec<Pushed>>>, StatusCode)>,
                 req: Request| async move {
                    let (parts, body) = req.into_parts();
                    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                    seen.lock().unwrap().push(Pushed {
                        method: parts.method.to_string(),
                        path: parts.uri.path().to_string(),
                        content_type: parts
                            .headers
                            .get("content-type")
                            .map(|v| v.to_str().unwrap().to_string())
                            .unwrap_or_default(),
                        body: String::from_utf8(body.to_vec()).unwrap(),
                    });
                    (status, "pushgateway says no")
                },
            )
            .with_state((seen.clone(), status));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

/// Parses strictly: every sample line must be `name{labels} value`, every
/// family typed, and prometheus-parse must accept the whole body.
fn parse(body: &str) -> Scrape {
    for line in body.lines() {
        if line.starts_with('#') {
            assert!(
                line.starts_with("# HELP cilium_gc_") || line.starts_with("# TYPE cilium_gc_"),
                "unexpected comment: {line}"
            );
            continue;
        }
        let (name, value) = line.rsplit_once(' ').expect("name and value");
        assert!(value.parse::<f64>().is_ok(), "bad value in {line}");
        let metric = name.split('{').next().unwrap();
        assert!(
            metric
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "bad name in {line}"
        );
        assert!(
            body.contains(&format!("# TYPE {metric} gauge\n")),
            "{metric} untyped"
        );
    }
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text format")
}

fn gauge(s: &Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
    let sample = s
        .samples
        .iter()
        .find(|x| x.metric == name && label.is_none_or(|(k, v)| x.labels.get(k) == Some(v)))
        .unwrap_or_else(|| panic!("{name} {label:?} missing"));
    match sample.value {
        Value::Gauge(v) => v,
        ref other => panic!("{name} is not a gauge: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_pushes_parseable_metrics_matching_the_report_and_writes_the_textfile() {
    let w = World::start(calm("small")).await;
    let (url, seen) = receiver(StatusCode::OK).await;
    let file = w.dir.path().join("cilium_gc.prom");
    let out = w
        .bin(&[
            "delete",
            "--yes",
            "-o",
            "json",
            "--pushgateway",
            &url,
            "--pushgateway-job",
            "nightly-gc",
            "--metrics-file",
            file.to_str().unwrap(),
        ])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("metrics"), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let deleted = report["summary"]["deleted"].as_u64().unwrap();
    assert!(deleted > 0, "the scenario has stale identities");

    let pushes = seen.lock().unwrap().clone();
    assert_eq!(pushes.len(), 1, "{pushes:?}");
    let p = &pushes[0];
    assert_eq!(
        p.method, "POST",
        "POST keeps last_success from the last good run"
    );
    assert_eq!(p.path, "/metrics/job/nightly-gc");
    assert!(
        p.content_type.starts_with("text/plain; version=0.0.4"),
        "{}",
        p.content_type
    );
    let pushed = parse(&p.body);
    let from_file = parse(&std::fs::read_to_string(&file).unwrap());
    for s in [&pushed, &from_file] {
        assert_eq!(
            gauge(s, "cilium_gc_deleted_identities", None),
            deleted as f64
        );
        assert_eq!(
            gauge(s, "cilium_gc_identities", Some(("reason", "stale"))),
            report["summary"]["reasons"]["stale"].as_f64().unwrap()
        );
        assert_eq!(
            gauge(s, "cilium_gc_identities", Some(("reason", "in-use"))),
            report["summary"]["reasons"]["inUse"].as_f64().unwrap()
        );
        assert_eq!(
            gauge(s, "cilium_gc_conflicts", None),
            report["summary"]["conflicts"].as_f64().unwrap()
        );
        assert_eq!(gauge(s, "cilium_gc_failed_identities", None), 0.0);
        assert_eq!(gauge(s, "cilium_gc_run_success", None), 1.0);
        let finished = epoch_seconds(report["finishedAt"].as_str().unwrap());
        let last = gauge(s, "cilium_gc_last_success_timestamp_seconds", None);
        assert!((last - finished).abs() < 0.002, "{last} vs {finished}");
        assert!(gauge(s, "cilium_gc_delete_rate_per_second", None) > 0.0);
        assert!(gauge(s, "cilium_gc_run_duration_seconds", None) > 0.0);
        let ratio = gauge(s, "cilium_gc_identity_space_used_ratio", None);
        assert!(ratio > 0.0 && ratio < 1.0, "{ratio}");
    }
}

fn epoch_seconds(rfc3339: &str) -> f64 {
    rfc3339.parse::<jiff::Timestamp>().unwrap().as_millisecond() as f64 / 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_push_is_one_line_on_stderr_and_leaves_the_exit_code_alone() {
    let w = World::start(calm("small")).await;
    let (refusing, seen) = receiver(StatusCode::INTERNAL_SERVER_ERROR).await;
    let out = w
        .bin(&["scan", "-o", "json", "--pushgateway", &refusing])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("metrics not pushed"))
        .unwrap_or_else(|| panic!("no push error on stderr: {stderr}"));
    assert!(
        line.contains("500") && line.contains("pushgateway says no"),
        "{line}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("stdout is still the report");

    // Nothing listening: the same, naming the address.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let url = format!("http://{closed}");
    let out = w.bin(&["scan", "-o", "json", "--pushgateway", &url]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("metrics not pushed") && stderr.contains(&closed.to_string()),
        "{stderr}"
    );

    // A refused run (exit 3) keeps exit 3 and pushes run_success 0 without a last success.
    let (ok, seen) = receiver(StatusCode::OK).await;
    let mut s = calm("forbidden");
    s.faults = Default::default();
    let w = World::start(s).await;
    let out = w
        .bin(&["delete", "--yes", "-o", "json", "--pushgateway", &ok])
        .await;
    let code = out.status.code().unwrap();
    assert_ne!(code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    let body = seen.lock().unwrap()[0].body.clone();
    let pushed = parse(&body);
    assert_eq!(gauge(&pushed, "cilium_gc_run_success", None), 0.0);
    assert_eq!(
        gauge(&pushed, "cilium_gc_run_exit_code", None),
        f64::from(code)
    );
    assert!(!body.contains("last_success_timestamp_seconds"), "{body}");
}

/// The README's PrometheusRule parses and alerts on metrics the tool writes,
/// with the thresholds the issue asks for (2 hours, 80%).
#[test]
fn readme_alert_rule_uses_metrics_the_tool_writes() {
    let readme = std::fs::read_to_string(crate::support::repo_path("README.md")).unwrap();
    let block = readme
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("kind: PrometheusRule"))
        .expect("README has a PrometheusRule");
    let rule: serde_json::Value = serde_saphyr::from_str(block).expect("the rule is YAML");
    let rules = &rule["spec"]["groups"][0]["rules"];
    assert_eq!(rules.as_array().map(Vec::len), Some(1), "one alert rule");
    let expr = rules[0]["expr"].as_str().unwrap();
    assert!(expr.contains(kubectl_cilium_gc::metrics::LAST_SUCCESS) && expr.contains("7200"));
    assert!(expr.contains("cilium_gc_identity_space_used_ratio") && expr.contains("0.8"));
    assert!(expr.contains(&format!(
        "job=\"{}\"",
        kubectl_cilium_gc::metrics::DEFAULT_JOB
    )));
    let cronjob =
        std::fs::read_to_string(crate::support::repo_path("examples/cronjob.yaml")).unwrap();
    assert!(cronjob.contains(kubectl_cilium_gc::metrics::DEFAULT_JOB));
}
