//! Cluster actors that change objects while a client works: agents
//! reclaiming marked identities, new pods reusing unused ones, the operator
//! marking unused identities, identities and endpoints coming and going.
//! They write the store directly (no faults, no ledger) with their own field
//! managers, so resourceVersions move exactly as a client would see.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::cilium_objects::{endpoint, identity, Workload};
use super::object::{uuid, Clock, Writer};
use super::store::Store;
use crate::kinds::{parse_id, Kind, HEARTBEAT_ANNOTATION, NAMESPACE_LABEL};

/// Actor rates in events per second; 0 turns an actor off.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ActorRates {
    /// cilium-agent removes the heartbeat of a marked identity (and a pod using it appears).
    pub agent_reclaim: f64,
    /// A new pod reuses an unmarked, unused identity (a new CiliumEndpoint).
    pub reuse: f64,
    /// cilium-operator marks an unused identity with a heartbeat.
    pub operator_mark: f64,
    /// Identities created (agent) or garbage-collected (operator).
    pub identity_churn: f64,
    /// CiliumEndpoints created or deleted.
    pub endpoint_churn: f64,
    /// A pod appears for a *marked* identity with no write to the identity
    /// (the operator marked it from a stale view): the heartbeat handshake
    /// cannot protect it, only live usage can.
    pub shadow_reuse: f64,
    /// How long after the actors start `shadow_reuse` begins.
    pub shadow_reuse_after: Duration,
    /// cilium-agent removes the heartbeat of a marked identity no endpoint
    /// uses yet: a pod starting on it, or an agent still holding it
    /// (cilium/cilium#35946). The identity stays unused.
    pub agent_strip: f64,
}

const AGENT: &str = "cilium-agent";
const OPERATOR: &str = "cilium-operator-generic";
const TICK: Duration = Duration::from_millis(20);
const TRIES: usize = 24;

/// Where the actors act: the part of a scenario they need.
#[derive(Debug, Clone, Copy)]
pub struct Population {
    /// Smallest identity id of the cluster.
    pub first_id: u64,
    /// Next id an agent allocates.
    pub next_id: u64,
    /// Pod namespaces.
    pub namespaces: usize,
    /// Share of pods that belong to Jobs.
    pub job_ratio: f64,
    /// Whether CiliumEndpoints exist (CRD installed, not slice-only mode).
    pub endpoints: bool,
}

/// Control of the running actors.
pub(crate) struct Actors {
    paused: Arc<AtomicBool>,
    rates: Arc<Mutex<ActorRates>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Actors {
    /// Start the actor loop (it idles while every rate is 0).
    pub(crate) fn start(
        store: Arc<Store>,
        rates: ActorRates,
        p: Population,
        clock: Clock,
        rng: ChaCha8Rng,
    ) -> Self {
        let paused = Arc::new(AtomicBool::new(false));
        let rates = Arc::new(Mutex::new(rates));
        let world = World {
            store,
            clock,
            rng,
            first_id: p.first_id,
            next_id: p.next_id,
            namespaces: p.namespaces,
            job_ratio: p.job_ratio,
            endpoints: p.endpoints,
            counter: 0,
        };
        let task = tokio::spawn(run(world, paused.clone(), rates.clone()));
        Actors {
            paused,
            rates,
            task: Mutex::new(Some(task)),
        }
    }

    /// Stop acting until [`Self::resume`].
    pub(crate) fn pause(&self) {
        self.paused.store(true, Ordering::SeqCst);
    }

    /// Act again.
    pub(crate) fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Change rates.
    pub(crate) fn set_rates(&self, r: ActorRates) {
        *self.rates.lock().unwrap_or_else(|e| e.into_inner()) = r;
    }

    /// Current rates.
    pub(crate) fn rates(&self) -> ActorRates {
        *self.rates.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stop for good.
    pub(crate) fn stop(&self) {
        if let Some(t) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            t.abort();
        }
    }
}

impl Drop for Actors {
    fn drop(&mut self) {
        self.stop();
    }
}

struct World {
    store: Arc<Store>,
    clock: Clock,
    rng: ChaCha8Rng,
    first_id: u64,
    next_id: u64,
    namespaces: usize,
    job_ratio: f64,
    endpoints: bool,
    counter: u64,
}

async fn run(mut w: World, paused: Arc<AtomicBool>, rates: Arc<Mutex<ActorRates>>) {
    let mut credit = [0.0f64; 7];
    let started = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(TICK);
    loop {
        tick.tick().await;
        if paused.load(Ordering::SeqCst) {
            credit = [0.0; 7];
            continue;
        }
        let r = *rates.lock().unwrap_or_else(|e| e.into_inner());
        let rs = [
            r.agent_reclaim,
            r.reuse,
            r.operator_mark,
            r.identity_churn,
            r.endpoint_churn,
            if started.elapsed() >= r.shadow_reuse_after {
                r.shadow_reuse
            } else {
                0.0
            },
            r.agent_strip,
        ];
        for (i, rate) in rs.iter().enumerate() {
            credit[i] += rate.max(0.0) * TICK.as_secs_f64();
            while credit[i] >= 1.0 {
                credit[i] -= 1.0;
                match i {
                    0 => w.agent_reclaim(),
                    1 => w.reuse(),
                    2 => w.operator_mark(),
                    3 => w.identity_churn(),
                    4 => w.endpoint_churn(),
                    5 => w.shadow_reuse(),
                    _ => w.agent_strip(),
                }
            }
        }
    }
}

fn mark_of(v: &Value) -> Option<&str> {
    v.pointer("/metadata/annotations")
        .and_then(|a| a.get(HEARTBEAT_ANNOTATION))
        .and_then(Value::as_str)
}

impl World {
    /// A random identity satisfying `want`, sampled a few times.
    fn pick_identity(
        &mut self,
        want: impl Fn(&World, u64, &Value) -> bool,
    ) -> Option<(String, Value)> {
        for _ in 0..TRIES {
            let id = self
                .rng
                .random_range(self.first_id..self.next_id.max(self.first_id + 1));
            let (key, obj) = self
                .store
                .key_at_or_after(Kind::Identity, &id.to_string())?;
            let v = obj.value();
            if parse_id(&key).is_some_and(|id| want(self, id, &v)) {
                return Some((key, v));
            }
        }
        None
    }

    fn unused(&self, id: u64) -> bool {
        self.store.ref_count(id) == 0
    }

    fn set_mark(&mut self, name: &str, manager: &str, mark: Option<String>) {
        let now = self.clock.now();
        let _ = self.store.modify(
            Kind::Identity,
            name,
            &Writer::actor(manager),
            now,
            false,
            |cur| {
                let mut v = cur.clone();
                let annotations = v["metadata"]
                    .as_object_mut()
                    .map(|m| m.entry("annotations").or_insert(json!({})));
                if let Some(a) = annotations.and_then(Value::as_object_mut) {
                    match &mark {
                        Some(m) => {
                            a.insert(HEARTBEAT_ANNOTATION.into(), json!(m));
                        }
                        None => {
                            a.remove(HEARTBEAT_ANNOTATION);
                        }
                    }
                }
                Ok(v)
            },
        );
    }

    /// A pod using identity `id` (labels from the identity) appears.
    fn add_pod(&mut self, id: u64, ident: &Value) {
        if !self.endpoints {
            return;
        }
        let ns = ident
            .pointer("/metadata/labels")
            .and_then(|l| l.get(NAMESPACE_LABEL))
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_owned();
        let app = ident
            .pointer("/security-labels/k8s:app")
            .and_then(Value::as_str)
            .unwrap_or("app")
            .to_owned();
        let w = Workload {
            namespace: ns,
            app,
            job: None,
        };
        self.counter += 1;
        let pod = format!(
            "{}-{:08x}-a{:04}",
            w.app,
            self.rng.random::<u32>(),
            self.counter
        );
        let uid = uuid(&mut self.rng);
        let now = self.clock.now();
        let mut v = endpoint(&pod, &w, id, now, uid, self.rng.random::<u32>() & 0xffffff);
        if let Some(labels) = ident.pointer("/security-labels").and_then(Value::as_object) {
            v["status"]["identity"]["labels"] = labels
                .iter()
                .map(|(k, x)| json!(format!("{k}={}", x.as_str().unwrap_or_default())))
                .collect();
        }
        let key = format!("{}/{}", w.namespace, pod);
        let _ = self
            .store
            .create(Kind::Endpoint, &key, v, &Writer::actor(AGENT), now, false);
    }

    fn agent_reclaim(&mut self) {
        if let Some((name, v)) = self.pick_identity(|_, _, v| mark_of(v).is_some()) {
            self.set_mark(&name, AGENT, None);
            if let Some(id) = parse_id(&name) {
                self.add_pod(id, &v);
            }
        }
    }

    fn agent_strip(&mut self) {
        if let Some((name, _)) = self.pick_identity(|w, id, v| mark_of(v).is_some() && w.unused(id))
        {
            self.set_mark(&name, AGENT, None);
        }
    }

    fn reuse(&mut self) {
        if let Some((name, v)) = self.pick_identity(|w, id, v| mark_of(v).is_none() && w.unused(id))
        {
            self.store.note_actor_touch(&name);
            if let Some(id) = parse_id(&name) {
                self.add_pod(id, &v);
            }
        }
    }

    fn shadow_reuse(&mut self) {
        if let Some((name, v)) = self.pick_identity(|w, id, v| mark_of(v).is_some() && w.unused(id))
        {
            if let Some(id) = parse_id(&name) {
                self.add_pod(id, &v);
            }
        }
    }

    fn operator_mark(&mut self) {
        if let Some((name, _)) = self.pick_identity(|w, id, v| mark_of(v).is_none() && w.unused(id))
        {
            let mark = self.clock.now().to_string();
            self.set_mark(&name, OPERATOR, Some(mark));
        }
    }

    fn identity_churn(&mut self) {
        let now = self.clock.now();
        if self.rng.random_bool(0.5) {
            let id = self.next_id;
            self.next_id += 1;
            let w = Workload::random(&mut self.rng, self.namespaces, self.job_ratio);
            let uid = uuid(&mut self.rng);
            let v = identity(&id.to_string(), &w, now, uid, None, now);
            let _ = self.store.create(
                Kind::Identity,
                &id.to_string(),
                v,
                &Writer::actor(AGENT),
                now,
                false,
            );
        } else if let Some((name, _)) =
            self.pick_identity(|w, id, v| mark_of(v).is_some() && w.unused(id))
        {
            let _ = self.store.delete(
                Kind::Identity,
                &name,
                &Writer::actor(OPERATOR),
                false,
                |_| Ok(()),
            );
            self.store.note_actor_touch(&name);
        }
    }

    fn endpoint_churn(&mut self) {
        if !self.endpoints {
            return;
        }
        if self.rng.random_bool(0.5) {
            if let Some((name, v)) = self.pick_identity(|w, id, _| !w.unused(id)) {
                if let Some(id) = parse_id(&name) {
                    self.add_pod(id, &v);
                }
            }
        } else {
            let ns = format!(
                "team-{:03}/",
                self.rng.random_range(0..self.namespaces.max(1))
            );
            if let Some((key, _)) = self.store.key_at_or_after(Kind::Endpoint, &ns) {
                let _ =
                    self.store
                        .delete(Kind::Endpoint, &key, &Writer::actor(AGENT), false, |_| {
                            Ok(())
                        });
            }
        }
    }
}
