//! `--metrics-file` and `--pushgateway` (issues 15, 26): what a scheduled
//! run leaves for Prometheus, read back from a real Pushgateway
//! (`tests/tools/build.sh`). A small in-process stand-in stays only for what
//! a real one will not do on demand: answer 5xx, or never answer.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use prometheus_parse::{Scrape, Value};

use crate::support::world::{Binary, World};
use crate::support::{calm, tools};

/// A Pushgateway stand-in on 127.0.0.1:0 answering `status` to everything;
/// counts the requests it got.
async fn receiver(status: StatusCode) -> (String, Arc<Mutex<usize>>) {
    let seen = Arc::new(Mutex::new(0));
    let app = axum::Router::new()
        .fallback(
            |State((seen, status)): State<(Arc<Mutex<usize>>, StatusCode)>| async move {
                *seen.lock().unwrap() += 1;
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

/// The samples of a real Pushgateway's `/metrics` whose `job` is `job`
/// (and `cluster`, when given): what Prometheus scrapes from it.
fn scraped(pg: &tools::Pushgateway, job: &str, cluster: Option<&str>) -> Scrape {
    let all = parse_exposition(&pg.get("/metrics"));
    Scrape {
        docs: all.docs,
        samples: all
            .samples
            .into_iter()
            .filter(|s| s.labels.get("job") == Some(job) && s.labels.get("cluster") == cluster)
            .collect(),
    }
}

/// Any Prometheus exposition (the Pushgateway's own, with its Go metrics).
fn parse_exposition(body: &str) -> Scrape {
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text format")
}

/// `delete --pushgateway` against a real Pushgateway: what Prometheus would
/// scrape from it carries the report's numbers under the job's label, with
/// the Pushgateway's `push_time_seconds`; `--metrics-file` says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_pushes_to_a_real_pushgateway_what_the_report_says_and_writes_the_textfile() {
    let Some(pg) = tools::Pushgateway::start() else {
        return;
    };
    let w = World::start(calm("small")).await;
    let file = w.dir.path().join("cilium_gc.prom");
    let out = w
        .bin(&[
            "delete",
            "--yes",
            "-o",
            "json",
            "--pushgateway",
            &pg.url,
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

    // The Pushgateway's API: one group, keyed by the job alone.
    let api: serde_json::Value = serde_json::from_str(&pg.get("/api/v1/metrics")).unwrap();
    let groups = api["data"].as_array().expect("data");
    assert_eq!(groups.len(), 1, "{api}");
    assert_eq!(
        groups[0]["labels"],
        serde_json::json!({ "job": "nightly-gc" })
    );
    let family = &groups[0]["cilium_gc_deleted_identities"];
    assert_eq!(family["type"], "GAUGE", "{family}");
    assert_eq!(
        family["metrics"][0]["value"]
            .as_str()
            .unwrap()
            .parse::<f64>()
            .unwrap(),
        deleted as f64
    );
    assert!(groups[0]["push_time_seconds"].is_object(), "{}", groups[0]);

    let pushed = scraped(&pg, "nightly-gc", None);
    let from_file = parse(&std::fs::read_to_string(&file).unwrap());
    let push_time = gauge(&pushed, "push_time_seconds", None);
    let finished = epoch_seconds(report["finishedAt"].as_str().unwrap());
    assert!(push_time >= finished.floor(), "{push_time} vs {finished}");
    assert_eq!(gauge(&pushed, "push_failure_time_seconds", None), 0.0);
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
        let last = gauge(s, "cilium_gc_last_success_timestamp_seconds", None);
        assert!((last - finished).abs() < 0.002, "{last} vs {finished}");
        assert!(gauge(s, "cilium_gc_delete_rate_per_second", None) > 0.0);
        assert!(gauge(s, "cilium_gc_run_duration_seconds", None) > 0.0);
        let ratio = gauge(s, "cilium_gc_identity_space_used_ratio", None);
        assert!(ratio > 0.0 && ratio < 1.0, "{ratio}");
    }
}

/// A failed run (here refused, exit 3) pushes `run_success 0` and its exit
/// code, and the real Pushgateway keeps the last good run's
/// `last_success_timestamp_seconds` (POST replaces only what is pushed).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_run_never_replaces_the_last_success_on_a_real_pushgateway() {
    let Some(pg) = tools::Pushgateway::start() else {
        return;
    };
    let good = World::start(calm("small")).await;
    let out = good
        .bin(&["scan", "-o", "json", "--pushgateway", &pg.url])
        .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = kubectl_cilium_gc::output::metrics::DEFAULT_JOB;
    let first = gauge(
        &scraped(&pg, job, None),
        kubectl_cilium_gc::views::metrics::LAST_SUCCESS,
        None,
    );

    let mut s = calm("forbidden");
    s.faults = Default::default();
    let bad = World::start(s).await;
    let out = bad
        .bin(&["delete", "--yes", "-o", "json", "--pushgateway", &pg.url])
        .await;
    let code = out.status.code().unwrap();
    assert_ne!(code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    let now = scraped(&pg, job, None);
    assert_eq!(gauge(&now, "cilium_gc_run_success", None), 0.0);
    assert_eq!(
        gauge(&now, "cilium_gc_run_exit_code", None),
        f64::from(code)
    );
    assert_eq!(
        gauge(&now, kubectl_cilium_gc::views::metrics::LAST_SUCCESS, None),
        first,
        "the failed run must not move the last success"
    );
    assert!(gauge(&now, "cilium_gc_last_run_timestamp_seconds", None) > first);
}

/// A fleet pushes one group per cluster (`job`, `cluster`) to a real
/// Pushgateway; a cluster that fails later keeps its own last success while
/// the others move on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_pushes_one_group_per_cluster_to_a_real_pushgateway() {
    let Some(pg) = tools::Pushgateway::start() else {
        return;
    };
    let a = cilium_gc_sim::Simulator::start(calm("small"))
        .await
        .unwrap();
    let b = cilium_gc_sim::Simulator::start(calm("small"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let run = |kubeconfig: std::path::PathBuf, url: String| async move {
        let mut cmd = crate::support::world::binary();
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "scan",
                "--all-contexts",
                "-o",
                "json",
                "--pushgateway",
                &url,
            ])
            .stdin(std::process::Stdio::null());
        cmd.output().await.unwrap()
    };
    std::fs::write(
        &kubeconfig,
        cilium_gc_sim::Simulator::fleet_kubeconfig(&[("eu-1", &a), ("us-1", &b)], &[]),
    )
    .unwrap();
    let out = run(kubeconfig.clone(), pg.url.clone()).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = kubectl_cilium_gc::output::metrics::DEFAULT_JOB;
    let api: serde_json::Value = serde_json::from_str(&pg.get("/api/v1/metrics")).unwrap();
    let mut groups: Vec<serde_json::Value> = api["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["labels"].clone())
        .collect();
    groups.sort_by_key(|g| g.to_string());
    assert_eq!(
        groups,
        [
            serde_json::json!({ "job": job, "cluster": "eu-1" }),
            serde_json::json!({ "job": job, "cluster": "us-1" }),
        ]
    );
    let success = |cluster: &str| {
        gauge(
            &scraped(&pg, job, Some(cluster)),
            kubectl_cilium_gc::views::metrics::LAST_SUCCESS,
            None,
        )
    };
    let (eu, us) = (success("eu-1"), success("us-1"));

    // us-1 stops answering; eu-1 goes on.
    let closed = crate::support::world::closed_url();
    std::fs::write(
        &kubeconfig,
        cilium_gc_sim::Simulator::fleet_kubeconfig(&[("eu-1", &a)], &[("us-1", &closed)]),
    )
    .unwrap();
    let out = run(kubeconfig, pg.url.clone()).await;
    assert_ne!(out.status.code(), Some(0));
    assert!(success("eu-1") > eu, "eu-1 succeeded again");
    assert_eq!(success("us-1"), us, "us-1's last success stays");
    let us_now = scraped(&pg, job, Some("us-1"));
    assert_eq!(gauge(&us_now, "cilium_gc_run_success", None), 0.0);
    assert!(gauge(&us_now, "push_time_seconds", None) > 0.0);
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
    assert_eq!(*seen.lock().unwrap(), 1);
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

    // A Pushgateway that accepts and never answers: given up after the
    // push timeout, the same one line, the same exit code.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = silent.accept().await {
            held.push(conn);
        }
    });
    let out = w.bin(&["scan", "-o", "json", "--pushgateway", &url]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.matches("metrics not pushed").count(), 1, "{stderr}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("stdout is still the report");
}

/// The published PrometheusRule (shown in docs/metrics.md, run by promtool in
/// `alerts.rs`) alerts on metrics the tool writes, with the thresholds the
/// issue asks for (2 hours, 80%), per cluster.
#[test]
fn published_alert_rules_use_metrics_the_tool_writes() {
    let text =
        std::fs::read_to_string(crate::support::repo_path("examples/prometheusrule.yaml")).unwrap();
    let rule: serde_json::Value = serde_saphyr::from_str(&text).expect("the rule is YAML");
    let rules = rule["spec"]["groups"][0]["rules"].as_array().unwrap();
    let expr = |alert: &str| {
        rules
            .iter()
            .find(|r| r["alert"] == alert)
            .and_then(|r| r["expr"].as_str())
            .unwrap_or_else(|| panic!("no alert {alert}"))
            .to_owned()
    };
    let stalled = expr("CiliumIdentityGCStalled");
    assert!(
        stalled.contains(kubectl_cilium_gc::views::metrics::LAST_SUCCESS)
            && stalled.contains("7200")
    );
    assert!(stalled.contains("by (cluster)"), "{stalled}");
    let full = expr("CiliumIdentitySpaceNearlyFull");
    assert!(full.contains("cilium_gc_identity_space_used_ratio") && full.contains("0.8"));
    for r in rules {
        assert!(r["expr"].as_str().unwrap().contains(&format!(
            "job=\"{}\"",
            kubectl_cilium_gc::output::metrics::DEFAULT_JOB
        )));
    }
    let cronjob =
        std::fs::read_to_string(crate::support::repo_path("examples/cronjob.yaml")).unwrap();
    assert!(cronjob.contains(kubectl_cilium_gc::output::metrics::DEFAULT_JOB));
}
