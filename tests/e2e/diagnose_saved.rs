//! `diagnose --from` (issue 36, 2): on the real kube-apiserver, under the
//! churn of agents running Cilium's own allocator and the real current
//! cilium-operator marking and deleting, the live `diagnose` and
//! `diagnose --from` on `kubectl get -o yaml` dumps taken at the same moment
//! give the same document, but for the fields only a live cluster has
//! (listed in docs/diagnose.md, "Live and saved, compared"); `--redact`
//! alike.
//!
//! "The same moment" under churn: the writers (both agents programs and the
//! operator) are stopped with SIGSTOP, the dumps and the live runs taken,
//! then they resume. The server's resourceVersions of every identity and
//! endpoint, read before the dumps and after the live runs, are equal: the
//! premise that nothing moved. The dumps carry cilium-cli's sysdump file
//! names with the live run's second as `<ts>`, so both diagnoses judge ages
//! at the same second; the same dumps without those names give the newest
//! object time, a lower bound.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::audit::{Actor, Resource, Verb};
use crate::support::cluster::Cluster;
use crate::support::freeze::{Freeze, Snapshot};
use crate::support::objects::cilium_workloads;
use crate::support::operator::{release, Operator, Version};
use crate::support::workload::{seed_old, spawn_churn, GC_FLAGS};
use crate::support::{assert_exit, plugin, report, run};

/// The operator's lease outlasts the freeze (its default here, 4 s, would
/// end it: a leader stopped past its renew deadline steps down).
const LONG_LEASE: [&str; 3] = [
    "--leader-election-lease-duration=120s",
    "--leader-election-renew-deadline=90s",
    "--leader-election-retry-period=2s",
];

/// Fields where the two documents may differ, and why (docs/diagnose.md
/// lists the same, and this test checks it does): everything else must be
/// equal.
const LIVE_ONLY: [(&str, &str); 5] = [
    ("cluster.server", "no server in files"),
    ("cluster.context", "no kubeconfig context in files"),
    ("cluster.kubernetesVersion", "no /version in files"),
    (
        "cluster.endpointSliceCrd",
        "served CRDs: an empty `kubectl get` list names no kind",
    ),
    ("source", "saved objects only"),
];

/// The dumps, by cilium-cli's sysdump file name prefix, as `kubectl get` args.
const DUMPS: [(&str, &[&str]); 7] = [
    // managedFields are left out by kubectl unless asked for.
    (
        "ciliumidentities",
        &["ciliumidentities.cilium.io", "--show-managed-fields"],
    ),
    ("ciliumendpoints", &["ciliumendpoints.cilium.io", "-A"]),
    ("ciliumendpointslices", &["ciliumendpointslices.cilium.io"]),
    (
        "cilium-configmap",
        &["configmap", "cilium-config", "-n", "kube-system"],
    ),
    (
        "cilium-operator-deployment",
        &["deployment", "cilium-operator", "-n", "kube-system"],
    ),
    (
        "cilium-daemonset",
        &["daemonset", "cilium", "-n", "kube-system"],
    ),
    (
        "k8s-pods",
        &["pods", "-n", "kube-system", "-l", "io.cilium/app=operator"],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_dumps_under_churn_give_the_live_diagnosis() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    if crate::support::operator::build(Version::Current).is_none() {
        return;
    }
    // cilium-config says what the operator runs with, so the diagnosis
    // judges marks as it does; the workloads name its release.
    cluster.set_cilium_config(&[
        ("identity-gc-interval", "2s"),
        ("identity-heartbeat-timeout", "2s"),
    ]);
    cluster.apply(&cilium_workloads(&release(Version::Current)));
    let old = seed_old(&cluster, Version::Current).await;
    let flags = [&GC_FLAGS[..], &LONG_LEASE[..]].concat();
    let _operator = Operator::up(&cluster, Version::Current, &flags).expect("operator");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let churn = spawn_churn(
        &cluster,
        Version::Current,
        Duration::from_secs(120),
        50,
        Some(stop_rx),
    );
    // The operator marks (a pass every 2 s) and deletes (4/s) the old
    // identities while the agents start, end and reuse.
    tokio::time::sleep(Duration::from_secs(15)).await;

    let client = cluster.admin().await;
    let frozen_at = jiff::Timestamp::now();
    let dir = cluster.dir().join("saved");
    let (before, after, live, live_redacted) = {
        let _freeze = Freeze::writers(&cluster, 2);
        let before = Snapshot::settled(&client).await;
        dump(&cluster, &dir);
        let gc = cluster.gc_kubeconfig();
        let out = run(&gc, &["diagnose", "-o", "json"]).await;
        assert_exit(&out, 0);
        let live = report(&out);
        let out = run(&gc, &["diagnose", "-o", "json", "--redact"]).await;
        assert_exit(&out, 0);
        let live_redacted = report(&out);
        let after = Snapshot::read(&client).await;
        (before, after, live, live_redacted)
    };
    let _ = stop_tx.send(true);
    let [warm, _jobs] = churn.await.expect("agents task");

    // The premises, from the server: nothing moved while frozen; before
    // it, the agents stripped marks (Cilium's allocator reusing an
    // identity), the operator marked and deleted; the moment holds
    // identities in use, marked, and unmarked.
    assert_eq!(before, after, "the identities and endpoints held still");
    let audit = cluster.audit();
    let writes = |actor: Actor, verb: Verb| {
        audit
            .writes()
            .iter()
            .filter(|w| w.actor == actor && w.resource == Resource::Identity)
            .filter(|w| w.verb == verb && w.took_effect() && w.done < frozen_at)
            .count()
    };
    assert!(
        writes(Actor::Agents, Verb::Update) > 0,
        "agents stripped marks"
    );
    assert!(
        writes(Actor::Operator, Verb::Delete) > 0,
        "the operator deleted"
    );
    assert!(
        writes(Actor::Operator, Verb::Update) + writes(Actor::Operator, Verb::Patch) > 0,
        "the operator marked"
    );
    assert!(
        warm.requests("PUT", "ciliumidentities", "200") > 0,
        "{warm:?}"
    );
    let states = &live["identitySpace"]["states"];
    for state in ["inUse", "staleCandidates", "unusedUnmarked"] {
        assert!(states[state].as_u64() > Some(0), "{state}: {states}");
    }
    assert!(old.len() > 50, "old identities seeded");

    let saved = from(&as_sysdump(&dir, &live), &[]).await;
    assert_same(&live, &saved);
    assert!(
        live.get("source").is_none(),
        "a live diagnosis has no source"
    );
    let source = &saved["source"];
    assert_eq!(source["capturedAtFrom"], "sysdump-file-name", "{source}");
    assert_eq!(
        second(&source["capturedAt"]),
        second(&live["generatedAt"]),
        "judged at the live run's second"
    );
    let missing = source["missing"].to_string();
    assert!(
        missing.contains("cilium-operator metrics") && !missing.contains("cilium-config"),
        "{missing}"
    );

    // --redact: the same document, with other tokens; nothing of the
    // cluster's names or values left in either.
    let saved_redacted = from(&as_sysdump(&dir, &live_redacted), &["--redact"]).await;
    assert_same(
        &tokens_masked(&live_redacted),
        &tokens_masked(&saved_redacted),
    );
    for (d, what) in [(&live, "live"), (&saved, "saved")] {
        assert!(
            !plain_values(d).is_empty(),
            "{what}: label values to redact"
        );
    }
    for (d, what) in [(&live_redacted, "live"), (&saved_redacted, "saved")] {
        assert_eq!(plain_values(d), BTreeSet::new(), "{what} --redact");
        assert_eq!(d["redacted"], true, "{what}");
    }
    assert_eq!(
        token_count(&live_redacted),
        token_count(&saved_redacted),
        "as many distinct namespaces and values"
    );
    let path = saved_redacted["source"]["path"].as_str().unwrap();
    assert!(!path.contains("sysdump"), "the path is hashed: {path}");

    // The same files under their plain names: "now" is the newest object
    // time, a lower bound of the capture.
    let lower = from(&dir, &[]).await;
    assert_eq!(lower["source"]["capturedAtFrom"], "newest-object");
    assert!(
        second(&lower["source"]["capturedAt"]) <= second(&source["capturedAt"]),
        "a lower bound: {} vs {}",
        lower["source"]["capturedAt"],
        source["capturedAt"]
    );
}

/// `kubectl get -o yaml` of each of [`DUMPS`] into `dir`, as
/// `<prefix>.yaml`: no capture time in the names.
fn dump(cluster: &Cluster, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (prefix, args) in DUMPS {
        let out = cluster.kubectl(&[&["get"][..], args, &["-o", "yaml"]].concat());
        assert!(
            out.status.success(),
            "kubectl get {}: {}",
            args[0],
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(dir.join(format!("{prefix}.yaml")), &out.stdout).unwrap();
    }
}

/// A copy of the dumps in `dir` named `<prefix>-<ts>.yaml` as a sysdump
/// names its files, `<ts>` the second of `live`'s `generatedAt` (UTC,
/// cilium-cli's `20060102-150405`); returns its directory.
fn as_sysdump(dir: &Path, live: &Value) -> PathBuf {
    let at: jiff::Timestamp = live["generatedAt"].as_str().unwrap().parse().unwrap();
    let ts = at.strftime("%Y%m%d-%H%M%S").to_string();
    let to = dir.with_file_name(format!("sysdump-{ts}"));
    std::fs::create_dir_all(&to).unwrap();
    for (prefix, _) in DUMPS {
        std::fs::copy(
            dir.join(format!("{prefix}.yaml")),
            to.join(format!("{prefix}-{ts}.yaml")),
        )
        .unwrap();
    }
    to
}

/// `diagnose -o json --from dir` with `extra`.
async fn from(dir: &Path, extra: &[&str]) -> Value {
    let mut cmd = plugin();
    cmd.args(["diagnose", "-o", "json", "--from"])
        .arg(dir)
        .args(extra);
    let out = crate::support::finish(cmd).await;
    assert_exit(&out, 0);
    report(&out)
}

/// A time field, to the second.
fn second(v: &Value) -> i64 {
    let t: jiff::Timestamp = v.as_str().expect("a time").parse().expect("RFC 3339");
    t.as_second()
}

/// Live and saved are the same document but for [`LIVE_ONLY`], and the
/// saved one's two warnings of its own (its source, what was missing).
fn assert_same(live: &Value, saved: &Value) {
    let doc = std::fs::read_to_string(crate::support::repo_path("docs/diagnose.md")).unwrap();
    for (field, _) in LIVE_ONLY {
        assert!(
            doc.contains(&format!("`{field}`")),
            "docs/diagnose.md lists {field}"
        );
    }
    let mut saved = saved.clone();
    let warnings = saved["warnings"].as_array_mut().expect("warnings");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .starts_with("source: saved objects"),
        "{warnings:?}"
    );
    warnings.remove(0);
    warnings.retain(|w| {
        !w.as_str()
            .unwrap()
            .starts_with("not among the saved objects")
    });
    let mut diffs = Vec::new();
    differ(live, &saved, String::new(), &mut diffs);
    diffs.retain(|(p, _)| {
        !LIVE_ONLY
            .iter()
            .any(|(f, _)| p == f || p.starts_with(&format!("{f}.")))
    });
    assert_eq!(diffs, Vec::<(String, String)>::new(), "fields that differ");
    // The premise of the comparison: there was something to compare.
    assert!(!live["findings"].as_array().unwrap().is_empty());
}

/// The paths at which `a` and `b` differ (`findings[2].message`), each
/// with both values.
fn differ(a: &Value, b: &Value, at: String, out: &mut Vec<(String, String)>) {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Value::Null;
                differ(
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    join(k),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differ(p, q, format!("{at}[{i}]"), out);
            }
        }
        _ if a != b => out.push((at, format!("live {a} / saved {b}"))),
        _ => {}
    }
}

/// The redaction tokens (`ns-`, `v-`, `server-`, `context-`, `path-` plus
/// 16 hex digits) of a document.
fn tokens(d: &Value) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\b(ns|v|server|context|path)-[0-9a-f]{16}\b").unwrap();
    re.find_iter(&d.to_string())
        .map(|m| m.as_str().to_string())
        .collect()
}

/// Distinct namespace and label-value tokens by kind (the server and
/// context are live-only, the path saved-only).
fn token_count(d: &Value) -> Vec<(String, usize)> {
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for t in tokens(d)
        .iter()
        .filter(|t| t.starts_with("ns-") || t.starts_with("v-"))
    {
        *by.entry(t.split('-').next().unwrap().to_string())
            .or_default() += 1;
    }
    by.into_iter().collect()
}

/// The document with each token replaced by its kind (`ns-*`): two runs
/// draw different keys.
fn tokens_masked(d: &Value) -> Value {
    let re = regex::Regex::new(r"\b(ns|v|server|context|path)-[0-9a-f]{16}\b").unwrap();
    serde_json::from_str(&re.replace_all(&d.to_string(), "$1-*")).unwrap()
}

/// What the test world's names look like unredacted, found in a
/// document: its label values (`old-3`, `warm-17`, `job-40211`) and every
/// `namespace` field that is not a token.
fn plain_values(d: &Value) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\b(?:old|warm|job)-\d+\b").unwrap();
    let mut found: BTreeSet<String> = re
        .find_iter(&d.to_string())
        .map(|m| m.as_str().to_string())
        .collect();
    namespaces(d, &mut found);
    found
}

/// Every string under a `namespace` key that is not an `ns-` token.
fn namespaces(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match x.as_str() {
                    Some(s) if k == "namespace" && !s.starts_with("ns-") => {
                        out.insert(format!("namespace {s}"));
                    }
                    _ => namespaces(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| namespaces(x, out)),
        _ => {}
    }
}
