//! Regressions, named after what broke.

use super::*;

/// Broke: `scan::list_raw` counted every 410 of the whole list against
/// `MAX_LIST_RESTARTS` and never reset it, although continuing with the
/// server's token always makes progress. A long list through a server that
/// compacts often (more than 5 expiries in all) was aborted, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn regression_continue_token_expiring_often_over_a_long_list_aborted_the_scan() {
    let mut s = calm_sized(300);
    s.faults.expire_continue_fraction = 0.5;
    // One page of endpoints: kube's watcher restarts its initial list on a
    // 410, and at this rate would never finish a paged one.
    s.endpoints = 5;
    let w = World::start(s).await;
    let all = w.names();
    let pages_of_10 = ScanSettings {
        page_size: 10,
        ..ScanSettings::default()
    };
    let (report, exit) = w.gc(&scan_with(pages_of_10)).await;
    assert_eq!(exit, Exit::Success, "{:?}", report.aborted);
    assert!(
        report.summary.list_restarts > 5,
        "the schedule expired more than 5 tokens: {:?}",
        report.summary
    );
    assert_eq!(report.summary.scanned as usize, all.len());
}

/// Broke: when the endpoint watchers could not re-list mid-run (here: list
/// and watch of CiliumEndpoints forbidden, then the watch expired), every
/// delete worker waited for usage to be ready again, forever: the run hung
/// until killed, with no report. Since issue 11 the run ends `usage-lost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn regression_endpoint_watchers_unable_to_relist_hung_the_run() {
    let w = World::start(calm_sized(200)).await;
    let sim = &w.sim;
    // Slow enough that candidates remain once the usage last known
    // complete is older than `FRESHNESS_LIMIT`.
    let writes = WriteSettings {
        pacing: Pacing {
            qps: 2.0,
            burst: Some(1),
            ..yes().pacing
        },
        ..yes()
    };
    let settings = delete_with(ScanSettings::default(), writes);
    let run = w.gc(&settings);
    let break_usage = async {
        while sim.ledger().deletes.len() < 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        sim.set_rbac_denials(vec![
            cilium_gc_sim::Denial::new("list", "ciliumendpoints"),
            cilium_gc_sim::Denial::new("watch", "ciliumendpoints"),
        ]);
        sim.compact();
        sim.now()
    };
    let ((report, exit), broken_at) = tokio::time::timeout(Duration::from_secs(200), async {
        tokio::join!(run, break_usage)
    })
    .await
    .expect("the run ends although endpoint usage can no longer be read");
    assert_ne!(exit, Exit::Success, "{:?}", report.aborted);
    assert!(report.aborted.is_some());
    assert!(report.summary.not_attempted > 0 || report.summary.failed > 0);
    // The watch ended when usage broke: the index is known complete up to
    // then, and writes may rely on it for `FRESHNESS_LIMIT` (issue 11), no
    // longer (plus in-flight requests).
    let unknown_from = broken_at
        + SignedDuration::try_from(cilium_gc_cluster::usage::FRESHNESS_LIMIT).unwrap()
        + SignedDuration::from_millis(300);
    let late: Vec<_> = sim
        .ledger()
        .requests
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.time > unknown_from)
        .collect();
    assert!(late.is_empty(), "deletes while usage was unknown: {late:?}");
    assert_eq!(
        report.aborted.as_ref().map(|a| a.reason),
        Some(AbortReason::UsageLost)
    );
    assert_valid(&json(&report));
}
