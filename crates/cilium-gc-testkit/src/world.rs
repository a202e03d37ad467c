//! A simulated cluster for a test: the simulator, a scratch directory and
//! the kubeconfig that points at it, plus the ground truth a test judges a
//! run by (which identities are stale *now*, by the operator's rules and the
//! simulator's own view of references, never by the engine's decision code).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use cilium_gc_sim::{Scenario, Simulator};
use jiff::Timestamp;
use serde_json::Value;

/// Every run gives up after this long rather than hang CI.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(240);

/// The identities a cluster-local allocation may hand out (cluster 0).
const LOCAL_RANGE: std::ops::RangeInclusive<u64> = 256..=65535;

/// A running simulated cluster with its kubeconfig on disk.
pub struct World {
    /// The simulator.
    pub sim: Simulator,
    /// Scratch directory (kubeconfig, reports).
    pub dir: tempfile::TempDir,
    /// The kubeconfig the simulator wrote.
    pub kubeconfig: PathBuf,
}

impl World {
    /// Start `scenario` and write its kubeconfig.
    pub async fn start(scenario: Scenario) -> World {
        let sim = Simulator::start(scenario).await.expect("simulator starts");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig)
            .expect("kubeconfig written");
        World {
            sim,
            dir,
            kubeconfig,
        }
    }

    /// Start a preset as it is (actors and faults included).
    pub async fn preset(name: &str) -> World {
        World::start(Scenario::preset(name).expect("preset exists")).await
    }

    /// Identity names on the server now.
    pub fn names(&self) -> BTreeSet<String> {
        self.sim.identity_names().into_iter().collect()
    }

    /// Every identity object on the server now.
    pub fn identity_objects(&self) -> Vec<Value> {
        self.sim
            .identity_names()
            .iter()
            .filter_map(|n| self.sim.identity(n))
            .collect()
    }

    /// Identities that are stale right now by the operator's rules (unused,
    /// marked longer ago than `timeout`, in the local range).
    pub fn stale_now(&self, timeout: Duration) -> BTreeSet<String> {
        stale_names(&self.sim, timeout)
    }
}

/// The `name` preset made quiet: no agents or operator acting, no injected
/// faults. Tests that count exact outcomes start from it.
pub fn calm(name: &str) -> Scenario {
    Scenario::preset(name)
        .unwrap_or_else(|| panic!("no preset {name:?}"))
        .calm()
}

/// [`World::stale_now`] for any simulator.
pub fn stale_names(sim: &Simulator, timeout: Duration) -> BTreeSet<String> {
    let used = sim.referenced_ids();
    let now = sim.now();
    sim.identity_names()
        .into_iter()
        .filter(|name| {
            // The one id rule, shared by engine and simulator.
            let Some(id) = cilium_gc_kinds::parse_id(name) else {
                return false;
            };
            if used.contains(&id) || !LOCAL_RANGE.contains(&id) {
                return false;
            }
            let Some(obj) = sim.identity(name) else {
                return false;
            };
            mark_of(&obj).is_some_and(|m| older_than(m, now, timeout))
        })
        .collect()
}

/// The heartbeat mark of an identity object, parsed as the operator writes
/// it (RFC 3339).
pub fn mark_of(obj: &Value) -> Option<Timestamp> {
    obj.pointer("/metadata/annotations/io.cilium.heartbeat")
        .and_then(Value::as_str)
        .and_then(|s| s.trim().parse().ok())
}

fn older_than(mark: Timestamp, now: Timestamp, timeout: Duration) -> bool {
    now.duration_since(mark)
        .try_into()
        .is_ok_and(|age: Duration| age > timeout)
}

/// Simulated clusters, each a context of one kubeconfig, plus contexts that
/// point at a loopback port nobody listens on: a fleet.
pub struct Fleet {
    /// The simulators, by context name, in kubeconfig order.
    pub sims: Vec<(String, Simulator)>,
    /// Scratch directory (kubeconfig, reports).
    pub dir: tempfile::TempDir,
    /// The kubeconfig with every context.
    pub kubeconfig: PathBuf,
}

impl Fleet {
    /// Start one simulator per `(context, scenario)`, and add the
    /// `unreachable` contexts.
    pub async fn start(clusters: &[(&str, Scenario)], unreachable: &[&str]) -> Fleet {
        let mut sims = Vec::new();
        for (name, scenario) in clusters {
            let sim = Simulator::start(scenario.clone()).await.expect("starts");
            sims.push((name.to_string(), sim));
        }
        let closed: Vec<(String, String)> = unreachable
            .iter()
            .map(|n| (n.to_string(), closed_url()))
            .collect();
        let named: Vec<(&str, &Simulator)> = sims.iter().map(|(n, s)| (n.as_str(), s)).collect();
        let down: Vec<(&str, &str)> = closed
            .iter()
            .map(|(n, u)| (n.as_str(), u.as_str()))
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, Simulator::fleet_kubeconfig(&named, &down))
            .expect("kubeconfig written");
        Fleet {
            sims,
            dir,
            kubeconfig,
        }
    }

    /// The simulator of `context`.
    pub fn sim(&self, context: &str) -> &Simulator {
        &self
            .sims
            .iter()
            .find(|(n, _)| n == context)
            .unwrap_or_else(|| panic!("no context {context:?}"))
            .1
    }

    /// Identity names on `context`'s server now.
    pub fn names(&self, context: &str) -> BTreeSet<String> {
        self.sim(context).identity_names().into_iter().collect()
    }

    /// The simulated contexts, in kubeconfig order.
    pub fn contexts(&self) -> Vec<String> {
        self.sims.iter().map(|(n, _)| n.clone()).collect()
    }
}

/// An `https://` loopback URL nobody listens on (the port was free a
/// moment ago): a cluster that does not answer.
pub fn closed_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    format!("https://{}", l.local_addr().expect("local address"))
}
