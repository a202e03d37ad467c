//! Simulator figures: seed scenario load time, GET requests per second with
//! concurrent kube clients, and a full paginated identity list. Printed as
//! one JSON object on stdout; nothing is asserted.
//!
//! `cargo bench --bench sim` (env `SIM_BENCH_SECS`, `SIM_BENCH_CLIENTS`,
//! `SIM_BENCH_CEPS` to change the defaults).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cilium_gc_sim::{ActorRates, Scenario, Simulator};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{json, Value};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn client(sim: &Simulator) -> Client {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).expect("kubeconfig");
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    cfg.default_retry = false;
    Client::try_from(cfg).expect("client")
}

async fn get_requests_per_second(sim: &Simulator, clients: u64, secs: u64) -> f64 {
    let names = Arc::new(sim.identity_names());
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for i in 0..clients {
        let (c, names, done) = (client(sim).await, names.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = i as usize;
            while Instant::now() < deadline {
                let path = format!(
                    "/apis/cilium.io/v2/ciliumidentities/{}",
                    names[n % names.len()]
                );
                let req = http::Request::get(path).body(Vec::new()).expect("request");
                if c.request_text(req).await.is_ok() {
                    done.fetch_add(1, Ordering::Relaxed);
                }
                n += 7919;
            }
        }));
    }
    let t0 = Instant::now();
    for t in tasks {
        let _ = t.await;
    }
    done.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64()
}

async fn full_list_seconds(sim: &Simulator) -> (f64, usize) {
    let c = client(sim).await;
    let t0 = Instant::now();
    let (mut n, mut cont) = (0, String::new());
    loop {
        let path = format!("/apis/cilium.io/v2/ciliumidentities?limit=500&continue={cont}");
        let text = c
            .request_text(http::Request::get(path).body(Vec::new()).expect("request"))
            .await
            .expect("list");
        let v: Value = serde_json::from_str(&text).expect("json");
        n += v["items"].as_array().map_or(0, Vec::len);
        match v["metadata"]["continue"].as_str() {
            Some(t) => cont = t.to_owned(),
            None => return (t0.elapsed().as_secs_f64(), n),
        }
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let secs = env_or("SIM_BENCH_SECS", 3);
    let clients = env_or("SIM_BENCH_CLIENTS", 8);
    let ceps = env_or("SIM_BENCH_CEPS", 15_000) as usize;
    let scenario = Scenario {
        actors: ActorRates::default(),
        endpoints: ceps,
        ..Scenario::preset("seed").expect("seed preset")
    };
    let sim = Simulator::start(scenario).await.expect("start");
    let seed_load = sim.seed_time.as_secs_f64();
    let rps = get_requests_per_second(&sim, clients, secs).await;
    let (list_secs, listed) = full_list_seconds(&sim).await;
    let out = json!({
        "scenario": "seed",
        "identities": sim.identity_names().len(),
        "ciliumEndpoints": ceps,
        "seedLoadSeconds": seed_load,
        "getIdentity": {"clients": clients, "seconds": secs, "requestsPerSecond": rps},
        "fullIdentityList": {"pageSize": 500, "items": listed, "seconds": list_secs},
    });
    println!("{out}");
    sim.shutdown().await;
}
