//! cilium-operator 1.15's identity GC pass, played by the simulator so the
//! demo can show, on an identical copy of the cluster, what the tool is for.
//!
//! The algorithm (operator/identitygc/crd_gc.go before cilium/cilium#33143):
//! walk the identities as the operator's informer cached them; skip those an
//! endpoint uses; annotate unmarked ones with a heartbeat mark; delete those
//! whose mark is older than the heartbeat timeout, with preconditions
//! `{uid, resourceVersion}` from the cache; and on the first error, a 409
//! Conflict included, **return from the whole pass** (cilium/cilium#33142).
//! The next pass starts an `identity-gc-interval` later and meets the same
//! agents, so in a busy cluster the backlog grows.
//!
//! Writes go to the store directly, as the other cluster actors' do: this is
//! the cluster's operator, not a client under test.

use std::time::Duration;

use serde_json::Value;

use crate::kinds::{parse_id, Kind, HEARTBEAT_ANNOTATION};
use crate::object::Writer;
use crate::store::{Store, StoreError};
use crate::Simulator;

/// The field manager the pass writes as.
pub const OPERATOR_1_15: &str = "cilium-operator-generic";

/// What one cilium-operator 1.15 GC pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorPass {
    /// Identities whose mark was past the timeout when the pass read its cache.
    pub candidates: u64,
    /// Identities it deleted before it stopped.
    pub deleted: u64,
    /// Identities it marked before it stopped.
    pub marked: u64,
    /// The identity whose write answered 409 Conflict, ending the pass.
    pub stopped_at: Option<String>,
    /// Deletes of identities an endpoint used at that instant.
    pub in_use_deleted: u64,
}

fn mark_of(v: &Value) -> Option<jiff::Timestamp> {
    v["metadata"]["annotations"][HEARTBEAT_ANNOTATION]
        .as_str()?
        .parse()
        .ok()
}

impl Simulator {
    /// Run one cilium-operator 1.15 identity GC pass against this cluster,
    /// `qps` writes per second (the operator's client rate limit), until it
    /// finishes or meets its first conflict.
    pub async fn run_operator_1_15_pass(
        &self,
        heartbeat_timeout: Duration,
        qps: f64,
    ) -> OperatorPass {
        let app = &self.shared.app;
        let store = &app.store;
        let writer = Writer::actor(OPERATOR_1_15);
        // The informer's view when the pass starts: objects with their
        // resourceVersions, as cached.
        let cache = informer_cache(store);
        let now = app.clock.now();
        let timeout = jiff::SignedDuration::try_from(heartbeat_timeout).unwrap_or_default();
        let mut pass = OperatorPass {
            candidates: cache
                .iter()
                .filter(|(k, _, _, v)| {
                    let used = parse_id(k).is_some_and(|id| store.ref_count(id) > 0);
                    !used && mark_of(v).is_some_and(|m| m + timeout < now)
                })
                .count() as u64,
            ..OperatorPass::default()
        };
        let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / qps.max(0.1)));
        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for (key, rv, uid, cached) in cache {
            // Usage comes from the operator's endpoint cache, kept live.
            if parse_id(&key).is_some_and(|id| store.ref_count(id) > 0) {
                continue;
            }
            let precondition = |cur: &crate::object::StoredObject| {
                if cur.rv != rv || cur.uid != uid {
                    Err(StoreError::Conflict(format!(
                        "Operation cannot be fulfilled on ciliumidentities.cilium.io \"{key}\": the object has been modified; please apply your changes to the latest version and try again"
                    )))
                } else {
                    Ok(())
                }
            };
            let now = app.clock.now();
            let result = match mark_of(&cached) {
                Some(m) if m + timeout < now => {
                    pace.tick().await;
                    let r = store.delete(Kind::Identity, &key, &writer, false, precondition);
                    r.map(|d| {
                        pass.deleted += 1;
                        pass.in_use_deleted += u64::from(d.referenced);
                    })
                }
                Some(_) => Ok(()),
                None => {
                    pace.tick().await;
                    mark(store, &key, rv, &writer, now).map(|()| pass.marked += 1)
                }
            };
            match result {
                Ok(()) | Err(StoreError::NotFound) => {}
                Err(_) => {
                    // crd_gc.go: `return err` — the rest of the pass is abandoned.
                    pass.stopped_at = Some(key);
                    break;
                }
            }
        }
        pass
    }
}

/// One cached identity: key, resourceVersion, uid and the object.
type Cached = (String, u64, Box<str>, Value);

/// The informer's view when the pass starts: every identity with its
/// resourceVersion, as cached.
fn informer_cache(store: &Store) -> Vec<Cached> {
    store
        .keys(Kind::Identity)
        .into_iter()
        .filter_map(|k| {
            let o = store.get(Kind::Identity, &k)?;
            Some((k, o.rv, o.uid.clone(), o.value()))
        })
        .collect()
}

/// Mark an unmarked identity now, as the operator does: an update that
/// fails with a conflict when the cached resourceVersion is stale.
fn mark(
    store: &Store,
    key: &str,
    rv: u64,
    writer: &Writer,
    now: jiff::Timestamp,
) -> Result<(), StoreError> {
    let stamp = now.to_string();
    store
        .modify(Kind::Identity, key, writer, now, false, |cur| {
            let mut v = cur.clone();
            if v["metadata"]["resourceVersion"].as_str() != Some(rv.to_string().as_str()) {
                return Err(StoreError::Conflict(format!(
                    "Operation cannot be fulfilled on ciliumidentities.cilium.io \"{key}\": the object has been modified"
                )));
            }
            v["metadata"]["annotations"][HEARTBEAT_ANNOTATION] = Value::String(stamp);
            Ok(v)
        })
        .map(|_| ())
}
