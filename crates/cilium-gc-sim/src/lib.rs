//! A simulated Kubernetes API server for Cilium objects, over real HTTPS.
//!
//! [`Simulator::start`] seeds a store from a [`Scenario`], starts cluster
//! actors, serves on 127.0.0.1 with a freshly generated CA and writes a
//! kubeconfig both `kube` and `kubectl` accept. It follows kube-apiserver's
//! wire semantics (resourceVersions, pagination, preconditions, Status
//! bodies, watches): where it and a real kube-apiserver differ, the
//! simulator is wrong (`tests/e2e/wire` compares their answers request by
//! request; docs/real-apiserver.md lists what was found). Only the demo, tests and benchmarks use this module;
//! the GC core never imports it.
//!
//! Layout. The server: `routes` (HTTP front), `resource` (list/get/write
//! handlers), `watch`, `discovery`, `workloads` (the Cilium workloads in
//! `kube-system`), `status` (error and success bodies), `body` (request
//! caps, injected resets), over `state` (what handlers share, the parsed
//! request), `store` (versioned store with history) and `object` (stored
//! objects and their metadata bookkeeping); `tls` (CA and kubeconfig). The
//! cluster it starts from: `scenario`, `seed`, `cilium_objects` (object
//! builders), `install` (versions, operator pods), `crds` (Cilium's CRDs,
//! verbatim). What acts on it: `actors`, `identity_gc` (cilium-operator's
//! identity GC pass, as 1.15 and current releases run it), `faults`, `chaos` (malformed objects and spoiled list
//! answers, for tests). What judges the client: `ledger`. Its own reading
//! of Cilium objects: `kinds` (endpoint references, over the shared
//! `cilium-gc-kinds` vocabulary) and `labels` (label selectors).

#![warn(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod actors;
mod body;
mod chaos;
mod cilium_objects;
mod crds;
mod discovery;
mod faults;
mod identity_gc;
mod install;
mod kinds;
mod labels;
mod ledger;
mod object;
mod resource;
mod routes;
mod scenario;
mod seed;
mod state;
mod status;
mod store;
mod tls;
mod watch;
mod workloads;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rand::SeedableRng;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

pub use actors::ActorRates;
pub use chaos::PageFault;
pub use faults::{ApfRetryAfter, Faults, ResetMode, ThrottleShape};
pub use identity_gc::{OperatorPass, OperatorRelease, OperatorSettings, OPERATOR_1_15};
pub use install::{CiliumInstall, OperatorMetrics, OperatorPod, OPERATOR_METRICS_PORT};
pub use kinds::{
    parse_id, referenced_ids, Kind, CILIUM_GROUP, HEARTBEAT_ANNOTATION, NAMESPACE_LABEL,
};
pub use ledger::{IdentityDelete, Ledger, RequestRecord};
pub use scenario::{default_cilium_config, CrdSet, Denial, Scenario, UnusedMix};

use object::{Clock, Writer};
use state::ServerState;

/// Why the simulator could not start or restart.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Generating the CA or server certificate, or configuring TLS, failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// Binding the listening socket failed (port taken?).
    #[error("cannot listen on {addr}")]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A test-setup write was refused by the store.
    #[error("cannot {op} {kind} {name:?}: {cause}")]
    Write {
        /// `create`, `modify` or `delete`.
        op: &'static str,
        /// Resource plural.
        kind: &'static str,
        /// Object key.
        name: String,
        /// What the store said.
        cause: store::StoreError,
    },
}

/// Everything that survives a restart: objects, ledger, certificates, actors.
struct Shared {
    app: Arc<ServerState>,
    tls: tls::Tls,
    actors: actors::Actors,
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
        let store = store::Store::new();
        let rng = seed::populate(&store, &scenario, &clock);
        let seed_time = t0.elapsed();
        let tls = tls::Tls::generate()?;
        let (expire_watches, _) = tokio::sync::broadcast::channel(4);
        let app = Arc::new(ServerState {
            store: Arc::new(store),
            crds: scenario.crds,
            cilium_config: scenario.cilium_config.clone(),
            cilium_install: scenario.cilium_install.clone(),
            rbac: Mutex::new(scenario.rbac_denials.clone()),
            user: scenario.user.clone(),
            token: scenario.token.clone(),
            faults: faults::FaultEngine::new(scenario.faults.clone(), scenario.seed),
            ledger: ledger::LedgerBook::default(),
            clock,
            bookmark_interval: scenario.bookmark_interval,
            expire_watches,
            rng: Mutex::new(rand_chacha::ChaCha8Rng::seed_from_u64(
                scenario.seed.wrapping_add(7),
            )),
            chaos: chaos::Chaos::default(),
        });
        let actors = actors::Actors::start(
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
        use base64::Engine as _;
        let (mut clusters, mut users, mut contexts) = (String::new(), String::new(), String::new());
        let mut add = |name: &str, url: &str, ca: Option<&str>, token: &str| {
            let trust = match ca {
                Some(pem) => format!(
                    "certificate-authority-data: {}",
                    base64::engine::general_purpose::STANDARD.encode(pem.as_bytes())
                ),
                None => "insecure-skip-tls-verify: true".to_owned(),
            };
            clusters.push_str(&format!(
                "- name: {name:?}\n  cluster:\n    server: {url}\n    {trust}\n"
            ));
            users.push_str(&format!("- name: {name:?}\n  user:\n    token: {token}\n"));
            contexts.push_str(&format!(
                "- name: {name:?}\n  context:\n    cluster: {name:?}\n    user: {name:?}\n"
            ));
        };
        for (name, sim) in sims {
            add(name, &sim.url(), Some(sim.ca_pem()), &sim.shared.app.token);
        }
        let ca = sims.first().map(|(_, s)| s.ca_pem().to_owned());
        for (name, url) in unreachable {
            add(name, url, ca.as_deref(), "unused");
        }
        let current = sims.first().map(|(n, _)| *n).unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n{clusters}users:\n{users}contexts:\n{contexts}current-context: {current:?}\npreferences: {{}}\n"
        )
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
        v["apiVersion"] = Value::String(store::api_version(kind));
        v["kind"] = Value::String(kind.kind().to_owned());
        let uid = object::uuid(&mut *app.rng.lock().unwrap_or_else(|e| e.into_inner()));
        if v.pointer("/metadata/uid").is_none() {
            v["metadata"]["uid"] = Value::String(uid);
        }
        if v.pointer("/metadata/creationTimestamp").is_none() {
            v["metadata"]["creationTimestamp"] =
                Value::String(object::rfc3339_secs(app.clock.now()));
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
                    a.insert(
                        crate::kinds::HEARTBEAT_ANNOTATION.into(),
                        Value::String(m.to_owned()),
                    );
                }
                None => {
                    a.remove(crate::kinds::HEARTBEAT_ANNOTATION);
                }
            }
        })
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

async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, router: axum::Router) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let svc = TowerToHyperService::new(router.clone());
                conns.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    // The routes set `Date` from the simulated clock (or
                    // leave it out when a fault says so); hyper's own would
                    // hide both.
                    let mut builder = auto::Builder::new(TokioExecutor::new());
                    builder.http1().auto_date_header(false);
                    builder.http2().auto_date_header(false);
                    let _ = builder.serve_connection(TokioIo::new(tls), svc).await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}
