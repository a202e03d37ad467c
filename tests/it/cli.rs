//! The binary as users meet it: help and exit codes, stdout holding only the
//! report, jq, signals, and discovery through real `kubectl`. Issues 3, 4, 6.

use std::time::Duration;

use crate::support::calm;
use crate::support::tool_or_skip;
use crate::support::world::{assert_ok, assert_valid, binary, deletes_after, Binary, World};

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

/// An early abort in text mode: on stderr the error and what to try next,
/// on stdout nothing (no table of zeros).
fn assert_error_and_hint_only(out: &std::process::Output, error_mentions: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "the error and a hint: {err}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(error_mentions),
        "{err}"
    );
    assert!(lines[1].starts_with("hint: "), "{err}");
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `scan` on a machine with no kubeconfig and outside any pod.
async fn scan_without_kubeconfig(args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    binary()
        .arg("scan")
        .args(args)
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .await
        .unwrap()
}

/// Issue 13: with no kubeconfig, or a server refusing connections, the text
/// output was a table of zeros under the error.
#[tokio::test]
async fn early_aborts_in_text_print_the_error_and_what_to_try_next_only() {
    let out = scan_without_kubeconfig(&[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_error_and_hint_only(&out, "no kubeconfig");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kubeconfig"));
    for cmd in [&["scan"][..], &["delete", "--yes"]] {
        let out = binary()
            .args(cmd)
            .args(["-s", "https://127.0.0.1:1", "--token", "t"])
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        assert_error_and_hint_only(&out, "cannot reach");
        assert!(String::from_utf8_lossy(&out.stderr).contains("kubectl cluster-info"));
    }
    // JSON and YAML still carry the whole report.
    for fmt in ["json", "yaml"] {
        let out = scan_without_kubeconfig(&["-o", fmt]).await;
        assert_eq!(out.status.code(), Some(2));
        let r: serde_json::Value = serde_saphyr::from_slice(&out.stdout).expect("a report");
        assert_eq!(r["aborted"]["reason"], "read-failed", "{fmt}");
        assert_eq!(r["summary"]["scanned"], 0, "{fmt}");
        if fmt == "json" {
            let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_valid(&j);
        }
    }
}

/// A kubeconfig that cannot be read or parsed is named once, in one line,
/// whether it came from `--kubeconfig` or from `$KUBECONFIG` (kube's own
/// text quoted the path twice and named no file for `$KUBECONFIG`).
#[tokio::test]
async fn an_unreadable_or_unparsable_kubeconfig_is_named_once_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, "- not\n- a kubeconfig\n").unwrap();
    let flag = binary()
        .arg("scan")
        .arg("--kubeconfig")
        .arg(&missing)
        .output()
        .await
        .unwrap();
    let from_env = binary()
        .arg("scan")
        .env("KUBECONFIG", &garbage)
        .output()
        .await
        .unwrap();
    for (out, file) in [(&flag, &missing), (&from_env, &garbage)] {
        assert_eq!(out.status.code(), Some(2));
        assert_error_and_hint_only(out, "kubeconfig: ");
        let err = String::from_utf8_lossy(&out.stderr);
        let name = file.display().to_string();
        assert_eq!(err.matches(&name).count(), 1, "named once: {err}");
    }
    assert!(String::from_utf8_lossy(&flag.stderr).contains("No such file"));
}

#[tokio::test]
async fn delete_help_groups_flags_under_headings_connection_last() {
    let out = binary().args(["delete", "--help"]).output().await.unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let at = |needle: &str| {
        help.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing from delete --help:\n{help}"))
    };
    let headings = [
        "\nSelection (which identities to consider):\n",
        "\nRate:\n",
        "\nSafety:\n",
        "\nOutput:\n",
        "\nConnection:\n",
        "\nExit codes:\n",
    ];
    let pos: Vec<usize> = headings.iter().map(|h| at(h)).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "heading order: {help}");
    // Where the flag's own entry starts (`      --qps <QPS>`, `  -y, --yes`),
    // not a mention of it in some description.
    let entry = |flag: &str| {
        let mut offset = 0;
        for line in help.split_inclusive('\n') {
            let t = line.trim_start();
            let t = t
                .split_once(", ")
                .filter(|(s, _)| s.len() == 2)
                .map_or(t, |x| x.1);
            if t.split([' ', '\n', '[', '.']).next() == Some(flag) {
                return offset;
            }
            offset += line.len();
        }
        panic!("no entry for {flag} in delete --help:\n{help}")
    };
    let under = |flag: &str, section: usize| {
        let p = entry(flag);
        assert!(
            pos[section] < p && p < pos[section + 1],
            "{flag} not under {}",
            headings[section].trim()
        );
    };
    for f in ["--selector", "--namespace", "--min-age"] {
        under(f, 0);
    }
    for f in ["--qps", "--burst", "--concurrency", "--max-retries"] {
        under(f, 1);
    }
    for f in [
        "--dry-run",
        "--max-deletions",
        "--max-percent",
        "--yes",
        "--force",
    ] {
        under(f, 2);
    }
    for f in [
        "--output",
        "--report-file",
        "--items",
        "--verbose",
        "--color",
    ] {
        under(f, 3);
    }
    for f in [
        "--kubeconfig",
        "--context",
        "--server",
        "--token",
        "--as-group",
        "--request-timeout",
    ] {
        under(f, 4);
    }
    assert!(help.contains("second Ctrl-C"), "{help}");
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
    assert_error_and_hint_only(&out, "kubeconfig");
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
    if !tool_or_skip("jq", "json_output_is_one_document_and_jq_reads_it") {
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
    if !tool_or_skip("kubectl", "kubectl_discovers_and_runs_the_plugin") {
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

/// The subcommands a user can ask help for: every one `--help` lists.
fn visible_subcommands() -> Vec<String> {
    kubectl_cilium_gc::cli::command("kubectl-cilium_gc")
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_owned())
        .collect()
}

/// The help of `args` (e.g. `["scan", "--help"]`), as the binary prints it.
async fn help_of(args: &[&str]) -> String {
    let out = binary().args(args).output().await.unwrap();
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// krew's plugin guidelines: help names the command as users type it. Every
/// usage line (of the top-level help, every subcommand's `--help` and `-h`,
/// and a usage error) starts with `kubectl cilium-gc`.
#[tokio::test]
async fn every_usage_line_starts_with_kubectl_cilium_gc() {
    let mut texts = vec![help_of(&["--help"]).await];
    for sub in visible_subcommands() {
        texts.push(help_of(&[sub.as_str(), "--help"]).await);
        texts.push(help_of(&[sub.as_str(), "-h"]).await);
    }
    let out = binary()
        .args(["scan", "--no-such-flag"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    texts.push(String::from_utf8(out.stderr).unwrap());
    let mut usage_lines = 0;
    for text in &texts {
        for line in text.lines() {
            if let Some(usage) = line.strip_prefix("Usage: ") {
                usage_lines += 1;
                assert!(usage.starts_with("kubectl cilium-gc"), "{line}\n{text}");
            }
        }
    }
    // Every text had its usage line, the premise of the check.
    assert_eq!(usage_lines, texts.len(), "a usage line per help");
}

/// Each subcommand's `--help` ends with 2 to 4 examples, as kubectl's do,
/// and every example is a command the CLI accepts.
#[tokio::test]
async fn every_subcommand_help_ends_with_examples_that_parse() {
    let subs = visible_subcommands();
    assert!(subs.len() >= 6, "{subs:?}");
    for sub in subs {
        if sub == "help" {
            continue;
        }
        let help = help_of(&[sub.as_str(), "--help"]).await;
        let lines: Vec<&str> = help.trim_end().lines().collect();
        let at = lines
            .iter()
            .rposition(|l| *l == "Examples:")
            .unwrap_or_else(|| panic!("{sub} --help has no Examples:\n{help}"));
        let mut commands = 0;
        for line in &lines[at + 1..] {
            let line = line.trim();
            if line.starts_with('#') {
                continue;
            }
            let args = crate::docs::command_args(line)
                .unwrap_or_else(|| panic!("{sub}: not an example: {line:?}"));
            if let Err(e) = crate::docs::parses(&args) {
                panic!("{sub}'s example {line:?} does not parse: {e}");
            }
            commands += 1;
        }
        assert!((2..=4).contains(&commands), "{sub}: {commands} examples");
    }
}

/// `kubectl cilium-gc --help` fits one screen (40 lines), and still names
/// every subcommand and every flag the top level accepts (the connection
/// flags by name; each subcommand's `--help` describes them).
#[tokio::test]
async fn top_level_help_fits_one_screen_and_names_every_flag() {
    let help = help_of(&["--help"]).await;
    let lines = help.trim_end().lines().count();
    assert!(lines <= 40, "{lines} lines:\n{help}");
    let cmd = kubectl_cilium_gc::cli::command("kubectl-cilium_gc");
    for arg in cmd.get_arguments() {
        if let Some(long) = arg.get_long() {
            assert!(
                help.contains(&format!("--{long}")),
                "--{long} missing:\n{help}"
            );
        }
    }
    for sub in visible_subcommands() {
        assert!(
            help.contains(&format!("\n  {sub} ")),
            "{sub} missing:\n{help}"
        );
    }
    assert!(help.contains("Exit codes:"), "{help}");
}

/// `-A/--all-namespaces` is accepted wherever `-n/--namespace` is, as
/// kubectl users type it: every namespace, so `delete -A` deletes exactly
/// the stale identities of every namespace (judged by what the server holds
/// afterwards); with `-n` it is a usage error before any request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn all_namespaces_deletes_the_stale_identities_of_every_namespace() {
    let cmd = kubectl_cilium_gc::cli::command("kubectl-cilium_gc");
    for sub in cmd.get_subcommands() {
        let has = |short: char| sub.get_arguments().any(|a| a.get_short() == Some(short));
        assert_eq!(has('n'), has('A'), "{}: -n without -A", sub.get_name());
    }

    let w = World::start(calm("small")).await;
    let before = w.names();
    let stale = w.stale_now(Duration::from_secs(30 * 60));
    let namespaces: std::collections::BTreeSet<String> = w
        .identity_objects()
        .iter()
        .filter(|o| stale.contains(o["metadata"]["name"].as_str().unwrap()))
        .filter_map(|o| o["metadata"]["labels"]["io.kubernetes.pod.namespace"].as_str())
        .map(str::to_owned)
        .collect();
    assert!(namespaces.len() >= 2, "stale identities in {namespaces:?}");

    let out = w.bin(&["delete", "-n", "team-001", "-A", "--yes"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(w.sim.ledger().deletes.is_empty(), "nothing deleted");

    let out = w
        .bin(&["delete", "-A", "--yes", "--qps", "0", "-o", "json"])
        .await;
    assert_ok(&out);
    let left = w.names();
    assert_eq!(
        before
            .difference(&left)
            .cloned()
            .collect::<std::collections::BTreeSet<_>>(),
        stale,
        "exactly the stale identities of every namespace are gone"
    );
}
