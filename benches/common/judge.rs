//! Every real-server bench judges its runs as the e2e suite does, before a
//! figure of it counts: the plugin's exit codes ([`expect_exit`]), its
//! report parsed strictly ([`report`]), and the kube-apiserver's audit log
//! of the bench's cluster ([`judge`], with the e2e suite's own reader,
//! `tests/e2e/support/audit.rs`). A violation fails the bench after
//! printing what was violated; a missed goal is only printed ([`goal`]).
//!
//! The plugin is told from other clients of the same user by its user
//! agent (`kubectl-cilium-gc/v...`): the benches send DELETEs as
//! `cilium-gc` with curl, kubectl and the reference client too, of
//! identities in use (only the rate is compared) and without a body, and
//! those are not the plugin's. The e2e suite's checks
//! (`assert_plugin_deletes_carry_preconditions`, `violations`) take every
//! delete by that user as the plugin's, so here they are applied to the
//! plugin's deletes alone, with the same rules.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{json, Value};

#[path = "../../tests/e2e/support/audit.rs"]
#[allow(dead_code, unused_imports)]
mod audit;

use audit::{Actor, Audit, Resource, Verb, Write};

/// The plugin's user agent (`crates/cilium-gc/src/cluster/kubeconfig.rs`).
pub const PLUGIN_AGENT: &str = "kubectl-cilium-gc/v";

/// What the audit log showed of the plugin's deletes.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The plugin's identity deletes the server answered 200.
    pub deletes: usize,
    /// The first of them: when its first id was freed.
    pub first_freed: Option<Timestamp>,
    /// Each violation, in words.
    pub violations: Vec<String>,
}

impl Judged {
    /// The line printed for it.
    pub fn line(&self, dir: &Path) -> String {
        if self.violations.is_empty() {
            format!(
                "judge (audit log {}): {} identity deletes by kubectl cilium-gc answered 200, each of an identity the bench seeded stale, none referenced by a CiliumEndpoint or slice at that instant, every delete with {{uid, resourceVersion}} preconditions: passed",
                dir.join("audit.log").display(),
                self.deletes
            )
        } else {
            format!(
                "judge (audit log {}): {} violations: {}",
                dir.join("audit.log").display(),
                self.violations.len(),
                self.violations.join("; ")
            )
        }
    }

    pub fn json(&self) -> Value {
        json!({"pluginDeletes": self.deletes, "firstFreed": self.first_freed.map(|t| t.to_string()),
               "violations": self.violations, "passed": self.violations.is_empty()})
    }
}

/// A delete of a CiliumIdentity sent by the plugin (its user and its user
/// agent), whatever the answer.
fn by_plugin(w: &Write) -> bool {
    w.actor == Actor::Plugin
        && w.user_agent.starts_with(PLUGIN_AGENT)
        && w.resource == Resource::Identity
        && w.verb == Verb::Delete
}

/// Judge the audit log of the cluster in `dir` (`dir/audit.log`): every
/// identity the plugin deleted was one of `stale` (ids the bench seeded
/// stale) and, at that instant, the bench's own seed (not an identity an
/// agent or the operator created in a freed id); none was referenced by a
/// CiliumEndpoint or slice at that instant; every delete it sent carried
/// `{uid, resourceVersion}` preconditions; and, when `expected` is given
/// (the sum of its reports' `deleted`), the log holds that many of its
/// deletes answered 200 (so a judge that found none cannot pass for one
/// that found all fine). Prints its line (recorded, see `say!`) and fails
/// the bench on a violation.
pub fn judge(dir: &Path, stale: &BTreeSet<u64>, expected: Option<u64>) -> Judged {
    let judged = judge_log(&Audit::read(dir), stale, expected);
    super::print_recorded(&judged.line(dir));
    assert!(
        judged.violations.is_empty(),
        "violation: the audit log of {} judges the bench's runs unsafe (printed above)",
        dir.display()
    );
    judged
}

/// [`judge`] without printing or failing: the verdict of one log.
pub fn judge_log(audit: &Audit, stale: &BTreeSet<u64>, expected: Option<u64>) -> Judged {
    let mut violations = Vec::new();
    // Preconditions: as `assert_plugin_deletes_carry_preconditions` (a
    // delete refused before its body was read has no requestObject).
    for w in audit
        .writes()
        .iter()
        .filter(|w| by_plugin(w) && (w.request.is_some() || (200..300).contains(&w.code)))
    {
        let p = w.request.as_ref().map(|r| &r["preconditions"]);
        if !p.is_some_and(|p| p["uid"].is_string() && p["resourceVersion"].is_string()) {
            violations.push(format!(
                "the plugin deleted {} without uid and resourceVersion preconditions (answered {})",
                w.name, w.code
            ));
        }
    }
    let ours: Vec<&Write> = audit.identity_deletes().filter(|w| by_plugin(w)).collect();
    let at: BTreeSet<(&str, Timestamp)> = ours.iter().map(|w| (w.name.as_str(), w.done)).collect();
    // In use at that instant: the e2e suite's judgement, the plugin's
    // deletes among it.
    for d in audit.judge(Duration::from_secs(30)).deletes {
        if at.contains(&(d.name.as_str(), d.at)) && !d.referenced_by.is_empty() {
            violations.push(format!(
                "the plugin deleted identity {} while {} referenced it",
                d.name,
                d.referenced_by.join(", ")
            ));
        }
    }
    // Nothing but what the bench seeded stale: the name is one of `stale`,
    // and the identity it deleted was the bench's (the last create of
    // that name before the delete was not an agent's or the operator's).
    // Each name's effective creates, in the order answered (an index: a
    // 65k run holds hundreds of thousands of writes).
    let mut creates: std::collections::BTreeMap<&str, Vec<&Write>> = Default::default();
    for c in audit
        .writes()
        .iter()
        .filter(|c| c.resource == Resource::Identity && c.verb == Verb::Create && c.took_effect())
    {
        creates.entry(c.name.as_str()).or_default().push(c);
    }
    for w in &ours {
        let seeded = w.name.parse::<u64>().is_ok_and(|id| stale.contains(&id));
        let creator = creates
            .get(w.name.as_str())
            .and_then(|cs| cs.iter().rfind(|c| c.done <= w.received))
            .map(|c| c.actor.clone());
        let ours_to_delete = matches!(creator, Some(Actor::Other(_)));
        if !seeded || !ours_to_delete {
            violations.push(format!(
                "the plugin deleted identity {}, not one the bench seeded stale (created by {})",
                w.name,
                creator.map_or("no create in the log".into(), |a| a.to_string())
            ));
        }
    }
    if let Some(n) = expected.filter(|&n| n != ours.len() as u64) {
        violations.push(format!(
            "the plugin's reports say {n} deleted, the audit log holds {} of its deletes answered 200",
            ours.len()
        ));
    }
    Judged {
        deletes: ours.len(),
        first_freed: ours.iter().map(|w| w.done).min(),
        violations,
    }
}

/// Fail the bench unless `run` (named in the message) exited `want`.
pub fn expect_exit(run: &str, got: i32, want: u8) {
    assert!(
        got == i32::from(want),
        "violation: {run} exited {got}, expected {want}"
    );
}

/// The plugin's JSON report on stdout of `run`; a report that does not
/// parse fails the bench.
pub fn report(run: &str, stdout: &[u8]) -> Value {
    serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "violation: {run}: its report does not parse ({e}): {}",
            String::from_utf8_lossy(&stdout[..stdout.len().min(2000)])
        )
    })
}

/// Print one goal line, `goal WHAT: met|missed (FIGURES)` (recorded, see
/// `say!`); a missed goal is not a failure. Returns whether it was met.
pub fn goal(what: &str, met: bool, figures: &str) -> bool {
    super::print_recorded(&format!(
        "goal {what}: {} ({figures})",
        if met { "met" } else { "missed" }
    ));
    met
}

/// Show that the judge can fail: an audit log written for the purpose in
/// which the plugin deletes an identity a CiliumEndpoint references, one
/// without preconditions, and one the bench did not seed stale; the
/// verdict must name all three; then [`judge`] of the same log, as every
/// bench calls it, fails the bench (exit 101). Run by `cargo bench --bench
/// real -- --only judge-control`.
pub fn control() -> ! {
    let dir = tempfile::tempdir().unwrap();
    let t = |s: u32| format!("2026-12-06T12:00:{s:02}.000000Z");
    let event = |verb: &str,
                 resource: &str,
                 name: &str,
                 s: u32,
                 user: &str,
                 ua: &str,
                 extra: Value| {
        let mut e = json!({"kind": "Event", "apiVersion": "audit.k8s.io/v1", "stage": "ResponseComplete",
            "verb": verb, "objectRef": {"resource": resource, "name": name, "apiGroup": "cilium.io"},
            "user": {"username": user}, "userAgent": ua, "responseStatus": {"code": if verb == "create" {201} else {200}},
            "requestReceivedTimestamp": t(s), "stageTimestamp": t(s), "requestURI": "/apis/cilium.io/v2/x"});
        if let (Some(e), Some(x)) = (e.as_object_mut(), extra.as_object()) {
            e.extend(x.clone());
        }
        e.to_string()
    };
    let pre = json!({"requestObject": {"kind": "DeleteOptions", "preconditions": {"uid": "u", "resourceVersion": "1"}}});
    let admin = "kube-rs/5";
    let plugin = "kubectl-cilium-gc/v0.1.0";
    let lines = [
        event(
            "create",
            "ciliumidentities",
            "300",
            1,
            "admin",
            admin,
            json!({"responseObject": {"metadata": {"name": "300"}}}),
        ),
        event(
            "create",
            "ciliumendpoints",
            "pod-300",
            2,
            "admin",
            admin,
            json!({"objectRef": {"resource": "ciliumendpoints", "name": "pod-300", "namespace": "bench", "apiGroup": "cilium.io"},
                     "responseObject": {"metadata": {"name": "pod-300"}, "status": {"identity": {"id": 300}}}}),
        ),
        event(
            "create",
            "ciliumidentities",
            "301",
            3,
            "admin",
            admin,
            json!({"responseObject": {"metadata": {"name": "301"}}}),
        ),
        event(
            "create",
            "ciliumidentities",
            "302",
            3,
            "admin",
            admin,
            json!({"responseObject": {"metadata": {"name": "302"}}}),
        ),
        // In use, and deleted by the plugin: a violation.
        event(
            "delete",
            "ciliumidentities",
            "300",
            5,
            "cilium-gc",
            plugin,
            pre.clone(),
        ),
        // Stale, but without preconditions: a violation.
        event(
            "delete",
            "ciliumidentities",
            "301",
            6,
            "cilium-gc",
            plugin,
            json!({}),
        ),
        // Not in the stale set: a violation.
        event(
            "delete",
            "ciliumidentities",
            "302",
            7,
            "cilium-gc",
            plugin,
            pre.clone(),
        ),
        // curl as the same user, in use, no body: not the plugin's.
        event(
            "delete",
            "ciliumidentities",
            "300",
            8,
            "cilium-gc",
            "curl/8.5.0",
            json!({}),
        ),
    ];
    std::fs::write(dir.path().join("audit.log"), lines.join("\n") + "\n").unwrap();
    let stale: BTreeSet<u64> = [300, 301].into();
    let judged = judge_log(&Audit::read(dir.path()), &stale, Some(3));
    super::print_recorded(&format!(
        "judge control (an audit log written for the purpose: the plugin deletes 300 in use, 301 without preconditions, 302 not seeded stale; curl deletes 300 again): {}",
        judged.line(dir.path())
    ));
    let named = |what: &str| judged.violations.iter().any(|v| v.contains(what));
    let caught = judged.violations.len() == 3
        && named("deleted identity 300 while Endpoint bench/pod-300")
        && named("deleted 301 without")
        && named("deleted identity 302, not one");
    assert!(
        caught,
        "the judge missed a violation written for the purpose: {:?}",
        judged.violations
    );
    super::print_recorded("judge control: all three violations reported, curl's delete not taken for the plugin's; now judged as a bench's cluster is, which must fail the bench");
    // As every bench calls it: prints the violations and fails (exit 101).
    judge(dir.path(), &stale, Some(3));
    unreachable!("the judge passed a log with three violations")
}
