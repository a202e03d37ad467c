//! Signals at random points stop the run cleanly.

use super::*;

/// Signal the built binary at a random point (during preflight and scan, or
/// during deletes): a valid report, exit 130/143, no delete after it.
async fn signal_at_random_point(seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (signal, code) = if rng.random_bool(0.5) {
        ("INT", 130)
    } else {
        ("TERM", 143)
    };
    let during_deletes = rng.random_bool(0.5);
    let mut scenario = calm_sized(300);
    // Slow reads so the scan takes a few seconds and can be hit.
    scenario.faults.slow_fraction = 0.5;
    scenario.faults.slow_delay = Duration::from_millis(60);
    let w = World::start(scenario).await;
    let mut cmd = binary();
    cmd.arg("--kubeconfig")
        .arg(&w.kubeconfig)
        .args([
            "delete",
            "--yes",
            "--qps",
            "8",
            "--burst",
            "1",
            "--page-size",
            "10",
            "-o",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let ready = |w: &World| {
        let l = w.sim.ledger();
        if during_deletes {
            !l.deletes.is_empty()
        } else {
            !l.requests.is_empty()
        }
    };
    while !ready(&w) {
        assert!(tokio::time::Instant::now() < deadline, "run never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let wait = rng.random_range(0..if during_deletes { 800 } else { 2500 });
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let signalled_at = w.sim.now();
    let deletes_before = w.sim.ledger().deletes.len();
    let kill = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let what = format!(
        "seed {seed}: SIG{signal} {wait}ms after {} ({deletes_before} deletes)",
        if during_deletes {
            "the first delete"
        } else {
            "the first request"
        }
    );
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report on stdout");
    assert_valid(&report);
    assert_eq!(report["interrupted"], true, "{what}");
    assert_eq!(report["exitCode"], code, "{what}");
    let grace = SignedDuration::from_millis(300);
    let late = deletes_after(&w.sim, signalled_at, grace);
    assert!(
        late.is_empty(),
        "{what}: deletes after the signal: {late:?}"
    );
    let ledger = w.sim.ledger();
    assert_eq!(ledger.unsafe_deletes().count(), 0);
    assert_eq!(
        report["summary"]["deleted"].as_u64().unwrap() as usize
            + report["summary"]["alreadyGone"].as_u64().unwrap() as usize,
        ledger.deletes.len(),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_signals_at_random_points_stop_cleanly() {
    let base: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    let n = cases().div_ceil(2).max(3);
    for i in 0..n as u64 {
        signal_at_random_point(base.wrapping_add(i)).await;
    }
}
