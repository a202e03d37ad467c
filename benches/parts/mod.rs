//! Where the plugin's time per delete goes, against curl's (issue 33, 4):
//! the exhaustion bench measured `delete --yes --qps 0` at 1.15x the time
//! per delete of `curl --parallel` (32 at once, names given, no body), and
//! left apart what curl does not do: the list (and the CiliumEndpoint
//! watch) before and beside the deletes, the `{uid, resourceVersion}`
//! preconditions body of every DELETE, and the plugin's own CPU on the
//! cores the server needs.
//!
//! `cargo bench --bench real -- --only parts [--identities N]` (default
//! 20,000 stale identities, marked an hour ago, beside 1,000 in use with
//! a CiliumEndpoint each): the same stale ids, seeded again before each
//! run, deleted in turn by
//! - `curl --parallel --parallel-max 32 --http1.1` without a body;
//! - the same with the plugin's own DeleteOptions body (preconditions from
//!   a list taken before curl starts, not timed);
//! - `delete --yes --qps 0` as `cilium-gc`, timed from its start (list
//!   included) to its exit, and its delete phase (its report's rate);
//!
//! each three times, interleaved (a b c a b c a b c), with the CPU the kube-apiserver
//! and etcd spent during the run beside the client's own.

use serde_json::{json, Value};
use std::collections::BTreeMap;

use super::common::judge::{goal, judge};
use super::common::{load, proc_cpu, r3, say};
use super::{curl_deletes, curl_deletes_with_bodies, plugin_report, reseed, seed_from, Cluster};

const FIRST: u64 = 256;
const IN_USE: u64 = 1_000;

/// Who deletes, in turn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Client {
    CurlNoBody,
    CurlPreconditions,
    Plugin,
}

impl Client {
    /// Its key in the JSON and its words in the printed line.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Client::CurlNoBody => ("curlNoBody", "curl --parallel-max 32 --http1.1, no body"),
            Client::CurlPreconditions => (
                "curlPreconditions",
                "curl --parallel-max 32 --http1.1, the plugin's DeleteOptions body",
            ),
            Client::Plugin => ("plugin", "delete --yes --qps 0, list included"),
        }
    }
}

/// One run of one client: its rate, wall, CPU, and the server's CPU.
struct Part {
    rate: f64,
    wall: f64,
    client_cpu: f64,
    server_cpu: f64,
    ok: bool,
    /// Deletes sent (curl) or reported (the plugin).
    deleted: u64,
}

impl Part {
    fn json(&self) -> Value {
        json!({"ratePerSecond": r3(self.rate), "wallSeconds": r3(self.wall),
               "clientCpuSeconds": r3(self.client_cpu), "serverCpuSeconds": r3(self.server_cpu),
               "ok": self.ok, "deleted": self.deleted})
    }
}

/// See the module doc.
pub fn run(rt: &tokio::runtime::Runtime, stale: u64) -> Value {
    let cluster = Cluster::up(&[]);
    say!("parts: seeding {IN_USE} in use + {stale} stale marked");
    rt.block_on(seed_from(&cluster, FIRST, IN_USE, stale, true));
    let ids: Vec<u64> = (FIRST + IN_USE..FIRST + IN_USE + stale).collect();
    let mut runs: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for round in 0..3 {
        for client in [
            Client::CurlNoBody,
            Client::CurlPreconditions,
            Client::Plugin,
        ] {
            // The cluster was seeded for the first run; every later one
            // finds the ids the run before it deleted seeded again.
            if round > 0 || client != Client::CurlNoBody {
                rt.block_on(reseed(&cluster, &ids));
            }
            let load1 = load();
            let p = match client {
                Client::CurlNoBody => curl_part(&cluster, &ids, None),
                Client::CurlPreconditions => {
                    let bodies = rt.block_on(preconditions(&cluster, &ids));
                    curl_part(&cluster, &ids, Some(&bodies))
                }
                Client::Plugin => plugin_part(&cluster, &format!("parts round {}", round + 1)),
            };
            let (key, what) = client.names();
            say!(
                "parts: {what}: {} stale at {:.0}/s in {:.1} s, client CPU {:.1} s, kube-apiserver + etcd CPU {:.1} s ({:.2} ms per delete), load1 {load1:.2}",
                ids.len(),
                p.rate,
                p.wall,
                p.client_cpu,
                p.server_cpu,
                p.server_cpu * 1000.0 / ids.len() as f64,
            );
            let mut v = p.json();
            v["load1"] = json!(load1);
            runs.entry(key).or_default().push(v);
        }
    }
    // The goal, within this invocation: the plugin's time per delete (its
    // list included) against curl sending the same DELETEs with the same
    // body, medians of the three interleaved rounds.
    let median_wall = |key: &str| {
        let mut w: Vec<f64> = runs[key]
            .iter()
            .map(|r| r["wallSeconds"].as_f64().unwrap())
            .collect();
        w.sort_by(f64::total_cmp);
        w[w.len() / 2]
    };
    let (plugin, curl) = (median_wall("plugin"), median_wall("curlPreconditions"));
    let met = goal(
        "clearing within 1.1× of curl sending the same requests",
        plugin <= 1.1 * curl,
        &format!(
            "{stale} stale: delete --yes --qps 0 {plugin:.1} s from its start (list included), curl --parallel-max 32 --http1.1 with the plugin's DeleteOptions body {curl:.1} s, medians of 3 interleaved rounds in this run: {:.2}×",
            plugin / curl
        ),
    );
    let deleted: u64 = runs["plugin"]
        .iter()
        .map(|r| r["deleted"].as_u64().unwrap())
        .sum();
    let judged = judge(&cluster.dir, &ids.iter().copied().collect(), Some(deleted));
    json!({"stale": stale, "inUse": IN_USE, "runs": runs, "judge": judged.json(),
           "goalClearingWithin1_1xCurl": {"met": met, "pluginOverCurl": r3(plugin / curl)}})
}

/// The kube-apiserver's and etcd's CPU seconds so far.
fn server_cpu(cluster: &Cluster) -> f64 {
    ["apiserver.pid", "etcd.pid"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(cluster.dir.join(f)).ok())
        .filter_map(|p| p.trim().parse().ok())
        .map(proc_cpu)
        .sum()
}

/// curl's DELETEs of `ids`, with `bodies` (by id) when given.
fn curl_part(cluster: &Cluster, ids: &[u64], bodies: Option<&BTreeMap<u64, String>>) -> Part {
    let before = server_cpu(cluster);
    let started = std::time::Instant::now();
    let c = match bodies {
        None => curl_deletes(cluster, ids, false),
        Some(b) => curl_deletes_with_bodies(cluster, ids, b),
    };
    Part {
        rate: c.rate,
        wall: started.elapsed().as_secs_f64(),
        client_cpu: c.cpu,
        server_cpu: server_cpu(cluster) - before,
        ok: c.ok,
        deleted: ids.len() as u64,
    }
}

/// The plugin's run: wall from its start to its exit, rate over that.
fn plugin_part(cluster: &Cluster, run: &str) -> Part {
    let before = server_cpu(cluster);
    let started = std::time::Instant::now();
    let (report, exit, cpu) = plugin_report(
        cluster,
        &["delete", "--yes", "--qps", "0", "-o", "json"],
        run,
    );
    let wall = started.elapsed().as_secs_f64();
    let deleted = report["summary"]["deleted"].as_u64().unwrap_or(0);
    say!(
        "parts: delete --yes --qps 0's report: {deleted} deleted at {:.0}/s (its delete phase), lowest in flight {}",
        report["summary"]["deleteRatePerSecond"].as_f64().unwrap_or(0.0),
        report["summary"]["lowestInFlight"],
    );
    Part {
        rate: deleted as f64 / wall,
        wall,
        client_cpu: cpu,
        server_cpu: server_cpu(cluster) - before,
        ok: exit == Some(0),
        deleted,
    }
}

/// The plugin's DeleteOptions body for each of `ids`, from a list as admin.
pub(crate) async fn preconditions(cluster: &Cluster, ids: &[u64]) -> BTreeMap<u64, String> {
    let out = cluster.admin(&[
        "get",
        "ciliumidentities",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.metadata.resourceVersion}{\"\\n\"}{end}",
    ]);
    let wanted: std::collections::BTreeSet<u64> = ids.iter().copied().collect();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let id: u64 = f.next()?.parse().ok()?;
            let (uid, rv) = (f.next()?, f.next()?);
            wanted.contains(&id).then(|| {
                let body = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                    "preconditions": {"uid": uid, "resourceVersion": rv},
                    "propagationPolicy": "Background"});
                (id, body.to_string())
            })
        })
        .collect()
}
