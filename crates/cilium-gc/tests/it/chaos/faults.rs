//! Server faults: spoiled list pages, a restart mid-run, a skewed clock.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_truncated_and_dropped_list_pages_are_fetched_again() {
    let w = World::start(calm_sized(300)).await;
    let stale = w.stale_now(TIMEOUT_30M);
    let before = w.names();
    w.sim.spoil_lists(Kind::Identity, PageFault::Truncate, 2);
    w.sim.spoil_lists(Kind::Identity, PageFault::DropMidBody, 2);
    w.sim.spoil_lists(Kind::Identity, PageFault::Truncate, 1);
    w.sim.spoil_lists(Kind::Endpoint, PageFault::Truncate, 1);
    w.sim.spoil_lists(Kind::Endpoint, PageFault::DropMidBody, 1);
    let pages_of_25 = ScanSettings {
        page_size: 25,
        ..ScanSettings::default()
    };
    let (report, exit) = w.gc(&delete_with(pages_of_25, unlimited())).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert_eq!(w.sim.spoiled_lists(), 7, "every spoiler was served");
    let deleted: BTreeSet<String> = before.difference(&w.names()).cloned().collect();
    assert_eq!(deleted, stale, "the same identities as with a clean server");
    assert_eq!(
        report.summary.scanned as usize,
        before.len(),
        "no identity lost or counted twice"
    );
    assert!(report.summary.retries >= 5, "{:?}", report.summary);
    assert!(report.summary.watcher_restarts >= 1, "{:?}", report.summary);
    check_ledger_agrees(&report, &w);
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_server_restarted_mid_run_on_the_same_port_with_the_same_state() {
    let w = World::start(calm_sized(200)).await;
    let stale = w.stale_now(TIMEOUT_30M);
    let before = w.names();
    let World {
        sim,
        dir: _dir,
        kubeconfig,
    } = w;
    let kube = ConnectSettings {
        kubeconfig: Some(kubeconfig),
        ..ConnectSettings::default()
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let restarter = tokio::spawn(async move {
        while sim.ledger().deletes.len() < 5 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let state = sim.shutdown_keep_state().await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let sim = Simulator::start_with_state(state).await.expect("restarts");
        let _ = tx.send(());
        sim
    });
    let writes = WriteSettings {
        pacing: Pacing {
            qps: 20.0,
            burst: Some(1),
            concurrency: 2,
            max_retries: 10,
            ..yes().pacing
        },
        ..yes()
    };
    let settings = delete_with(all_items(), writes);
    let (report, exit) = gc_at(&kube, &settings, &Stop::default()).await;
    rx.await.expect("the server was restarted during the run");
    let sim = restarter.await.unwrap();
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    let left: BTreeSet<String> = sim.identity_names().into_iter().collect();
    let deleted: BTreeSet<String> = before.difference(&left).cloned().collect();
    assert_eq!(deleted, stale);
    let ledger = sim.ledger();
    assert_eq!(ledger.unsafe_deletes().count(), 0);
    assert_eq!(
        report.summary.deleted + report.summary.already_gone,
        stale.len() as u64
    );
    assert_eq!(ledger.deletes.len(), stale.len());
    assert!(
        report.summary.watcher_restarts >= 1 || report.summary.retries >= 1,
        "the outage was noticed: {:?}",
        report.summary
    );
    assert_valid(&json(&report));
}

/// Marks are judged by the server's clock, learned from its `Date` header:
/// the operator writes them with the cluster's clock, not ours.
async fn skewed(offset_secs: i64) {
    let w = World::start(Scenario {
        clock_offset_secs: offset_secs,
        ..calm_sized(50)
    })
    .await;
    let server_now = w.sim.now();
    let client_now = Timestamp::now();
    let skew = (server_now - client_now).get_seconds();
    assert!((skew - offset_secs).abs() <= 2, "{skew}");
    let cases = [
        ("61001", ago(server_now, 40 * 60), true), // 40 min old by the server
        ("61002", ago(server_now, 10 * 60), false), // 10 min: too recent
        ("61003", ago(server_now, -10 * 60), false), // in the server's future
        ("61004", ago(client_now, 40 * 60), offset_secs > 0), // 40 min by *our* clock
    ];
    for (name, mark, _) in &cases {
        w.sim
            .create_object(
                Kind::Identity,
                identity(name, Some(mark)),
                "cilium-operator",
            )
            .unwrap();
    }
    let (report, exit) = w.gc(&delete_with(all_items(), unlimited())).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    let left = w.names();
    for (name, mark, collected) in cases {
        assert_eq!(
            !left.contains(name),
            collected,
            "{name} marked {mark}, server clock {offset_secs:+}s from ours"
        );
    }
    assert_eq!(w.sim.ledger().unsafe_deletes().count(), 0);
    assert_valid(&json(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_server_clock_two_hours_ahead_judges_marks_by_server_time() {
    skewed(2 * 3600).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_server_clock_two_hours_behind_judges_marks_by_server_time() {
    skewed(-2 * 3600).await;
}
