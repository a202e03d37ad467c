//! The binary as users meet it: help and exit codes, stdout holding only the
//! report, jq, signals, and discovery through real `kubectl`. Issues 3, 4, 6.

use std::time::Duration;

use cilium_gc_sim::Scenario;

use crate::support::world::{assert_ok, assert_valid, binary, deletes_after, World};

fn calm(name: &str) -> Scenario {
    Scenario::preset(name).unwrap().calm()
}

fn has(cmd: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test]
async fn delete_help_documents_every_flag_and_the_exit_codes() {
    let out = binary().args(["delete", "--help"]).output().await.unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let cmd = kubectl_cilium_gc::cli::command("kubectl-cilium_gc");
    let delete = cmd.find_subcommand("delete").unwrap();
    for arg in delete.get_arguments().chain(cmd.get_arguments()) {
        if let Some(long) = arg.get_long() {
            assert!(
                help.contains(&format!("--{long}")),
                "--{long} missing from delete --help"
            );
        }
    }
    for code in ["0 ", "1 ", "2 ", "3 ", "4 ", "5 ", "130", "143"] {
        assert!(
            help.contains(&format!("  {code}")),
            "exit code {code} missing"
        );
    }
    assert!(help.contains("Usage: kubectl cilium-gc delete"), "{help}");
}

#[tokio::test]
async fn bad_flags_are_one_line_errors_with_exit_2() {
    for args in [
        &["delete", "--qps", "fast"][..],
        &["scan", "--min-age", "soon"],
        &["delete", "--max-percent", "200"],
    ] {
        let out = binary().args(args).output().await.unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.stdout.is_empty());
    }
    let out = binary()
        .args(["scan", "--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let out = binary()
        .args([
            "scan",
            "-s",
            "https://127.0.0.1:1",
            "--token",
            "t",
            "-o",
            "json",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("a report even when unreachable");
    assert_eq!(report["exitCode"], 2);
    assert!(report["aborted"]["message"]
        .as_str()
        .unwrap()
        .contains("cannot reach"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn json_output_is_one_document_and_jq_reads_it() {
    if !has("jq") {
        eprintln!("jq not found: SKIPPING json_output_is_one_document_and_jq_reads_it (.ci/run installs it)");
        return;
    }
    let w = World::start(calm("small")).await;
    let script = format!(
        "{} --kubeconfig {} delete --yes --qps 0 -o json 2>/dev/null | jq -e .summary.deleted",
        env!("CARGO_BIN_EXE_kubectl-cilium_gc"),
        w.kubeconfig.display()
    );
    let out = tokio::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .await
        .unwrap();
    assert_ok(&out);
    let deleted: usize = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(deleted > 0);
    assert_eq!(
        deleted,
        w.sim.ledger().deletes.len(),
        "jq's .summary.deleted equals the server's ledger"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn text_output_has_no_colour_when_piped_and_report_file_is_written() {
    let w = World::start(calm("small")).await;
    let path = w.dir.path().join("report.json");
    let out = w
        .bin(&[
            "scan",
            "--report-file",
            path.to_str().unwrap(),
            "--color",
            "auto",
        ])
        .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\u{1b}'), "no ANSI codes into a pipe");
    assert!(text.contains("stale"), "{text}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_valid(&report);
    let out = w.bin(&["scan", "-o", "yaml"]).await;
    let y: serde_json::Value = serde_saphyr::from_slice(&out.stdout).expect("yaml parses");
    assert_eq!(y["kind"].as_str(), Some("CiliumIdentityGCReport"));
}

async fn interrupt_during_deletes(signal: &str, code: i32) {
    let w = World::start(calm("small")).await;
    let path = w.dir.path().join("report.json");
    let mut cmd = binary();
    cmd.arg("--kubeconfig")
        .arg(&w.kubeconfig)
        .args([
            "delete",
            "--yes",
            "--qps",
            "4",
            "--burst",
            "1",
            "-o",
            "json",
            "--report-file",
        ])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while w.sim.ledger().deletes.len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "deletes never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let signalled_at = w.sim.now();
    let kill = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report on stdout");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for r in [&stdout, &file] {
        assert_valid(r);
        assert_eq!(r["interrupted"], true);
        assert_eq!(r["exitCode"], code);
        assert!(r["summary"]["notAttempted"].as_u64().unwrap() > 0);
    }
    // In flight at the signal is allowed; anything later is not.
    let grace = jiff::SignedDuration::from_millis(300);
    let late = deletes_after(&w.sim, signalled_at, grace);
    assert!(
        late.is_empty(),
        "deletes started after the signal: {late:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigint_during_deletes_writes_the_report_and_exits_130() {
    interrupt_during_deletes("INT", 130).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_during_deletes_writes_the_report_and_exits_143() {
    interrupt_during_deletes("TERM", 143).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_discovers_and_runs_the_plugin() {
    if !has("kubectl") {
        eprintln!("kubectl not found: SKIPPING kubectl_discovers_and_runs_the_plugin (.ci/run installs it)");
        return;
    }
    let w = World::start(calm("small")).await;
    let bin_dir = w.dir.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_kubectl-cilium_gc"),
        bin_dir.join("kubectl-cilium_gc"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = |args: &[&str]| {
        let mut c = tokio::process::Command::new("kubectl");
        c.args(args)
            .env("PATH", &path)
            .env("HOME", w.dir.path())
            .env("KUBECONFIG", &w.kubeconfig)
            .env("NO_COLOR", "1");
        c
    };
    let out = kubectl(&["plugin", "list"]).output().await.unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(
        list.contains("kubectl-cilium_gc"),
        "{list}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl(&["cilium-gc", "--help"]).output().await.unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: kubectl cilium-gc"));
    let out = kubectl(&["cilium-gc", "version"]).output().await.unwrap();
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(
        v.contains(env!("CARGO_PKG_VERSION")) && v.contains("commit"),
        "{v}"
    );
    // KUBECONFIG from kubectl's environment is honoured.
    let out = kubectl(&["cilium-gc", "scan", "-o", "json"])
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["summary"]["scanned"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn completions_and_man_page_are_generated() {
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let out = binary().args(["completion", shell]).output().await.unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("max-conflict-retries"),
            "{shell} completion misses delete flags"
        );
    }
    let out = binary().arg("man").output().await.unwrap();
    let man = String::from_utf8(out.stdout).unwrap();
    assert!(
        man.starts_with(".ie") || man.contains(".TH"),
        "roff man page"
    );
    assert!(man.contains("Exit codes"));
}
