//! Deleting (or marking) the chosen identities: concurrent workers behind one
//! shared rate limiter, each item handled to the end without ever stopping
//! the run for it.
//!
//! Per item, right before every write: wait for the limiter and the
//! Retry-After gate, wait until usage is live, decide again on the freshest
//! object we have and the live usage; only a still-stale identity is deleted,
//! always with preconditions `{uid, resourceVersion}`. A 409 means someone
//! changed it: we re-read it and decide again (bounded). Only a lost
//! permission stops the run; the items not started are reported as such.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::StreamExt;
use http::Method;
use jiff::Timestamp;
use serde_json::json;
use tokio::time::Instant;

use crate::cluster::{Api, FIELD_MANAGER, JSON, MERGE_PATCH};
use crate::model::{decode_identity, Identity, Kind, HEARTBEAT_ANNOTATION};
use crate::policy::{decide, Policy, Reason};
use crate::report::{Conflict, Outcome};
use crate::retry::Class;
use crate::stats::Stats;
use crate::stop::{Stop, StopReason};
use crate::usage::{UsageHandle, USAGE_STALL_LIMIT};

/// 429s tolerated for one item before it is reported failed. Throttling is
/// expected under a server-side rate cap, so this is far above `--max-retries`.
pub const MAX_THROTTLED_PER_ITEM: u32 = 64;

/// What to do to each target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Delete a stale identity.
    Delete,
    /// Annotate an unmarked unused identity with a heartbeat mark.
    Mark,
}

impl Action {
    /// The reason an identity must still have for the action to go ahead.
    fn wanted(self) -> Reason {
        match self {
            Action::Delete => Reason::Stale,
            Action::Mark => Reason::Unmarked,
        }
    }
}

/// Settings of a sweep.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// Parallel workers.
    pub concurrency: u32,
    /// Writes per second (0: unlimited).
    pub qps: f64,
    /// Limiter burst.
    pub burst: u32,
    /// Conflicts tolerated per item.
    pub max_conflict_retries: u32,
    /// Transient failures tolerated per request.
    pub max_retries: u32,
    /// Send `dryRun: [All]`.
    pub dry_run: bool,
    /// `--allow-unreadable-endpoints`: an endpoint whose identity reference
    /// cannot be read does not stop the deletes.
    pub allow_unreadable_endpoints: bool,
    /// The decision rules, applied again before each write.
    pub policy: Policy,
}

/// The result for one identity.
#[derive(Debug, Clone)]
pub struct ItemResult {
    /// What happened.
    pub outcome: Outcome,
    /// The last decision made on it.
    pub reason: Reason,
    /// Writes sent.
    pub attempts: u32,
    /// Conflicts met.
    pub conflicts: Vec<Conflict>,
    /// The last error.
    pub last_error: Option<String>,
}

/// The generic cell rate algorithm (GCRA, what `governor` implements),
/// deciding when a cell is *reserved* rather than when it is used.
///
/// `governor`'s `until_ready` checks again when its sleep ends and, with
/// `--burst 1`, anchors the next cell at that wake-up: every wake-up's
/// lateness (timer resolution, a busy CPU, 64 workers racing for one cell)
/// is lost for good, and at `--qps 1000` that was 17-23% of the rate. Here a
/// worker reserves its cell before it sleeps, so the schedule advances by
/// exactly one period per cell and a late wake-up delays only that one
/// write (as client-go's token bucket does with `x/time/rate`'s `Reserve`).
/// The burst keeps its meaning: at most `burst` cells are conforming at
/// once after a pause; an idle limiter never banks more.
#[derive(Debug)]
struct Gcra {
    /// Emission interval: 1 / qps.
    period: Duration,
    /// Cells allowed at once.
    burst: u32,
    /// Theoretical arrival time of the next cell; `None` before the first.
    tat: std::sync::Mutex<Option<Instant>>,
}

impl Gcra {
    fn new(qps: f64, burst: u32) -> Self {
        Gcra {
            period: Duration::from_secs_f64(1.0 / qps),
            burst: burst.max(1),
            tat: std::sync::Mutex::new(None),
        }
    }

    /// Reserve `n` cells (`1..=burst`) at `now`: the instant they may be used.
    fn reserve(&self, n: u32, now: Instant) -> Instant {
        let n = n.clamp(1, self.burst);
        let mut tat = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        let current = tat.map_or(now, |t| t.max(now));
        // Conforming once `current + n·T - t <= burst·T`.
        let slack = self.period * (self.burst - n);
        let at = current.checked_sub(slack).map_or(now, |t| t.max(now));
        *tat = Some(current + self.period * n);
        at
    }
}

/// Pacing: a GCRA limiter plus a penalty that makes each write cost more
/// cells while the server throttles us, decaying as writes succeed.
struct Pace {
    limiter: Option<Gcra>,
    burst: u32,
    penalty: AtomicU32,
    successes: AtomicU32,
}

impl Pace {
    fn new(qps: f64, burst: u32) -> Self {
        let burst = burst.max(1);
        Pace {
            limiter: (qps > 0.0).then(|| Gcra::new(qps, burst)),
            burst,
            penalty: AtomicU32::new(1),
            successes: AtomicU32::new(0),
        }
    }

    /// Wait for this write's cells. Cancelling the wait (a stop) only wastes
    /// the reserved cells, which never makes us faster than the rate.
    async fn until_ready(&self) {
        if let Some(l) = &self.limiter {
            let n = self.penalty.load(Ordering::Relaxed).clamp(1, self.burst);
            let at = l.reserve(n, Instant::now());
            tokio::time::sleep_until(at).await;
        }
    }

    fn throttled(&self) {
        let p = self.penalty.load(Ordering::Relaxed);
        self.penalty
            .store((p * 2).min(self.burst.max(1)), Ordering::Relaxed);
        self.successes.store(0, Ordering::Relaxed);
    }

    fn succeeded(&self) {
        if self.successes.fetch_add(1, Ordering::Relaxed) >= 20 {
            self.successes.store(0, Ordering::Relaxed);
            let p = self.penalty.load(Ordering::Relaxed);
            self.penalty.store((p / 2).max(1), Ordering::Relaxed);
        }
    }
}

struct Ctx<'a> {
    api: &'a Api,
    usage: &'a UsageHandle,
    cfg: &'a SweepConfig,
    action: Action,
    stop: &'a Stop,
    pace: Pace,
}

/// Process every target; returns one result per target, in input order.
/// `on_done` is called as each item finishes (progress).
pub async fn sweep(
    api: &Api,
    usage: &UsageHandle,
    targets: Vec<Identity>,
    action: Action,
    cfg: &SweepConfig,
    stop: &Stop,
    on_done: impl Fn(&ItemResult),
) -> Vec<ItemResult> {
    let ctx = Ctx {
        api,
        usage,
        cfg,
        action,
        stop,
        pace: Pace::new(cfg.qps, cfg.burst),
    };
    let ctx = &ctx;
    let mut indexed: Vec<(usize, ItemResult)> =
        futures::stream::iter(targets.into_iter().enumerate())
            .map(|(i, t)| async move { (i, process(ctx, t).await) })
            .buffer_unordered(cfg.concurrency.max(1) as usize)
            .inspect(|(_, r)| on_done(r))
            .collect()
            .await;
    indexed.sort_by_key(|(i, _)| *i);
    indexed.into_iter().map(|(_, r)| r).collect()
}

fn finish(mut r: ItemResult, outcome: Outcome, error: Option<String>) -> ItemResult {
    r.outcome = outcome;
    if error.is_some() {
        r.last_error = error;
    }
    r
}

async fn process(ctx: &Ctx<'_>, mut ident: Identity) -> ItemResult {
    let mut r = ItemResult {
        outcome: Outcome::NotAttempted,
        reason: ctx.action.wanted(),
        attempts: 0,
        conflicts: Vec::new(),
        last_error: None,
    };
    let (mut transient, mut throttled, mut lost_answers) = (0u32, 0u32, 0u32);
    loop {
        if ctx.stop.is_stopped() {
            return stopped(r);
        }
        tokio::select! {
            _ = ctx.pace.until_ready() => {}
            _ = ctx.stop.wait() => return stopped(r),
        }
        tokio::select! {
            ready = ctx.usage.wait_ready_within(USAGE_STALL_LIMIT) => if !ready {
                ctx.stop.trigger(StopReason::UsageLost);
                return stopped(r);
            },
            _ = ctx.stop.wait() => return stopped(r),
        }
        // An endpoint whose identity we cannot read may protect this one.
        if !ctx.cfg.allow_unreadable_endpoints && ctx.usage.unreadable_count() > 0 {
            ctx.stop.trigger(StopReason::UnreadableEndpoint);
            return stopped(r);
        }
        if ctx.stop.is_stopped() {
            return stopped(r);
        }
        // Decide again, right now, on live usage: never write to an identity
        // that stopped being a candidate.
        let refs = ident.numeric_id().map_or(0, |id| ctx.usage.refs(id));
        let decision = decide(&ident, refs, &ctx.cfg.policy, ctx.api.clock.now());
        r.reason = decision.reason;
        if decision.reason != ctx.action.wanted() {
            return finish(r, Outcome::Reclaimed, None);
        }
        r.attempts += 1;
        let answer = write(ctx, &ident).await;
        match answer.class {
            Class::Success => {
                ctx.pace.succeeded();
                let done = match ctx.action {
                    Action::Delete => Outcome::Deleted,
                    Action::Mark => Outcome::Marked,
                };
                return finish(r, done, None);
            }
            Class::NotFound => {
                // After a lost answer (reset, timeout) the 404 may be our own
                // earlier delete; we cannot tell, so it counts as gone, noted.
                let note = (lost_answers > 0)
                    .then(|| "an earlier attempt got no answer and may have deleted it".to_owned());
                return finish(r, Outcome::AlreadyGone, note);
            }
            Class::Conflict => {
                Stats::bump(&ctx.api.stats.conflicts);
                let expected = ident.resource_version.clone();
                match reread(ctx, &ident.name).await {
                    Reread::Gone => return finish(r, Outcome::AlreadyGone, None),
                    Reread::Failed(e) => return finish(r, Outcome::Failed, Some(e)),
                    Reread::Fresh(fresh) => {
                        let change = fresh.last_change.clone();
                        r.conflicts.push(Conflict {
                            expected_resource_version: expected,
                            observed_resource_version: Some(fresh.resource_version.clone()),
                            manager: change.as_ref().map(|c| c.manager.clone()),
                            operation: change.as_ref().map(|c| c.operation.clone()),
                            time: change.and_then(|c| c.time),
                        });
                        ident = *fresh;
                    }
                }
                if r.conflicts.len() as u32 > ctx.cfg.max_conflict_retries {
                    // Decide once more: a final conflict that removed the mark is a reclaim.
                    let refs = ident.numeric_id().map_or(0, |id| ctx.usage.refs(id));
                    let d = decide(&ident, refs, &ctx.cfg.policy, ctx.api.clock.now());
                    r.reason = d.reason;
                    if d.reason != ctx.action.wanted() {
                        return finish(r, Outcome::Reclaimed, None);
                    }
                    let msg = format!(
                        "still {} after {} conflicts",
                        ctx.action.wanted().as_str(),
                        r.conflicts.len()
                    );
                    return finish(r, Outcome::Failed, Some(msg));
                }
                Stats::bump(&ctx.api.stats.retries);
            }
            Class::Throttled { .. } => {
                // The gate in `Api` already holds every request until Retry-After.
                ctx.pace.throttled();
                throttled += 1;
                r.last_error = Some(answer.message);
                if throttled > MAX_THROTTLED_PER_ITEM {
                    return finish(r, Outcome::Failed, None);
                }
                Stats::bump(&ctx.api.stats.retries);
            }
            Class::Transient { retry_after } => {
                if answer.code == 0 {
                    lost_answers += 1;
                }
                r.last_error = Some(answer.message);
                if transient >= ctx.cfg.max_retries {
                    return finish(r, Outcome::Failed, None);
                }
                let delay = ctx
                    .api
                    .backoff
                    .delay(transient, retry_after, &mut rand::rng());
                transient += 1;
                Stats::bump(&ctx.api.stats.retries);
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = ctx.stop.wait() => return finish(r, Outcome::Failed, None),
                }
            }
            Class::Unauthorized | Class::Forbidden => {
                ctx.stop.trigger(StopReason::PermissionLost);
                return finish(r, Outcome::Failed, Some(answer.message));
            }
            Class::Expired { .. } | Class::Rejected => {
                return finish(r, Outcome::Failed, Some(answer.message));
            }
        }
    }
}

/// An item the stop reached: never attempted, or failed if writes were sent.
fn stopped(r: ItemResult) -> ItemResult {
    if r.attempts == 0 {
        finish(r, Outcome::NotAttempted, None)
    } else {
        let e = r
            .last_error
            .clone()
            .or_else(|| Some("run stopped before this item finished".into()));
        finish(r, Outcome::Failed, e)
    }
}

/// The DELETE (with preconditions) or the mark PATCH (with resourceVersion,
/// so a concurrent change wins), sent once.
async fn write(ctx: &Ctx<'_>, ident: &Identity) -> crate::cluster::Answer {
    let path = Kind::Identity.object_path(&ident.name);
    match ctx.action {
        Action::Delete => {
            let mut body = json!({
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "preconditions": {"uid": ident.uid, "resourceVersion": ident.resource_version},
                "propagationPolicy": "Background",
            });
            // In the query string as well as the body: a proxy that drops
            // DELETE bodies must not turn a dry run into a real delete.
            let path = if ctx.cfg.dry_run {
                body["dryRun"] = json!(["All"]);
                format!("{path}?dryRun=All")
            } else {
                path
            };
            ctx.api
                .send_once(
                    Method::DELETE,
                    &path,
                    Some((JSON, body.to_string().into_bytes())),
                )
                .await
        }
        Action::Mark => {
            let now = ctx.api.clock.now();
            let body = json!({"metadata": {
                "resourceVersion": ident.resource_version,
                "annotations": {HEARTBEAT_ANNOTATION: rfc3339_nano(now)},
            }});
            let mut q = format!("{path}?fieldManager={FIELD_MANAGER}");
            if ctx.cfg.dry_run {
                q.push_str("&dryRun=All");
            }
            ctx.api
                .send_once(
                    Method::PATCH,
                    &q,
                    Some((MERGE_PATCH, body.to_string().into_bytes())),
                )
                .await
        }
    }
}

/// RFC 3339 in UTC with up to nanoseconds, trailing zeros trimmed: Go's
/// `time.RFC3339Nano`, as the operator writes marks.
pub fn rfc3339_nano(t: Timestamp) -> String {
    t.to_string()
}

enum Reread {
    Fresh(Box<Identity>),
    Gone,
    Failed(String),
}

async fn reread(ctx: &Ctx<'_>, name: &str) -> Reread {
    let a = ctx
        .api
        .get(&Kind::Identity.object_path(name), ctx.cfg.max_retries)
        .await;
    match a.class {
        Class::Success => {}
        Class::NotFound => return Reread::Gone,
        Class::Unauthorized | Class::Forbidden => {
            ctx.stop.trigger(StopReason::PermissionLost);
            return Reread::Failed(a.message);
        }
        _ => return Reread::Failed(format!("re-reading after a conflict: {}", a.message)),
    }
    let raw: Box<serde_json::value::RawValue> = match a.json() {
        Ok(r) => r,
        Err(e) => return Reread::Failed(format!("re-reading after a conflict: {e}")),
    };
    match decode_identity(&raw) {
        Ok(mut i) => {
            i.labels.clear();
            Reread::Fresh(Box::new(i))
        }
        Err(m) => Reread::Failed(format!("re-read object is malformed: {}", m.problem)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_rfc3339_nano() {
        let t: Timestamp = "2026-01-02T03:04:05.123456789Z".parse().unwrap();
        assert_eq!(rfc3339_nano(t), "2026-01-02T03:04:05.123456789Z");
        let t: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        assert_eq!(rfc3339_nano(t), "2026-01-02T03:04:05Z");
        let t: Timestamp = "2026-01-02T03:04:05.5Z".parse().unwrap();
        assert_eq!(rfc3339_nano(t), "2026-01-02T03:04:05.5Z");
        assert_eq!(crate::policy::parse_mark(&rfc3339_nano(t)), Some(t));
    }

    #[test]
    fn gcra_reservations_keep_the_period_and_the_burst() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Burst 1 at 1000/s: cell k at k ms, however late the callers come
        // back, as long as they ask before their slot.
        let g = Gcra::new(1000.0, 1);
        let slots: Vec<Instant> = (0..64).map(|_| g.reserve(1, t0)).collect();
        for (k, s) in slots.iter().enumerate() {
            assert_eq!(*s, t0 + ms(k as u64));
        }
        assert_eq!(g.reserve(1, t0 + ms(10)), t0 + ms(64));
        // Idle: no credit is banked beyond the burst.
        assert_eq!(g.reserve(1, t0 + ms(1000)), t0 + ms(1000));
        assert_eq!(g.reserve(1, t0 + ms(1000)), t0 + ms(1001));
        // Burst 3 at 10/s: three at once, then one per 100 ms.
        let g = Gcra::new(10.0, 3);
        let got: Vec<Instant> = (0..5).map(|_| g.reserve(1, t0)).collect();
        assert_eq!(got, vec![t0, t0, t0, t0 + ms(100), t0 + ms(200)]);
        // A penalised write takes several cells: it waits for all of them.
        let g = Gcra::new(10.0, 4);
        assert_eq!(g.reserve(4, t0), t0);
        assert_eq!(g.reserve(4, t0), t0 + ms(400));
        assert_eq!(g.reserve(9, t0), t0 + ms(800), "clamped to the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn pace_penalty_rises_on_throttle_and_decays() {
        let p = Pace::new(10.0, 8);
        p.throttled();
        p.throttled();
        assert_eq!(p.penalty.load(Ordering::Relaxed), 4);
        for _ in 0..5 {
            p.throttled();
        }
        assert_eq!(p.penalty.load(Ordering::Relaxed), 8, "capped at burst");
        for _ in 0..22 {
            p.succeeded();
        }
        assert_eq!(p.penalty.load(Ordering::Relaxed), 4);
        p.until_ready().await; // never errors on capacity
    }
}
