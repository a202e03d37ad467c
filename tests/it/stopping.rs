//! What Ctrl-C and a bug promise, through the built binary: a signal at
//! any phase (connecting, preflight, watcher sync, scan, sweep) stops the
//! run promptly with the report written (exit 130/143); a second signal
//! exits at once; and a panic ends in an `internal-error` report (exit 1).
//! (That `--request-timeout` never cuts a quiet watch is the engine's
//! `run::request_timeout_does_not_cut_quiet_watches`.) Promptness is checked
//! only by a generous bound that catches a hang, never by fine timing.
//! Issue 13.

use std::process::{Output, Stdio};
use std::time::Duration;

use cilium_gc_sim::Faults;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::calm;
use crate::support::world::{assert_valid, binary, World};

/// Far longer than a prompt stop takes, far shorter than the hang it catches
/// (today's default request timeout is 30 s, retried).
const PROMPT: Duration = Duration::from_secs(20);

fn hang_everything() -> Faults {
    Faults {
        slow_fraction: 1.0,
        slow_delay: Duration::from_secs(600),
        ..Faults::default()
    }
}

/// A plain-HTTP "API server" that accepts connections and never answers,
/// except `GET /version` when `version` is set (so the run gets past
/// connecting and hangs in preflight).
async fn unanswering_server(version: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        if version && head.starts_with("GET /version") {
                            let body = r#"{"major":"1","minor":"31","gitVersion":"v1.31.0"}"#;
                            let res = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            let _ = conn.write_all(res.as_bytes()).await;
                        } else {
                            // Never answer; keep the connection open.
                            std::future::pending::<()>().await;
                        }
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

/// A running binary whose output is collected when it ends.
struct Running {
    child: tokio::process::Child,
    pid: u32,
}

fn spawn(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut cmd = binary();
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("binary starts");
    let pid = child.id().expect("pid");
    Running { child, pid }
}

impl Running {
    fn signal(&self, sig: &str) {
        let ok = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &self.pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} {}", self.pid);
    }

    /// Wait for the exit, failing if it takes longer than `bound`.
    async fn finish(self, bound: Duration, what: &str) -> Output {
        tokio::time::timeout(bound, self.child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("{what}: still running {bound:?} after the signal"))
            .expect("binary ran")
    }
}

/// Exit 130, a valid report on stdout saying `interrupted`.
fn assert_interrupted(out: &Output, what: &str) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{what}: {stderr}");
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: no JSON report on stdout ({e}): {stderr}"));
    assert_valid(&r);
    assert_eq!(r["exitCode"], 130, "{what}");
    assert_eq!(r["interrupted"], true, "{what}");
    assert_eq!(r["aborted"]["reason"], "interrupted", "{what}");
    r
}

async fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(tokio::time::Instant::now() < deadline, "never {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_while_connecting_to_a_server_that_never_answers() {
    let server = unanswering_server(false).await;
    let run = spawn(
        &["scan", "--server", &server, "--token", "x", "-o", "json"],
        &[],
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    run.signal("INT");
    let out = run.finish(PROMPT, "connecting").await;
    let r = assert_interrupted(&out, "connecting");
    assert_eq!(r["summary"]["scanned"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_in_preflight_when_the_server_stops_answering() {
    let server = unanswering_server(true).await;
    let run = spawn(
        &[
            "delete", "--yes", "--server", &server, "--token", "x", "-o", "json",
        ],
        &[],
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    run.signal("INT");
    let out = run.finish(PROMPT, "preflight").await;
    let r = assert_interrupted(&out, "preflight");
    assert_eq!(
        r["cluster"]["kubernetesVersion"], "v1.31.0",
        "got past /version"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_the_endpoint_watchers_sync() {
    let mut s = calm("small");
    s.faults = hang_everything(); // Cilium resources hang; /version, CRDs do not
    let w = World::start(s).await;
    let kc = w.kubeconfig.to_string_lossy().to_string();
    let run = spawn(&["--kubeconfig", &kc, "scan", "-o", "json"], &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    run.signal("TERM");
    let out = run.finish(PROMPT, "watcher sync").await;
    assert_eq!(out.status.code(), Some(143));
    let r: Value = serde_json::from_slice(&out.stdout).expect("report");
    assert_valid(&r);
    assert_eq!(r["aborted"]["reason"], "interrupted");
    assert!(
        r["preflight"]["checks"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "preflight was done and is reported"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_in_the_middle_of_the_scan() {
    let w = World::start(calm("small")).await;
    let kc = w.kubeconfig.to_string_lossy().to_string();
    let run = spawn(
        &[
            "--kubeconfig",
            &kc,
            "scan",
            "--page-size",
            "5",
            "-o",
            "json",
        ],
        &[],
    );
    wait_until("listed identities", || {
        w.sim
            .ledger()
            .requests
            .iter()
            .any(|r| r.verb == "list" && r.path.contains("ciliumidentities"))
    })
    .await;
    w.sim.set_faults(hang_everything());
    tokio::time::sleep(Duration::from_millis(500)).await;
    run.signal("INT");
    let out = run.finish(PROMPT, "scan").await;
    let r = assert_interrupted(&out, "scan");
    let scanned = r["summary"]["scanned"].as_u64().unwrap();
    assert!(scanned > 0 && scanned < 300, "stopped mid-scan: {scanned}");
}

/// A `delete --qps 5` on the calm `small` preset that has deleted one identity.
async fn deleting_at_5_per_second() -> (World, Running) {
    let w = World::start(calm("small")).await;
    let kc = w.kubeconfig.to_string_lossy().to_string();
    let args = [
        "--kubeconfig",
        &kc,
        "delete",
        "--yes",
        "--qps",
        "5",
        "-o",
        "json",
    ];
    let run = spawn(&args, &[]);
    wait_until("deleted one", || !w.sim.ledger().deletes.is_empty()).await;
    (w, run)
}

/// A `delete` that has deleted one identity when every request starts to
/// hang on the server; the world is returned to keep the server up.
async fn deletes_then_the_server_hangs() -> (World, Running) {
    let (w, run) = deleting_at_5_per_second().await;
    w.sim.set_faults(hang_everything());
    tokio::time::sleep(Duration::from_millis(600)).await;
    (w, run)
}

/// Deletes that hang on the server: the first signal gives them a short
/// grace, then the report is written with them failed (maybe applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_while_deletes_hang_on_the_server() {
    let (_w, run) = deletes_then_the_server_hangs().await;
    run.signal("INT");
    let out = run.finish(PROMPT, "sweep").await;
    let r = assert_interrupted(&out, "sweep");
    let s = &r["summary"];
    assert!(s["deleted"].as_u64().unwrap() >= 1);
    assert!(s["notAttempted"].as_u64().unwrap() > 0);
    assert!(
        r["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["outcome"] == "failed"
                && i["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("may have been applied"))),
        "the hung delete is reported as possibly applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigint_exits_at_once_without_a_report() {
    let (_w, run) = deletes_then_the_server_hangs().await;
    run.signal("INT");
    tokio::time::sleep(Duration::from_millis(100)).await;
    run.signal("INT");
    let out = run.finish(PROMPT, "second signal").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("second signal"), "{stderr}");
    assert!(out.stdout.is_empty(), "no report after a second signal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_the_run_ends_in_an_internal_error_report() {
    let w = World::start(calm("small")).await;
    let kc = w.kubeconfig.to_string_lossy().to_string();
    let path = w.dir.path().join("report.json");
    let rf = path.to_string_lossy().to_string();
    for (place, args) in [
        ("plan", vec!["scan"]),
        ("background", vec!["delete", "--yes", "--qps", "2"]),
    ] {
        let mut argv = vec!["--kubeconfig", &kc];
        argv.extend(args);
        argv.extend(["-o", "json", "--report-file", &rf]);
        let run = spawn(
            &argv,
            &[(cilium_gc::TEST_PANIC_ENV, place), ("RUST_BACKTRACE", "0")],
        );
        let out = run.finish(PROMPT, place).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{place}: {stderr}");
        assert_eq!(
            stderr.matches("RUST_BACKTRACE=1").count(),
            1,
            "{place}: one line points at RUST_BACKTRACE=1: {stderr}"
        );
        assert!(!stderr.contains("stack backtrace"), "{place}: {stderr}");
        let stdout: Value = serde_json::from_slice(&out.stdout).expect("report on stdout");
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for r in [&stdout, &file] {
            assert_valid(r);
            assert_eq!(r["exitCode"], 1, "{place}");
            assert_eq!(r["aborted"]["reason"], "internal-error", "{place}");
            assert!(
                r["aborted"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("injected") && m.contains("RUST_BACKTRACE=1")),
                "{place}: {}",
                r["aborted"]
            );
            assert_eq!(
                r["summary"]["scanned"], 301,
                "{place}: what was known is kept"
            );
        }
    }
}

/// Issue 21: an item whose only answers were 429s when Ctrl-C cut its
/// Retry-After wait had nothing applied: `not-attempted`, with the 429 as
/// its last error (it used to be `failed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_during_a_retry_after_wait_leaves_the_item_not_attempted() {
    let (w, run) = deleting_at_5_per_second().await;
    // From now on every delete is over the server's cap: 429, Retry-After 60 s.
    w.sim.set_faults(Faults {
        delete_rate_cap: Some(0.001),
        retry_after_secs: 60,
        ..Faults::default()
    });
    wait_until("a 429 answered", || {
        w.sim
            .ledger()
            .requests
            .iter()
            .any(|r| r.method == "DELETE" && r.status == 429)
    })
    .await;
    run.signal("INT");
    let out = run.finish(PROMPT, "sweep").await;
    let r = assert_interrupted(&out, "sweep");
    assert_eq!(r["summary"]["failed"], 0, "{}", r["summary"]);
    let throttled: Vec<&Value> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["outcome"] == "not-attempted" && i["attempts"].as_u64() > Some(0))
        .collect();
    assert!(
        !throttled.is_empty(),
        "an item sent and throttled is not-attempted"
    );
    for i in throttled {
        assert!(
            i["lastError"]
                .as_str()
                .is_some_and(|e| e.contains("429") || e.to_lowercase().contains("too many")),
            "its last error is the 429: {i}"
        );
    }
}
