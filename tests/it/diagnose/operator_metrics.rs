//! `diagnose` reads cilium-operator's own identity-GC metrics through the
//! API server's pod proxy (issue 25, 4.4) and says from them whether its
//! passes complete; without them it falls back on the marks and the
//! version, and says which evidence it used. Run through the binary.

use super::*;
use cilium_gc_sim::{CiliumInstall, Denial, OperatorMetrics};

const DAY: u64 = 86_400;

/// The small preset, calm, Cilium 1.15.6, the first operator pod (the
/// leader) serving `leader`, the second (a standby) serving no GC series.
fn with_metrics(leader: OperatorMetrics) -> Scenario {
    let mut s = small();
    let mut install = CiliumInstall::version("v1.15.6");
    install.operator_pods[0].metrics = Some(leader);
    install.operator_pods[1].metrics = Some(OperatorMetrics::default());
    s.cilium_install = Some(install);
    s
}

async fn diagnose_json(w: &World, extra: &[&str]) -> Value {
    let mut args = vec!["diagnose", "-o", "json"];
    args.extend_from_slice(extra);
    let out = w.bin(&args).await;
    assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json on stdout");
    assert_conforms(&v);
    v
}

fn finding_codes(d: &Value) -> Vec<&str> {
    d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

fn finding_of<'a>(d: &'a Value, code: &str) -> &'a Value {
    d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in {:#}", d["findings"]))
}

/// An operator up 12 days at a 15m interval (about 1,153 passes) that
/// completed 2, with 40 GC errors logged: diagnose says its passes do not
/// complete, from its metrics (cilium#33142 seen), names the pod, and
/// compares with the identities now; the standby replica has no GC series.
/// Text and Markdown carry it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_operator_passes_are_seen_in_its_metrics() {
    let w = World::start(with_metrics(OperatorMetrics {
        runs_success: Some(2),
        entries: Some((120, 0)),
        gc_errors: 40,
        current_format: false,
        last_pass_seconds: None,
    }))
    .await;
    let d = diagnose_json(&w, &[]).await;
    let h = &d["gcHealth"];
    assert_eq!(h["passEvidence"], "operator-metrics", "{h:#}");
    let m = &h["operatorMetrics"];
    assert_eq!(m["verdict"], "not-completing", "{m:#}");
    assert_eq!(m["gcIntervalSeconds"], 900.0);
    let leader = &m["pods"][0];
    assert_eq!(leader["pod"], "cilium-operator-6d9f7c8b5-2xkqp");
    assert_eq!(leader["port"], 9963);
    assert_eq!(leader["first"]["runsSuccess"], 2);
    assert_eq!(leader["first"]["gcErrors"], 40);
    assert_eq!(leader["completedPasses"], 2);
    let expected = leader["expectedPasses"].as_f64().unwrap();
    assert!((1150.0..=1154.0).contains(&expected), "{expected}");
    assert_eq!(m["pods"][1]["verdict"], "no-passes", "{m:#}");

    let f = finding_of(&d, "gc-passes-failing");
    assert_eq!(f["severity"], "warning");
    let msg = f["message"].as_str().unwrap();
    assert!(msg.contains("cilium-operator-6d9f7c8b5-2xkqp"), "{msg}");
    assert!(msg.contains("2 passes completed"), "{msg}");
    let evidence = f["evidence"].to_string();
    assert!(evidence.contains("40 errors logged"), "{evidence}");
    let total = d["identitySpace"]["total"].as_u64().unwrap();
    // The unused ones by how far along GC they are, each from the states.
    let st = &d["identitySpace"]["states"];
    let n = |k: &str| st[k].as_u64().unwrap();
    let overdue = n("staleCandidates") + n("unusedUnmarked");
    let (marked, young) = (n("unusedMarked"), n("tooYoung"));
    assert!(
        evidence.contains(&format!(
            "identities now: {total} (unused: {overdue} overdue for GC, {marked} marked within the heartbeat timeout, {young} too young to judge)"
        )),
        "{evidence}"
    );
    assert!(evidence.contains("120 alive, 0 deleted"), "{evidence}");
    // The version inference is kept, and points at what was seen.
    let k = finding_of(&d, "known-gc-defect")["evidence"].to_string();
    assert!(k.contains("not completing: see gc-passes-failing"), "{k}");

    let text = w.bin(&["diagnose"]).await;
    assert_ok(&text);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("gc-passes-failing"), "{text}");
    let md = w.bin(&["diagnose", "-o", "markdown"]).await;
    let md = String::from_utf8(md.stdout).unwrap();
    assert!(
        md.contains("| GC passes (evidence: operator metrics) | not completing |"),
        "{md}"
    );
}

/// The same operator completing about one pass per interval: no
/// gc-passes-failing, the verdict says completing, and the 1.15 known
/// defect drops to info with the metrics' word that it is not happening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_operator_passes_are_not_reported_stalled() {
    let passes = 12 * DAY / 900;
    let w = World::start(with_metrics(OperatorMetrics {
        runs_success: Some(passes),
        entries: Some((120, 3)),
        gc_errors: 0,
        current_format: true,
        last_pass_seconds: None,
    }))
    .await;
    let d = diagnose_json(&w, &[]).await;
    let h = &d["gcHealth"];
    assert_eq!(h["operatorMetrics"]["verdict"], "completing", "{h:#}");
    assert_eq!(h["passEvidence"], "operator-metrics");
    assert!(!finding_codes(&d).contains(&"gc-passes-failing"));
    let k = finding_of(&d, "known-gc-defect");
    assert_eq!(k["severity"], "info", "{k:#}");
    assert!(
        k["evidence"]
            .to_string()
            .contains("metrics show its GC passes completing"),
        "{k:#}"
    );
}

/// A big cluster's operator whose passes take 20 minutes at a 15m interval
/// starts one every 35 minutes (Cilium's controller waits the interval after
/// a pass): a current release says so in `identity_gc_latency`, and its
/// passes are not counted as missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_passes_of_a_current_operator_are_not_missed_passes() {
    let w = World::start(with_metrics(OperatorMetrics {
        runs_success: Some(12 * DAY / 2100),
        entries: Some((120, 3)),
        gc_errors: 0,
        current_format: true,
        last_pass_seconds: Some(1200.0),
    }))
    .await;
    let d = diagnose_json(&w, &[]).await;
    let m = &d["gcHealth"]["operatorMetrics"];
    assert_eq!(m["verdict"], "completing", "{m:#}");
    assert_eq!(m["pods"][0]["first"]["lastPassSeconds"], 1200.0, "{m:#}");
    let evidence = m["pods"][0]["evidence"].to_string();
    assert!(evidence.contains("plus the last pass's 20m"), "{evidence}");
    assert!(!finding_codes(&d).contains(&"gc-passes-failing"));
}

/// Without `pods/proxy` the metrics are not read: the verdict is unknown,
/// each pod says why, and the diagnosis falls back on the marks' ages (the
/// seed's marks are days old: gc-not-completing), saying so. An operator
/// whose metrics port serves nothing (the proxy's 503) falls back the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_proxy_the_marks_and_version_are_the_evidence() {
    let mut s = with_metrics(OperatorMetrics {
        runs_success: Some(2),
        ..OperatorMetrics::default()
    });
    s.rbac_denials = vec![Denial::new("get", "pods/proxy")];
    let w = World::start(s).await;
    let d = diagnose_json(&w, &[]).await;
    let h = &d["gcHealth"];
    assert_eq!(h["operatorMetrics"]["verdict"], "unknown", "{h:#}");
    assert_eq!(h["passEvidence"], "heartbeat-marks");
    let problem = h["operatorMetrics"]["pods"][0]["problem"].as_str().unwrap();
    assert!(
        problem.contains("no permission to get pods/proxy in kube-system (optional)"),
        "{problem}"
    );
    let codes = finding_codes(&d);
    assert!(!codes.contains(&"gc-passes-failing"));
    assert!(codes.contains(&"gc-not-completing"), "{codes:?}");

    let w = World::start(small()).await; // default install: nothing listens on 9963
    let d = diagnose_json(&w, &[]).await;
    let h = &d["gcHealth"];
    assert_eq!(h["passEvidence"], "heartbeat-marks", "{h:#}");
    let problem = h["operatorMetrics"]["pods"][0]["problem"].as_str().unwrap();
    assert!(
        problem.contains("503") || problem.contains("connection refused"),
        "{problem}"
    );
}
