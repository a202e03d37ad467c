//! The fleet, from the library: several simulated clusters in one
//! kubeconfig, `run_fleet` with plain settings, and what each server holds
//! afterwards. The one confirmation is checked through an observer that
//! records what it is asked.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use cilium_gc::Exit;
use cilium_gc::PendingWrites;
use cilium_gc::Stop;
use cilium_gc::{ConnectSettings, GcSettings, Pacing, ScanSettings, WriteSettings};
use cilium_gc_documents::fleet::{ClusterFailure, ClusterStatus};
use cilium_gc_documents::report::{AbortReason, Mode, Outcome};
use cilium_gc_fleet::{run_fleet, FleetObserver, FleetSettings};
use cilium_gc_sim::Scenario;

use cilium_gc_testkit::{calm, Fleet, TEST_TIMEOUT};

/// Connection settings with only `--kubeconfig <kubeconfig>`.
fn kube_of(kubeconfig: &std::path::Path) -> ConnectSettings {
    ConnectSettings {
        kubeconfig: Some(kubeconfig.to_owned()),
        ..ConnectSettings::default()
    }
}

/// One calm `small` cluster per context name.
async fn calm_fleet(contexts: &[&str]) -> Fleet {
    let clusters: Vec<(&str, Scenario)> = contexts.iter().map(|c| (*c, calm("small"))).collect();
    Fleet::start(&clusters, &[]).await
}

/// Identity names on each cluster, in kubeconfig order.
fn all_names(f: &Fleet) -> Vec<BTreeSet<String>> {
    f.contexts().iter().map(|c| f.names(c)).collect()
}

/// Answers `answer` and records every question.
#[derive(Default)]
struct Asked {
    answer: Option<bool>,
    questions: Mutex<Vec<Vec<PendingWrites>>>,
}

impl FleetObserver for Asked {
    fn confirm_all(&self, pending: &[PendingWrites]) -> Option<bool> {
        self.questions.lock().unwrap().push(pending.to_vec());
        self.answer
    }
}

/// `delete` (asking first), one cluster at a time.
fn delete_asking() -> GcSettings {
    let w = WriteSettings {
        pacing: Pacing {
            qps: 0.0,
            ..WriteSettings::default().pacing
        },
        yes: false,
        ..WriteSettings::default()
    };
    GcSettings::for_delete(ScanSettings::default(), w).expect("valid")
}

async fn run(
    f: &Fleet,
    s: &GcSettings,
    parallel: u32,
    observer: Arc<Asked>,
) -> (cilium_gc_fleet::FleetReport, Exit) {
    let fleet = FleetSettings {
        contexts: f.contexts(),
        parallel,
        diagnose: false,
        redact: false,
    };
    tokio::time::timeout(
        TEST_TIMEOUT,
        run_fleet(
            &kube_of(&f.kubeconfig),
            s,
            &fleet,
            &Stop::default(),
            observer,
        ),
    )
    .await
    .expect("fleet finished in time")
}

/// Three clusters, one at a time: the person is asked once, with every
/// cluster's deletes, in the order selected, and a yes deletes on all
/// three. (With `parallel` 1 the first cluster waits at the gate for the
/// others: it must give its slot back, or the run would never end.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_question_for_every_cluster_and_yes_deletes_everywhere() {
    let f = calm_fleet(&["a", "b", "c"]).await;
    let asked = Arc::new(Asked {
        answer: Some(true),
        ..Asked::default()
    });
    let (report, exit) = run(&f, &delete_asking(), 1, asked.clone()).await;
    assert_eq!(exit, Exit::Success, "{:#?}", report.summary);
    let questions = asked.questions.lock().unwrap().clone();
    assert_eq!(questions.len(), 1, "asked once: {questions:#?}");
    let contexts: Vec<_> = questions[0]
        .iter()
        .map(|p| p.context.clone().unwrap())
        .collect();
    assert_eq!(contexts, ["a", "b", "c"]);
    for (p, e) in questions[0].iter().zip(&report.clusters) {
        let r = e.report.as_ref().unwrap();
        assert_eq!(p.deletes, r.summary.candidates);
        assert_eq!(r.summary.deleted, r.summary.candidates, "{}", e.context);
        assert!(r.summary.deleted > 0);
    }
    assert_eq!(report.summary.deleted, report.summary.candidates);
    // What the servers hold: every candidate gone, nothing else.
    // The items come back from the spool (memory keeps only the summary).
    for (i, (_, sim)) in f.sims.iter().enumerate() {
        assert!(report.clusters[i].report.as_ref().unwrap().items.is_empty());
        let e = report.clusters.full(i).unwrap();
        let r = e.report.as_ref().unwrap();
        assert!(!r.items.is_empty());
        let gone: BTreeSet<String> = r
            .items
            .iter()
            .filter(|i| i.outcome == Outcome::Deleted)
            .map(|i| i.name.clone())
            .collect();
        let left: BTreeSet<String> = sim.identity_names().into_iter().collect();
        assert!(gone.is_disjoint(&left));
        assert_eq!(sim.ledger().unsafe_deletes().count(), 0);
    }
}

/// A no, or nobody to ask: nothing is deleted anywhere, every cluster is
/// `not-confirmed` with its candidates `not-attempted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_or_nobody_to_ask_deletes_nothing_anywhere() {
    for answer in [Some(false), None] {
        let f = calm_fleet(&["a", "b"]).await;
        let before = all_names(&f);
        let asked = Arc::new(Asked {
            answer,
            ..Asked::default()
        });
        let (report, exit) = run(&f, &delete_asking(), 2, asked.clone()).await;
        assert_eq!(exit, Exit::Usage, "{answer:?}");
        assert_eq!(asked.questions.lock().unwrap().len(), 1);
        for e in &report.clusters {
            assert_eq!(e.status, ClusterStatus::Failed);
            assert_eq!(
                e.error.as_ref().unwrap().reason,
                ClusterFailure::Aborted(AbortReason::NotConfirmed)
            );
            let r = e.report.as_ref().unwrap();
            assert_eq!(
                r.aborted.as_ref().unwrap().reason,
                AbortReason::NotConfirmed
            );
            assert_eq!(r.summary.not_attempted, r.summary.candidates);
        }
        assert_eq!(all_names(&f), before, "{answer:?}: nothing deleted");
    }
}

/// `--max-deletions` is per cluster: the cluster over it is refused (exit 5,
/// nothing deleted there), the others delete; the fleet exits 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_deletions_applies_to_each_cluster_on_its_own() {
    let f = calm_fleet(&["small", "big"]).await;
    // Seed the second with more stale identities than the first has.
    let small_stale = {
        let s = GcSettings::for_scan(ScanSettings::default()).unwrap();
        let (r, _) = run(&f, &s, 2, Arc::default()).await;
        r.clusters[0].report.as_ref().unwrap().summary.candidates
    };
    let big = &f.sims[1].1;
    let mark = (big.now() - jiff::SignedDuration::from_hours(2)).to_string();
    for i in 0..20u64 {
        let name = (60_000 + i).to_string();
        big.create_object(
            cilium_gc_sim::Kind::Identity,
            serde_json::json!({
                "apiVersion": "cilium.io/v2", "kind": "CiliumIdentity",
                "metadata": {"name": name, "annotations": {"io.cilium.heartbeat": mark}},
                "security-labels": {"k8s:app": "gone"}
            }),
            "test",
        )
        .expect("created");
    }
    let before = all_names(&f);
    let w = WriteSettings {
        pacing: Pacing {
            qps: 0.0,
            ..WriteSettings::default().pacing
        },
        yes: true,
        max_deletions: Some(small_stale),
        ..WriteSettings::default()
    };
    let s = GcSettings::for_delete(ScanSettings::default(), w).unwrap();
    let (report, exit) = run(&f, &s, 2, Arc::default()).await;
    assert_eq!(exit, Exit::BlastRadius);
    assert_eq!(report.mode, Mode::Delete);
    let (a, b) = (&report.clusters[0], &report.clusters[1]);
    assert_eq!(a.status, ClusterStatus::Succeeded);
    assert_eq!(a.report.as_ref().unwrap().summary.deleted, small_stale);
    assert_eq!(b.exit_code, Exit::BlastRadius.code());
    assert_eq!(
        b.error.as_ref().unwrap().reason,
        ClusterFailure::Aborted(AbortReason::BlastRadius)
    );
    assert_eq!(
        all_names(&f)[1],
        before[1],
        "nothing deleted on the refused cluster"
    );
    assert_eq!(
        all_names(&f)[0].len(),
        before[0].len() - small_stale as usize
    );
}
