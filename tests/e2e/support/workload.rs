//! The workload of the real-Cilium tests: stale identities left by agents
//! running Cilium's own code (label sets `old-N`, whose pods all ended), and
//! agents churning pods over a small pool of label sets (`warm-N`) and jobs
//! with label sets of their own (`job-N`), so that
//! Cilium's allocator strips the operator's marks (bumping resourceVersions)
//! while the operator and the plugin collect.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::audit::{Actor, Audit, Resource, Verb};
use crate::support::cluster::Cluster;
use crate::support::operator::{Agents, AgentsSummary, GcLog, Operator, Version, World};
use crate::support::{finish, plugin, report};

/// The operator's GC, made quick: a pass every 2 s, an identity unused for
/// 2 s is marked, then deleted a pass later, at most 4 deletes a second (so
/// a pass over a few hundred identities lasts about a minute, as a pass over
/// 65k lasts minutes at the default 2,500/min).
pub const GC_FLAGS: [&str; 4] = [
    "--identity-gc-interval=2s",
    "--identity-heartbeat-timeout=2s",
    "--identity-gc-rate-limit=4",
    "--identity-gc-rate-interval=1s",
];

/// The silence after an operator's write that tells its pass ended: four
/// steps of its rate limit (250 ms), half its GC interval.
pub const PASS_GAP: Duration = Duration::from_secs(1);

/// The plugin's heartbeat timeout in these tests (the operator's is 2 s;
/// under 5m needs --allow-short-heartbeat-timeout).
pub const PLUGIN_TIMEOUT: &str = "5s";

/// Four agents start 50 pods each over 200 label sets `old-N` and end them
/// all: the identities they allocated are unused. Returns their names.
pub async fn seed_old(cluster: &Cluster, version: Version) -> BTreeSet<String> {
    let agents = Agents {
        agents: 4,
        pods: 50,
        churn: Duration::ZERO,
        duration: Duration::from_secs(120),
        label_sets: 200,
        label_prefix: "old".into(),
        end_all: true,
        seed: 11,
        ..Agents::default()
    };
    let s = agents.run(cluster, version).await;
    assert_eq!(s.pods_running, 0, "every old pod ended: {s:?}");
    assert!(
        s.new_identities > 50,
        "the agents allocated identities: {s:?}"
    );
    // The operator may be running already: an old identity unused for its
    // heartbeat timeout (an agent that ended its pods early) may be deleted
    // before the read. Deletes counted in the audit log before and after it.
    let deleted = || cluster.audit().identity_deletes().count() as u64;
    let before = deleted();
    let world = World::read(&cluster.admin().await).await;
    let old = world.unused("old");
    let after = deleted();
    let read = old.len() as u64;
    assert!(
        (read + before..=read + after).contains(&s.new_identities),
        "one identity per label set used: {read} read, {before}..={after} deleted, {} allocated",
        s.new_identities
    );
    old
}

/// The churn, two groups of agents running Cilium's code at once:
/// - `warm`: 4 agents keep 3 pods each over 300 label sets `warm-N`, each
///   ending one and starting another every 250 ms: a label set comes back
///   about every 20 s, about as long as a pass lasts, so its identity is
///   marked in one pass and reused (Cilium's allocator strips the mark,
///   bumping the resourceVersion) during the next;
/// - `job`: 2 agents run one pod at a time with a label set of its own
///   (`job-N` out of 100,000, like Jobs whose pods carry their job's name),
///   a new one every 400 ms: 5 new identities a second that go stale, a
///   little more than the operator may delete (4/s), so its passes are long
///   (a pass over 65k identities lasts minutes) and agents write during them.
pub fn churn(duration: Duration, seed: u64) -> [Agents; 2] {
    [
        Agents {
            agents: 4,
            pods: 3,
            churn: Duration::from_millis(250),
            duration,
            label_sets: 300,
            label_prefix: "warm".into(),
            seed,
            ..Agents::default()
        },
        Agents {
            agents: 2,
            pods: 1,
            churn: Duration::from_millis(400),
            duration,
            label_sets: 100_000,
            label_prefix: "job".into(),
            seed: seed + 1,
            ..Agents::default()
        },
    ]
}

/// Start [`churn`] in the background; the task returns both summaries.
/// Both groups stop early (SIGTERM) when `stop` turns true.
pub fn spawn_churn(
    cluster: &Cluster,
    version: Version,
    duration: Duration,
    seed: u64,
    stop: Option<tokio::sync::watch::Receiver<bool>>,
) -> tokio::task::JoinHandle<[AgentsSummary; 2]> {
    let dir = cluster.dir().to_path_buf();
    let kubeconfig = cluster.admin_kubeconfig();
    tokio::spawn(async move {
        let [warm, jobs] = churn(duration, seed);
        let (w, j) = tokio::join!(
            warm.run_at(&dir, &kubeconfig, version, stop.clone()),
            jobs.run_at(&dir, &kubeconfig, version, stop)
        );
        [w, j]
    })
}

/// Identities no endpoint uses, of the seeded old ones and the jobs'
/// (counted by label set: a freed old id may carry a job's identity since).
pub fn stale_now(world: &World) -> usize {
    world.unused("old").len() + world.unused("job").len()
}

/// One look at the cluster during the churn.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Duration,
    /// Old identities still on the server.
    pub old_left: usize,
    /// Unused identities: the old ones left and the ended jobs'.
    pub stale: usize,
    /// Passes the operator's log shows ended by a failed write.
    pub passes_ended: usize,
    /// `cilium_operator_identity_gc_runs{outcome="success"}`.
    pub successful_runs: f64,
}

/// What the operator did during a churn.
#[derive(Debug, Clone)]
pub struct ChurnRun {
    pub version: String,
    pub old: usize,
    pub samples: Vec<Sample>,
    pub warm: AgentsSummary,
    pub jobs: AgentsSummary,
    pub log: GcLog,
}

impl fmt::Display for ChurnRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "cilium-operator {}: {} stale identities, then agents on Cilium's code churning: {} pods over 300 label sets ({} marks stripped by Cilium's allocator, {} more met a 409), {} job pods with a label set each",
            self.version,
            self.old,
            self.warm.pods_started,
            self.warm.requests("PUT", "ciliumidentities", "200"),
            self.warm.requests("PUT", "ciliumidentities", "409"),
            self.jobs.pods_started,
        )?;
        for s in &self.samples {
            writeln!(
                f,
                "  t={:>3}s unused identities {:>3} (old {:>3}/{}), passes ended by errors {:>3}, passes completed {}",
                s.at.as_secs(),
                s.stale,
                s.old_left,
                self.old,
                s.passes_ended,
                s.successful_runs
            )?;
        }
        write!(
            f,
            "  passes ended: mark update {:?}, delete {:?}; 409s on delete skipped: {}",
            self.log.mark_errors, self.log.delete_errors, self.log.conflicts_skipped
        )
    }
}

impl ChurnRun {
    /// What the display says of the workload holds: Cilium's allocator
    /// stripped marks, job pods ran, the samples were taken.
    pub fn assert_premise(&self) {
        assert!(
            self.warm.requests("PUT", "ciliumidentities", "200") > 0,
            "Cilium's allocator stripped marks: {:?}",
            self.warm.requests
        );
        assert!(self.jobs.pods_started > 0, "job pods ran: {:?}", self.jobs);
        assert!(!self.samples.is_empty(), "the churn was sampled");
    }

    /// Passes the operator began during the churn, at least: those a failed
    /// write ended and those it completed (the last sample).
    pub fn passes_seen(&self) -> f64 {
        self.samples
            .last()
            .map_or(0.0, |s| s.passes_ended as f64 + s.successful_runs)
    }
}

/// Churn under the operator for `min`, then on until `enough` holds of its
/// log (at most `max`), looking every 5 s at how many of the old identities
/// are left and how its passes end.
pub async fn churn_under_operator(
    cluster: &Cluster,
    operator: &Operator,
    version: Version,
    old: &BTreeSet<String>,
    (min, max): (Duration, Duration),
    enough: impl Fn(&GcLog) -> bool,
) -> ChurnRun {
    let client = cluster.admin().await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let churn = spawn_churn(cluster, version, max, 20, Some(stop_rx));
    let start = Instant::now();
    let mut samples = Vec::new();
    while !churn.is_finished() {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let world = World::read(&client).await;
        samples.push(Sample {
            at: start.elapsed(),
            old_left: world.of_label("old").len(),
            stale: stale_now(&world),
            passes_ended: operator.passes().passes_ended(),
            successful_runs: operator.metrics().successful_runs(),
        });
        if start.elapsed() >= min && enough(&operator.passes()) {
            let _ = stop_tx.send(true);
        }
    }
    let [warm, jobs] = churn.await.expect("agents task");
    ChurnRun {
        version: crate::support::operator::release(version),
        old: old.len(),
        samples,
        warm,
        jobs,
        log: operator.passes(),
    }
}

/// The seed's bug, which every 1.15 test builds on: churn under
/// cilium-operator 1.15 for at least `min`, then on until one of its passes
/// has ended at a 409 (at most 180 s: on a loaded machine passes are slower,
/// and none met a 409 in 90 s once), and assert that premise from its own log.
pub async fn churn_until_a_1_15_pass_conflicts(
    cluster: &Cluster,
    operator: &Operator,
    old: &BTreeSet<String>,
    min: Duration,
) -> ChurnRun {
    let ended_at_409 = |log: &GcLog| log.mark_errors.conflict + log.delete_errors.conflict >= 1;
    let window = (min, Duration::from_secs(180));
    let run =
        churn_under_operator(cluster, operator, Version::V115, old, window, ended_at_409).await;
    eprintln!("{run}");
    run.assert_premise();
    let log = operator.passes();
    assert!(
        ended_at_409(&log),
        "1.15.6's passes end at 409s: {:?} {:?}",
        log.mark_errors,
        log.delete_errors
    );
    run
}

/// The seed's bug as 1.15 alone shows it: churn under cilium-operator 1.15
/// for at least `min`, then on until one of its passes has ended at a 409
/// **on its delete** (a 409 on the mark update, which current releases
/// still end a pass at, does not count), at most 180 s. Asserts that
/// premise from its log and from the server's audit log (an operator delete
/// answered 409).
pub async fn churn_until_a_1_15_delete_conflicts(
    cluster: &Cluster,
    operator: &Operator,
    old: &BTreeSet<String>,
    min: Duration,
) -> ChurnRun {
    let on_delete = |log: &GcLog| log.delete_errors.conflict >= 1;
    let window = (min, Duration::from_secs(180));
    let run = churn_under_operator(cluster, operator, Version::V115, old, window, on_delete).await;
    eprintln!("{run}");
    run.assert_premise();
    assert!(
        on_delete(&run.log),
        "a 1.15.6 pass ended at a 409 on delete: {:?}",
        run.log.delete_errors
    );
    let conflicts = operator_identity_writes(&cluster.audit(), Verb::Delete, 409);
    assert!(
        conflicts >= 1,
        "the audit log shows the operator's delete answered 409"
    );
    run
}

/// The operator's passes around its deletes answered 409, told apart by
/// pass boundaries in the audit log. A 409 is judged when identities were
/// due at that instant (their last write was the operator's own mark, made
/// at least the heartbeat timeout before, none written since) besides the
/// one refused: a pass that goes on deletes the next of them within the
/// rate limit (4/s here: 250 ms); a pass that stopped writes nothing more
/// until its next pass, one GC interval later. The seed's defect is a pass
/// that met a 409 on a delete and stopped, with due identities left that a
/// later pass deleted: at the default 15 m interval, left 15 m per pass.
pub struct Passes409 {
    /// The operator's deletes answered 409 with other identities due.
    pub met: usize,
    /// Of those, the passes that stopped there (no operator write to an
    /// identity within `gap`) and left due identities a later pass deleted:
    /// how many each left.
    pub stopped: Vec<usize>,
}

impl fmt::Display for Passes409 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "audit log: {} operator deletes answered 409 with other identities due; {} passes stopped there, leaving {:?} due identities that only a later pass deleted",
            self.met,
            self.stopped.len(),
            self.stopped
        )
    }
}

/// [`Passes409`] from the audit log: `heartbeat` is the operator's
/// timeout, `gap` the silence that marks a pass's end (longer than the
/// rate limit's step, shorter than the GC interval).
pub fn passes_at_409s_on_delete(audit: &Audit, heartbeat: Duration, gap: Duration) -> Passes409 {
    let ours = |w: &&crate::support::audit::Write| {
        w.resource == Resource::Identity && w.actor == Actor::Operator
    };
    let heartbeat = jiff::SignedDuration::try_from(heartbeat).expect("a short heartbeat");
    let gap = jiff::SignedDuration::try_from(gap).expect("a short gap");
    let mut out = Passes409 {
        met: 0,
        stopped: Vec::new(),
    };
    let refused = audit
        .writes()
        .iter()
        .filter(ours)
        .filter(|w| w.verb == Verb::Delete && w.code == 409);
    for r in refused {
        let due = due_at(audit, r.done, heartbeat, &r.name);
        if due.is_empty() {
            continue;
        }
        out.met += 1;
        let next = audit
            .writes()
            .iter()
            .filter(ours)
            .find(|w| w.received > r.done);
        if next.is_some_and(|n| n.received < r.done + gap) {
            continue;
        }
        let left = audit
            .identity_deletes()
            .filter(|w| w.actor == Actor::Operator && w.done > r.done)
            .filter(|w| due.contains(w.name.as_str()))
            .count();
        if left > 0 {
            out.stopped.push(left);
        }
    }
    out
}

/// Identities (other than `but`) due at `at`: their last write before it
/// was the operator's own mark, made at least `heartbeat` before.
fn due_at<'a>(
    audit: &'a Audit,
    at: jiff::Timestamp,
    heartbeat: jiff::SignedDuration,
    but: &str,
) -> BTreeSet<&'a str> {
    let mut last = std::collections::BTreeMap::new();
    for w in audit.writes().iter() {
        if w.resource == Resource::Identity && w.took_effect() && w.done < at {
            last.insert(w.name.as_str(), w);
        }
    }
    last.into_iter()
        .filter(|(name, w)| {
            let marked = w.object.as_ref().is_some_and(|o| {
                o["metadata"]["annotations"][crate::support::objects::HEARTBEAT].is_string()
            });
            *name != but
                && w.actor == Actor::Operator
                && matches!(w.verb, Verb::Update | Verb::Patch)
                && marked
                && w.done + heartbeat <= at
        })
        .map(|(name, _)| name)
        .collect()
}

/// The operator's writes of `verb` to CiliumIdentities the server answered `code`.
pub fn operator_identity_writes(audit: &Audit, verb: Verb, code: u16) -> usize {
    audit
        .writes()
        .iter()
        .filter(|w| w.actor == Actor::Operator && w.resource == Resource::Identity)
        .filter(|w| w.verb == verb && w.code == code)
        .count()
}

/// A `delete` by the plugin as `cilium-gc` while the agents churn.
pub struct Verdict {
    /// When the plugin was started (right before `before` was read).
    pub started: jiff::Timestamp,
    /// The heartbeat timeout it ran with.
    pub timeout: Duration,
    /// The server's audit log, read once the churn ended.
    pub audit: Audit,
    pub report: Value,
    pub exit: Option<i32>,
    pub before: World,
    pub after: World,
    pub old: BTreeSet<String>,
    pub agents: [AgentsSummary; 2],
}

/// Run `delete --yes -o json` as `cilium-gc` (heartbeat timeout
/// [`PLUGIN_TIMEOUT`]) while the churn goes on, then let the churn end.
pub async fn plugin_under_churn(
    cluster: &Cluster,
    version: Version,
    old: &BTreeSet<String>,
    extra: &[&str],
) -> Verdict {
    plugin_under_churn_after(cluster, version, old, PLUGIN_TIMEOUT_DURATION, extra).await
}

/// [`plugin_under_churn`] with another heartbeat timeout: the verdict
/// judges the run's deletes by it.
pub async fn plugin_under_churn_after(
    cluster: &Cluster,
    version: Version,
    old: &BTreeSet<String>,
    timeout: Duration,
    extra: &[&str],
) -> Verdict {
    let client = cluster.admin().await;
    let churn = spawn_churn(cluster, version, Duration::from_secs(30), 30, None);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = jiff::Timestamp::now();
    let before = World::read(&client).await;
    let mut cmd = plugin();
    cmd.arg("--kubeconfig")
        .arg(cluster.gc_kubeconfig())
        .args(["delete", "--yes", "-o", "json"])
        .args(["--heartbeat-timeout", &format!("{}s", timeout.as_secs())])
        .arg("--allow-short-heartbeat-timeout")
        .args(extra);
    let out = finish(cmd).await;
    let agents = churn.await.expect("agents task");
    let after = World::read(&client).await;
    Verdict {
        started,
        timeout,
        audit: cluster.audit(),
        report: report(&out),
        exit: out.status.code(),
        before,
        after,
        old: old.clone(),
        agents,
    }
}

impl Verdict {
    /// Identities the run deleted that are on the server again under the
    /// same name (a new uid), with the same label set: Cilium's allocator,
    /// still holding the key locally, re-creates a master key it sees
    /// deleted (`WithMasterKeyProtection`). (A new uid with another label set
    /// is a new identity that was given the freed id.)
    pub fn recreated(&self) -> BTreeSet<String> {
        self.names_with("deleted")
            .into_iter()
            .filter(
                |n| match (self.before.identities.get(n), self.after.identities.get(n)) {
                    (Some(b), Some(a)) => a.app == b.app,
                    _ => false,
                },
            )
            .collect()
    }

    /// Deleted identities whose id a new identity (another label set) took.
    pub fn id_reused(&self) -> usize {
        self.names_with("deleted")
            .into_iter()
            .filter(
                |n| match (self.before.identities.get(n), self.after.identities.get(n)) {
                    (Some(b), Some(a)) => a.app != b.app,
                    _ => false,
                },
            )
            .count()
    }

    /// The report's items.
    pub fn items(&self) -> &[Value] {
        self.report["items"].as_array().map_or(&[], Vec::as_slice)
    }

    /// Names of the report's items with `outcome` (`deleted`, `already-gone`).
    pub fn names_with(&self, outcome: &str) -> BTreeSet<String> {
        self.items()
            .iter()
            .filter(|i| i["outcome"] == outcome)
            .filter_map(|i| i["name"].as_str().map(str::to_string))
            .collect()
    }

    /// `summary.<field>`.
    pub fn summary(&self, field: &str) -> u64 {
        crate::support::summary(&self.report, field)
    }

    /// Nothing in use deleted, every stale identity gone, the report equal
    /// to the server, each conflict re-decided.
    pub fn assert_sound(&self) {
        assert_eq!(
            self.exit,
            Some(0),
            "the run succeeded: {}",
            self.report["summary"]
        );
        assert_eq!(self.summary("failed"), 0, "{}", self.report["summary"]);
        assert_eq!(
            self.summary("notAttempted"),
            0,
            "{}",
            self.report["summary"]
        );
        // Nothing in use was deleted: every endpoint's identity exists.
        assert!(
            self.after.dangling().is_empty(),
            "identities in use were deleted: {:?}",
            self.after.dangling()
        );
        for id in self.agents.iter().flat_map(|a| &a.held_identities) {
            assert!(
                self.after.identities.contains_key(&id.to_string()),
                "identity {id} the agents hold was deleted"
            );
        }
        // The report equals the server.
        for name in self
            .names_with("deleted")
            .iter()
            .chain(&self.names_with("already-gone"))
        {
            if let Some(now) = self.after.identities.get(name) {
                assert_ne!(
                    Some(&now.uid),
                    self.before.identities.get(name).map(|i| &i.uid),
                    "{name} reported gone, yet the same object is on the server"
                );
            }
        }
        // A reclaimed identity was left alone by the plugin. It may be gone
        // by the time the churn ends: the operator, running beside it, can
        // delete it once its pods went away again. The audit log says who:
        // each deleted name, and whether the plugin was among its deleters.
        let mut deleted: BTreeMap<&str, bool> = BTreeMap::new();
        for w in self.audit.identity_deletes() {
            *deleted.entry(w.name.as_str()).or_default() |= w.actor == Actor::Plugin;
        }
        for name in &self.names_with("reclaimed") {
            if self.after.identities.contains_key(name) {
                continue;
            }
            match deleted.get(name.as_str()) {
                Some(false) => {}
                Some(true) => panic!("{name} reported reclaimed, yet the plugin deleted it"),
                None => panic!("{name} reported reclaimed, yet gone with no delete on record"),
            }
        }
        // Every stale old identity (no agent uses their label sets any more)
        // the run planned is gone: none was reclaimed.
        let planned: BTreeSet<String> = self
            .items()
            .iter()
            .filter(|i| i["outcome"] != "skipped")
            .filter_map(|i| i["name"].as_str().map(str::to_string))
            .collect();
        for name in planned.intersection(&self.old) {
            assert!(
                self.after.identities.get(name).map(|i| &i.uid)
                    != self.before.identities.get(name).map(|i| &i.uid),
                "stale {name} left"
            );
        }
        // Each conflict was re-decided: an item that met a 409 ended
        // deleted, reclaimed or already gone.
        for item in self.items() {
            if item["conflicts"].as_array().is_some_and(|c| !c.is_empty()) {
                assert!(
                    ["deleted", "reclaimed", "already-gone"]
                        .contains(&item["outcome"].as_str().unwrap_or("")),
                    "a conflict was not re-decided: {item}"
                );
            }
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // By label set: a freed old id may carry a new identity since.
        let old_before = self.before.of_label("old").len();
        let old_after = self.after.of_label("old").len();
        write!(
            f,
            "kubectl cilium-gc delete: {} deleted ({} re-created since by an agent's allocator, {} ids taken by new identities), {} already gone, {} reclaimed, {} conflicts re-decided, {} failed; old stale identities {} -> {}; {} unmarked at the plan; {} endpoints left on a deleted identity",
            self.summary("deleted"),
            self.recreated().len(),
            self.id_reused(),
            self.summary("alreadyGone"),
            self.summary("reclaimed"),
            self.summary("conflicts"),
            self.summary("failed"),
            old_before,
            old_after,
            self.report["summary"]["reasons"]["unmarked"],
            self.after.dangling().len(),
        )
    }
}

/// [`PLUGIN_TIMEOUT`] as a duration.
pub const PLUGIN_TIMEOUT_DURATION: Duration = Duration::from_secs(5);

impl Verdict {
    /// Stale identities the run had to delete unless another deleted them
    /// first or an agent took them back: `old-`/`job-` identities no
    /// endpoint used when the plugin started whose mark was already older
    /// than its heartbeat timeout (so older still at its scan).
    pub fn due(&self) -> BTreeSet<String> {
        let Ok(cut) = self
            .started
            .checked_sub(jiff::SignedDuration::try_from(PLUGIN_TIMEOUT_DURATION).unwrap())
        else {
            return BTreeSet::new();
        };
        let unused = self.before.unused("old");
        unused
            .union(&self.before.unused("job"))
            .filter(|n| {
                self.before.identities[*n]
                    .marked_at
                    .is_some_and(|at| at <= cut)
            })
            .cloned()
            .collect()
    }

    /// The lower bound on the plugin's deletes, by the audit log: of the
    /// [`Verdict::due`] identities, the plugin deleted every one that no one
    /// else deleted and no agent wrote (took back) after it started.
    /// Returns the line it prints.
    pub fn assert_lower_bound(&self) -> String {
        let due = self.due();
        let after = |w: &&crate::support::audit::Write| w.received >= self.started;
        let deleted = |actor: &Actor| -> BTreeSet<&str> {
            self.audit
                .identity_deletes()
                .filter(after)
                .filter(|w| &w.actor == actor && due.contains(&w.name))
                .map(|w| w.name.as_str())
                .collect()
        };
        let ours = deleted(&Actor::Plugin);
        let others: BTreeSet<&str> = self
            .audit
            .identity_deletes()
            .filter(after)
            .filter(|w| w.actor != Actor::Plugin && due.contains(&w.name))
            .map(|w| w.name.as_str())
            .collect();
        let taken_back: BTreeSet<&str> = self
            .audit
            .writes()
            .iter()
            .filter(after)
            .filter(|w| w.actor == Actor::Agents && w.resource == Resource::Identity)
            // A mark stripped (an update); a create of a due name can only
            // follow its delete (a new identity given the freed id).
            .filter(|w| w.took_effect() && matches!(w.verb, Verb::Update | Verb::Patch))
            .filter(|w| due.contains(&w.name))
            .map(|w| w.name.as_str())
            .collect();
        let line = format!(
            "lower bound (audit log): {} stale identities due when the plugin started; it deleted {} of them, others {}, agents took back {} (bound {})",
            due.len(),
            ours.len(),
            others.len(),
            taken_back.len(),
            due.len().saturating_sub(others.len() + taken_back.len()),
        );
        assert!(!due.is_empty(), "stale identities were due: {line}");
        for name in &due {
            assert!(
                ours.contains(name.as_str())
                    || others.contains(name.as_str())
                    || taken_back.contains(name.as_str()),
                "{name} was due, and no one deleted or took it back: {line}"
            );
        }
        line
    }

    /// The plugin's and the operator's identity deletes in the whole log
    /// (the churn under the operator and the plugin's run), judged with the
    /// plugin's heartbeat timeout as the window for both. Asserts the
    /// plugin's: at least one delete, each with `{uid, resourceVersion}`
    /// preconditions and the plugin's user agent, none referenced at that instant, none of an identity
    /// an agent wrote within its timeout before.
    pub fn judge_deletes(&self) -> [crate::support::audit::Tally; 2] {
        let judged = self.audit.judge(self.timeout);
        judged.assert_no_plugin_violation();
        self.audit.assert_plugin_deletes_carry_preconditions();
        self.audit.assert_plugin_deletes_name_the_plugin();
        let ours = judged.tally(&Actor::Plugin);
        let operator = judged.tally(&Actor::Operator);
        assert!(ours.deletes > 0, "{ours}");
        assert_eq!(ours.referenced, 0, "{ours}");
        assert_eq!(
            ours.agent_wrote_before, 0,
            "the plugin deleted an identity an agent wrote within its heartbeat timeout: {ours}"
        );
        [ours, operator]
    }
}

/// With `KCG_RECORD=1`, store `figures` under `key` in
/// benches/results/results-real-cilium.json (the raw numbers behind
/// docs/real-cilium.md), keeping what other tests stored.
pub fn record(key: &str, figures: Value) {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if std::env::var("KCG_RECORD").as_deref() != Ok("1") {
        return;
    }
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let path = crate::support::repo_path("benches/results/results-real-cilium.json");
    let mut all: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    all[key] = serde_json::json!({
        "recorded": jiff::Timestamp::now().to_string(),
        "figures": figures,
    });
    let text = serde_json::to_string_pretty(&all).expect("JSON") + "\n";
    std::fs::write(&path, text).expect("benches/results/results-real-cilium.json written");
}
