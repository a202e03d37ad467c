//! The benchmark of issue 7: kubectl-cilium-gc side by side with kubectl on
//! the same simulated cluster, the simulator in its own process so client
//! and server are measured apart.
//!
//! Run: `cargo bench --bench compare` (release build). Quick: add
//! `-- --quick` (smaller sizes). Prints a Markdown table on stderr and the
//! raw figures as JSON on stdout; `bench/results.json` keeps the last run.
//!
//! Wall time is measured around each child process; CPU time and peak RSS
//! come from `wait4`'s rusage of that child alone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cilium_gc");

/// What one child process cost.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    wall: f64,
    cpu: f64,
    max_rss_kib: i64,
    ok: bool,
}

impl Cost {
    fn json(&self) -> Value {
        json!({"wallSeconds": r3(self.wall), "cpuSeconds": r3(self.cpu), "peakRssKiB": self.max_rss_kib, "ok": self.ok})
    }
    fn plus(self, o: Cost) -> Cost {
        Cost {
            wall: self.wall + o.wall,
            cpu: self.cpu + o.cpu,
            max_rss_kib: self.max_rss_kib.max(o.max_rss_kib),
            ok: self.ok && o.ok,
        }
    }
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Run a command to completion, measuring it alone.
fn measure(cmd: &mut Command) -> (Cost, Vec<u8>) {
    let out_path = std::env::temp_dir().join(format!("bench-out-{}", std::process::id()));
    let out = std::fs::File::create(&out_path).unwrap();
    let start = Instant::now();
    let child = cmd
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let (status, usage) = wait4(child);
    let wall = start.elapsed().as_secs_f64();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cost = Cost {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        max_rss_kib: usage.ru_maxrss,
        ok: status == 0,
    };
    let bytes = std::fs::read(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(out_path);
    (cost, bytes)
}

fn wait4(child: Child) -> (i32, libc::rusage) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    std::mem::forget(child);
    (code, usage)
}

/// A simulator in its own process.
struct Server {
    child: Child,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(identities: usize, endpoints: usize) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let child = Command::new(BIN)
            .args(["sim-serve", "--scenario", "seed", "--no-actors"])
            .args([
                "--identities",
                &identities.to_string(),
                "--endpoints",
                &endpoints.to_string(),
            ])
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sim-serve starts");
        let deadline = Instant::now() + Duration::from_secs(300);
        while !kubeconfig.exists() {
            assert!(Instant::now() < deadline, "simulator did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(100));
        Server {
            child,
            kubeconfig,
            _dir: dir,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn gc(server: &Server, args: &[&str]) -> (Cost, Value) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(args)
        .args(["-o", "json"]);
    let (cost, out) = measure(&mut cmd);
    let report = serde_json::from_slice(&out).unwrap_or(Value::Null);
    (cost, report)
}

fn kubectl(server: &Server, home: &Path, args: &[&str]) -> Cost {
    let mut cmd = Command::new("kubectl");
    cmd.args(args)
        .env("KUBECONFIG", &server.kubeconfig)
        .env("HOME", home);
    measure(&mut cmd).0
}

fn identity_names(server: &Server, home: &Path) -> Vec<String> {
    let out = Command::new("kubectl")
        .args(["get", "ciliumidentities", "--chunk-size=500", "-o", "name"])
        .env("KUBECONFIG", &server.kubeconfig)
        .env("HOME", home)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.rsplit('/').next().map(str::to_owned))
        .collect()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let home = tempfile::tempdir().unwrap();
    let have_kubectl = Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok();
    let mut results = json!({
        "date": jiff::Timestamp::now().to_string(),
        "machine": machine(),
        "command": "cargo bench --bench compare",
        "quick": quick,
    });
    let (ids, ceps) = if quick {
        (6_528, 15_000)
    } else {
        (65_280, 150_000)
    };

    // 1. Scan.
    let server = Server::start(ids, ceps);
    let (ours, report) = gc(&server, &["scan", "--items", "none"]);
    let theirs = if have_kubectl {
        kubectl(
            &server,
            home.path(),
            &["get", "ciliumidentities", "--chunk-size=500", "-o", "json"],
        )
        .plus(kubectl(
            &server,
            home.path(),
            &[
                "get",
                "ciliumendpoints",
                "-A",
                "--chunk-size=500",
                "-o",
                "json",
            ],
        ))
    } else {
        Cost::default()
    };
    eprintln!("scan {ids} identities / {ceps} CEPs: ours {ours:?}, kubectl {theirs:?}");
    results["scan"] = json!({
        "identities": ids, "endpoints": ceps,
        "kubectlCiliumGc": ours.json(), "kubectl": theirs.json(),
        "scanned": report["summary"]["scanned"],
        "wallRatio": r3(ours.wall / theirs.wall), "rssRatio": r3(ours.max_rss_kib as f64 / theirs.max_rss_kib as f64),
    });
    drop(server);

    // 2. Delete throughput, qps 0, by concurrency; kubectl delete in batches.
    let mut rows = Vec::new();
    for c in [1, 8, 32, 64] {
        let server = Server::start(ids, ceps);
        let (cost, report) = gc(
            &server,
            &[
                "delete",
                "--yes",
                "--qps",
                "0",
                "--concurrency",
                &c.to_string(),
                "--items",
                "none",
            ],
        );
        let rate = report["summary"]["deleteRatePerSecond"]
            .as_f64()
            .unwrap_or(0.0);
        eprintln!(
            "delete c={c}: {rate}/s ({:?} deleted) {cost:?}",
            report["summary"]["deleted"]
        );
        rows.push(json!({"concurrency": c, "deleted": report["summary"]["deleted"], "ratePerSecond": rate, "cost": cost.json()}));
    }
    let kubectl_rate = if have_kubectl {
        let server = Server::start(ids, ceps);
        let names = identity_names(&server, home.path());
        let sample: Vec<&str> = names
            .iter()
            .take(if quick { 500 } else { 2_000 })
            .map(String::as_str)
            .collect();
        let mut total = Cost {
            ok: true,
            ..Cost::default()
        };
        for batch in sample.chunks(100) {
            let mut args = vec!["delete", "ciliumidentities", "--wait=false"];
            args.extend_from_slice(batch);
            total = total.plus(kubectl(&server, home.path(), &args));
        }
        let rate = sample.len() as f64 / total.wall;
        eprintln!("kubectl delete: {rate:.1}/s over {} names", sample.len());
        json!({"deleted": sample.len(), "ratePerSecond": r3(rate), "cost": total.json()})
    } else {
        Value::Null
    };
    let c32 = rows
        .iter()
        .find(|r| r["concurrency"] == 32)
        .and_then(|r| r["ratePerSecond"].as_f64())
        .unwrap_or(0.0);
    results["deleteThroughput"] = json!({
        "byConcurrency": rows, "kubectlDelete": kubectl_rate,
        "ratioAtConcurrency32": kubectl_rate["ratePerSecond"].as_f64().map(|k| r3(c32 / k)),
    });

    // 3. Rate accuracy: burst 1 so the figure is the limiter's steady rate.
    let mut acc = Vec::new();
    for qps in [10u32, 100, 1000] {
        let want = (qps as usize * if quick { 5 } else { 10 }).max(50);
        // A scenario whose stale share gives about `want` candidates.
        let server = Server::start(
            (want as f64 / 0.3) as usize + 300,
            (want as f64 / 0.3) as usize,
        );
        let (_, report) = gc(
            &server,
            &[
                "delete",
                "--yes",
                "--qps",
                &qps.to_string(),
                "--burst",
                "1",
                "--concurrency",
                "64",
                "--items",
                "none",
            ],
        );
        let rate = report["summary"]["deleteRatePerSecond"]
            .as_f64()
            .unwrap_or(0.0);
        let err = (rate - qps as f64).abs() * 100.0 / qps as f64;
        eprintln!("qps {qps}: achieved {rate:.2}/s, error {err:.2}%");
        acc.push(json!({"qps": qps, "deleted": report["summary"]["deleted"], "achieved": rate, "errorPercent": r3(err)}));
    }
    results["rateAccuracy"] = json!(acc);

    // 4. Memory vs size.
    let mut mem = Vec::new();
    let sizes: &[(usize, usize)] = if quick {
        &[(6_528, 15_000), (65_280, 15_000), (6_528, 150_000)]
    } else {
        &[
            (6_528, 15_000),
            (65_280, 15_000),
            (652_800, 15_000),
            (65_280, 150_000),
        ]
    };
    for &(i, e) in sizes {
        let server = Server::start(i, e);
        let (cost, report) = gc(&server, &["scan", "--items", "none"]);
        eprintln!("scan {i}/{e}: peak RSS {} KiB", cost.max_rss_kib);
        mem.push(json!({"identities": i, "endpoints": e, "scanned": report["summary"]["scanned"], "cost": cost.json()}));
    }
    let rss = |i: usize, e: usize| {
        mem.iter()
            .find(|m| m["identities"] == i && m["endpoints"] == e)
            .and_then(|m| m["cost"]["peakRssKiB"].as_f64())
    };
    let (small, big) = if quick {
        (6_528, 65_280)
    } else {
        (65_280, 652_800)
    };
    let per_identity = match (rss(small, 15_000), rss(big, 15_000)) {
        (Some(a), Some(b)) => Some(r3((b - a) * 1024.0 / (big - small) as f64)),
        _ => None,
    };
    let (ei, e_lo, e_hi) = if quick {
        (6_528, 15_000, 150_000)
    } else {
        (65_280, 15_000, 150_000)
    };
    let per_endpoint = match (rss(ei, e_lo), rss(ei, e_hi)) {
        (Some(a), Some(b)) => Some(r3((b - a) * 1024.0 / (e_hi - e_lo) as f64)),
        _ => None,
    };
    results["memory"] =
        json!({"runs": mem, "bytesPerIdentity": per_identity, "bytesPerEndpoint": per_endpoint});

    let text = serde_json::to_string_pretty(&results).unwrap();
    println!("{text}");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench");
    let _ = std::fs::create_dir_all(&dir);
    let name = if quick {
        "results-quick.json"
    } else {
        "results.json"
    };
    let _ = std::fs::write(dir.join(name), text + "\n");
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    json!({"cpu": cpu, "cores": cores, "os": std::env::consts::OS, "arch": std::env::consts::ARCH})
}
