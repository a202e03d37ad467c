//! The fleet benchmark (issue 21): one `scan --all-contexts` over N
//! simulated clusters, each simulator in its own process, against what
//! people do today (a shell loop of N single-context scans).
//!
//! Run: `cargo bench --bench fleet` (release build; `-- --quick` for small
//! sizes; `-- --only memory` for the memory rows alone).
//!
//! *Memory follows `--parallel`* (issue 28): peak RSS of
//! `scan --all-contexts --parallel 4 -o json` over 8, 16 and 32 clusters
//! (with and without the diagnosis) must stay flat: finished clusters wait
//! on disk for the document (`fleet/spool.rs`), not in memory. Prints a Markdown table on stderr and the figures as JSON on
//! stdout; `benches/results/results-fleet.json` (`-quick.json`) keeps the last run.
//! Wall time around each child; CPU and peak RSS from `wait4` (see
//! `compare.rs` for the peak-RSS caveat).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

mod common;
use common::{load, measure, median, proc_cpu, Cost};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cilium_gc");

/// A simulator in its own process, its kubeconfig's context renamed.
struct Server {
    child: Child,
    kubeconfig: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(sim: &Path, dir: &Path, name: &str, identities: usize, endpoints: usize) -> Server {
    let raw = dir.join(format!("{name}.raw"));
    let log = dir.join(format!("{name}.log"));
    let (i, e) = (identities.to_string(), endpoints.to_string());
    let args = [
        "--scenario",
        "seed",
        "--no-actors",
        "--no-faults",
        "--identities",
        &i,
        "--endpoints",
        &e,
    ];
    let mut child = common::spawn_sim(sim, &args, &raw, &log);
    common::wait_for_sim(&mut child, &raw, &log, Duration::from_secs(600));
    let text = std::fs::read_to_string(&raw).unwrap();
    let renamed: String = text
        .lines()
        .map(|l| match l.trim_end().rsplit_once(": sim") {
            Some((head, "")) => format!("{head}: {name}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&kubeconfig, renamed).unwrap();
    Server { child, kubeconfig }
}

fn plugin(kubeconfig_env: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(common::plugin_bin(BIN));
    cmd.env("KUBECONFIG", kubeconfig_env)
        .env("NO_COLOR", "1")
        .args(args);
    cmd
}

/// The median of `runs` measurements of `make()`, with the simulators' CPU.
fn timed(runs: usize, servers: &[Server], make: impl Fn() -> Vec<Command>) -> Cost {
    let costs = (0..runs)
        .map(|_| {
            let sim_before: f64 = servers.iter().map(|s| proc_cpu(s.child.id())).sum();
            let mut total = Cost {
                ok: true,
                ..Cost::default()
            };
            for mut cmd in make() {
                total = total.plus(measure(&mut cmd, Stdio::null(), None));
            }
            total.sim_cpu =
                servers.iter().map(|s| proc_cpu(s.child.id())).sum::<f64>() - sim_before;
            total
        })
        .collect();
    median(costs)
}

/// Peak RSS of `scan --all-contexts --parallel 4` over the first 8, 16 and
/// 32 of `servers` (fewer when quick), with and without the diagnosis.
fn memory_rows(servers: &[Server], runs: usize) -> Vec<(String, Cost)> {
    let mut rows = Vec::new();
    for count in [8, 16, 32].into_iter().filter(|c| *c <= servers.len()) {
        let env = std::env::join_paths(servers[..count].iter().map(|s| s.kubeconfig.clone()))
            .unwrap()
            .into_string()
            .unwrap();
        for diagnosis in [false, true] {
            let mut args = vec!["scan", "--all-contexts", "--parallel", "4", "-o", "json"];
            if !diagnosis {
                args.push("--no-diagnosis");
            }
            let label = format!(
                "{count} clusters: `scan --all-contexts --parallel 4`{}",
                if diagnosis { "" } else { " `--no-diagnosis`" }
            );
            let cost = timed(runs, &servers[..count], || vec![plugin(&env, &args)]);
            eprintln!("  {label}: {:.1} MiB", cost.max_rss_kib as f64 / 1024.0);
            rows.push((label, cost));
        }
    }
    rows
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let only_memory = std::env::args().any(|a| a == "memory");
    let (clusters, identities, endpoints, runs) = if quick {
        (4, 2_000, 1_000, 1)
    } else {
        (8, 10_000, 5_000, 3)
    };
    let sim = common::sim_bin(BIN);
    let dir = tempfile::tempdir().unwrap();
    eprintln!("fleet benchmark: {clusters} clusters x {identities} identities + {endpoints} CEPs, load {:.2}", load());
    let total = if quick { 8 } else { 32 };
    let servers: Vec<Server> = (0..total)
        .map(|i| start(&sim, dir.path(), &format!("c{i}"), identities, endpoints))
        .collect();
    let mut rows: Vec<(String, Cost)> = Vec::new();
    if only_memory {
        rows.extend(memory_rows(&servers, runs));
        print_rows(&rows);
        let out = json!({
            "identitiesPerCluster": identities, "endpointsPerCluster": endpoints, "runs": runs,
            "load": load(), "date": jiff::Timestamp::now().to_string(),
            "memory": rows.iter().map(|(l, c)| json!({"run": l, "cost": c.json()})).collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&out).unwrap();
        println!("{text}");
        if !quick {
            let _ = std::fs::write(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("benches/results/results-fleet-memory.json"),
                text + "\n",
            );
        }
        return;
    }
    let servers_all = servers;
    let servers = &servers_all[..clusters];
    let env = std::env::join_paths(servers.iter().map(|s| s.kubeconfig.clone()))
        .unwrap()
        .into_string()
        .unwrap();
    let names: Vec<String> = (0..clusters).map(|i| format!("c{i}")).collect();
    rows.push((
        format!("shell loop: {clusters} x `scan --context cN -o json`"),
        timed(runs, servers, || {
            names
                .iter()
                .map(|n| plugin(&env, &["scan", "--context", n, "-o", "json"]))
                .collect()
        }),
    ));
    let mut parallels = vec![1, 4, clusters];
    parallels.dedup();
    for parallel in parallels {
        for diagnosis in [false, true] {
            let p = parallel.to_string();
            let mut args = vec!["scan", "--all-contexts", "--parallel", &p, "-o", "json"];
            if !diagnosis {
                args.push("--no-diagnosis");
            }
            let label = format!(
                "`scan --all-contexts --parallel {parallel}`{}",
                if diagnosis { "" } else { " `--no-diagnosis`" }
            );
            let cost = timed(runs, servers, || vec![plugin(&env, &args)]);
            eprintln!("  {label}: {:.2}s", cost.wall);
            rows.push((label, cost));
        }
    }
    let memory = memory_rows(&servers_all, 1);
    rows.extend(memory.iter().cloned());
    print_rows(&rows);
    let out: Value = json!({
        "clusters": clusters, "identitiesPerCluster": identities, "endpointsPerCluster": endpoints,
        "runs": runs, "load": load(),
        "date": jiff::Timestamp::now().to_string(),
        "results": rows.iter().map(|(l, c)| json!({"run": l, "cost": c.json()})).collect::<Vec<_>>(),
    });
    let text = serde_json::to_string_pretty(&out).unwrap();
    println!("{text}");
    let file = if quick {
        "benches/results/results-fleet-quick.json"
    } else {
        "benches/results/results-fleet.json"
    };
    let _ = std::fs::write(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(file),
        text + "\n",
    );
}

fn print_rows(rows: &[(String, Cost)]) {
    eprintln!("\n| run | wall s | CPU s | peak RSS MiB | simulators' CPU s | ok |\n|---|---|---|---|---|---|");
    for (label, c) in rows {
        eprintln!(
            "| {label} | {:.2} | {:.2} | {:.1} | {:.2} | {} |",
            c.wall,
            c.cpu,
            c.max_rss_kib as f64 / 1024.0,
            c.sim_cpu,
            c.ok
        );
    }
}
