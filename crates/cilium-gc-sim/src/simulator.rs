//! The public handle of a running simulator, [`Simulator`]: it starts the
//! server (seeds the store, generates certificates, starts the actors and
//! the compactor, binds the listener), stops and restarts it with its state
//! kept ([`SimState`]), and gives tests their levers: faults, RBAC, actors,
//! compaction, chaos, direct object writes and cilium-operator's GC pass.
//!
//! Every method here is a thin door onto the module that does the work
//! (`store`, `actors`, `faults`, `chaos`, `identity_gc`, `tls`, `routes`),
//! so this module stands above all of them and none of them knows it.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::actors::{ActorRates, Actors};
use crate::chaos::PageFault;
use crate::error::SimError;
use crate::faults::Faults;
use crate::identity_gc::{self, OperatorPass, OperatorRelease, OperatorSettings};
use crate::kinds::{api_version, Kind, HEARTBEAT_ANNOTATION};
use crate::ledger::Ledger;
use crate::object::{rfc3339_secs, uuid, Clock, Writer};
use crate::routes;
use crate::scenario::{Denial, Scenario};
use crate::seed;
use crate::serve::accept_loop;
use crate::state::ServerState;
use crate::store::Store;
use crate::tls::{fleet_kubeconfig, FleetMember, Tls};

/// Everything that survives a restart: objects, ledger, certificates, actors.
struct Shared {
    app: Arc<ServerState>,
    tls: Tls,
    actors: Actors,
    compactor: JoinHandle<()>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.compactor.abort();
        self.actors.stop();
    }
}

/// A running simulated API server. Dropping it without [`Simulator::shutdown`]
/// stops serving too (tasks are aborted).
pub struct Simulator {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: Option<JoinHandle<()>>,
    /// How long seeding took.
    pub seed_time: Duration,
}

/// The objects and fault state of a stopped simulator, for
/// [`Simulator::start_with_state`] (same port, same CA, same objects).
pub struct SimState {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl SimState {
    /// The address the simulator served on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Simulator {
    /// Start on an ephemeral port of 127.0.0.1.
    pub async fn start(scenario: Scenario) -> Result<Simulator, SimError> {
        Self::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), scenario).await
    }

    /// Start on `addr`.
    pub async fn start_at(addr: SocketAddr, scenario: Scenario) -> Result<Simulator, SimError> {
        let t0 = Instant::now();
        let clock = Clock::new(scenario.clock_offset_secs);
        let store = Store::new();
        let rng = seed::populate(&store, &scenario, &clock);
        let seed_time = t0.elapsed();
        let tls = Tls::generate()?;
        let app = Arc::new(ServerState::new(Arc::new(store), &scenario, clock));
        let actors = Actors::start(
            app.store.clone(),
            scenario.actors,
            scenario.population(),
            clock,
            rng,
        );
        let compactor = tokio::spawn(compact_periodically(
            app.clone(),
            scenario.compaction_interval,
        ));
        let shared = Arc::new(Shared {
            app,
            tls,
            actors,
            compactor,
        });
        let mut sim = Self::serve(shared, addr).await?;
        sim.seed_time = seed_time;
        Ok(sim)
    }

    /// Serve `state` again on its old address (or `addr` if given).
    pub async fn start_with_state(state: SimState) -> Result<Simulator, SimError> {
        // A restarted kube-apiserver fills a new watch cache from etcd at the
        // current revision: a watch resumed from any older resourceVersion
        // gets 410 "too old resource version" (pinned against the real
        // server in tests/e2e/watches.rs; docs/real-apiserver.md).
        let store = &state.shared.app.store;
        store.compact(store.rv());
        Self::serve(state.shared, state.addr).await
    }

    async fn serve(shared: Arc<Shared>, addr: SocketAddr) -> Result<Simulator, SimError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| SimError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| SimError::Bind { addr, source })?;
        let acceptor = TlsAcceptor::from(shared.tls.server_config()?);
        let router = routes::app(shared.app.clone());
        let server = tokio::spawn(accept_loop(listener, acceptor, router));
        Ok(Simulator {
            shared,
            addr,
            server: Some(server),
            seed_time: Duration::ZERO,
        })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (context, cluster and user all named `sim`) with the CA
    /// and bearer token.
    pub fn kubeconfig_yaml(&self) -> String {
        self.shared
            .tls
            .kubeconfig(&self.url(), &self.shared.app.token)
    }

    /// One kubeconfig with a context per simulator (named as given, its
    /// cluster and user too), and one per `(name, url)` of `unreachable`
    /// (a server nobody answers, for a fleet's unreachable cluster; it
    /// trusts the first simulator's CA). The current context is the first
    /// simulator's.
    pub fn fleet_kubeconfig(sims: &[(&str, &Simulator)], unreachable: &[(&str, &str)]) -> String {
        let urls: Vec<String> = sims.iter().map(|(_, sim)| sim.url()).collect();
        let first_ca = sims.first().map(|(_, sim)| sim.ca_pem());
        let served = sims
            .iter()
            .zip(&urls)
            .map(|((name, sim), url)| FleetMember {
                name,
                url,
                ca: Some(sim.ca_pem()),
                token: &sim.shared.app.token,
            });
        let unanswered = unreachable.iter().map(|(name, url)| FleetMember {
            name,
            url,
            ca: first_ca,
            token: "unused",
        });
        let members: Vec<FleetMember<'_>> = served.chain(unanswered).collect();
        let current = sims.first().map(|(n, _)| *n).unwrap_or_default();
        fleet_kubeconfig(&members, current)
    }

    /// Write [`Self::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
    }

    /// The CA certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.shared.tls.ca_pem
    }

    /// A snapshot of the safety ledger.
    pub fn ledger(&self) -> Ledger {
        let app = &self.shared.app;
        app.ledger.snapshot(app.store.actor_touched())
    }

    /// Forget recorded deletes and requests (actor touches are kept).
    pub fn clear_ledger(&self) {
        self.shared.app.ledger.clear();
    }

    /// Stop serving; keep the state for [`Simulator::start_with_state`].
    pub async fn shutdown_keep_state(mut self) -> SimState {
        self.stop_server().await;
        SimState {
            shared: self.shared.clone(),
            addr: self.addr,
        }
    }

    /// Stop serving and start again on the same port with the same state;
    /// open connections (and watches) are cut.
    pub async fn restart(self) -> Result<Simulator, SimError> {
        let state = self.shutdown_keep_state().await;
        Self::start_with_state(state).await
    }

    /// Stop serving, actors and background tasks.
    pub async fn shutdown(mut self) {
        self.stop_server().await;
        self.shared.actors.stop();
        self.shared.compactor.abort();
    }

    async fn stop_server(&mut self) {
        if let Some(s) = self.server.take() {
            s.abort();
            let _ = s.await;
        }
    }

    // ---- faults ----

    /// Current fault settings.
    pub fn faults(&self) -> Faults {
        self.shared.app.faults.get()
    }

    /// Replace the fault settings (takes effect on the next request).
    pub fn set_faults(&self, f: Faults) {
        self.shared.app.faults.set(f);
    }

    /// Replace the RBAC denials.
    pub fn set_rbac_denials(&self, d: Vec<Denial>) {
        *self
            .shared
            .app
            .rbac
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = d;
    }

    /// Compact now: every outstanding continue token and older watch
    /// resourceVersion gets 410 from here on, and open watches end with a
    /// 410 ERROR event.
    pub fn compact(&self) {
        let app = &self.shared.app;
        app.store.compact(app.store.rv());
        let _ = app.expire_watches.send(());
    }

    /// Compact history only (open watches keep running).
    pub fn compact_history(&self) {
        let app = &self.shared.app;
        app.store.compact(app.store.rv());
    }

    // ---- actors ----

    /// Pause the cluster actors.
    pub fn pause_actors(&self) {
        self.shared.actors.pause();
    }

    /// Resume the cluster actors.
    pub fn resume_actors(&self) {
        self.shared.actors.resume();
    }

    /// Stop the cluster actors for good.
    pub fn stop_actors(&self) {
        self.shared.actors.stop();
    }

    /// Change actor rates.
    pub fn set_actor_rates(&self, r: ActorRates) {
        self.shared.actors.set_rates(r);
    }

    /// Current actor rates.
    pub fn actor_rates(&self) -> ActorRates {
        self.shared.actors.rates()
    }

    // ---- objects ----

    /// The newest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.app.store.rv()
    }

    /// Names of all CiliumIdentities, in key order.
    pub fn identity_names(&self) -> Vec<String> {
        self.shared.app.store.keys(Kind::Identity)
    }

    /// Keys (`namespace/name`) of all CiliumEndpoints.
    pub fn endpoint_keys(&self) -> Vec<String> {
        self.shared.app.store.keys(Kind::Endpoint)
    }

    /// Number of objects of a kind.
    pub fn count(&self, kind: Kind) -> usize {
        self.shared.app.store.count(kind)
    }

    /// One identity as JSON.
    pub fn identity(&self, name: &str) -> Option<Value> {
        self.object(Kind::Identity, name)
    }

    /// Any object by kind and key (`namespace/name` for endpoints).
    pub fn object(&self, kind: Kind, key: &str) -> Option<Value> {
        self.shared.app.store.get(kind, key).map(|o| o.value())
    }

    /// Identity ids referenced by some CiliumEndpoint or slice now.
    pub fn referenced_ids(&self) -> BTreeSet<u64> {
        self.shared.app.store.referenced_ids()
    }

    /// Create an object as field manager `manager` (test setup; not logged,
    /// no faults). `v` needs `metadata.name` (and `metadata.namespace` for
    /// endpoints); uid and creationTimestamp are filled in.
    pub fn create_object(
        &self,
        kind: Kind,
        mut v: Value,
        manager: &str,
    ) -> Result<Value, SimError> {
        let app = &self.shared.app;
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let key = match v.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(ns) if kind == Kind::Endpoint => format!("{ns}/{name}"),
            _ => name,
        };
        v["apiVersion"] = Value::String(api_version(kind));
        v["kind"] = Value::String(kind.kind().to_owned());
        let uid = uuid(&mut *app.rng.lock().unwrap_or_else(|e| e.into_inner()));
        if v.pointer("/metadata/uid").is_none() {
            v["metadata"]["uid"] = Value::String(uid);
        }
        if v.pointer("/metadata/creationTimestamp").is_none() {
            v["metadata"]["creationTimestamp"] = Value::String(rfc3339_secs(app.clock.now()));
        }
        app.store
            .create(
                kind,
                &key,
                v,
                &Writer::client(manager),
                app.clock.now(),
                false,
            )
            .map(|o| o.value())
            .map_err(|cause| SimError::Write {
                op: "create",
                kind: kind.plural(),
                name: key,
                cause,
            })
    }

    /// Change an object as `manager`; `actor` says whether it counts as a
    /// cluster actor's write (for the ledger).
    pub fn modify_object(
        &self,
        kind: Kind,
        key: &str,
        manager: &str,
        actor: bool,
        f: impl FnOnce(&mut Value),
    ) -> Result<Value, SimError> {
        let app = &self.shared.app;
        let writer = if actor {
            Writer::actor(manager)
        } else {
            Writer::client(manager)
        };
        app.store
            .modify(kind, key, &writer, app.clock.now(), false, |cur| {
                let mut v = cur.clone();
                f(&mut v);
                Ok(v)
            })
            .map(|o| o.value())
            .map_err(|cause| SimError::Write {
                op: "modify",
                kind: kind.plural(),
                name: key.to_owned(),
                cause,
            })
    }

    /// Delete an object as `manager` (`actor`: counts as a cluster actor).
    pub fn delete_object(
        &self,
        kind: Kind,
        key: &str,
        manager: &str,
        actor: bool,
    ) -> Result<(), SimError> {
        let app = &self.shared.app;
        let writer = if actor {
            Writer::actor(manager)
        } else {
            Writer::client(manager)
        };
        if actor && kind == Kind::Identity {
            app.store.note_actor_touch(key);
        }
        app.store
            .delete(kind, key, &writer, false, |_| Ok(()))
            .map(|_| ())
            .map_err(|cause| SimError::Write {
                op: "delete",
                kind: kind.plural(),
                name: key.to_owned(),
                cause,
            })
    }

    /// Set or remove the heartbeat annotation of an identity, as
    /// cilium-operator (set) or cilium-agent (remove) would: an actor write.
    pub fn set_heartbeat(&self, name: &str, mark: Option<&str>) -> Result<Value, SimError> {
        let manager = if mark.is_some() {
            "cilium-operator-generic"
        } else {
            "cilium-agent"
        };
        self.modify_object(Kind::Identity, name, manager, true, |v| {
            let meta = &mut v["metadata"];
            if meta.get("annotations").is_none_or(|a| !a.is_object()) {
                meta["annotations"] = serde_json::json!({});
            }
            let a = meta["annotations"].as_object_mut().expect("object");
            match mark {
                Some(m) => {
                    a.insert(HEARTBEAT_ANNOTATION.into(), Value::String(m.to_owned()));
                }
                None => {
                    a.remove(HEARTBEAT_ANNOTATION);
                }
            }
        })
    }

    // ---- chaos ----

    /// Store `v` as the object `key` of `kind` exactly as given, bypassing
    /// what a write would add or check: for malformed-object tests. An
    /// existing object is replaced (a watch sees MODIFIED, else ADDED).
    pub fn inject_raw(&self, kind: Kind, key: &str, v: Value) {
        self.shared.app.store.put_raw(kind, key, &v);
    }

    /// Spoil the next `n` list answers (any page) for `kind` with `fault`.
    pub fn spoil_lists(&self, kind: Kind, fault: PageFault, n: u32) {
        self.shared.app.chaos.spoil(kind, fault, n);
    }

    /// How many list answers were spoiled so far.
    pub fn spoiled_lists(&self) -> u64 {
        self.shared.app.chaos.spoiled()
    }

    // ---- cilium-operator ----

    /// Run one cilium-operator 1.15 identity GC pass against this cluster,
    /// `qps` writes per second, Cilium's default GC limiter, an operator up
    /// for a day; until it finishes or meets its first error.
    pub async fn run_operator_1_15_pass(
        &self,
        heartbeat_timeout: Duration,
        qps: f64,
    ) -> OperatorPass {
        self.run_operator_pass(OperatorSettings::new(
            OperatorRelease::V1_15,
            heartbeat_timeout,
            qps,
        ))
        .await
    }

    /// Run one identity GC pass of `s.release` against this cluster (see
    /// the `identity_gc` module for what the pass does, as the real one).
    pub async fn run_operator_pass(&self, s: OperatorSettings) -> OperatorPass {
        let app = &self.shared.app;
        identity_gc::run_pass(&app.store, app.clock, s).await
    }

    /// The server clock now.
    pub fn now(&self) -> jiff::Timestamp {
        self.shared.app.clock.now()
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.abort();
        }
    }
}

async fn compact_periodically(app: Arc<ServerState>, every: Duration) {
    if every.is_zero() {
        return;
    }
    let mut last = app.store.rv();
    loop {
        tokio::time::sleep(every).await;
        app.store.compact(last);
        last = app.store.rv();
    }
}
