//! The forecast, live against the simulator: `--sample` watches the
//! identities and measures what appears and disappears meanwhile.

use super::*;
use cilium_gc_documents::forecast::PaceSource;
use serde_json::json;

/// Twelve identities created and one deleted while the diagnosis samples:
/// the sample counts them, and its twelve creations are the pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_counts_what_appears_and_disappears_meanwhile() {
    let w = World::start(small()).await;
    let before = w.sim.identity_names();
    let unused = before
        .iter()
        .find(|n| {
            n.parse::<u64>()
                .is_ok_and(|id| !w.sim.referenced_ids().contains(&id))
        })
        .expect("the preset has an unused identity")
        .clone();
    let settings = DiagnoseSettings {
        sample: Duration::from_secs(4),
        ..pages_of(10_000)
    };
    let kube = w.kube();
    let run = tokio::spawn(async move {
        cilium_gc_diagnose::diagnose(&kube, &settings, &Stop::default()).await
    });
    // The sample's list is the diagnosis' first of identities: change the
    // cluster once it was answered.
    let listed = |w: &World| {
        w.sim
            .ledger()
            .requests
            .iter()
            .any(|r| r.verb == "list" && r.path.contains("ciliumidentities") && r.status == 200)
    };
    tokio::time::timeout(TEST_TIMEOUT, async {
        while !listed(&w) && !run.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the sample listed the identities");
    assert!(
        listed(&w),
        "the diagnosis ended before it listed: {:?}",
        run.await
    );
    for k in 0..12u64 {
        w.sim
            .create_object(
                Kind::Identity,
                json!({"metadata": {"name": (60_000 + k).to_string()},
                       "security-labels": {"k8s:job-name": format!("job-{k}")}}),
                "cilium-agent",
            )
            .unwrap();
    }
    w.sim
        .delete_object(Kind::Identity, &unused, "cilium-operator", true)
        .unwrap();
    let d = tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("diagnosis finished in time")
        .unwrap()
        .expect("diagnosis succeeds");
    assert_conforms(&serde_json::to_value(&d).unwrap());
    let f = d.forecast.as_ref().expect("a forecast");
    let s = f.sample.as_ref().expect("a sample");
    assert_eq!((s.created, s.deleted), (12, 1));
    assert!(s.seconds >= 4.0, "the sample lasted its 4s: {}", s.seconds);
    assert_eq!(f.pace.source, PaceSource::Sample);
    assert_eq!(f.pace.created, 12);
    assert_eq!(d.identity_space.total as usize, before.len() + 11);
}
