//! API Priority and Fairness: a `Limited` priority level with
//! `limitResponse: Reject` for the plugin's user and a low
//! `--max-requests-inflight`, so the real server answers 429s. The run
//! still finishes, counts the throttling, and deletes nothing unsafe.

use std::collections::BTreeSet;

use futures::future::join_all;
use http_body_util::BodyExt;

use crate::scale::seed;
use crate::support::cluster::{client_for, k8s_minor, Cluster};
use crate::support::objects::identity_names;
use crate::support::{assert_exit, report, run, summary};

/// One seat for everything the user `cilium-gc` sends (no borrowing from
/// other levels, which is unlimited when `borrowingLimitPercent` is
/// absent); the rest rejected. `{VERSION}` is the API's version on the
/// release under test ([`limited`]).
const LIMITED: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/{VERSION}
kind: PriorityLevelConfiguration
metadata: {name: cilium-gc-limited}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/{VERSION}
kind: FlowSchema
metadata: {name: cilium-gc-limited}
spec:
  priorityLevelConfiguration: {name: cilium-gc-limited}
  matchingPrecedence: 200
  distinguisherMethod: {type: ByUser}
  rules:
    - subjects: [{kind: User, user: {name: cilium-gc}}]
      resourceRules:
        - {verbs: ["*"], apiGroups: ["*"], resources: ["*"], clusterScope: true, namespaces: ["*"]}
      nonResourceRules:
        - {verbs: ["*"], nonResourceURLs: ["*"]}
"#;

/// [`LIMITED`] in the flowcontrol API the release serves: `v1` from 1.29,
/// `v1beta3` on 1.28 (the same fields; docs/real-apiserver.md).
fn limited() -> String {
    let version = if k8s_minor() >= 29 { "v1" } else { "v1beta3" };
    LIMITED.replace("{VERSION}", version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_and_fairness_429s_are_honoured_and_counted() {
    let Some(cluster) = Cluster::up(&[
        "--max-requests-inflight=10",
        "--max-mutating-requests-inflight=5",
    ]) else {
        return;
    };
    let seeded = seed(&cluster, 1000).await;
    cluster.apply(&limited());
    assert_rejections_look_like_the_simulators(&cluster).await;
    let out = run(
        &cluster.gc_kubeconfig(),
        &[
            "delete",
            "--yes",
            "-o",
            "json",
            "--qps",
            "1000",
            "--concurrency",
            "32",
        ],
    )
    .await;
    assert_exit(&out, 0);
    let r = report(&out);
    // The premise: the level refused some of ours. Then the writes in
    // flight followed its one seat instead of collecting a 429 each
    // (before they adapted with a rate, 32 writes out got 279 refusals
    // for 200 deletes, and APF's lengthened `Retry-After` kept the run
    // waiting for minutes). At the start the plugin's own list pages and
    // watches hold the level's only seat; a write refused then had none of
    // ours ahead, and every write waits out a probe window before the next
    // is sent (it was 16 refusals in 0.26 s under load when the next write
    // followed at once): at most one refusal per ten deletes.
    let throttled = summary(&r, "throttled");
    assert!(throttled > 0, "the server answered 429s: {}", r["summary"]);
    assert_eq!(r["summary"]["lowestInFlight"], 1, "cut to the level's seat");
    assert!(
        throttled * 10 <= seeded.stale.len() as u64,
        "{throttled} refusals for {} deletes: {}",
        seeded.stale.len(),
        r["summary"]
    );
    let client = cluster.admin().await;
    let left = identity_names(&client).await;
    let expected: BTreeSet<String> = seeded.all.difference(&seeded.stale).cloned().collect();
    assert_eq!(left, expected, "every stale identity deleted, nothing else");
    assert_eq!(summary(&r, "deleted"), seeded.stale.len() as u64);
    assert_eq!(summary(&r, "failed"), 0);
}

/// APF's rejection, as the simulator's `ThrottleShape::Apf` sends it:
/// `text/plain`, a fixed sentence (no Status JSON), and `Retry-After` in
/// whole seconds. The real value is not always 1: it grows with the
/// priority level's load (12 s was seen here with 40 requests on one seat),
/// so the simulator's fixed 1 s is the mild case (docs/real-apiserver.md).
async fn assert_rejections_look_like_the_simulators(cluster: &Cluster) {
    let client = client_for(&cluster.gc_kubeconfig()).await;
    let get = || {
        let client = client.clone();
        async move {
            let req = http::Request::get("/apis/cilium.io/v2/ciliumidentities?limit=500")
                .body(Vec::new().into())
                .unwrap();
            let res = client.send(req).await.expect("an answer");
            let head = res.headers().clone();
            let status = res.status().as_u16();
            let body = res.into_body().collect().await.unwrap().to_bytes();
            (status, head, String::from_utf8_lossy(&body).to_string())
        }
    };
    let answers = join_all((0..40).map(|_| get())).await;
    let (_, head, body) = answers
        .iter()
        .find(|(s, _, _)| *s == 429)
        .expect("40 lists at once on one seat: some rejected");
    assert_eq!(head["content-type"], "text/plain; charset=utf-8");
    let retry_after: u64 = head["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .expect("delta-seconds");
    assert!(retry_after >= 1, "Retry-After {retry_after}");
    assert_eq!(body, "Too many requests, please try again later.\n");
}
