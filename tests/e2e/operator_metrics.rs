//! `diagnose` reads the real cilium-operator's identity-GC metrics through
//! the kube-apiserver's pod proxy and says from them whether its passes
//! complete. Issue 25, 4.4.
//!
//! kube-apiserver refuses to proxy to loopback and link-local addresses, so
//! the operator's metrics need an address of their own: each test re-runs
//! itself (this test binary, filtered to the one test) under `unshare -n`,
//! in a network namespace of its own where `198.18.0.10` (a benchmarking
//! address, RFC 2544) lives on an interface that exists only there. The
//! cluster, the operator and the plugin all run inside it; no packet leaves
//! it. A Pod labelled like Cilium's operator, its status patched to point at
//! that address, stands for the operator's pod.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::cluster::Cluster;
use crate::support::operator::{Agents, Operator, Version};
use crate::support::workload::{churn_until_a_1_15_pass_conflicts, record, seed_old, GC_FLAGS};
use crate::support::{assert_exit, report, run, tool_or_skip};

/// Set in the re-run inside the network namespace.
const INSIDE: &str = "KCG_E2E_NETNS";
/// The operator's address inside the namespace.
const ADDR: &str = "198.18.0.10";

/// Outside the namespace: re-run `test` (this module's test of that name)
/// inside a new one and fail if it fails; returns false. Inside: set the
/// namespace's interfaces up and return true (the caller runs the test).
fn inside_netns(test: &str) -> bool {
    if std::env::var_os(INSIDE).is_some() {
        netns_interfaces();
        return true;
    }
    if !tool_or_skip("unshare", "diagnose on a real operator")
        || !tool_or_skip("ip", "diagnose on a real operator")
    {
        return false;
    }
    // Build (or find cached) everything outside: the namespace has no network.
    if crate::support::cluster::binaries().is_none()
        || crate::support::operator::build(Version::V115).is_none()
        || crate::support::operator::build(Version::Current).is_none()
    {
        return false;
    }
    let probe = Command::new("unshare").args(["-n", "true"]).output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        assert!(
            !cilium_gc_testkit::in_ci(),
            "unshare -n fails and CI=true: {probe:?}"
        );
        eprintln!("unshare -n fails ({probe:?}): SKIPPING diagnose on a real operator");
        return false;
    }
    let name = format!("operator_metrics::{test}");
    let out = Command::new("unshare")
        .arg("-n")
        .arg("--")
        .arg(std::env::current_exe().expect("test binary"))
        .args([&name, "--exact", "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1")
        .env("KCG_OPERATOR_BIND", ADDR)
        .output()
        .expect("unshare runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} inside a network namespace failed ({})",
        out.status
    );
    false
}

/// `lo` up, and [`ADDR`] on an interface of the namespace: a dummy one, or
/// a veth pair with both ends inside when the kernel has no dummy driver.
fn netns_interfaces() {
    let ip = |args: &str| {
        Command::new("ip")
            .args(args.split(' '))
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(ip("link set lo up"), "ip link set lo up");
    let dev = if ip("link add kcg0 type dummy") {
        "kcg0"
    } else {
        assert!(
            ip("link add kcg0 type veth peer name kcg1") && ip("link set kcg1 up"),
            "neither a dummy nor a veth interface can be made in the namespace"
        );
        "kcg0"
    };
    assert!(ip(&format!("addr add {ADDR}/32 dev {dev}")), "ip addr add");
    assert!(ip(&format!("link set {dev} up")), "ip link set {dev} up");
}

/// A Pod in kube-system labelled as Cilium's chart labels the operator's,
/// its container port `prometheus` the operator's metrics port, its args the
/// operator's GC interval; its status (as admin, on the status subresource)
/// says it runs at [`ADDR`].
fn operator_pod(cluster: &Cluster, release: &str) {
    let env: BTreeMap<String, String> = std::fs::read_to_string(cluster.dir().join("operator/env"))
        .expect("operator env")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let port = &env["METRICS_PORT"];
    let interval = GC_FLAGS[0];
    cluster.apply(&format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {{name: default, namespace: kube-system}}
---
apiVersion: v1
kind: Pod
metadata:
  name: cilium-operator-7c9d8f6b5-e2e
  namespace: kube-system
  labels: {{io.cilium/app: operator, name: cilium-operator}}
spec:
  automountServiceAccountToken: false
  containers:
  - name: cilium-operator
    image: quay.io/cilium/operator-generic:{release}
    command: [cilium-operator-generic]
    args: ["{interval}", "--operator-prometheus-serve-addr={ADDR}:{port}"]
    ports:
    - {{name: prometheus, containerPort: {port}, protocol: TCP}}
"#
    ));
    let now = jiff::Timestamp::now().to_string();
    let status = serde_json::json!({"status": {
        "phase": "Running",
        "podIP": ADDR,
        "podIPs": [{"ip": ADDR}],
        "hostIP": ADDR,
        "startTime": now,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [{
            "name": "cilium-operator", "ready": true, "restartCount": 0,
            "image": format!("quay.io/cilium/operator-generic:{release}"), "imageID": "",
            "started": true, "state": {"running": {"startedAt": now}},
        }],
    }});
    let out = cluster.kubectl(&[
        "-n",
        "kube-system",
        "patch",
        "pod",
        "cilium-operator-7c9d8f6b5-e2e",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    assert!(
        out.status.success(),
        "patching the pod's status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The operator's error-log counters, as it serves them.
fn error_counters(cluster: &Cluster) -> String {
    let env = std::fs::read_to_string(cluster.dir().join("operator/env")).unwrap_or_default();
    let url = env
        .lines()
        .find_map(|l| l.strip_prefix("METRICS_URL="))
        .unwrap_or_default();
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "10", url])
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("cilium_operator_errors_warnings_total"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `diagnose -o json` as the least-privileged `cilium-gc` (the published
/// Role's optional `get pods/proxy`).
async fn diagnose(cluster: &Cluster) -> Value {
    let out = run(&cluster.gc_kubeconfig(), &["diagnose", "-o", "json"]).await;
    assert_exit(&out, 0);
    report(&out)
}

/// Seconds the operator had been up at `diagnose`'s first read of its
/// metrics (`cilium_operator_process_start_time_seconds` to the read).
fn up_seconds(first: &Value) -> Option<f64> {
    let at = |k: &str| first[k].as_str()?.parse::<jiff::Timestamp>().ok();
    let (started, read) = (at("processStartedAt")?, at("readAt")?);
    Some(started.duration_until(read).as_secs_f64())
}

fn codes(d: &Value) -> Vec<&str> {
    d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect()
}

/// The real 1.15.6 under agent churn: its passes end at 409s (its log), and
/// `diagnose` sees from its metrics that they do not complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnose_sees_the_real_1_15_operators_passes_not_completing() {
    if !inside_netns("diagnose_sees_the_real_1_15_operators_passes_not_completing") {
        return;
    }
    let cluster = Cluster::up(&[]).expect("cluster inside the namespace");
    let operator = Operator::up(&cluster, Version::V115, &GC_FLAGS).expect("operator");
    operator_pod(&cluster, "v1.15.6");
    let old = seed_old(&cluster, Version::V115).await;
    // The premise, from the operator's own log: a pass ended at a 409.
    let churn =
        churn_until_a_1_15_pass_conflicts(&cluster, &operator, &old, Duration::from_secs(30)).await;
    let metrics = operator.metrics();
    let d = diagnose(&cluster).await;
    let h = &d["gcHealth"];
    eprintln!(
        "operator metrics directly: {:?}\n{}\ndiagnose gcHealth: {h:#}\nfindings: {:#}",
        metrics.0,
        error_counters(&cluster),
        d["findings"]
    );
    assert_eq!(h["passEvidence"], "operator-metrics", "{h:#}");
    let m = &h["operatorMetrics"];
    assert_eq!(m["verdict"], "not-completing", "{m:#}");
    assert_eq!(m["gcIntervalSeconds"], 2.0, "{m:#}");
    let pod = &m["pods"][0];
    assert_eq!(pod["pod"], "cilium-operator-7c9d8f6b5-e2e", "{m:#}");
    assert!(pod["problem"].is_null(), "{m:#}");
    // The pass that ended at a 409 logged an error, which it counts.
    assert!(pod["first"]["gcErrors"].as_u64() >= Some(1), "{m:#}");
    // 1.15 publishes no pass length (identity_gc_latency came in 1.16).
    assert!(pod["first"].get("lastPassSeconds").is_none(), "{m:#}");
    assert!(
        codes(&d).contains(&"gc-passes-failing"),
        "{:#}",
        d["findings"]
    );
    // The figures the line prints, each asserted: the passes 409s ended
    // (its log), how long the churn ran, what diagnose read and expected.
    let log = operator.passes();
    let churned = churn.samples.last().expect("churn samples").at.as_secs();
    assert!(churned >= 30, "the churn ran at least 30 s: {churned}");
    let completed = pod["completedPasses"].as_u64().expect("completedPasses");
    let expected = pod["expectedPasses"].as_f64().expect("expectedPasses");
    assert!((completed as f64) < expected, "{m:#}");
    // Our own read came first; the counter only grows.
    assert!(metrics.successful_runs() <= completed as f64, "{m:#}");
    let up = up_seconds(&pod["first"]).expect("the operator's uptime at diagnose's read");
    let line = format!(
        "diagnose on the real cilium-operator v1.15.6 under the churn: its log: passes ended at a 409 on delete {}, on mark {}, after {churned} s of churn; diagnose as cilium-gc read identity_gc_runs{{outcome=success}} {completed} after {up:.0} s up, about {expected:.0} passes expected at a 2 s interval: verdict not-completing, gcErrors {}, no lastPassSeconds, finding gc-passes-failing, passEvidence operator-metrics",
        log.delete_errors.conflict, log.mark_errors.conflict, pod["first"]["gcErrors"],
    );
    eprintln!("{line}");
    record(
        "operator_metrics_115",
        json!({"passesEndedAt409OnDelete": log.delete_errors.conflict,
               "passesEndedAt409OnMark": log.mark_errors.conflict, "churnSeconds": churned,
               "directRunsSuccess": metrics.successful_runs(), "upSeconds": up,
               "operatorMetrics": m, "findings": codes(&d), "printed": [line]}),
    );
}

/// Today's real operator, no churn: its passes complete, and `diagnose`
/// says so from its metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnose_sees_the_current_operators_passes_completing() {
    if !inside_netns("diagnose_sees_the_current_operators_passes_completing") {
        return;
    }
    let cluster = Cluster::up(&[]).expect("cluster inside the namespace");
    let operator = Operator::up(&cluster, Version::Current, &GC_FLAGS).expect("operator");
    let release = crate::support::operator::release(Version::Current);
    operator_pod(&cluster, &release);
    // A few stale identities from agents on its release's code: each pass
    // marks or deletes a few (4 a second at most), and completes.
    let seeded = Agents {
        agents: 2,
        pods: 4,
        churn: Duration::ZERO,
        duration: Duration::from_secs(30),
        label_sets: 8,
        label_prefix: "old".into(),
        end_all: true,
        seed: 11,
        ..Agents::default()
    }
    .run(&cluster, Version::Current)
    .await;
    // Its first pass comes about 11 s after it starts (leader election, its
    // CRDs registered, caches synced); at a 2 s interval that is 5 intervals
    // uncounted, which 15 completed passes outweigh (at the default 15m,
    // seconds are nothing).
    let mut metrics = operator.metrics();
    for _ in 0..90 {
        if metrics.successful_runs() >= 15.0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        metrics = operator.metrics();
    }
    let d = diagnose(&cluster).await;
    let h = &d["gcHealth"];
    eprintln!(
        "{release}: {} identities allocated by agents whose pods all ended; operator metrics directly: {:?}; its log: {:?}\ndiagnose gcHealth: {h:#}",
        seeded.new_identities,
        metrics.0,
        operator.passes()
    );
    assert!(metrics.successful_runs() > 0.0, "passes complete");
    assert_eq!(h["passEvidence"], "operator-metrics", "{h:#}");
    let m = &h["operatorMetrics"];
    assert_eq!(m["verdict"], "completing", "{m:#}");
    let pod = &m["pods"][0];
    assert!(pod["completedPasses"].as_u64().unwrap_or(0) > 0, "{m:#}");
    // The current release publishes its last pass's length, which the
    // expected passes count with (Cilium's controller waits the interval
    // after a pass ends).
    let last_pass = &pod["first"]["lastPassSeconds"];
    assert!(last_pass.as_f64().is_some_and(|s| s >= 0.0), "{m:#}");
    assert!(
        !codes(&d).contains(&"gc-passes-failing"),
        "{:#}",
        d["findings"]
    );
    // The figures the line prints, each asserted.
    let log = operator.passes();
    assert_eq!(log.passes_ended(), 0, "no pass ended by an error: {log:?}");
    assert!(seeded.new_identities > 0, "the agents allocated identities");
    let completed = pod["completedPasses"].as_u64().expect("completedPasses");
    let expected = pod["expectedPasses"].as_f64().expect("expectedPasses");
    assert!(completed >= 15, "{m:#}");
    let up = up_seconds(&pod["first"]).expect("the operator's uptime at diagnose's read");
    let line = format!(
        "diagnose on the real cilium-operator {release}, {} identities left by agents whose pods all ended, no churn: its log: {} passes ended by an error; diagnose as cilium-gc read identity_gc_runs{{outcome=success}} {completed} after {up:.0} s up, about {expected:.0} passes expected at a 2 s interval, the last pass {} s: verdict completing, no gc-passes-failing, passEvidence operator-metrics",
        seeded.new_identities, log.passes_ended(), last_pass,
    );
    eprintln!("{line}");
    record(
        "operator_metrics_current",
        json!({"release": release, "newIdentities": seeded.new_identities,
               "passesEnded": log.passes_ended(), "directRunsSuccess": metrics.successful_runs(),
               "upSeconds": up, "operatorMetrics": m, "findings": codes(&d), "printed": [line]}),
    );
}
