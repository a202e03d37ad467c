//! A scan's report carries the forecast, with the numbers the identities it
//! listed give, and its metrics say them: what the forecast's alerts read.

use cilium_gc_sim::{Kind, Simulator};
use jiff::SignedDuration;
use prometheus_parse::{Scrape, Value as Sample};
use serde_json::{json, Value};

use crate::support::calm;
use crate::support::world::{binary, TEST_TIMEOUT};

/// Identities created in the last five minutes, on top of the scenario's.
const FRESH: u64 = 30;

fn gauge(text: &str, name: &str) -> Option<f64> {
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parses");
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name)
        .map(|s| match s.value {
            Sample::Gauge(v) | Sample::Untyped(v) => v,
            ref other => panic!("{name} is not a gauge: {other:?}"),
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scan_reports_the_forecast_and_its_metrics_say_it() {
    let sim = Simulator::start(calm("small")).await.unwrap();
    let now = sim.now();
    for k in 0..FRESH {
        let created = now - SignedDuration::from_secs(5 + 8 * k as i64);
        sim.create_object(
            Kind::Identity,
            json!({"metadata": {"name": (60_000 + k).to_string(),
                                "creationTimestamp": created.to_string()},
                   "security-labels": {"k8s:job-name": format!("job-{k}")}}),
            "cilium-agent",
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let file = dir.path().join("m.prom");
    let mut cmd = binary();
    cmd.arg("--kubeconfig").arg(&kubeconfig);
    cmd.args(["scan", "-o", "json", "--metrics-file"])
        .arg(&file);
    let out = tokio::time::timeout(TEST_TIMEOUT, cmd.output())
        .await
        .expect("finished in time")
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let f = &report["forecast"];
    let reasons = &report["summary"]["reasons"];
    // Premise: the scenario's own identities are older than five minutes.
    let windows = f["windows"].as_array().expect("the forecast is present");
    assert_eq!(windows[0]["label"], "5m");
    assert_eq!(windows[0]["created"], FRESH, "{windows:?}");
    assert_eq!(f["pace"]["window"], "5m");
    assert_eq!(f["pace"]["ratePerHour"], (FRESH * 12) as f64);
    let local: u64 = [
        "inUse",
        "unmarked",
        "markTooRecent",
        "malformedMark",
        "stale",
        "filtered",
    ]
    .iter()
    .map(|r| reasons[r].as_u64().unwrap())
    .sum();
    let headroom = 65_280 - local;
    assert_eq!(f["fullIfGcStops"]["headroom"], headroom);
    let seconds = (headroom as f64 / (FRESH * 12) as f64 * 3600.0).round();
    assert_eq!(f["fullIfGcStops"]["seconds"], seconds);
    let s = &f["steadyState"];
    assert_eq!(s["heldSeconds"], 2700.0, "30m timeout + 15m interval");
    // 360/h held 45 minutes: 270, plus those in use.
    assert_eq!(s["staleHeld"], 270);
    assert_eq!(s["inUse"], reasons["inUse"]);
    let needed = s["needed"].as_u64().unwrap();
    assert_eq!(needed, 270 + reasons["inUse"].as_u64().unwrap());

    let text = std::fs::read_to_string(&file).unwrap();
    let full = kubectl_cilium_gc::views::metrics::FULL_IF_GC_STOPS;
    let ratio = kubectl_cilium_gc::views::metrics::STEADY_STATE_RATIO;
    assert_eq!(gauge(&text, full), Some(seconds));
    assert_eq!(gauge(&text, ratio), Some(needed as f64 / 65_280.0));
    assert_eq!(
        gauge(&text, "cilium_gc_identity_creation_rate_per_hour"),
        Some((FRESH * 12) as f64)
    );
}
