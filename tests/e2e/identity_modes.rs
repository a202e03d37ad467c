//! Today's real cilium-operator in `identity-management-mode=operator`
//! (issue 36, 4): it allocates the identity of a Pod itself, and its
//! heartbeat GC, which counts only CiliumEndpoints and CiliumEndpointSlices
//! as usage, marks that identity while the Pod still exists, and nobody
//! strips the mark (agents do not write identities in this mode). This is
//! why the plugin keeps refusing the mode: a mark and a resourceVersion
//! cannot tell such an identity from a stale one (docs/real-cilium.md).

use std::time::Duration;

use crate::support::cluster::Cluster;
use crate::support::operator::{Operator, Version, World};
use crate::support::workload::GC_FLAGS;

const POD: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: modes}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: modes}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: modes, labels: {app: mode-web-1}}
spec:
  automountServiceAccountToken: false
  containers: [{name: web, image: "example.invalid/web:1"}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_mode_marks_the_identity_of_a_pod_that_still_exists() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    if crate::support::operator::build(Version::Current).is_none() {
        return;
    }
    cluster.apply(POD);
    let flags = [&GC_FLAGS[..], &["--identity-management-mode=operator"]].concat();
    let _operator = Operator::up(&cluster, Version::Current, &flags).expect("operator");
    let client = cluster.admin().await;
    let (mut created, mut marked_while_pod_exists) = (false, false);
    for _ in 0..60 {
        let w = World::read(&client).await;
        let mine: Vec<_> = w
            .identities
            .values()
            .filter(|i| i.app == "mode-web-1")
            .collect();
        created |= !mine.is_empty();
        marked_while_pod_exists |= mine.iter().any(|i| i.marked);
        if marked_while_pod_exists {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The premise: in this mode the operator allocated the Pod's identity.
    assert!(created, "the operator created no identity for the Pod");
    let pod = cluster.kubectl(&["get", "pod", "web-0", "-n", "modes"]);
    assert!(pod.status.success(), "the Pod still exists");
    assert!(
        marked_while_pod_exists,
        "the operator's GC never marked the identity of an existing Pod"
    );
}
