//! Safety under chaos (issue 8): random scenarios with faults and actors
//! (property tests), malformed objects in lists and watches, spoiled list
//! pages, a server restarted mid-run, clock skew. Every test judges the run
//! by the simulator's ledger: what the server saw, not what the engine says
//! it did. (Moved from `tests/it/chaos/`; signals at random points go
//! through the binary and stay there.)
//!
//! `CHAOS_CASES=N` runs N random schedules instead of the default few.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cilium_gc::report::Report;
use cilium_gc::Exit;
use cilium_gc::Stop;
use cilium_gc::{ConnectSettings, Pacing, ScanSettings, WriteSettings};
use cilium_gc_documents::report::{AbortReason, ErrorKind, Outcome};
use cilium_gc_sim::{ActorRates, Faults, PageFault, Scenario, Simulator, ThrottleShape};
use cilium_gc_sim::{Kind, HEARTBEAT_ANNOTATION};
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::support::{
    all_items, assert_valid, calm, delete_with, gc_at, json, scan_with, unlimited, yes, Engine,
    World,
};

mod faults;
mod malformed;
mod properties;
mod regressions;

const TIMEOUT_30M: Duration = Duration::from_secs(30 * 60);
/// The note sweep puts on a 404 that followed a lost answer.
const LOST_ANSWER_NOTE: &str = "an earlier attempt got no answer";

fn calm_sized(identities: usize) -> Scenario {
    Scenario {
        identities,
        endpoints: identities,
        ..calm("small")
    }
}

// Random cases per property: `CHAOS_CASES`, else 6.
use cilium_gc_testkit::chaos_cases as cases;

fn ago(now: Timestamp, secs: i64) -> String {
    (now - SignedDuration::from_secs(secs)).to_string()
}

/// A well-formed CiliumIdentity with an optional heartbeat mark.
fn identity(name: &str, mark: Option<&str>) -> Value {
    let mut v = json!({
        "metadata": {"name": name, "labels": {"io.kubernetes.pod.namespace": "chaos"}},
        "security-labels": {"k8s:io.kubernetes.pod.namespace": "chaos"},
    });
    if let Some(m) = mark {
        v["metadata"]["annotations"] = json!({ HEARTBEAT_ANNOTATION: m });
    }
    v
}

/// A raw CiliumIdentity exactly as given (with apiVersion and kind).
fn raw_identity(metadata: Value) -> Value {
    json!({"apiVersion": "cilium.io/v2", "kind": "CiliumIdentity", "metadata": metadata,
           "security-labels": {"k8s:io.kubernetes.pod.namespace": "chaos"}})
}

/// A raw CiliumEndpoint in namespace `chaos` with the given `status`.
fn raw_endpoint(name: Value, status: Option<Value>) -> Value {
    let mut v = json!({"apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
        "metadata": {"name": name, "namespace": "chaos", "uid": format!("uid-cep-{name}"),
                     "resourceVersion": "1"}});
    if let Some(s) = status {
        v["status"] = s;
    }
    v
}

/// Outcome counts the ledger can be held to.
fn check_ledger_agrees(report: &Report, w: &World) {
    let ledger = w.sim.ledger();
    assert_eq!(
        ledger.unsafe_deletes().count(),
        0,
        "identities in use were deleted: {:?}",
        ledger.unsafe_deletes().collect::<Vec<_>>()
    );
    assert!(
        ledger.deletes.iter().all(|d| d.preconditions),
        "every delete carries preconditions"
    );
    let mut once = BTreeSet::new();
    for d in &ledger.deletes {
        assert!(once.insert(d.name.clone()), "{} deleted twice", d.name);
    }
    let by_outcome = |o: Outcome| -> BTreeSet<String> {
        report
            .items
            .iter()
            .filter(|i| i.outcome == o)
            .map(|i| i.name.clone())
            .collect()
    };
    let deleted = by_outcome(Outcome::Deleted);
    assert_eq!(report.summary.deleted as usize, deleted.len());
    let noted_gone: BTreeSet<String> = report
        .items
        .iter()
        .filter(|i| i.outcome == Outcome::AlreadyGone)
        .filter(|i| {
            i.last_error
                .as_deref()
                .is_some_and(|e| e.contains(LOST_ANSWER_NOTE))
        })
        .map(|i| i.name.clone())
        .collect();
    assert!(
        deleted.is_subset(&once),
        "reported deleted, but the server saw no delete: {:?}",
        deleted.difference(&once).collect::<Vec<_>>()
    );
    let explained: BTreeSet<String> = deleted.union(&noted_gone).cloned().collect();
    assert!(
        once.is_subset(&explained),
        "the server saw deletes the report does not account for: {:?}",
        once.difference(&explained).collect::<Vec<_>>()
    );
}
