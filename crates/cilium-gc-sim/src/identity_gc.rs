//! cilium-operator's identity GC pass, played by the simulator so the demo
//! can show, on an identical copy of the cluster, what the tool is for.
//! Checked against the real code (cilium/cilium v1.15.6 and v1.19.3,
//! `operator/identitygc/crd_gc.go`, `heartbeat.go`; docs/real-cilium.md
//! lists every difference and the test that pins it):
//!
//! - The pass walks the identities as the operator's informer cached them
//!   when it started, and skips those an endpoint uses.
//! - Liveness is the operator's in-memory heartbeat store, not the mark's
//!   time: every update event of an identity (anyone's write, the
//!   operator's own mark included) is a sign of life, and the informer's
//!   first list makes every identity alive when the operator starts
//!   (cilium#28339). An identity written less than a heartbeat timeout ago,
//!   or any identity while the operator has been up less than that, is
//!   left alone.
//! - Not alive and unmarked: marked now (an update with the cached object,
//!   so a stale resourceVersion is a 409). Not alive and marked: deleted,
//!   whatever time the mark says (its presence is all that is checked),
//!   with preconditions `{uid, resourceVersion}` from the cache, one at a
//!   time behind the GC limiter (`identity-gc-rate-limit` deletes per
//!   `identity-gc-rate-interval`, 2,500 per minute by default, released in
//!   one batch per interval).
//! - 1.15: the first error of any write, a 409 or a 404, **returns from the
//!   whole pass** (cilium/cilium#33142). Current releases (1.16 and later,
//!   #33143) skip a 409 on a delete, but still end the pass on a 404 on a
//!   delete and on any error of the mark update (#47571).
//!
//! Writes go to the store directly, as the other cluster actors' do: this is
//! the cluster's operator, not a client under test. So the pass is a
//! function of the store and the server clock ([`run_pass`]), which
//! `Simulator::run_operator_pass` calls.

use std::time::Duration;

use serde_json::Value;

use crate::kinds::{parse_id, Kind, HEARTBEAT_ANNOTATION};
use crate::object::{Clock, StoredObject, Writer};
use crate::store::{Store, StoreError};

/// The field manager the pass writes as.
pub const OPERATOR_1_15: &str = "cilium-operator-generic";

/// Which cilium-operator's GC pass to play.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OperatorRelease {
    /// 1.15 (v1.15.6): any error ends the pass.
    #[default]
    V1_15,
    /// 1.16 and later (v1.19.3 read): a 409 on a delete is skipped; a 404
    /// on a delete or an error on the mark update ends the pass.
    Current,
}

/// How the operator runs: its release and its GC flags.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OperatorSettings {
    /// Which release's pass.
    pub release: OperatorRelease,
    /// `identity-heartbeat-timeout`.
    pub heartbeat_timeout: Duration,
    /// Writes per second of its API client (client-go's limiter).
    pub qps: f64,
    /// `identity-gc-rate-limit` deletes per `identity-gc-rate-interval`.
    pub gc_rate_limit: u64,
    /// `identity-gc-rate-interval`.
    pub gc_rate_interval: Duration,
    /// How long the operator has been up when the pass starts: for one
    /// heartbeat timeout after a start every identity is alive.
    pub up_for: Duration,
}

impl OperatorSettings {
    /// Cilium's defaults (2,500 deletes per minute), an operator up for a
    /// day: the pass of a long-running operator.
    pub fn new(release: OperatorRelease, heartbeat_timeout: Duration, qps: f64) -> Self {
        OperatorSettings {
            release,
            heartbeat_timeout,
            qps,
            gc_rate_limit: 2500,
            gc_rate_interval: Duration::from_secs(60),
            up_for: Duration::from_secs(86_400),
        }
    }
}

/// What one cilium-operator GC pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorPass {
    /// Unused, marked identities with no sign of life within the heartbeat
    /// timeout when the pass started: what a completed pass deletes.
    pub candidates: u64,
    /// Identities it deleted before it stopped.
    pub deleted: u64,
    /// Identities it marked before it stopped.
    pub marked: u64,
    /// Deletes answered 409 that it skipped (current releases only).
    pub conflicts_skipped: u64,
    /// The identity whose write failed, ending the pass.
    pub stopped_at: Option<String>,
    /// The HTTP status of that failure (409 or 404).
    pub stopped_by: Option<u16>,
    /// Deletes of identities an endpoint used at that instant.
    pub in_use_deleted: u64,
}

fn has_mark(v: &Value) -> bool {
    v["metadata"]["annotations"][HEARTBEAT_ANNOTATION].is_string()
}

/// The last sign of life the operator's heartbeat store holds for an
/// identity: its last write (every update event marks it alive) or its
/// creation.
fn last_write(v: &Value) -> Option<jiff::Timestamp> {
    let fields = v["metadata"]["managedFields"].as_array();
    let times = fields
        .into_iter()
        .flatten()
        .filter_map(|f| f["time"].as_str()?.parse().ok());
    let created = v["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| t.parse().ok());
    times.chain(created).max()
}

/// Run one identity GC pass of `s.release` against `store`, on the server
/// clock: until it finishes or meets the error that ends it.
pub(crate) async fn run_pass(store: &Store, clock: Clock, s: OperatorSettings) -> OperatorPass {
    let writer = Writer::actor(OPERATOR_1_15);
    let cache = informer_cache(store);
    let start = clock.now();
    let signed = |d: Duration| jiff::SignedDuration::try_from(d).unwrap_or_default();
    let operator_started = start - signed(s.up_for);
    let timeout = signed(s.heartbeat_timeout);
    // The heartbeat store, read live: an identity is alive when its
    // last update event, or the operator's start, is recent.
    let alive = |key: &str, now: jiff::Timestamp| {
        let life = store
            .get(Kind::Identity, key)
            .and_then(|o| last_write(&o.value()))
            .map_or(operator_started, |t| t.max(operator_started));
        life + timeout > now
    };
    let used = |key: &str| parse_id(key).is_some_and(|id| store.ref_count(id) > 0);
    let mut pass = OperatorPass {
        candidates: cache
            .iter()
            .filter(|(k, _, _, v)| !used(k) && has_mark(v) && !alive(k, start))
            .count() as u64,
        ..OperatorPass::default()
    };
    let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / s.qps.max(0.1)));
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut limiter = GcLimiter::new(s.gc_rate_limit, s.gc_rate_interval);
    for (key, rv, uid, cached) in cache {
        if used(&key) || alive(&key, clock.now()) {
            continue;
        }
        let failure = if has_mark(&cached) {
            limiter.wait().await;
            pace.tick().await;
            delete_marked(store, (&key, rv, &uid), &writer, s.release, &mut pass)
        } else {
            pace.tick().await;
            match mark(store, &key, rv, &writer, clock.now()) {
                Ok(()) => {
                    pass.marked += 1;
                    None
                }
                Err(e) => Some(e),
            }
        };
        if let Some(e) = failure {
            // crd_gc.go: `return err` — the rest of the pass is abandoned.
            pass.stopped_by = Some(status_of(&e));
            pass.stopped_at = Some(key);
            break;
        }
    }
    pass
}

/// Delete a marked identity under the resourceVersion and uid the informer
/// cached (crd_gc.go's preconditions); `Some` is the error that ends the
/// pass. The current release skips a conflict; 1.15 stops at it.
fn delete_marked(
    store: &Store,
    (key, rv, uid): (&str, u64, &str),
    writer: &Writer,
    release: OperatorRelease,
    pass: &mut OperatorPass,
) -> Option<StoreError> {
    let precondition = |cur: &StoredObject| {
        if cur.rv != rv || &*cur.uid != uid {
            Err(StoreError::Conflict(format!(
                "Operation cannot be fulfilled on ciliumidentities.cilium.io \"{key}\": the object has been modified; please apply your changes to the latest version and try again"
            )))
        } else {
            Ok(())
        }
    };
    match store.delete(Kind::Identity, key, writer, false, precondition) {
        Ok(d) => {
            pass.deleted += 1;
            pass.in_use_deleted += u64::from(d.referenced);
            None
        }
        Err(StoreError::Conflict(_) | StoreError::Precondition(_))
            if release == OperatorRelease::Current =>
        {
            pass.conflicts_skipped += 1;
            None
        }
        Err(e) => Some(e),
    }
}

/// The HTTP status the real server would have answered with.
fn status_of(e: &StoreError) -> u16 {
    match e {
        StoreError::NotFound => 404,
        StoreError::Conflict(_) | StoreError::Precondition(_) => 409,
        _ => 500,
    }
}

/// Cilium's `pkg/rate.Limiter` as the GC uses it: `limit` tokens, all
/// given back at every tick of `interval` (a batch, not a smooth rate).
struct GcLimiter {
    limit: u64,
    used: u64,
    interval: Duration,
    window_start: tokio::time::Instant,
}

impl GcLimiter {
    fn new(limit: u64, interval: Duration) -> Self {
        GcLimiter {
            limit: limit.max(1),
            used: 0,
            interval,
            window_start: tokio::time::Instant::now(),
        }
    }

    async fn wait(&mut self) {
        let now = tokio::time::Instant::now();
        if now >= self.window_start + self.interval {
            self.window_start = now;
            self.used = 0;
        }
        if self.used >= self.limit {
            tokio::time::sleep_until(self.window_start + self.interval).await;
            self.window_start = tokio::time::Instant::now();
            self.used = 0;
        }
        self.used += 1;
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

/// Mark an unmarked identity now, as the operator does: an update of the
/// cached object, which fails with a conflict when its resourceVersion is
/// stale and with 404 when the identity is gone.
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
