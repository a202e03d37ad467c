//! The simulator's cilium-operator GC pass against the real code (issue 25,
//! item 5; docs/real-cilium.md, "The re-enactment checked"): each test pins
//! one difference that was fixed, on the small preset with actors off.

use std::collections::BTreeSet;
use std::time::Duration;

use cilium_gc_sim::{Kind, OperatorRelease, OperatorSettings, Simulator};
use serde_json::Value;

use crate::support::calm;
use crate::support::world::TEST_TIMEOUT;

const TIMEOUT: Duration = Duration::from_secs(1800);

/// The last write of an object: what the real operator's heartbeat store
/// holds as its last sign of life (every update event counts).
fn last_write(v: &Value) -> jiff::Timestamp {
    let created: jiff::Timestamp = v["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    v["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["time"].as_str()?.parse().ok())
        .chain([created])
        .max()
        .unwrap()
}

/// What the real pass deletes: unused, carrying the mark (any value), and
/// no write for a heartbeat timeout. In the pass's order (key order).
fn deletable(sim: &Simulator) -> Vec<String> {
    let used = sim.referenced_ids();
    let now = sim.now();
    let mut keys = sim.identity_names();
    keys.sort();
    keys.into_iter()
        .filter(|n| !n.parse::<u64>().is_ok_and(|id| used.contains(&id)))
        .filter(|n| {
            let v = sim.identity(n).unwrap();
            v["metadata"]["annotations"]["io.cilium.heartbeat"].is_string()
                && now.duration_since(last_write(&v)).as_secs_f64() > TIMEOUT.as_secs_f64()
        })
        .collect()
}

fn settings(release: OperatorRelease) -> OperatorSettings {
    OperatorSettings::new(release, TIMEOUT, 1000.0)
}

/// The mark is checked for presence only (crd_gc.go never parses it): an
/// unused identity whose mark is not a time, with no write for a heartbeat
/// timeout, is deleted like the others; and one marked minutes ago is
/// left alone because the mark was a write, not because of its time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mark_is_checked_for_presence_only() {
    let sim = Simulator::start(calm("small")).await.unwrap();
    let want = deletable(&sim);
    let junk: BTreeSet<&String> = want
        .iter()
        .filter(|n| {
            let v = sim.identity(n).unwrap();
            let m = v["metadata"]["annotations"]["io.cilium.heartbeat"]
                .as_str()
                .unwrap();
            m.parse::<jiff::Timestamp>().is_err()
        })
        .collect();
    assert!(!junk.is_empty(), "the preset has malformed marks");
    let pass = tokio::time::timeout(TEST_TIMEOUT, sim.run_operator_1_15_pass(TIMEOUT, 1000.0))
        .await
        .unwrap();
    assert_eq!(pass.stopped_at, None);
    assert_eq!(pass.candidates as usize, want.len());
    assert_eq!(pass.deleted as usize, want.len());
    for n in &want {
        assert!(sim.identity(n).is_none(), "{n} deleted");
    }
    sim.shutdown().await;
}

/// cilium#28339: the heartbeat store is in memory and the informer's first
/// list marks every identity alive, so for one heartbeat timeout after a
/// start the operator deletes and marks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_operator_deletes_nothing_for_a_heartbeat_timeout() {
    let sim = Simulator::start(calm("small")).await.unwrap();
    let before = sim.identity_names().len();
    let mut s = settings(OperatorRelease::V1_15);
    s.up_for = Duration::from_secs(60);
    let pass = tokio::time::timeout(TEST_TIMEOUT, sim.run_operator_pass(s))
        .await
        .unwrap();
    assert_eq!((pass.candidates, pass.deleted, pass.marked), (0, 0, 0));
    assert_eq!(sim.identity_names().len(), before);
    sim.shutdown().await;
}

/// Every update event is a sign of life: a stale identity another writer
/// touched (mark kept) before the pass is skipped, never deleted and never
/// a 409; the rest are deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_write_is_a_sign_of_life() {
    let sim = Simulator::start(calm("small")).await.unwrap();
    let want = deletable(&sim);
    let touched = want[3].clone();
    sim.modify_object(Kind::Identity, &touched, "other-writer", true, |v| {
        v["metadata"]["labels"]["touched"] = "yes".into();
    })
    .unwrap();
    let pass = tokio::time::timeout(TEST_TIMEOUT, sim.run_operator_1_15_pass(TIMEOUT, 1000.0))
        .await
        .unwrap();
    assert_eq!(pass.stopped_at, None);
    assert_eq!(pass.deleted as usize, want.len() - 1);
    assert!(sim.identity(&touched).is_some());
    sim.shutdown().await;
}

/// Run a pass whose GC limiter lets `n` deletes through and then holds the
/// next one for 6 s; during that wait (after the pass judged the next
/// candidate not alive) `act` writes to it. Returns the pass and the
/// victim.
async fn write_during_the_limiter_wait(
    release: OperatorRelease,
    act: impl FnOnce(&Simulator, &str),
) -> (cilium_gc_sim::OperatorPass, Simulator, Vec<String>, usize) {
    let sim = Simulator::start(calm("small")).await.unwrap();
    let want = deletable(&sim);
    // The victim is the last but one: one limiter window for the rest.
    let n = want.len() - 2;
    assert!(n >= 4, "{want:?}");
    let victim = want[n].clone();
    let mut s = settings(release);
    s.gc_rate_limit = n as u64;
    s.gc_rate_interval = Duration::from_secs(6);
    let watcher = async {
        while want[..n].iter().any(|k| sim.identity(k).is_some()) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Let the pass reach the victim's liveness check and block on the
        // limiter (it holds for 6 s): a loaded machine may pause it a while.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        act(&sim, &victim);
    };
    let (pass, ()) = tokio::time::timeout(TEST_TIMEOUT, async {
        tokio::join!(sim.run_operator_pass(s), watcher)
    })
    .await
    .unwrap();
    (pass, sim, want, n)
}

fn strip(sim: &Simulator, name: &str) {
    sim.set_heartbeat(name, None).unwrap();
}

fn delete(sim: &Simulator, name: &str) {
    sim.delete_object(Kind::Identity, name, "another-deleter", false)
        .unwrap();
}

/// A pass deletes one identity at a time behind its limiter, so a write
/// *during* the pass meets the delete as a 409: 1.15 ends the pass there
/// (cilium#33142); a current release skips it and deletes the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_409_on_delete_ends_the_1_15_pass_and_the_current_skips_it() {
    let (pass, sim, want, n) = write_during_the_limiter_wait(OperatorRelease::V1_15, strip).await;
    assert_eq!(pass.stopped_at.as_deref(), Some(want[n].as_str()));
    assert_eq!(pass.stopped_by, Some(409));
    assert_eq!(pass.deleted as usize, n);
    assert!(sim.identity(&want[n]).is_some());
    assert!(sim.identity(&want[n + 1]).is_some(), "the rest left");
    sim.shutdown().await;

    let (pass, sim, want, n) = write_during_the_limiter_wait(OperatorRelease::Current, strip).await;
    assert_eq!(pass.stopped_at, None);
    assert_eq!(pass.conflicts_skipped, 1);
    assert_eq!(pass.deleted as usize, want.len() - 1);
    assert!(sim.identity(&want[n]).is_some());
    assert!(sim.identity(&want[n + 1]).is_none(), "the pass went on");
    sim.shutdown().await;
}

/// A 404 on a delete (another deleter, such as this plugin, got there
/// first) ends the pass in 1.15 and in current releases alike (#47571).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_on_delete_ends_the_pass_in_both_releases() {
    for release in [OperatorRelease::V1_15, OperatorRelease::Current] {
        let (pass, sim, want, n) = write_during_the_limiter_wait(release, delete).await;
        assert_eq!(
            pass.stopped_at.as_deref(),
            Some(want[n].as_str()),
            "{release:?}"
        );
        assert_eq!(pass.stopped_by, Some(404), "{release:?}");
        assert_eq!(pass.deleted as usize, n, "{release:?}");
        assert!(
            sim.identity(&want[n + 1]).is_some(),
            "{release:?}: the rest left"
        );
        sim.shutdown().await;
    }
}
