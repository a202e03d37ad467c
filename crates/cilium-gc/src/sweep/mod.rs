//! Deleting (or marking) the chosen identities: concurrent workers behind one
//! shared rate limiter, each item handled to the end without ever stopping
//! the run for it.
//!
//! Per item, right before every write: wait until endpoint usage is known
//! complete as of a few seconds ago (`usage`), wait for the shared limiter
//! (`pace`), decide again on the freshest object we have and the live
//! usage; only a still-stale identity is deleted, always with preconditions
//! `{uid, resourceVersion}`. A 409 means someone changed it: we re-read it
//! and decide again (bounded). A wait the server imposes on one request (a
//! 429's `Retry-After`, a 5xx's or a lost answer's backoff) delays only
//! that request, and without holding a worker: the item is parked with a
//! not-before instant and the worker takes the next ready item (a worker
//! asleep on a backoff leaves the server's admitted rate unused, and under
//! throttling it may be the only write allowed in flight).
//! The shared limiter slows down only when throttling is sustained. A
//! refused connection spends no retry (nothing reached a server); a 403 is
//! confirmed by SelfSubjectAccessReview before it counts (a restarted
//! kube-apiserver answers 403 until its RBAC caches sync). Only a lost
//! permission, or endpoint usage unknown for [`USAGE_STALL_LIMIT`], stops
//! the run; the items not started are reported as such.
//!
//! The targets arrive on a channel ([`Feed`]): all at once, or page by page
//! while the identity list is still being read (see `gc`), so the first
//! deletes need not wait for the last page.

use std::time::{Duration, Instant};

use http::Method;
use jiff::Timestamp;
use serde_json::json;

use crate::pace::Pace;
use crate::report::{Conflict, Outcome, Pacing};
use cilium_gc_cluster::cluster::{ApiClient, FIELD_MANAGER, JSON, MERGE_PATCH};
use cilium_gc_cluster::model::{decode_identity, Identity, Kind, HEARTBEAT_ANNOTATION};
use cilium_gc_cluster::policy::{decide, Rules};
use cilium_gc_cluster::retry::Class;
use cilium_gc_cluster::stats::Stats;
use cilium_gc_cluster::stop::{Stop, StopReason};
use cilium_gc_cluster::usage::{UsageHandle, USAGE_STALL_LIMIT};

mod item;
mod queue;

pub(crate) use item::{feed_all, Action, Feed, ItemResult, Target};
use item::{finish, stopped, Tries};
use queue::{drive, Item, Queue, Turn};

/// 429s tolerated for one item before it is reported failed. Throttling is
/// expected under a server-side rate cap, so this is far above `--max-retries`.
pub(crate) const MAX_THROTTLED_PER_ITEM: u32 = 64;

/// 403s on one item that SelfSubjectAccessReview then allowed, before the
/// item is reported failed (an admission policy, not RBAC, denies it).
pub(crate) const MAX_FORBIDDEN_PER_ITEM: u32 = 3;

/// How long a 403 on a write is confirmed by SelfSubjectAccessReview before
/// the permission counts as lost: long enough for a loaded kube-apiserver to
/// sync its RBAC caches after a restart; a really revoked permission only
/// stops the run this much later (every write meanwhile gets 403 too).
pub(crate) const FORBIDDEN_WINDOW: Duration = Duration::from_secs(30);

/// Settings of a sweep.
#[derive(Debug, Clone)]
pub(crate) struct SweepSettings {
    /// Workers, rate, burst and the retries tolerated per item and per
    /// request: the run's, as validated.
    pub pacing: Pacing,
    /// Send `dryRun: [All]`.
    pub dry_run: bool,
    /// `--allow-unreadable-endpoints`: an endpoint whose identity reference
    /// cannot be read does not stop the deletes.
    pub allow_unreadable_endpoints: bool,
    /// The cluster's rules, judged again before each write. Deliberately not
    /// the whole [`cilium_gc_cluster::policy::Policy`]: the user's narrowing was applied
    /// once, at plan time, and must not be applied again here.
    pub rules: Rules,
}

/// What every sweep worker shares: the client, the live usage, the
/// settings, the action, the stop signal and the shared limiter.
struct Sweeper<'a> {
    api: &'a ApiClient,
    usage: &'a UsageHandle,
    cfg: &'a SweepSettings,
    action: Action,
    stop: &'a Stop,
    pace: Pace,
}

/// Process every target the feed brings; returns one result per target, in
/// the order received. `on_done` is called as each item finishes
/// (progress).
pub(crate) async fn sweep(
    api: &ApiClient,
    usage: &UsageHandle,
    targets: Feed,
    action: Action,
    cfg: &SweepSettings,
    stop: &Stop,
    on_done: impl Fn(&ItemResult),
) -> Vec<ItemResult> {
    let ctx = Sweeper {
        api,
        usage,
        cfg,
        action,
        stop,
        pace: Pace::new(
            cfg.pacing.qps,
            cfg.pacing.burst,
            cfg.pacing.concurrency.max(1) as usize,
        ),
    };
    let queue = Queue::new(targets, action);
    let slots = cfg.pacing.concurrency.max(1) as usize;
    let mut indexed = drive(
        &ctx.pace,
        stop,
        &api.stats,
        queue,
        slots,
        &on_done,
        |i, item| turn(&ctx, i, item),
    )
    .await;
    if let Some(p) = ctx.pace.summary() {
        api.stats.add_pace(p);
    }
    api.stats.add_in_flight(ctx.pace.lowest_in_flight());
    indexed.sort_by_key(|(i, _)| *i);
    indexed.into_iter().map(|(_, r)| r).collect()
}

/// What one step of an item's write loop leads to.
enum Step {
    /// Go round again: wait for usage and the limiter, decide, write.
    Retry,
    /// Give the worker back; not to be sent again for `wait`, of which
    /// `retry_after` counts as the server's `Retry-After` (a 429's; zero
    /// for a 5xx's backoff).
    Park {
        /// How long before the item may be sent again.
        wait: Duration,
        /// The part of `wait` the report counts as `Retry-After`.
        retry_after: Duration,
    },
    /// The item ends with this outcome (and error, if any).
    Finish(Outcome, Option<String>),
    /// The run is stopping: see [`stopped`].
    Stopped,
}

/// Whether a write may go out now.
enum Gate {
    Open,
    /// Usage went stale while the limiter held us: wait again.
    Recheck,
    Stopped,
}

/// One turn of an identity with a worker: wait until usage is fresh and the
/// limiter allows, decide again on live usage, write with preconditions,
/// and handle the answer, until it ends in an outcome or is throttled (then
/// it is parked, see [`drive`]). Never fails the run: a stop, a lost
/// permission or lost usage stop it through `ctx.stop`.
async fn turn(ctx: &Sweeper<'_>, i: usize, mut item: Box<Item>) -> (usize, Turn) {
    loop {
        match gate(ctx).await {
            Gate::Stopped => return (i, Turn::Done(stopped(item.r, &item.tries))),
            Gate::Recheck => continue,
            Gate::Open => {}
        }
        // Decide again, right now, on live usage and the freshest object:
        // only what can change under us (usage, the mark) is judged; the
        // user's narrowing was applied once, at plan time.
        let refs = item.ident.numeric_id().map_or(0, |id| ctx.usage.refs(id));
        let decision = decide(&item.ident, refs, &ctx.cfg.rules, ctx.api.clock.now());
        item.r.reason = decision.reason;
        if decision.reason != ctx.action.wanted() {
            return (i, Turn::Done(finish(item.r, Outcome::Reclaimed, None)));
        }
        item.r.attempts += 1;
        // A stop gives a write already sent a short grace to be answered;
        // then it is given up as a lost answer (it may have been applied).
        let ticket = ctx.pace.depart();
        let answer = tokio::select! {
            a = write(ctx, &item.ident) => a,
            _ = ctx.stop.grace_elapsed() => cilium_gc_cluster::cluster::Answer::lost(
                "the run stopped before the server answered: it may have been applied",
            ),
        };
        // Ours the server was already holding when it answered this one.
        let ahead = ticket.ahead();
        drop(ticket);
        match on_answer(ctx, &mut item, answer, ahead).await {
            Step::Retry => {}
            Step::Park { wait, retry_after } => {
                tracing::trace!(?wait, attempts = item.r.attempts, "item parked");
                let not_before = tokio::time::Instant::now() + wait;
                let park = Turn::Park {
                    item,
                    not_before,
                    retry_after,
                };
                return (i, park);
            }
            Step::Finish(outcome, error) => return (i, Turn::Done(finish(item.r, outcome, error))),
            Step::Stopped => return (i, Turn::Done(stopped(item.r, &item.tries))),
        }
    }
}

/// What one write's answer means for its item; `ahead`: our writes sent
/// before it and still unanswered (see `pace::Window`).
async fn on_answer(
    ctx: &Sweeper<'_>,
    item: &mut Item,
    answer: cilium_gc_cluster::cluster::Answer,
    ahead: usize,
) -> Step {
    let Item { ident, r, tries } = item;
    match answer.class {
        Class::Success => {
            ctx.pace.record(false, None, ahead);
            let done = match ctx.action {
                Action::Delete => Outcome::Deleted,
                Action::Mark => Outcome::Marked,
            };
            Step::Finish(done, None)
        }
        Class::NotFound => {
            // After a lost answer (reset, timeout) or a 5xx (which a server
            // may send after the write committed) the 404 may be our own
            // earlier delete; we cannot tell, so it counts as gone, noted.
            let note = (tries.lost_answers > 0).then(|| {
                "an earlier attempt got no answer or a server error and may have deleted it"
                    .to_owned()
            });
            Step::Finish(Outcome::AlreadyGone, note)
        }
        Class::Conflict => on_conflict(ctx, r, ident).await,
        Class::Throttled { retry_after } => {
            r.last_error = Some(answer.message);
            on_throttled(ctx, tries, retry_after, ahead)
        }
        Class::Transient { .. } if answer.unsent => {
            r.last_error = Some(answer.message);
            on_unreachable(ctx, tries).await
        }
        Class::Transient { retry_after } => {
            r.last_error = Some(answer.message);
            on_transient(ctx, tries, retry_after)
        }
        Class::Unauthorized | Class::Forbidden => on_forbidden(ctx, tries, answer.message).await,
        Class::Expired { .. } | Class::Rejected => {
            Step::Finish(Outcome::Failed, Some(answer.message))
        }
    }
}

/// Wait until a write may go out: usage first (every endpoint source known
/// complete as of at most `FRESHNESS_LIMIT` ago; given up once unknown for
/// the stall limit), no unreadable endpoint, then the shared limiter.
async fn gate(ctx: &Sweeper<'_>) -> Gate {
    if ctx.stop.is_stopped() {
        return Gate::Stopped;
    }
    tokio::select! {
        ready = ctx.usage.wait_fresh(USAGE_STALL_LIMIT) => if !ready {
            ctx.stop.trigger(StopReason::UsageLost);
            return Gate::Stopped;
        },
        _ = ctx.stop.wait() => return Gate::Stopped,
    }
    // An endpoint whose identity we cannot read may protect this one.
    if !ctx.cfg.allow_unreadable_endpoints && ctx.usage.unreadable_count() > 0 {
        ctx.stop.trigger(StopReason::UnreadableEndpoint);
        return Gate::Stopped;
    }
    tokio::select! {
        _ = ctx.pace.until_ready() => {}
        _ = ctx.stop.wait() => return Gate::Stopped,
    }
    if ctx.stop.is_stopped() {
        return Gate::Stopped;
    }
    // The limiter may have held us while usage went stale: check again,
    // without waiting, right before deciding.
    if ctx.usage.is_fresh() {
        Gate::Open
    } else {
        Gate::Recheck
    }
}

/// A 409: re-read the identity, record who changed it, and go round again
/// (the loop re-decides), until the conflicts allowed are used up.
async fn on_conflict(ctx: &Sweeper<'_>, r: &mut ItemResult, ident: &mut Identity) -> Step {
    Stats::bump(&ctx.api.stats.conflicts);
    let expected = ident.resource_version.clone();
    let fresh = tokio::select! {
        f = reread(ctx, &ident.name) => f,
        _ = ctx.stop.wait() => return Step::Stopped,
    };
    match fresh {
        Reread::Gone => return Step::Finish(Outcome::AlreadyGone, None),
        Reread::Failed(e) => return Step::Finish(Outcome::Failed, Some(e)),
        // Same name, another object: the identity this run planned on was
        // deleted and another one created in its place. It is not ours to
        // judge (the plan never saw it); the precondition on uid said so.
        Reread::Fresh(fresh) if fresh.uid != ident.uid => {
            let note = format!(
                "re-created under the run (uid {} is now {}): the new identity was left alone",
                ident.uid, fresh.uid
            );
            return Step::Finish(Outcome::AlreadyGone, Some(note));
        }
        Reread::Fresh(fresh) => {
            let change = fresh.last_change.clone();
            r.conflicts.push(Conflict {
                expected_resource_version: expected,
                observed_resource_version: Some(fresh.resource_version.clone()),
                manager: change.as_ref().map(|c| c.manager.clone()),
                operation: change.as_ref().map(|c| c.operation.clone()),
                time: change.and_then(|c| c.time),
            });
            *ident = *fresh;
        }
    }
    if r.conflicts.len() as u32 > ctx.cfg.pacing.max_conflict_retries {
        // Decide once more: a final conflict that removed the mark is a reclaim.
        let refs = ident.numeric_id().map_or(0, |id| ctx.usage.refs(id));
        let d = decide(ident, refs, &ctx.cfg.rules, ctx.api.clock.now());
        r.reason = d.reason;
        if d.reason != ctx.action.wanted() {
            return Step::Finish(Outcome::Reclaimed, None);
        }
        let msg = format!(
            "still {} after {} conflicts",
            ctx.action.wanted().as_str(),
            r.conflicts.len()
        );
        return Step::Finish(Outcome::Failed, Some(msg));
    }
    Stats::bump(&ctx.api.stats.retries);
    Step::Retry
}

/// A 429: this request waits out its own Retry-After, parked off the
/// workers (the wait is counted when it ends); the shared limiter slows
/// everyone only when throttling is sustained (`pace`). The server's
/// `Retry-After` is the wait, exactly: no backoff grows on top of it for an
/// item throttled again (under a server-side cap most items are refused
/// several times, and growing waits, up to 10 s for a `Retry-After: 1`,
/// would leave the run with nothing ready to send). Without one
/// (or `0`), backoff with jitter.
fn on_throttled(
    ctx: &Sweeper<'_>,
    tries: &mut Tries,
    retry_after: Option<Duration>,
    ahead: usize,
) -> Step {
    ctx.pace.record(true, retry_after, ahead);
    tracing::debug!(?retry_after, ahead, "write throttled (429)");
    tries.throttled += 1;
    if tries.throttled > MAX_THROTTLED_PER_ITEM {
        return Step::Finish(Outcome::Failed, None);
    }
    Stats::bump(&ctx.api.stats.retries);
    let delay = retry_after.filter(|d| !d.is_zero()).unwrap_or_else(|| {
        ctx.api
            .backoff
            .delay(tries.throttled.min(8) - 1, None, &mut rand::rng())
    });
    Step::Park {
        wait: delay,
        retry_after: delay,
    }
}

/// A 5xx, a timeout or a reset: backoff with jitter (at least the server's
/// `Retry-After`, if it gave one, unless other writes get through: see
/// `Pace::answering`), a bounded number of times, parked off
/// the workers as a 429 is: asleep in its turn, the item would hold a
/// worker, and under throttling that may be the only write allowed in
/// flight. The write may have been applied, which a later 404
/// must allow for (and a stop during the wait reports it failed).
fn on_transient(ctx: &Sweeper<'_>, tries: &mut Tries, retry_after: Option<Duration>) -> Step {
    tries.lost_answers += 1;
    if tries.transient >= ctx.cfg.pacing.max_retries {
        return Step::Finish(Outcome::Failed, None);
    }
    let retry_after = retry_after.filter(|_| !ctx.pace.answering());
    let delay = ctx
        .api
        .backoff
        .delay(tries.transient, retry_after, &mut rand::rng());
    tries.transient += 1;
    Stats::bump(&ctx.api.stats.retries);
    Step::Park {
        wait: delay,
        retry_after: Duration::ZERO,
    }
}

/// The connection was refused: the request never reached a server (a
/// kube-apiserver that is restarting refuses connections for seconds), so
/// nothing was applied and no retry is spent. The item waits with backoff
/// and goes back through the gate, which holds writes once usage is no
/// longer fresh and stops the run when it stays unknown; on its own the
/// wait is bounded by [`USAGE_STALL_LIMIT`] too.
async fn on_unreachable(ctx: &Sweeper<'_>, tries: &mut Tries) -> Step {
    let since = *tries.unreachable_since.get_or_insert_with(Instant::now);
    if since.elapsed() > USAGE_STALL_LIMIT {
        return Step::Finish(Outcome::Failed, None);
    }
    let delay = ctx
        .api
        .backoff
        .delay(tries.unreachable.min(4), None, &mut rand::rng());
    tries.unreachable += 1;
    Stats::bump(&ctx.api.stats.retries);
    tokio::select! {
        _ = tokio::time::sleep(delay) => Step::Retry,
        _ = ctx.stop.wait() => Step::Stopped,
    }
}

/// A 401 or 403 on a write. Either the permission is gone (nothing more can
/// be done: the run stops) or the server answered before its authorizer
/// caught up: a kube-apiserver serves requests while its RBAC informers are
/// still syncing right after a restart (found by tests/e2e/watches.rs).
/// SelfSubjectAccessReview decides, asked for up to [`FORBIDDEN_WINDOW`]
/// (its own answers are just as unsure during that sync): allowed at any
/// point, the item is retried (bounded); denied or unanswered throughout,
/// the permission is lost.
async fn on_forbidden(ctx: &Sweeper<'_>, tries: &mut Tries, message: String) -> Step {
    tries.forbidden += 1;
    if tries.forbidden > MAX_FORBIDDEN_PER_ITEM {
        let note = format!(
            "{message} (SelfSubjectAccessReview allows it: an admission policy may deny this write)"
        );
        return Step::Finish(Outcome::Failed, Some(note));
    }
    let verb = match ctx.action {
        Action::Delete => "delete",
        Action::Mark => "patch",
    };
    let permission = cilium_gc_cluster::rbac::PERMISSIONS
        .iter()
        .find(|p| p.resource == Kind::Identity.plural() && p.verb == verb);
    let started = Instant::now();
    let mut asked = 0;
    while let Some(p) = permission {
        if let Ok(true) = cilium_gc_cluster::rbac::review(ctx.api, p, "v2", "", 0).await {
            Stats::bump(&ctx.api.stats.retries);
            return Step::Retry;
        }
        if started.elapsed() >= FORBIDDEN_WINDOW {
            break;
        }
        let delay = ctx
            .api
            .backoff
            .delay(2 + asked.min(2), None, &mut rand::rng());
        asked += 1;
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = ctx.stop.wait() => return Step::Finish(Outcome::Failed, Some(message)),
        }
    }
    ctx.stop.trigger(StopReason::PermissionLost);
    Step::Finish(Outcome::Failed, Some(message))
}

/// The DELETE (with preconditions) or the mark PATCH (with resourceVersion,
/// so a concurrent change wins), sent once, at once: the caller has waited
/// for the Retry-After gate where a stop could cancel the wait.
async fn write(ctx: &Sweeper<'_>, ident: &Identity) -> cilium_gc_cluster::cluster::Answer {
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
pub(crate) fn rfc3339_nano(t: Timestamp) -> String {
    t.to_string()
}

enum Reread {
    Fresh(Box<Identity>),
    Gone,
    Failed(String),
}

async fn reread(ctx: &Sweeper<'_>, name: &str) -> Reread {
    let a = ctx
        .api
        .get(
            &Kind::Identity.object_path(name),
            ctx.cfg.pacing.max_retries,
        )
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
        assert_eq!(
            cilium_gc_cluster::policy::parse_mark(&rfc3339_nano(t)),
            Some(t)
        );
    }
}
