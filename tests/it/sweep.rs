//! `scan` and `delete` through the binary over the simulator: what only a
//! user at the command line meets (no terminal to confirm, the Markdown
//! ticket). Issue 3. The runs themselves (what is deleted, the ledger, the
//! counts, the exit codes) are the engine's own tests:
//! `crates/cilium-gc/tests/it/sweep.rs` and `run.rs`.

use crate::support::calm;
use crate::support::world::{Binary, World};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_terminal_delete_requires_yes() {
    let w = World::start(calm("small")).await;
    let before = w.names();
    let out = w.bin(&["delete", "-o", "json"]).await;
    assert_eq!(out.status.code(), Some(2));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("a report on stdout");
    assert_eq!(report["aborted"]["reason"], "not-confirmed");
    assert_eq!(w.names(), before);
}

/// `delete -o markdown` (issue 15): the verdict and the numbers come from the
/// run, every table is well formed, the items are folded in `<details>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_markdown_is_a_ticket_with_the_run_s_numbers() {
    let w = World::start(calm("small")).await;
    let path = w.dir.path().join("report.json");
    let out = w
        .bin(&[
            "delete",
            "--yes",
            "-o",
            "markdown",
            "--report-file",
            path.to_str().unwrap(),
        ])
        .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = String::from_utf8(out.stdout).unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let deleted = report["summary"]["deleted"].as_u64().unwrap();
    assert!(md.starts_with("# kubectl cilium-gc delete\n"), "{md}");
    assert!(
        md.contains(&format!("**Verdict: 🟢 {deleted} deleted, 0 conflicts")),
        "{md}"
    );
    assert!(md.contains(&format!("| Deleted | {deleted} |")), "{md}");
    let tables = crate::diagnose::markdown_tables(&md);
    let items = tables
        .iter()
        .find(|(h, _)| h[0] == "Identity")
        .expect("items table");
    assert_eq!(items.0.len(), 7);
    assert!(items.1 as u64 >= deleted);
    assert!(md.contains("<details><summary>Identities ("));
    assert_eq!(md.matches("| deleted |").count() as u64, deleted);
}

/// `--max-percent` is judged over the whole list, so the deletes wait for
/// it, and stderr says why, once; without a limit it says nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_blast_radius_limit_says_why_the_deletes_wait_for_the_list() {
    let w = World::start(calm("small")).await;
    let why = "--max-percent is judged over the whole list";
    let out = w
        .bin(&["delete", "--yes", "--max-percent", "100", "-o", "json"])
        .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.matches(why).count(), 1, "{err}");
    let out = w.bin(&["delete", "--yes", "-o", "json"]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("judged over the whole list"), "{err}");
}
