//! The benchmark against a real kube-apiserver and etcd (issue 19): the
//! same figures as `compare.rs` measures on the simulator, on the real
//! server built by `tests/apiserver/build.sh`.
//!
//! Run: `cargo bench --bench real` (release build; `-- --quick` for 5,000
//! identities). It starts its own cluster with `tests/apiserver/cluster.sh`,
//! creates N identities and N CiliumEndpoints using them (plus N/4 stale
//! identities), and measures, each three times (median), as the user
//! `cilium-gc` of the published RBAC:
//! - `kubectl cilium-gc scan -o json` against `kubectl get ciliumidentities`
//!   plus `kubectl get ciliumendpoints -A` (both `--chunk-size=500 -o json`,
//!   what a script would need for the same answer): wall, CPU, peak RSS;
//! - the delete phase: `delete --yes --qps 0 --concurrency 32` of the N/4
//!   stale identities (the report's `deleteRatePerSecond`), against
//!   `kubectl delete --wait=false` of the same number.
//!
//! Prints a Markdown table on stderr and the figures as JSON on stdout;
//! `bench/results-real.json` keeps the last full run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use futures::{stream, StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

mod common;
use common::{load, measure, median, r3, Cost};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cilium_gc");

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A real cluster for the benchmark, stopped on drop.
struct Cluster {
    dir: PathBuf,
    kubectl: PathBuf,
}

impl Cluster {
    fn up() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("kcg-bench.")
            .tempdir()
            .unwrap()
            .keep();
        let out = Command::new(repo("tests/apiserver/cluster.sh"))
            .arg("up")
            .arg(&dir)
            .args(["--owner", &std::process::id().to_string()])
            .output()
            .expect("cluster.sh runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = std::fs::read_to_string(dir.join("env")).unwrap();
        let bin = env.lines().find_map(|l| l.strip_prefix("BIN=")).unwrap();
        Cluster {
            kubectl: Path::new(bin).join("kubectl"),
            dir,
        }
    }
    fn kubeconfig(&self, user: &str) -> PathBuf {
        self.dir.join(format!("{user}.kubeconfig"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo("tests/apiserver/cluster.sh"))
            .arg("down")
            .arg(&self.dir)
            .output();
    }
}

fn resource(g: &str, v: &str, k: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), plural)
}

/// Create N in-use identities with a CiliumEndpoint each, and `stale`
/// identities marked an hour ago, 64 requests at a time, as admin.
async fn seed(cluster: &Cluster, n: u64, stale: u64) -> f64 {
    let kc = kube::config::Kubeconfig::read_from(cluster.kubeconfig("admin")).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let ns = resource("", "v1", "Namespace", "namespaces");
    let ids = resource("cilium.io", "v2", "CiliumIdentity", "ciliumidentities");
    let ceps = resource("cilium.io", "v2", "CiliumEndpoint", "ciliumendpoints");
    let start = std::time::Instant::now();
    let create = |ar: ApiResource, ns: Option<&'static str>, v: Value| {
        let client = client.clone();
        async move {
            let api: Api<DynamicObject> = match ns {
                Some(ns) => Api::namespaced_with(client, ns, &ar),
                None => Api::all_with(client, &ar),
            };
            api.create(&PostParams::default(), &serde_json::from_value(v).unwrap())
                .await
                .map(|_| ())
        }
    };
    create(ns.clone(), None, json!({"metadata": {"name": "bench"}}))
        .await
        .unwrap();
    let hour = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1)).to_string();
    let objects = (0..n + stale).flat_map(|i| {
        let id = 1000 + i;
        let mut identity = json!({"apiVersion": "cilium.io/v2", "kind": "CiliumIdentity",
            "metadata": {"name": id.to_string(), "labels": {"io.kubernetes.pod.namespace": "bench", "app": format!("app-{id}")}},
            "security-labels": {"k8s:io.kubernetes.pod.namespace": "bench", "k8s:app": format!("app-{id}")}});
        let mut v = vec![(ids.clone(), None, identity.take())];
        if i < n {
            v.push((ceps.clone(), Some("bench"), json!({"apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
                "metadata": {"name": format!("pod-{id}"), "namespace": "bench"},
                "status": {"identity": {"id": id}, "networking": {"addressing": [{"ipv4": "10.0.0.1"}], "node": "192.168.0.1"}}})));
        } else {
            v[0].2["metadata"]["annotations"] = json!({"io.cilium.heartbeat": hour});
        }
        v
    });
    stream::iter(objects)
        .map(|(ar, ns, v)| create(ar, ns, v))
        .buffer_unordered(64)
        .try_collect::<Vec<()>>()
        .await
        .expect("seeded");
    start.elapsed().as_secs_f64()
}

fn plugin(cluster: &Cluster, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--kubeconfig")
        .arg(cluster.kubeconfig("cilium-gc"))
        .args(args)
        .env("NO_COLOR", "1");
    c
}

fn kubectl(cluster: &Cluster, home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(&cluster.kubectl);
    c.arg("--kubeconfig")
        .arg(cluster.kubeconfig("cilium-gc"))
        .env("HOME", home)
        .args(args);
    c
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n: u64 = if quick { 5_000 } else { 20_000 };
    let stale = n / 4;
    let rt = tokio::runtime::Runtime::new().unwrap();
    eprintln!("real-apiserver bench: starting a cluster");
    let cluster = Cluster::up();
    eprintln!("seeding {n} identities + {n} endpoints + {stale} stale identities");
    let seed_seconds = rt.block_on(seed(&cluster, n, stale));
    let home = tempfile::tempdir().unwrap();

    let scans: Vec<Cost> = (0..3)
        .map(|_| {
            measure(
                &mut plugin(&cluster, &["scan", "-o", "json"]),
                Stdio::null(),
                None,
            )
        })
        .collect();
    let kubectl_runs: Vec<Cost> = (0..3)
        .map(|_| {
            let a = measure(
                &mut kubectl(
                    &cluster,
                    home.path(),
                    &["get", "ciliumidentities", "--chunk-size=500", "-o", "json"],
                ),
                Stdio::null(),
                None,
            );
            let b = measure(
                &mut kubectl(
                    &cluster,
                    home.path(),
                    &[
                        "get",
                        "ciliumendpoints",
                        "-A",
                        "--chunk-size=500",
                        "-o",
                        "json",
                    ],
                ),
                Stdio::null(),
                None,
            );
            a.plus(b)
        })
        .collect();
    let (scan, kget) = (median(scans), median(kubectl_runs));

    // The delete phase: the plugin deletes the stale identities ...
    let out = plugin(
        &cluster,
        &[
            "delete",
            "--yes",
            "--qps",
            "0",
            "--concurrency",
            "32",
            "-o",
            "json",
        ],
    )
    .stderr(Stdio::null())
    .output()
    .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).expect("a report");
    let deleted = report["summary"]["deleted"].as_u64().unwrap_or(0);
    let rate = report["summary"]["deleteRatePerSecond"]
        .as_f64()
        .unwrap_or(0.0);
    // ... and kubectl deletes as many in-use ones (it cannot tell them apart;
    // only its rate is compared), by name, without waiting.
    let count = stale.min(1000);
    let names: Vec<String> = (1000..1000 + count).map(|i| i.to_string()).collect();
    let mut args = vec!["delete", "ciliumidentities", "--wait=false"];
    args.extend(names.iter().map(String::as_str));
    let kdel = measure(
        &mut kubectl(&cluster, home.path(), &args),
        Stdio::null(),
        None,
    );

    let result = json!({
        "date": jiff::Timestamp::now().to_string(),
        "server": "kube-apiserver v1.35.4 + etcd v3.6.5 on loopback (tests/apiserver), user cilium-gc",
        "load1": load(),
        "identities": n + stale, "endpoints": n, "seedSeconds": r3(seed_seconds),
        "scan": {"plugin": scan.json(), "kubectl": kget.json()},
        "delete": {"plugin": {"deleted": deleted, "ratePerSecond": r3(rate), "exit": out.status.code()},
                   "kubectl": {"deleted": count, "ratePerSecond": r3(count as f64 / kdel.wall), "cost": kdel.json()}},
    });
    eprintln!(
        "\n| on the real server ({} identities, {} CEPs) | kubectl cilium-gc | kubectl |\n|---|---|---|\n\
         | scan: wall | {:.2} s | {:.2} s |\n| scan: CPU | {:.2} s | {:.2} s |\n| scan: peak RSS | {:.1} MiB | {:.1} MiB |\n\
         | delete rate | {:.0}/s ({} deleted, --qps 0 -c 32) | {:.0}/s (`delete --wait=false`, {} names) |",
        n + stale, n, scan.wall, kget.wall, scan.cpu, kget.cpu,
        scan.max_rss_kib as f64 / 1024.0, kget.max_rss_kib as f64 / 1024.0,
        rate, deleted, count as f64 / kdel.wall, count
    );
    println!("{}", serde_json::to_string_pretty(&result).unwrap());
    if !quick {
        std::fs::write(
            repo("bench/results-real.json"),
            serde_json::to_string_pretty(&result).unwrap() + "\n",
        )
        .unwrap();
    }
    drop(cluster);
}
