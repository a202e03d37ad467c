//! The plan a scan builds (what to delete, what to mark, which report item
//! each one is) and what becomes of it: refused, or the sweep's results.

use jiff::Timestamp;

use crate::report::{ErrorKind, Item, ItemsMode, Mode, Outcome};
use crate::settings::GcSettings;
use crate::sweep::{ItemResult, Target};
use cilium_gc_cluster::cluster::Endpoint;
use cilium_gc_cluster::model::{Identity, Malformed};
use cilium_gc_cluster::policy::{self, Policy, Reason};
use cilium_gc_cluster::usage::UsageHandle;

use super::census::Census;
use super::draft::Draft;
use super::observer::{PendingWrites, Ui};

/// What the scan decided: counts, items, and what to write.
#[derive(Default)]
pub(super) struct Plan {
    /// The candidates kept for a sweep after the list; empty while `feed`
    /// is set.
    pub(super) candidates: Vec<Target>,
    /// Where candidates go as they are decided when the deletes start
    /// during the list (see `stream`); their report indices are still kept
    /// in `candidate_items`, in the same order.
    pub(super) feed: Option<tokio::sync::mpsc::UnboundedSender<Target>>,
    pub(super) candidate_items: Vec<Option<usize>>,
    pub(super) to_mark: Vec<Target>,
    pub(super) mark_items: Vec<Option<usize>>,
    /// The whole list as the forecast reads it, whatever the narrowing.
    pub(super) census: Census,
}

impl Plan {
    pub(super) fn take(
        &mut self,
        item: Result<Identity, Malformed>,
        usage: &UsageHandle,
        policy: &Policy,
        now: Timestamp,
        s: &GcSettings,
        run: &mut Draft,
    ) {
        let identity = match item {
            Ok(i) => i,
            Err(bad) => {
                run.summary.malformed += 1;
                let name = bad.name.as_deref().unwrap_or("<no name>");
                run.error(
                    ErrorKind::MalformedObject,
                    format!("ciliumidentity {name}: {} (skipped)", bad.problem),
                );
                return;
            }
        };
        run.summary.scanned += 1;
        let refs = identity.numeric_id().map_or(0, |id| usage.refs(id));
        // Narrowing is judged here, once; the sweep re-judges only usage
        // and the mark (`policy::decide`), so what waits for it is a
        // `Target`: no labels, namespace or managedFields.
        let d = policy::plan(&identity, refs, policy, now);
        run.summary.reasons.add(d.reason);
        self.census
            .count(&identity, d.reason, &policy.rules.local_range);
        let candidate = d.is_candidate();
        let markable = s.mark && d.reason == Reason::Unmarked;
        let keep = match s.scan.items {
            ItemsMode::All => true,
            ItemsMode::Unused => d.reason != Reason::InUse,
            ItemsMode::Actionable => candidate || markable,
            ItemsMode::None => false,
        };
        let index = keep.then(|| {
            run.items.push(Item {
                name: identity.name.clone(),
                id: identity.numeric_id(),
                namespace: identity.namespace.clone(),
                created_at: identity.created_at,
                marked_at: d.marked_at,
                reason: d.reason,
                outcome: Outcome::Skipped,
                attempts: 0,
                conflicts: Vec::new(),
                last_error: None,
            });
            run.items.len() - 1
        });
        if candidate {
            self.candidate_items.push(index);
            match &self.feed {
                // The sweep holds the receiver until the feed is dropped.
                Some(feed) => drop(feed.send(identity.into())),
                None => self.candidates.push(identity.into()),
            }
        } else if markable {
            self.to_mark.push(identity.into());
            self.mark_items.push(index);
        }
    }
}

pub(super) fn mark_not_attempted(run: &mut Draft, plan: &Plan) {
    for i in plan
        .candidate_items
        .iter()
        .chain(&plan.mark_items)
        .flatten()
    {
        run.items[*i].outcome = Outcome::NotAttempted;
    }
}

/// `--max-deletions` / `--max-percent`: why the plan is too big, if it is.
pub(super) fn blast_radius(candidates: u64, scanned: u64, s: &GcSettings) -> Option<String> {
    if let Some(max) = s.max_deletions {
        if candidates > max {
            return Some(format!(
                "{candidates} identities would be deleted, more than --max-deletions {max}: nothing was deleted"
            ));
        }
    }
    if let Some(p) = s.max_percent {
        let share = if scanned == 0 {
            0.0
        } else {
            candidates as f64 * 100.0 / scanned as f64
        };
        if share > p {
            return Some(format!(
                "{candidates} of {scanned} identities ({share:.1}%) would be deleted, more than --max-percent {p}: nothing was deleted"
            ));
        }
    }
    None
}

/// Ask the person watching unless `--yes` (or a dry run, which changes
/// nothing); without anyone to ask, the answer is no. The observer is asked
/// on a thread of its own, so a signal at the prompt stops the run at once
/// (that thread is left blocked on its input and ends with the process).
pub(super) async fn confirm(
    s: &GcSettings,
    plan: &Plan,
    endpoint: &Endpoint,
    run_scanned: u64,
    ui: &Ui,
) -> bool {
    if s.yes
        || s.mode == Mode::DryRunServer
        || (plan.candidates.is_empty() && plan.to_mark.is_empty())
    {
        return true;
    }
    let pending = PendingWrites {
        server: endpoint.server.clone(),
        context: endpoint.context.clone(),
        scanned: run_scanned,
        deletes: plan.candidates.len() as u64,
        marks: if s.mark { plan.to_mark.len() as u64 } else { 0 },
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let observer = ui.observer.clone();
    let asked = std::thread::Builder::new()
        .name("confirm".into())
        .spawn(move || {
            let _ = tx.send(observer.confirm_writes(&pending));
        });
    if asked.is_err() {
        return false;
    }
    matches!(rx.await, Ok(Some(true)))
}

pub(super) fn apply(run: &mut Draft, indices: &[Option<usize>], results: Vec<ItemResult>) {
    let dry_run = run.mode == Mode::DryRunServer;
    for (index, r) in indices.iter().zip(results) {
        let s = &mut run.summary;
        match r.outcome {
            // The server validated a dry-run delete and applied nothing.
            Outcome::Deleted if dry_run => s.validated += 1,
            Outcome::Deleted => s.deleted += 1,
            Outcome::AlreadyGone => s.already_gone += 1,
            Outcome::Reclaimed => s.reclaimed += 1,
            Outcome::Failed => s.failed += 1,
            Outcome::Marked => s.marked += 1,
            Outcome::NotAttempted => s.not_attempted += 1,
            Outcome::Skipped | Outcome::WouldDelete => {}
        }
        if let Some(i) = index {
            let item = &mut run.items[*i];
            item.outcome = r.outcome;
            item.reason = r.reason;
            item.attempts = r.attempts;
            item.conflicts = r.conflicts;
            item.last_error = r.last_error;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{ScanSettings, WriteSettings};
    use cilium_gc_cluster::connect::ConnectSettings;
    use std::time::Duration;

    const NOW: &str = "2026-06-01T12:00:00Z";

    fn identity(id: u64, mark: Option<&str>) -> Identity {
        Identity {
            name: id.to_string(),
            uid: format!("uid-{id}"),
            resource_version: "1".into(),
            created_at: Some("2026-05-01T00:00:00Z".parse().unwrap()),
            labels: Default::default(),
            namespace: Some("prod".into()),
            mark: mark.map(str::to_owned),
            last_change: None,
        }
    }

    fn policy() -> Policy {
        Policy {
            rules: policy::Rules {
                local_range: policy::local_range(0, 255),
                heartbeat_timeout: Duration::from_secs(30 * 60),
            },
            narrowing: Default::default(),
        }
    }

    /// Settings of a delete (`mark`: `--mark`) keeping `items` in the report.
    fn settings(items: ItemsMode, mark: bool) -> GcSettings {
        let scan = ScanSettings {
            items,
            ..ScanSettings::default()
        };
        GcSettings::for_delete(
            scan,
            WriteSettings {
                mark,
                ..WriteSettings::default()
            },
        )
        .unwrap()
    }

    /// One of each: in use (1000), stale (1001, marked a day before NOW),
    /// unmarked (1002), marked too recently (1003); then a malformed object.
    fn planned(s: &GcSettings) -> (Plan, Draft) {
        let usage = cilium_gc_cluster::usage::UsageHandle::referencing(&[1000]);
        let (mut plan, mut run) = (Plan::default(), Draft::new(s, &ConnectSettings::default()));
        let day_before = Some("2026-05-31T12:00:00Z");
        let just_now = Some("2026-06-01T11:59:00Z");
        let now: Timestamp = NOW.parse().unwrap();
        for i in [
            identity(1000, day_before),
            identity(1001, day_before),
            identity(1002, None),
            identity(1003, just_now),
        ] {
            plan.take(Ok(i), &usage, &policy(), now, s, &mut run);
        }
        let bad = Malformed {
            kind: cilium_gc_cluster::model::Kind::Identity,
            name: Some("bad".into()),
            namespace: None,
            problem: "no uid".into(),
        };
        plan.take(Err(bad), &usage, &policy(), now, s, &mut run);
        (plan, run)
    }

    fn names(targets: &[Target]) -> Vec<&str> {
        targets.iter().map(Target::name).collect()
    }

    /// Every object counted once, by what became of it; only the stale one
    /// is a candidate; the report's items and the plan's indices agree.
    #[test]
    fn take_counts_each_object_and_plans_only_the_stale() {
        let s = settings(ItemsMode::All, false);
        let (plan, run) = planned(&s);
        assert_eq!((run.summary.scanned, run.summary.malformed), (4, 1));
        assert_eq!(run.errors.len(), 1, "the malformed object is named");
        assert!(run.errors[0].message.contains("ciliumidentity bad: no uid"));
        assert_eq!(names(&plan.candidates), ["1001"]);
        assert!(plan.to_mark.is_empty(), "no --mark");
        let kept: Vec<&str> = run.items.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(kept, ["1000", "1001", "1002", "1003"]);
        assert_eq!(plan.candidate_items, [Some(1)], "the stale one's item");
        let r = &run.summary.reasons;
        assert_eq!(
            (r.in_use, r.stale, r.unmarked, r.mark_too_recent),
            (1, 1, 1, 1)
        );
    }

    /// `--mark` marks the unmarked unused one only: never one in use, nor
    /// one already marked.
    #[test]
    fn mark_takes_only_the_unmarked_unused() {
        let s = settings(ItemsMode::All, true);
        let (plan, run) = planned(&s);
        assert_eq!(names(&plan.to_mark), ["1002"]);
        assert_eq!(plan.mark_items, [Some(2)]);
        assert_eq!(names(&plan.candidates), ["1001"]);
        assert_eq!(run.items[2].name, "1002");
    }

    /// What the report keeps: unused drops only what is in use;
    /// actionable keeps what will be written (deleted, or marked with
    /// `--mark`); none keeps nothing, and the plan still writes.
    #[test]
    fn items_modes_keep_what_they_say() {
        let kept = |items, mark| {
            let (plan, run) = planned(&settings(items, mark));
            let names: Vec<String> = run.items.iter().map(|i| i.name.clone()).collect();
            (names, plan.candidate_items, plan.mark_items)
        };
        assert_eq!(kept(ItemsMode::Unused, false).0, ["1001", "1002", "1003"]);
        assert_eq!(kept(ItemsMode::Actionable, false).0, ["1001"]);
        let (names, candidates, marks) = kept(ItemsMode::Actionable, true);
        assert_eq!(names, ["1001", "1002"]);
        assert_eq!((candidates, marks), (vec![Some(0)], vec![Some(1)]));
        let (names, candidates, _) = kept(ItemsMode::None, false);
        assert!(names.is_empty());
        assert_eq!(candidates, [None], "written, not reported");
    }

    /// The sweep's results land in the summary (one count per outcome; a
    /// dry run's deletes are "validated") and in the reported items, by
    /// the plan's indices; an unreported one is counted only.
    #[test]
    fn apply_counts_every_outcome_and_fills_the_reported_items() {
        let s = settings(ItemsMode::All, true);
        let (_, mut run) = planned(&s);
        let result = |outcome, attempts| ItemResult {
            outcome,
            reason: Reason::Stale,
            attempts,
            conflicts: Vec::new(),
            last_error: (attempts > 1).then(|| "409".to_string()),
        };
        let outcomes = [
            Outcome::Deleted,
            Outcome::AlreadyGone,
            Outcome::Reclaimed,
            Outcome::Failed,
            Outcome::Marked,
            Outcome::NotAttempted,
            Outcome::Deleted,
        ];
        let indices = [Some(0), Some(1), Some(2), Some(3), None, None, None];
        let results = outcomes
            .iter()
            .zip(1..)
            .map(|(o, n)| result(*o, n))
            .collect();
        apply(&mut run, &indices, results);
        let c = &run.summary;
        assert_eq!(
            (
                c.deleted,
                c.already_gone,
                c.reclaimed,
                c.failed,
                c.marked,
                c.not_attempted
            ),
            (2, 1, 1, 1, 1, 1)
        );
        assert_eq!(c.validated, 0);
        let items: Vec<(Outcome, u32, bool)> = run
            .items
            .iter()
            .map(|i| (i.outcome, i.attempts, i.last_error.is_some()))
            .collect();
        assert_eq!(
            items,
            [
                (Outcome::Deleted, 1, false),
                (Outcome::AlreadyGone, 2, true),
                (Outcome::Reclaimed, 3, true),
                (Outcome::Failed, 4, true),
            ]
        );
        assert!(run.items.iter().all(|i| i.reason == Reason::Stale));
        // A dry run's deletes are validated, not deleted.
        let dry = GcSettings {
            mode: Mode::DryRunServer,
            ..settings(ItemsMode::All, false)
        };
        let (_, mut run) = planned(&dry);
        apply(&mut run, &[Some(1)], vec![result(Outcome::Deleted, 1)]);
        assert_eq!((run.summary.validated, run.summary.deleted), (1, 0));
    }

    /// A refused run reports every planned write not attempted, and
    /// nothing else.
    #[test]
    fn a_refused_plan_is_not_attempted() {
        let s = settings(ItemsMode::All, true);
        let (plan, mut run) = planned(&s);
        mark_not_attempted(&mut run, &plan);
        let outcomes: Vec<Outcome> = run.items.iter().map(|i| i.outcome).collect();
        assert_eq!(
            outcomes,
            [
                Outcome::Skipped,
                Outcome::NotAttempted,
                Outcome::NotAttempted,
                Outcome::Skipped
            ]
        );
    }

    /// An observer that gives one answer and keeps what it was asked.
    struct Answers {
        answer: Option<bool>,
        asked: std::sync::Arc<std::sync::Mutex<Vec<PendingWrites>>>,
    }

    impl super::super::Observer for Answers {
        fn confirm_writes(&self, pending: &PendingWrites) -> Option<bool> {
            self.asked.lock().unwrap().push(pending.clone());
            self.answer
        }
    }

    /// `confirm` with an observer answering `answer`: what it returned and
    /// what the observer was asked.
    async fn confirmed(
        s: &GcSettings,
        plan: &Plan,
        answer: Option<bool>,
    ) -> (bool, Vec<PendingWrites>) {
        let asked = std::sync::Arc::default();
        let ui = Ui::new(Answers {
            answer,
            asked: std::sync::Arc::clone(&asked),
        });
        let endpoint = Endpoint {
            server: "https://api.example".into(),
            context: Some("prod".into()),
            warnings: Vec::new(),
            timeout: None,
        };
        let ok = confirm(s, plan, &endpoint, 5, &ui).await;
        let asked = asked.lock().unwrap().clone();
        (ok, asked)
    }

    /// The prompt before the first write: `--yes`, a server dry run and a
    /// plan with nothing to write go ahead without asking; otherwise the
    /// observer's answer decides, with no answer (nobody to ask) a no. The
    /// question names the deletes, and the marks only with `--mark`.
    #[tokio::test]
    async fn confirm_asks_unless_yes_dry_run_or_nothing_to_write() {
        let delete = settings(ItemsMode::All, false);
        let (plan, _) = planned(&delete);
        assert_eq!(plan.candidates.len(), 1, "the premise: one delete");
        let yes = GcSettings {
            yes: true,
            ..settings(ItemsMode::All, false)
        };
        let dry = GcSettings {
            mode: Mode::DryRunServer,
            ..settings(ItemsMode::All, false)
        };
        for s in [&yes, &dry] {
            let (ok, asked) = confirmed(s, &plan, Some(false)).await;
            assert!(ok && asked.is_empty(), "{:?} yes={}", s.mode, s.yes);
        }
        let (ok, asked) = confirmed(&delete, &Plan::default(), Some(false)).await;
        assert!(ok && asked.is_empty(), "nothing to write");
        let (ok, asked) = confirmed(&delete, &plan, Some(false)).await;
        assert!(!ok);
        let want = PendingWrites {
            server: "https://api.example".into(),
            context: Some("prod".into()),
            scanned: 5,
            deletes: 1,
            marks: 0,
        };
        assert_eq!(asked, std::slice::from_ref(&want));
        assert!(confirmed(&delete, &plan, Some(true)).await.0);
        assert!(!confirmed(&delete, &plan, None).await.0, "nobody to ask");
        // Only marks to write: still asked.
        let mark = settings(ItemsMode::All, true);
        let (mut plan, _) = planned(&mark);
        plan.candidates.clear();
        let (ok, asked) = confirmed(&mark, &plan, Some(false)).await;
        assert!(!ok);
        let marks_only = PendingWrites {
            deletes: 0,
            marks: 1,
            ..want
        };
        assert_eq!(asked, [marks_only]);
    }

    fn limits(max_deletions: Option<u64>, max_percent: Option<f64>) -> GcSettings {
        let w = WriteSettings {
            max_deletions,
            max_percent,
            ..WriteSettings::default()
        };
        GcSettings::for_delete(ScanSettings::default(), w).unwrap()
    }

    #[test]
    fn blast_radius_limits() {
        assert!(blast_radius(10, 100, &limits(None, None)).is_none());
        assert!(blast_radius(10, 100, &limits(Some(10), None)).is_none());
        assert!(blast_radius(11, 100, &limits(Some(10), None))
            .unwrap()
            .contains("--max-deletions 10"));
        assert!(blast_radius(50, 100, &limits(None, Some(50.0))).is_none());
        assert!(blast_radius(51, 100, &limits(None, Some(50.0)))
            .unwrap()
            .contains("51.0%"));
        assert!(blast_radius(0, 0, &limits(None, Some(1.0))).is_none());
    }
}
