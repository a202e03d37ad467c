//! Random schedules of faults and actors (property tests): every run is judged by the ledger.

use super::*;

/// One random schedule: cluster size and shape, actors, faults, client pace.
#[derive(Debug, Clone)]
struct Schedule {
    seed: u64,
    identities: usize,
    stale_ratio: f64,
    actors: ActorRates,
    faults: Faults,
    qps: u32,
    concurrency: u32,
    page_size: u32,
}

fn actor_rates() -> impl Strategy<Value = ActorRates> {
    prop_oneof![
        Just(ActorRates::default()),
        (
            0.0..4.0f64,
            0.0..2.0f64,
            0.0..4.0f64,
            0.0..2.0f64,
            0.0..4.0f64
        )
            .prop_map(
                |(agent_reclaim, reuse, operator_mark, identity_churn, endpoint_churn)| {
                    ActorRates {
                        agent_reclaim,
                        reuse,
                        operator_mark,
                        identity_churn,
                        endpoint_churn,
                        ..ActorRates::default()
                    }
                }
            ),
    ]
}

fn faults() -> impl Strategy<Value = Faults> {
    (
        (0.0..0.02f64, 0u64..=1, prop::bool::ANY),
        (0.0..0.02f64, 0.0..0.02f64, 0.0..0.01f64),
        (0.0..0.02f64, 0.0..0.1f64, 0.0..0.1f64),
        prop::option::of(40.0..200.0f64),
    )
        .prop_map(
            |(
                (throttle, retry_after, status_shape),
                (e500, e503, e504),
                (reset, slow, expire),
                cap,
            )| {
                Faults {
                    throttle_fraction: throttle,
                    throttle_shape: if status_shape {
                        ThrottleShape::Mixed
                    } else {
                        ThrottleShape::Apf
                    },
                    retry_after_secs: retry_after,
                    delete_rate_cap: cap,
                    error_500_fraction: e500,
                    error_503_fraction: e503,
                    error_504_fraction: e504,
                    reset_fraction: reset,
                    slow_fraction: slow,
                    slow_delay: Duration::from_millis(40),
                    expire_continue_fraction: expire,
                    ..Faults::default()
                }
            },
        )
}

fn schedule() -> impl Strategy<Value = Schedule> {
    (
        any::<u64>(),
        100usize..=600,
        0.2..0.8f64,
        actor_rates(),
        faults(),
        prop_oneof![Just(0u32), 30u32..300],
        1u32..=16,
        prop_oneof![Just(500u32), 40u32..500],
    )
        .prop_map(
            |(seed, identities, stale_ratio, actors, faults, qps, concurrency, page_size)| {
                Schedule {
                    seed,
                    identities,
                    stale_ratio,
                    actors,
                    faults,
                    qps,
                    concurrency,
                    page_size,
                }
            },
        )
}

async fn run_schedule(s: Schedule) {
    let scenario = Scenario {
        seed: s.seed,
        stale_ratio: s.stale_ratio,
        actors: s.actors,
        faults: s.faults.clone(),
        ..calm_sized(s.identities)
    };
    let w = World::start(scenario).await;
    let stale = w.stale_now(TIMEOUT_30M);
    // `delete --yes --items all --qps Q --concurrency C --page-size P
    // --max-retries 12`
    let scan = ScanSettings {
        page_size: s.page_size,
        ..all_items()
    };
    let writes = WriteSettings {
        pacing: Pacing {
            qps: f64::from(s.qps),
            concurrency: s.concurrency,
            max_retries: 12,
            ..yes().pacing
        },
        ..yes()
    };
    let (report, exit) = w.gc(&delete_with(scan, writes)).await;
    w.sim.stop_actors();
    if let Some(abort) = &report.aborted {
        // The one early end allowed: the endpoint watchers could not list
        // (kube's watcher restarts a paged list on any failed page, as
        // client-go's reflector does). Then nothing more may be written, and
        // what was written must still add up.
        // Before the first full list: read-failed; mid-run: usage-lost.
        assert!(
            matches!(
                abort.reason,
                AbortReason::ReadFailed | AbortReason::UsageLost
            ),
            "{abort:?}"
        );
        assert!(abort.message.contains("endpoint watchers"), "{abort:?}");
        assert_eq!(exit, Exit::Unexpected);
        check_ledger_agrees(&report, &w);
        assert_valid(&json(&report));
        eprintln!("schedule ended safely without usage: {}", abort.message);
        w.sim.shutdown().await;
        return;
    }
    let failed: Vec<_> = report
        .items
        .iter()
        .filter(|i| i.outcome == Outcome::Failed)
        .collect();
    assert_eq!(failed.len() as u64, report.summary.failed);
    assert!(
        failed.iter().all(|i| i.last_error.is_some()),
        "every failure has a reason: {failed:?}"
    );
    let want = if failed.is_empty() {
        Exit::Success
    } else {
        Exit::PartialFailure
    };
    assert_eq!(exit, want, "{failed:?}");
    assert_eq!(report.exit_code, want.code());

    check_ledger_agrees(&report, &w);

    // Stale at the start and left alone by actors: gone, or failed with a reason.
    let ledger = w.sim.ledger();
    let left = w.names();
    let failed: BTreeSet<&str> = failed.iter().map(|i| i.name.as_str()).collect();
    let missed: Vec<_> = stale
        .iter()
        .filter(|n| !ledger.actor_touched.contains(*n))
        .filter(|n| left.contains(*n) && !failed.contains(n.as_str()))
        .collect();
    assert!(
        missed.is_empty(),
        "stale, untouched, neither deleted nor failed: {missed:?}"
    );
    assert_valid(&json(&report));
    w.sim.shutdown().await;
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        // Each case starts a server and runs a whole delete: shrinking would
        // take minutes. The failing schedule is printed whole instead.
        max_shrink_iters: 0,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Invariants of any run, whatever the cluster, the actors and the faults.
    #[test]
    fn chaos_schedules_keep_the_invariants(s in schedule()) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(180), run_schedule(s))
                .await
                .expect("a chaos schedule finished in time")
        });
    }
}
