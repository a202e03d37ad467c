//! `diagnose --from` on an archive the real cilium-cli wrote (issue 36, 2):
//! `cilium sysdump` of a real kube-apiserver holding identities allocated by
//! agents on Cilium's own code, marked by the real current operator, some
//! in use by CiliumEndpoints. The saved diagnosis must say where it came
//! from, take "now" from the archive's file names, count what the server
//! holds, give the findings of a live `diagnose` of the same still cluster,
//! and list the evidence a quick sysdump leaves out.
//!
//! cilium-cli cannot be built by CI (the Go module proxy refuses it:
//! tests/tools/cilium-cli.sh), so this test is run by hand with a built
//! cilium-cli, and records what it saw in `tests/fixtures/cilium-sysdump/`:
//! the archive itself and `expected.json` (what the server held and what the
//! live diagnosis said at that moment). The integration test
//! `diagnose::sysdump_real` reads that archive in every CI run.
//!
//! ```text
//! KCG_CILIUM_CLI_SRC=<cilium-cli source with vendor/> \
//!   cargo test --test e2e -- --ignored diagnose_sysdump
//! ```
//! (or `KCG_CILIUM_CLI=<a cilium binary>`); `KCG_RECORD_SYSDUMP=1` also
//! replaces the fixture.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::support::cluster::Cluster;
use crate::support::objects::{cilium_workloads, create_all, endpoint, namespace};
use crate::support::operator::{release, Operator, Version, World};
use crate::support::sysdump::{assert_saved_matches, findings, rfc3339};
use crate::support::workload::seed_old;
use crate::support::{assert_exit, plugin, repo_path, report, run};

/// As in `diagnose_saved`: every unused identity marked, at most one
/// deleted an hour, so the world holds still between the sysdump and the
/// live run.
const SLOW_GC: [&str; 4] = [
    "--identity-gc-interval=2s",
    "--identity-heartbeat-timeout=2s",
    "--identity-gc-rate-limit=1",
    "--identity-gc-rate-interval=1h",
];

/// Identities of the seed that CiliumEndpoints use.
const IN_USE: usize = 3;

/// Marked identities a third writer (`label-sync`) patches after the mark.
const PATCHED: usize = 2;

/// An identity no endpoint may find: one CiliumEndpoint references it.
const GONE: u64 = 65_000;

/// The cilium-cli binary: `KCG_CILIUM_CLI`, else built from
/// `KCG_CILIUM_CLI_SRC` by tests/tools/cilium-cli.sh. Missing is a failure
/// (this test runs only when asked for).
fn cilium_cli() -> PathBuf {
    if let Some(bin) = std::env::var_os("KCG_CILIUM_CLI") {
        return PathBuf::from(bin);
    }
    let src = std::env::var_os("KCG_CILIUM_CLI_SRC")
        .expect("KCG_CILIUM_CLI (a cilium binary) or KCG_CILIUM_CLI_SRC (its source with vendor/)");
    let out = Command::new(repo_path("tests/tools/cilium-cli.sh"))
        .arg(src)
        .output()
        .expect("cilium-cli.sh runs");
    assert!(
        out.status.success(),
        "building cilium-cli failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).expect("utf-8").trim())
}

/// How many objects of `resource` the server holds, as `kubectl` lists them.
fn server_count(cluster: &Cluster, resource: &str) -> u64 {
    let out = cluster.kubectl(&["get", resource, "-A", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("a list");
    v["items"].as_array().expect("items").len() as u64
}

/// The objects a cluster with Cilium shows, beyond what cluster.sh sets up:
/// a Node (cilium-cli refuses a cluster without one), the operator's
/// Deployment and the agents' DaemonSet (cilium-cli picks it by label), and
/// an operator Pod with the operator's flags (never scheduled: no kubelet
/// runs it, so neither cilium-cli nor `diagnose` can read its metrics).
fn cilium_objects(cluster: &Cluster) {
    let release = release(Version::Current);
    cluster.apply(&cilium_workloads(&release));
    cluster.apply(
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-1, labels: {kubernetes.io/hostname: node-1}}\n",
    );
    let args = SLOW_GC.map(|a| format!("\"{a}\"")).join(", ");
    cluster.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: cilium-operator-5d8f7c9b4-x2x7q, namespace: kube-system, labels: {{io.cilium/app: operator, name: cilium-operator}}}}
spec:
  containers:
  - name: cilium-operator
    image: "quay.io/cilium/operator-generic:{release}"
    args: [{args}]
    ports: [{{name: prometheus, containerPort: 9963}}]
"#
    ));
}

/// `kubectl patch --field-manager=label-sync` of [`PATCHED`] identities the
/// operator has marked, as a label-syncing controller would.
fn third_writer(cluster: &Cluster, world: &World, old: &BTreeSet<String>) {
    let chosen: Vec<&String> = old
        .iter()
        .filter(|n| world.identities.get(*n).is_some_and(|i| i.marked))
        .take(PATCHED)
        .collect();
    assert_eq!(chosen.len(), PATCHED, "marked identities to patch");
    for name in chosen {
        cluster.patch_as_label_sync(name);
    }
}

/// Run `cilium sysdump` in `dir` against `kubeconfig`: objects only (quick,
/// no Hubble flows, no profiles), in UTC. Returns the archive and its
/// `<ts>`.
fn sysdump(cli: &Path, kubeconfig: &Path, dir: &Path) -> (PathBuf, String) {
    let out = Command::new(cli)
        .current_dir(dir)
        .env("TZ", "UTC")
        .arg("sysdump")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--quick",
            "--hubble-flows-count=0",
            "--profiling=false",
            "--worker-count=2",
            "--output-filename=cilium-sysdump-<ts>",
        ])
        .output()
        .expect("cilium sysdump runs");
    assert!(
        out.status.success(),
        "cilium sysdump failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let zip = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "zip"))
        .expect("cilium sysdump wrote a .zip");
    let stem = zip.file_stem().unwrap().to_string_lossy().into_owned();
    let ts = stem
        .strip_prefix("cilium-sysdump-")
        .expect("our name")
        .to_string();
    (zip, ts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs cilium-cli, which CI cannot build: KCG_CILIUM_CLI_SRC=… cargo test --test e2e -- --ignored diagnose_sysdump"]
async fn a_real_cilium_sysdump_gives_the_live_findings() {
    let cli = cilium_cli();
    let version = Command::new(&cli)
        .args(["version", "--client"])
        .output()
        .expect("cilium version runs");
    let version = String::from_utf8_lossy(&version.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(version.starts_with("cilium-cli: v"), "{version}");
    let cluster = Cluster::up(&[]).expect("kube-apiserver (tests/apiserver/build.sh)");
    crate::support::operator::build(Version::Current).expect("cilium (tests/cilium/build.sh)");
    cilium_objects(&cluster);
    // A heartbeat timeout under 5 minutes in the ConfigMap (the operator
    // runs with its own flags, as a flag overrides the ConfigMap): a
    // finding, and a window of "lately" that the seconds between the
    // sysdump and the live run cannot cross.
    cluster.set_cilium_config(&[("identity-heartbeat-timeout", "4m")]);
    let old = seed_old(&cluster, Version::Current).await;
    assert!(!old.contains(&GONE.to_string()));
    // A few of the old identities in use again, by endpoints of one
    // namespace, and one endpoint of an identity that does not exist.
    let ns = "sysdump-web";
    let mut objects = vec![namespace(ns), endpoint(ns, "web-gone", GONE)];
    for (i, id) in old.iter().take(IN_USE).enumerate() {
        objects.push(endpoint(ns, &format!("web-{i}"), id.parse().unwrap()));
    }
    let client = cluster.admin().await;
    create_all(&client, objects).await;
    let _operator = Operator::up(&cluster, Version::Current, &SLOW_GC).expect("operator");
    // Let it mark the unused ones and spend its one delete.
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    third_writer(&cluster, &World::read(&client).await, &old);

    let before = (
        server_count(&cluster, "ciliumidentities.cilium.io"),
        server_count(&cluster, "ciliumendpoints.cilium.io"),
    );
    let dir = cluster.dir().join("sysdump");
    std::fs::create_dir_all(&dir).unwrap();
    let (zip, ts) = sysdump(&cli, &cluster.admin_kubeconfig(), &dir);
    let out = run(&cluster.gc_kubeconfig(), &["diagnose", "-o", "json"]).await;
    assert_exit(&out, 0);
    let live = report(&out);
    let after = (
        server_count(&cluster, "ciliumidentities.cilium.io"),
        server_count(&cluster, "ciliumendpoints.cilium.io"),
    );
    // The premise: the world held still, and the operator marked.
    assert_eq!(before, after, "(identities, endpoints) on the server");
    assert_eq!(after.1, IN_USE as u64 + 1);
    let states = &live["identitySpace"]["states"];
    let marked =
        states["unusedMarked"].as_u64().unwrap() + states["staleCandidates"].as_u64().unwrap();
    assert!(marked > old.len() as u64 / 2, "{}", live["identitySpace"]);

    let pods = &live["gcHealth"]["cilium"]["operatorPods"];
    assert_eq!(
        pods.as_array().map(Vec::len),
        Some(1),
        "the operator Pod, live: {pods}"
    );
    let codes: BTreeSet<String> = findings(&live).into_iter().map(|(c, _)| c).collect();
    for code in [
        "known-gc-defect",
        "dangling-references",
        "heartbeat-timeout-low",
        "conflict-writers",
    ] {
        assert!(codes.contains(code), "live: {code} in {codes:?}");
    }

    let mut cmd = plugin();
    cmd.args(["diagnose", "-o", "json", "--from"]).arg(&zip);
    let out = crate::support::finish(cmd).await;
    assert_exit(&out, 0);
    let saved = report(&out);
    let expected = json!({
        "ciliumCli": version,
        "archive": zip.file_name().unwrap().to_string_lossy(),
        "capturedAt": rfc3339(&ts),
        "server": {"identities": after.0, "endpoints": after.1},
        "live": {
            "findings": findings(&live),
            "states": live["identitySpace"]["states"],
            "total": live["identitySpace"]["total"],
            "writers": live["writers"],
            "endpointSliceCrd": live["cluster"]["endpointSliceCrd"],
            "operatorPods": live["gcHealth"]["cilium"]["operatorPods"],
        },
    });
    assert_saved_matches(&saved, &expected);
    if std::env::var_os("KCG_RECORD_SYSDUMP").is_some() {
        record(&zip, &expected);
    }
}

/// Replace the recorded fixture with this run's archive and expectations.
fn record(zip: &Path, expected: &Value) {
    let dir = repo_path("tests/fixtures/cilium-sysdump");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(zip, dir.join(zip.file_name().unwrap())).unwrap();
    let mut text = serde_json::to_string_pretty(expected).unwrap();
    text.push('\n');
    std::fs::write(dir.join("expected.json"), text).unwrap();
}
