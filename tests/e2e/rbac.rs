//! The ClusterRole and Role `examples/cronjob.yaml` publishes (the krew
//! manifest points at the same) are enough for `scan`, `delete` and
//! `diagnose`; a user without delete is refused before any write.

use crate::scale::seed;
use crate::support::cluster::Cluster;
use crate::support::objects::identity_names;
use crate::support::{assert_exit, report, run, summary};

/// Run errors or preflight checks that mention a refusal by RBAC.
fn forbidden_mentions(r: &serde_json::Value) -> Vec<String> {
    let mut found = Vec::new();
    for e in r["errors"].as_array().into_iter().flatten() {
        let s = e.to_string();
        if s.contains("403") || s.to_lowercase().contains("forbidden") {
            found.push(s);
        }
    }
    for c in r["preflight"]["checks"].as_array().into_iter().flatten() {
        let s = c.to_string();
        if s.contains("403") || s.to_lowercase().contains("forbidden") {
            found.push(s);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_published_role_is_enough_for_scan_delete_mark_and_diagnose() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let seeded = seed(&cluster, 500).await;
    let gc = cluster.gc_kubeconfig();

    let out = run(&gc, &["scan", "-o", "json"]).await;
    assert_exit(&out, 0);
    assert_eq!(forbidden_mentions(&report(&out)), Vec::<String>::new());

    let out = run(
        &gc,
        &["delete", "--yes", "--mark", "-o", "json", "--qps", "500"],
    )
    .await;
    assert_exit(&out, 0);
    let r = report(&out);
    assert_eq!(forbidden_mentions(&r), Vec::<String>::new());
    assert_eq!(summary(&r, "deleted"), seeded.stale.len() as u64);
    assert_eq!(
        summary(&r, "marked"),
        100,
        "the unmarked unused identities were marked"
    );

    let out = run(&gc, &["diagnose", "-o", "json"]).await;
    assert_exit(&out, 0);
    let d = report(&out);
    // The warnings and the workloads problem are where diagnose reports a
    // read it was refused (the whole document also matches "403" inside a
    // timestamp or a count).
    let problems = format!("{} {}", d["warnings"], d["gcHealth"]["workloadsProblem"]);
    assert!(
        !problems.contains("no permission")
            && !problems.contains("403")
            && !problems.contains("forbidden"),
        "diagnose met a refusal: {}",
        d["warnings"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_delete_is_refused_before_any_write() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let seeded = seed(&cluster, 200).await;
    // The published rules minus delete and patch, for the user `viewer`.
    cluster.apply(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cilium-gc-readonly}
rules:
  - apiGroups: ["cilium.io"]
    resources: ["ciliumidentities"]
    verbs: ["list", "get"]
  - apiGroups: ["cilium.io"]
    resources: ["ciliumendpoints", "ciliumendpointslices"]
    verbs: ["list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cilium-gc-readonly}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cilium-gc-readonly}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: cilium-gc-viewer, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cilium-gc}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}]
"#,
    );
    // admin may impersonate: `--as viewer` is parsed as kubectl parses it.
    let admin = cluster.admin_kubeconfig();
    let out = run(&admin, &["--as", "viewer", "scan", "-o", "json"]).await;
    assert_exit(&out, 0);
    let out = run(&admin, &["--as", "viewer", "delete", "--yes", "-o", "json"]).await;
    assert_exit(&out, 3);
    let r = report(&out);
    assert_eq!(
        r["aborted"]["reason"], "preflight-refused",
        "{}",
        r["aborted"]
    );
    assert!(
        r["aborted"].to_string().contains("delete"),
        "the refusal names the missing verb: {}",
        r["aborted"]
    );
    assert_eq!(summary(&r, "deleted"), 0);
    let client = cluster.admin().await;
    assert_eq!(
        identity_names(&client).await,
        seeded.all,
        "nothing was written"
    );
}
