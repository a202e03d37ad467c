//! Fleet mode (issue 21) through the built binary: several simulated
//! clusters in one kubeconfig (healthy ones, one that forbids deletes, one
//! in kvstore mode, one nobody answers), judged by the fleet report, its
//! schema, the exit code and what every server holds afterwards.

use std::process::{Output, Stdio};
use std::time::Duration;

use cilium_gc_sim::Scenario;
use serde_json::Value;

use crate::support::world::{binary, stale_names, Fleet, TEST_TIMEOUT};
use crate::support::{calm, schema, tool_or_skip};

const HEARTBEAT: Duration = Duration::from_secs(30 * 60);

/// prod-a and prod-b (calm `small`), lab-forbidden (delete denied),
/// lab-kvstore, and dr-down (unreachable).
async fn mixed() -> Fleet {
    Fleet::start(
        &[
            ("prod-a", calm("small")),
            ("prod-b", calm("small")),
            ("lab-forbidden", calm("forbidden")),
            ("lab-kvstore", calm("kvstore")),
        ],
        &["dr-down"],
    )
    .await
}

/// The built binary over a [`Fleet`]'s kubeconfig, as a user runs it.
trait FleetBinary {
    /// The command, `--kubeconfig` set, no stdin.
    fn command(&self, args: &[&str]) -> tokio::process::Command;
    /// Run it to the end.
    async fn run(&self, args: &[&str]) -> Output;
}

impl FleetBinary for Fleet {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = binary();
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        cmd.stdin(Stdio::null());
        cmd
    }

    async fn run(&self, args: &[&str]) -> Output {
        tokio::time::timeout(TEST_TIMEOUT, self.command(args).output())
            .await
            .expect("finished in time")
            .expect("runs")
    }
}

fn parse(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON on stdout ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Valid against the fleet schema, and every embedded report against the
/// report schema.
fn assert_fleet_valid(doc: &Value) {
    let errors = schema::errors(&schema::committed_fleet(), doc);
    assert!(
        errors.is_empty(),
        "fleet report invalid:\n{}",
        errors.join("\n")
    );
    for e in doc["clusters"].as_array().unwrap() {
        if !e["report"].is_null() {
            let errors = schema::errors(&schema::committed(), &e["report"]);
            assert!(
                errors.is_empty(),
                "{}: report invalid:\n{}",
                e["context"],
                errors.join("\n")
            );
        }
    }
}

fn entry<'a>(doc: &'a Value, context: &str) -> &'a Value {
    doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["context"] == context)
        .unwrap_or_else(|| panic!("no entry for {context}"))
}

/// The committed fleet schema is a valid, documented JSON Schema. (That
/// it matches the types is the documents crate's test:
/// `cilium-gc-documents --test schema committed_fleet_schema_matches_the_types`.)
#[test]
fn committed_fleet_schema_is_valid_and_documented() {
    let s = schema::committed_fleet();
    assert!(schema::meta_errors(&s).is_empty());
    assert_eq!(s["$id"], cilium_gc_documents::fleet::FLEET_SCHEMA_ID);
    let problems = schema::documentation_problems(
        &s,
        &[
            "startedAt",
            "finishedAt",
            "generatedAt",
            "createdAt",
            "markedAt",
            "time",
        ],
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The issue's fleet: the healthy clusters are collected, each failing
/// one is an entry with its own error and exit code, nothing is written
/// where a cluster refused, and the process exits with the most severe
/// code (3 here: two refusals beat one unreachable).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn healthy_clusters_are_collected_and_failing_ones_carry_their_errors() {
    let f = mixed().await;
    let stale: Vec<_> = ["prod-a", "prod-b"]
        .map(|c| stale_names(f.sim(c), HEARTBEAT))
        .to_vec();
    let before_refused = [f.names("lab-forbidden"), f.names("lab-kvstore")];
    let file = f.dir.path().join("fleet.json");
    let out = f
        .run(&[
            "delete",
            "--all-contexts",
            "--yes",
            "--qps",
            "0",
            "-o",
            "json",
            "--report-file",
            file.to_str().unwrap(),
        ])
        .await;
    let doc = parse(&out);
    assert_fleet_valid(&doc);
    let written: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written, doc, "--report-file holds the fleet report");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(doc["exitCode"], 3);
    assert_eq!(doc["kind"], "CiliumIdentityGCFleetReport");
    let contexts: Vec<_> = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["context"].as_str().unwrap())
        .collect();
    assert_eq!(
        contexts,
        [
            "prod-a",
            "prod-b",
            "lab-forbidden",
            "lab-kvstore",
            "dr-down"
        ]
    );
    for (c, stale) in ["prod-a", "prod-b"].iter().zip(&stale) {
        let e = entry(&doc, c);
        assert_eq!(e["status"], "succeeded", "{c}");
        assert_eq!(e["report"]["summary"]["deleted"], stale.len() as u64, "{c}");
        assert!(f.names(c).is_disjoint(stale), "{c}: stale identities left");
        assert_eq!(f.sim(c).ledger().unsafe_deletes().count(), 0, "{c}");
        assert!(e["diagnosis"]["findings"].is_array(), "{c}: diagnosed");
        assert!(e["gcVerdict"].is_string(), "{c}");
    }
    let forbidden = entry(&doc, "lab-forbidden");
    assert_eq!(forbidden["exitCode"], 3);
    assert_eq!(forbidden["error"]["reason"], "preflight-refused");
    assert!(forbidden["error"]["message"]
        .as_str()
        .unwrap()
        .contains("delete ciliumidentities"));
    let kvstore = entry(&doc, "lab-kvstore");
    assert_eq!(kvstore["exitCode"], 3);
    assert!(kvstore["error"]["message"]
        .as_str()
        .unwrap()
        .contains("kvstore"));
    assert_eq!(kvstore["gcVerdict"], "not in CRD mode");
    let down = entry(&doc, "dr-down");
    assert_eq!(down["exitCode"], 2);
    assert_eq!(down["error"]["reason"], "read-failed");
    assert_eq!(
        down["report"]["exitCode"], 2,
        "the unreachable cluster's own report"
    );
    assert_eq!(f.names("lab-forbidden"), before_refused[0]);
    assert_eq!(f.names("lab-kvstore"), before_refused[1]);
    let s = &doc["summary"];
    assert_eq!(
        (
            s["clusters"].as_u64(),
            s["succeeded"].as_u64(),
            s["failed"].as_u64()
        ),
        (Some(5), Some(2), Some(3))
    );
    assert_eq!(s["deleted"], (stale[0].len() + stale[1].len()) as u64);
}

/// A report's fields that differ between two runs of the same state: when
/// it ran and how fast, and the forecast (as of when it ran: its ages and
/// the time the range is full move with the clock; present in both).
fn without_timings(mut r: Value) -> Value {
    for k in ["startedAt", "finishedAt", "durationSeconds"] {
        r.as_object_mut().unwrap().remove(k);
    }
    if r["summary"]["scanned"].as_u64() > Some(0) {
        let forecast = r.as_object_mut().unwrap().remove("forecast");
        assert!(forecast.is_some(), "a report that listed has a forecast");
    }
    r["summary"]
        .as_object_mut()
        .unwrap()
        .remove("deleteRatePerSecond");
    r
}

/// Each healthy cluster's entry is exactly what `--context <it>` alone
/// reports on the same state, bar the timings.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_entry_is_the_single_context_report() {
    let f = mixed().await;
    let doc = parse(
        &f.run(&[
            "scan",
            "--context",
            "prod-*",
            "--context",
            "lab-kvstore",
            "-o",
            "json",
            "--items",
            "all",
        ])
        .await,
    );
    assert_fleet_valid(&doc);
    assert_eq!(doc["clusters"].as_array().unwrap().len(), 3);
    for c in ["prod-a", "prod-b", "lab-kvstore"] {
        let single = f
            .run(&["scan", "--context", c, "-o", "json", "--items", "all"])
            .await;
        let alone = without_timings(parse(&single));
        let in_fleet = without_timings(entry(&doc, c)["report"].clone());
        assert_eq!(in_fleet, alone, "{c}");
        assert_eq!(
            entry(&doc, c)["exitCode"].as_i64(),
            single.status.code().map(i64::from),
            "{c}"
        );
    }
}

/// Ctrl-C stops every cluster: the one deleting stops, the ones queued
/// behind `--parallel 1` never start (and nothing is written there), and
/// the fleet report is still written, exit 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigint_stops_every_cluster_and_the_fleet_report_is_written() {
    let f = Fleet::start(
        &[
            ("a", calm("small")),
            ("b", calm("small")),
            ("c", calm("small")),
        ],
        &[],
    )
    .await;
    let before = [f.names("b"), f.names("c")];
    let mut cmd = f.command(&[
        "delete",
        "--all-contexts",
        "--yes",
        "--qps",
        "5",
        "--parallel",
        "1",
        "-o",
        "json",
    ]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while f.sim("a").ledger().deletes.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never deleted on a");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("stopped")
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = parse(&out);
    assert_fleet_valid(&doc);
    assert_eq!(doc["interrupted"], true);
    let a = entry(&doc, "a");
    assert_eq!(a["report"]["interrupted"], true);
    assert!(a["report"]["summary"]["deleted"].as_u64().unwrap() >= 1);
    assert!(a["report"]["summary"]["notAttempted"].as_u64().unwrap() >= 1);
    for (c, before) in ["b", "c"].iter().zip(before) {
        let e = entry(&doc, c);
        assert_eq!(e["status"], "not-started", "{c}");
        assert_eq!(e["error"]["reason"], "not-started", "{c}");
        assert!(e["report"].is_null(), "{c}");
        assert_eq!(f.names(c), before, "{c}: nothing written");
    }
}

/// Without a terminal and without `--yes`, nobody can confirm: nothing is
/// deleted on any cluster, exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_yes_and_a_terminal_nothing_is_deleted_anywhere() {
    let f = Fleet::start(&[("a", calm("small")), ("b", calm("small"))], &[]).await;
    let before = [f.names("a"), f.names("b")];
    let out = f
        .run(&["delete", "--context", "a", "--context", "b", "-o", "json"])
        .await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for progress in [
        "listing identities",
        "syncing endpoints",
        "waiting for the confirmation",
        "Proceed?",
    ] {
        assert!(
            !stderr.contains(progress),
            "no progress or prompt on a pipe: {stderr}"
        );
    }
    let doc = parse(&out);
    for c in ["a", "b"] {
        assert_eq!(entry(&doc, c)["error"]["reason"], "not-confirmed");
    }
    assert_eq!([f.names("a"), f.names("b")], before);
}

/// Text and Markdown lead with the clusters table; Markdown folds each
/// cluster into `<details>`; `--redact` leaves no context name or server
/// address in any format.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn text_and_markdown_lead_with_the_table_and_redact_hides_names() {
    let f = mixed().await;
    let text = f.run(&["scan", "--all-contexts"]).await;
    let text = String::from_utf8(text.stdout).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("CONTEXT"), "{text}");
    for c in [
        "prod-a",
        "prod-b",
        "lab-forbidden",
        "lab-kvstore",
        "dr-down",
    ] {
        assert!(lines.next().unwrap().starts_with(c), "{text}");
    }
    assert!(text.contains("5 clusters: 3 succeeded, 2 failed"), "{text}");
    let md = String::from_utf8(
        f.run(&["scan", "--all-contexts", "-o", "markdown"])
            .await
            .stdout,
    )
    .unwrap();
    assert!(md.contains("| Context | Kubernetes | Identities |"), "{md}");
    assert_eq!(md.matches("<details><summary>prod-a:").count(), 1, "{md}");
    assert!(md.contains("## Per cluster"), "{md}");
    let servers: Vec<String> = f.sims.iter().map(|(_, s)| s.addr().to_string()).collect();
    for format in ["json", "markdown", "text", "yaml"] {
        let out = f
            .run(&["scan", "--all-contexts", "--redact", "-o", format])
            .await;
        let body = String::from_utf8(out.stdout).unwrap();
        for secret in [
            "prod-a",
            "prod-b",
            "lab-forbidden",
            "lab-kvstore",
            "dr-down",
            "127.0.0.1",
        ]
        .iter()
        .copied()
        .chain(servers.iter().map(String::as_str))
        {
            assert!(
                !body.contains(secret),
                "{format}: {secret} left in:\n{body}"
            );
        }
        assert!(body.contains("context-"), "{format}");
    }
}

/// `--metrics-file` holds every cluster's series labelled `cluster` (the
/// context, or `--cluster-label`), and each cluster is pushed into its own
/// Pushgateway group.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_are_labelled_per_cluster() {
    let f = mixed().await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let app = axum::Router::new()
        .fallback(
            |axum::extract::State(seen): axum::extract::State<
                std::sync::Arc<std::sync::Mutex<Vec<String>>>,
            >,
             req: axum::extract::Request| async move {
                seen.lock().unwrap().push(req.uri().path().to_owned());
                "ok"
            },
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let file = f.dir.path().join("gc.prom");
    let file_arg = file.to_string_lossy().to_string();
    let out = f
        .run(&[
            "scan",
            "--all-contexts",
            "--cluster-label",
            "prod-a=eu",
            "--metrics-file",
            &file_arg,
            "--pushgateway",
            &url,
            "-o",
            "json",
        ])
        .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let scrape =
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parses");
    let doc = parse(&out);
    for (label, context) in [
        ("eu", "prod-a"),
        ("prod-b", "prod-b"),
        ("lab-kvstore", "lab-kvstore"),
        ("dr-down", "dr-down"),
    ] {
        let sample = scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == "cilium_gc_run_exit_code" && s.labels.get("cluster") == Some(label)
            })
            .unwrap_or_else(|| panic!("no exit code for {label}:\n{text}"));
        let prometheus_parse::Value::Gauge(v) = sample.value else {
            panic!()
        };
        assert_eq!(
            v as u64,
            entry(&doc, context)["exitCode"].as_u64().unwrap(),
            "{label}"
        );
    }
    assert_eq!(
        text.matches("# HELP cilium_gc_run_exit_code ").count(),
        1,
        "one family:\n{text}"
    );
    let mut paths = seen.lock().unwrap().clone();
    paths.sort();
    assert_eq!(
        paths,
        [
            "/metrics/job/kubectl-cilium-gc/cluster/dr-down",
            "/metrics/job/kubectl-cilium-gc/cluster/eu",
            "/metrics/job/kubectl-cilium-gc/cluster/lab-forbidden",
            "/metrics/job/kubectl-cilium-gc/cluster/lab-kvstore",
            "/metrics/job/kubectl-cilium-gc/cluster/prod-b",
        ]
    );
}

/// Selection mistakes are one line and exit 2, before any cluster is
/// contacted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn selection_mistakes_are_usage_errors() {
    let f = Fleet::start(&[("a", calm("small")), ("b", calm("small"))], &[]).await;
    for (args, says) in [
        (
            &["scan", "--context", "a", "--context", "nope"][..],
            "context \"nope\" not found",
        ),
        (&["scan", "--context", "zz-*"], "matches no context"),
        (
            &["scan", "--context-regex", "^x"],
            "no context of the kubeconfig is selected",
        ),
        (
            &["scan", "--all-contexts", "--server", "https://h"],
            "--server",
        ),
        (&["diagnose", "--context", "zz-*"], "matches no context"),
        (&["scan", "--redact"], "apply to a fleet run"),
        (
            &["scan", "--all-contexts", "--cluster-label", "x=y"],
            "not one of the selected",
        ),
        (
            &["scan", "--context-regex", "("],
            "not a regular expression: unclosed group",
        ),
    ] {
        let out = f.run(args).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    for (_, s) in &f.sims {
        assert!(
            s.ledger().requests.is_empty(),
            "a mistake contacted a cluster"
        );
    }
}

/// `demo --fleet` shows it without a cluster: five entries, the schema,
/// the exit rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn demo_fleet_shows_a_fleet_without_a_cluster() {
    let out = tokio::time::timeout(
        TEST_TIMEOUT,
        binary()
            .args(["demo", "--fleet", "--scan-only", "-o", "json"])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let doc = parse(&out);
    assert_fleet_valid(&doc);
    assert_eq!(doc["clusters"].as_array().unwrap().len(), 5);
    assert_eq!(out.status.code(), Some(3));
    assert!(entry(&doc, "prod-eu")["gcVerdict"]
        .as_str()
        .unwrap()
        .starts_with("operator 1.15.3: cilium#33142"));
}

/// docs/fleet.md's jq one-liners work on a fleet report: the clusters over
/// 80% full, the total deleted, the failed clusters.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fleet_docs_jq_one_liners_answer_the_fleet_questions() {
    if !tool_or_skip("jq", "fleet_docs_jq_one_liners_answer_the_fleet_questions") {
        return;
    }
    // 81% of the range taken, none of it stale (so the delete is quick).
    let full = Scenario {
        identities: 53_000,
        endpoints: 100,
        unused_mix: cilium_gc_sim::UnusedMix {
            unmarked: 1.0,
            recent_mark: 0.0,
            old_mark: 0.0,
            malformed_mark: 0.0,
        },
        ..calm("small")
    };
    let f = Fleet::start(&[("full", full), ("roomy", calm("small"))], &["dr-down"]).await;
    let out = f
        .run(&[
            "delete",
            "--all-contexts",
            "--yes",
            "--qps",
            "0",
            "-o",
            "json",
        ])
        .await;
    let report = f.dir.path().join("fleet.json");
    std::fs::write(&report, &out.stdout).unwrap();
    let fleet_md = std::fs::read_to_string(crate::support::repo_path("docs/fleet.md")).unwrap();
    let doc = parse(&out);
    for (filter, want) in [
        (
            ".clusters[] | select(.identitySpace.utilisationPercent > 80) | .context",
            "full".to_owned(),
        ),
        (".summary.deleted", doc["summary"]["deleted"].to_string()),
        (
            r#".clusters[] | select(.status != "succeeded") | "\(.context): \(.error.message)""#,
            format!(
                "dr-down: {}",
                entry(&doc, "dr-down")["error"]["message"].as_str().unwrap()
            ),
        ),
    ] {
        assert!(
            fleet_md.contains(&format!("jq -r '{filter}'")),
            "docs/fleet.md lacks jq -r '{filter}'"
        );
        let got = std::process::Command::new("jq")
            .args(["-r", filter])
            .arg(&report)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got.stdout).trim(),
            want,
            "{filter}"
        );
    }
}

/// A server that accepts connections and never answers (a blackholed
/// cluster), counting the connections it was sent.
async fn blackhole() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(conn);
        }
    });
    (url, count)
}

/// A cluster that never answers is not diagnosed: one probe, then only
/// the run's own attempts (a diagnosis would spend its retries, each a
/// whole `--request-timeout`, for nothing). Its entry says it was not
/// reached; the healthy one is diagnosed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_blackholed_cluster_costs_one_probe_not_a_diagnosis() {
    let f = Fleet::start(&[("up", calm("small"))], &[]).await;
    let (url, sent) = blackhole().await;
    let text = std::fs::read_to_string(&f.kubeconfig).unwrap();
    // The same kubeconfig with a second context whose server never answers.
    let hole = text
        .replace("- name: \"up\"\n  cluster:", "- name: \"hole\"\n  cluster:\n    server: HOLE\n    insecure-skip-tls-verify: true\n- name: \"up\"\n  cluster:")
        .replace("contexts:\n", "contexts:\n- name: \"hole\"\n  context:\n    cluster: \"hole\"\n    user: \"up\"\n")
        .replace("HOLE", &url);
    std::fs::write(&f.kubeconfig, hole).unwrap();
    let args = [
        "scan",
        "--all-contexts",
        "--request-timeout",
        "1s",
        "-o",
        "json",
    ];
    let doc = parse(&f.run(&args).await);
    let with_diagnosis = sent.swap(0, std::sync::atomic::Ordering::SeqCst);
    let mut no_diag = args.to_vec();
    no_diag.push("--no-diagnosis");
    parse(&f.run(&no_diag).await);
    let run_alone = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(run_alone >= 1, "the run tried the dead server");
    assert_eq!(
        with_diagnosis,
        run_alone + 1,
        "one probe, no diagnosis retries"
    );
    let h = entry(&doc, "hole");
    assert_eq!(h["error"]["reason"], "read-failed");
    assert!(h["diagnosis"].is_null() && h["diagnosisError"].is_null());
    assert!(entry(&doc, "up")["diagnosis"]["findings"].is_array());
}

/// `--dry-run=server` over a fleet: the servers validate every delete,
/// nothing is deleted anywhere, and the counts say `validated`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_dry_run_over_a_fleet_deletes_nothing() {
    let f = Fleet::start(&[("a", calm("small")), ("b", calm("small"))], &[]).await;
    let before = [f.names("a"), f.names("b")];
    let out = f
        .run(&[
            "delete",
            "--all-contexts",
            "--dry-run=server",
            "--qps",
            "0",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = parse(&out);
    assert_fleet_valid(&doc);
    assert_eq!(doc["mode"], "dry-run-server");
    assert_eq!(doc["summary"]["deleted"], 0);
    assert_eq!(doc["summary"]["validated"], doc["summary"]["candidates"]);
    assert!(doc["summary"]["validated"].as_u64().unwrap() > 0);
    assert_eq!([f.names("a"), f.names("b")], before);
    let text = String::from_utf8(
        f.run(&["delete", "--all-contexts", "--dry-run=server", "--qps", "0"])
            .await
            .stdout,
    )
    .unwrap();
    assert!(text.contains("VALIDATED/ELIGIBLE"), "{text}");
}

/// The committed fleet diagnosis schema is a valid draft 2020-12 schema
/// under its published id (its drift from the types is the documents
/// crate's test, `committed_fleet_diagnosis_schema_matches_the_types`).
#[test]
fn fleet_diagnosis_schema_is_valid_draft_2020_12() {
    let s = schema::committed_fleet_diagnosis();
    assert!(schema::meta_errors(&s).is_empty());
    assert_eq!(
        s["$id"],
        cilium_gc_documents::fleet::FLEET_DIAGNOSIS_SCHEMA_ID
    );
}

/// Valid against the fleet diagnosis schema, and every embedded diagnosis
/// against the diagnosis schema.
fn assert_fleet_diagnosis_valid(doc: &Value) {
    let errors = schema::errors(&schema::committed_fleet_diagnosis(), doc);
    assert!(
        errors.is_empty(),
        "fleet diagnosis invalid:\n{}",
        errors.join("\n")
    );
    for e in doc["clusters"].as_array().unwrap() {
        assert!(e["report"].is_null(), "a diagnosis scans nothing");
        if !e["diagnosis"].is_null() {
            let errors = schema::errors(&schema::committed_diagnosis(), &e["diagnosis"]);
            assert!(
                errors.is_empty(),
                "{}: diagnosis invalid:\n{}",
                e["context"],
                errors.join("\n")
            );
        }
    }
}

/// Issue 26: `diagnose --all-contexts` is one document: an entry per
/// cluster holding exactly what `diagnose --context <it>` finds, a failing
/// cluster with its own error and exit code, the fleet scan's exit rule
/// (2 here: the unreachable cluster), and nothing written anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn diagnose_over_a_fleet_is_one_document_with_each_clusters_diagnosis() {
    let f = mixed().await;
    let out = f.run(&["diagnose", "--all-contexts", "-o", "json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let doc = parse(&out);
    assert_fleet_diagnosis_valid(&doc);
    assert_eq!(
        doc["kind"],
        cilium_gc_documents::fleet::FLEET_DIAGNOSIS_KIND
    );
    assert_eq!(doc["exitCode"], 2);
    let contexts: Vec<&str> = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["context"].as_str().unwrap())
        .collect();
    assert_eq!(
        contexts,
        [
            "prod-a",
            "prod-b",
            "lab-forbidden",
            "lab-kvstore",
            "dr-down"
        ]
    );
    assert_eq!(doc["summary"]["diagnosed"], 4);
    assert_eq!(doc["summary"]["failed"], 1);
    let down = entry(&doc, "dr-down");
    assert_eq!(down["status"], "failed");
    assert_eq!(down["exitCode"], 2);
    assert_eq!(down["error"]["reason"], "read-failed");
    assert!(down["diagnosis"].is_null());

    // Each diagnosis is the single-context one.
    for context in ["prod-a", "lab-kvstore"] {
        let e = entry(&doc, context);
        assert_eq!(e["status"], "succeeded", "{context}");
        let single = f
            .run(&["diagnose", "--context", context, "-o", "json"])
            .await;
        assert_eq!(single.status.code(), Some(0));
        let single = parse(&single);
        let d = &e["diagnosis"];
        for field in ["identitySpace", "configuration", "cluster"] {
            assert_eq!(d[field], single[field], "{context}: {field}");
        }
        // Findings as found (their evidence quotes ages, which move on).
        let found = |d: &Value| -> Vec<(Value, Value, Value)> {
            d["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["severity"].clone(),
                        f["code"].clone(),
                        f["message"].clone(),
                    )
                })
                .collect()
        };
        assert_eq!(found(d), found(&single), "{context}: findings");
        assert!(e["gcVerdict"].is_string(), "{context}");
    }
    assert_eq!(entry(&doc, "lab-kvstore")["gcVerdict"], "not in CRD mode");
    for (name, sim) in &f.sims {
        assert!(
            sim.ledger()
                .requests
                .iter()
                .all(|r| !matches!(r.method.as_str(), "DELETE" | "PATCH" | "PUT")),
            "{name}: diagnose wrote"
        );
    }
}

/// The text and Markdown views: the clusters table first, then each
/// cluster's diagnosis (folded per cluster in Markdown); `--redact` hides
/// every context and server in every format.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fleet_diagnosis_text_markdown_and_redact() {
    let f = Fleet::start(
        &[("prod-a", calm("small")), ("lab-kvstore", calm("kvstore"))],
        &["dr-down"],
    )
    .await;
    let out = f.run(&["diagnose", "--all-contexts"]).await;
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("CONTEXT") && first.contains("GC VERDICT") && first.ends_with("RESULT"),
        "{text}"
    );
    assert!(
        text.contains("=== prod-a ===") && text.contains("=== lab-kvstore ==="),
        "{text}"
    );
    assert!(!text.contains("=== dr-down ==="), "{text}");
    assert!(text.lines().any(|l| l.starts_with("dr-down: ")), "{text}");
    let table_end = text.find("=== prod-a ===").unwrap();
    assert!(text[..table_end].contains("diagnosed"), "{text}");

    let out = f
        .run(&["diagnose", "--all-contexts", "-o", "markdown"])
        .await;
    let md = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        md.starts_with("# Cilium identity diagnosis: 3 clusters\n"),
        "{md}"
    );
    assert!(md.contains("## Clusters"), "{md}");
    for c in ["prod-a", "lab-kvstore", "dr-down"] {
        assert!(
            md.contains(&format!("<details><summary>{c}: ")),
            "{c}:\n{md}"
        );
    }
    assert!(
        md.contains("### Findings"),
        "each diagnosis one level down:\n{md}"
    );

    for format in ["json", "text", "markdown"] {
        let out = f
            .run(&["diagnose", "--all-contexts", "--redact", "-o", format])
            .await;
        let all = String::from_utf8_lossy(&out.stdout);
        for name in ["prod-a", "lab-kvstore", "dr-down", "127.0.0.1"] {
            assert!(!all.contains(name), "{format}: {name} leaked:\n{all}");
        }
        if format == "json" {
            let doc: Value = serde_json::from_str(&all).unwrap();
            assert_eq!(doc["redacted"], true);
            assert_fleet_diagnosis_valid(&doc);
        }
    }
}
