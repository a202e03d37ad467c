//! `diagnose --labels` reading the network policies of a live server
//! (issue 36, 3): on the real kube-apiserver with Cilium v1.19.3's own
//! CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy CRDs (from its Go
//! module), policies of the three kinds whose selectors use keys a proposed
//! filter drops, keys it keeps, and a key today's filter already drops. As
//! the plugin's least-privileged user (the published RBAC, whose policy
//! reads are optional), the diagnosis names exactly the policies the filter
//! breaks; as a user with the same rules minus those reads, it says which
//! permissions it lacked, names none, and gives the rest alike.

use std::collections::BTreeSet;
use std::process::Command;

use cilium_gc_cluster::rbac::{Need, PERMISSIONS};
use serde_json::{json, Value};

use crate::support::cluster::Cluster;
use crate::support::objects::{cilium_workloads, create_all, namespace};
use crate::support::operator::{release, Version};
use crate::support::{assert_exit, report, run};

/// The proposal: drop `job-name` (a high-cardinality key of Jobs' pods) and
/// the namespace label `team`.
const FILTER: &str = r"k8s:!job-name k8s:!io\.cilium\.k8s\.namespace\.labels\.team";

/// The resources the optional policy reads are on.
const POLICY_RESOURCES: [&str; 3] = [
    "ciliumnetworkpolicies",
    "ciliumclusterwidenetworkpolicies",
    "networkpolicies",
];

/// Jobs' pods, one identity each (a label set per job), next to two apps.
const JOBS: u64 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_names_the_policies_a_filter_breaks_and_says_when_it_cannot_read_them() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    if crate::support::operator::build(Version::Current).is_none() {
        return;
    }
    // The published permissions: the three policy lists are there, and
    // optional (never required by a run).
    for resource in POLICY_RESOURCES {
        let p = PERMISSIONS
            .iter()
            .find(|p| p.resource == resource)
            .unwrap_or_else(|| panic!("{resource} is not among the published permissions"));
        assert_eq!(
            (p.verb, p.needed_for),
            ("list", Need::Optional),
            "{resource}"
        );
    }
    install_policy_crds(&cluster);
    // The agents' release picks the built-in patterns the filter adds to.
    cluster.apply(&cilium_workloads(&release(Version::Current)));
    let client = cluster.admin().await;
    create_all(&client, world()).await;
    cluster.apply(POLICIES);
    let viewer = bind_without_policy_reads(&cluster);
    // The premise, from the server's RBAC: the published user may list
    // the policies, the other may not.
    for resource in POLICY_RESOURCES {
        assert_eq!(
            can_list(&cluster, "cilium-gc", resource),
            "yes",
            "{resource}"
        );
        assert_eq!(can_list(&cluster, viewer, resource), "no", "{resource}");
    }

    let out = run(
        &cluster.gc_kubeconfig(),
        &["diagnose", "-o", "json", "--labels", FILTER],
    )
    .await;
    assert_exit(&out, 0);
    let full = report(&out);
    let w = &full["labelsWhatIf"];
    assert_eq!(w["defaultsRelease"], "v1.19.3", "{w}");
    assert_eq!(w["policiesRead"], 7, "every policy of the three kinds: {w}");
    assert_eq!(w["policiesProblem"], Value::Null, "{w}");
    assert_eq!(
        affected(w),
        BTreeSet::from([
            (
                "cilium-network-policy".to_string(),
                "shop/orders".to_string(),
                "k8s:job-name".to_string()
            ),
            (
                "cilium-clusterwide-network-policy".to_string(),
                "batch-egress".to_string(),
                "k8s:job-name".to_string()
            ),
            (
                "network-policy".to_string(),
                "shop/from-team".to_string(),
                "k8s:io.cilium.k8s.namespace.labels.team".to_string()
            ),
        ]),
        "exactly the policies selecting on a key the filter drops and today's keeps"
    );
    // What the filter saves: the jobs' label sets collapse into one.
    assert_eq!(w["identities"], JOBS + 2, "{w}");
    assert_eq!(w["labelSetsNow"], JOBS + 2, "{w}");
    assert_eq!(w["labelSetsAfter"], 3, "{w}");
    assert_eq!(w["droppedKeys"][0]["key"], "k8s:job-name", "{w}");
    assert_eq!(w["droppedKeys"][0]["distinctValues"], JOBS, "{w}");
    let finding = full["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "labels-filter-breaks-policies")
        .unwrap_or_else(|| panic!("no labels-filter-breaks-policies: {}", full["findings"]))
        .clone();
    assert_eq!(finding["severity"], "warning");
    let evidence = finding["evidence"].to_string();
    for name in ["shop/orders", "batch-egress", "shop/from-team"] {
        assert!(evidence.contains(name), "{name}: {evidence}");
    }

    // Without the optional reads: the policies were not read, each missing
    // permission named; the rest of the diagnosis is the same.
    let out = run(
        &cluster.admin_kubeconfig(),
        &["--as", viewer, "diagnose", "-o", "json", "--labels", FILTER],
    )
    .await;
    assert_exit(&out, 0);
    let partial = report(&out);
    let p = &partial["labelsWhatIf"];
    let problem = p["policiesProblem"].as_str().unwrap_or_default();
    for resource in POLICY_RESOURCES {
        assert!(
            problem.contains(&format!("no permission to list {resource} (optional)")),
            "{resource}: {problem}"
        );
    }
    assert_eq!(p["policiesRead"], 0, "{p}");
    assert_eq!(p["policies"], json!([]), "{p}");
    let codes = |d: &Value| -> BTreeSet<String> {
        d["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_string())
            .collect()
    };
    let mut expected = codes(&full);
    expected.remove("labels-filter-breaks-policies");
    assert_eq!(codes(&partial), expected, "the other findings alike");
    for field in [
        "labelSetsNow",
        "labelSetsAfter",
        "droppedKeys",
        "identities",
    ] {
        assert_eq!(p[field], w[field], "{field}");
    }
    assert_eq!(partial["identitySpace"], full["identitySpace"]);
}

/// CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy as Cilium
/// v1.19.3 defines them: the CRD files of its Go module (the one
/// tests/cilium/current builds the operator from; cached by its build).
fn install_policy_crds(cluster: &Cluster) {
    let out = Command::new("go")
        .args(["mod", "download", "-json", "github.com/cilium/cilium"])
        .current_dir(crate::support::repo_path("tests/cilium/current"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("go runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let module: Value = serde_json::from_slice(&out.stdout).expect("go mod download -json");
    assert_eq!(module["Version"], "v1.19.3", "{module}");
    let crds = std::path::Path::new(module["Dir"].as_str().expect("Dir"))
        .join("pkg/k8s/apis/cilium.io/client/crds/v2");
    for plural in &POLICY_RESOURCES[..2] {
        let file = crds.join(format!("{plural}.yaml"));
        // Too large for the last-applied annotation of a client-side apply.
        let out = cluster.kubectl(&["create", "-f", file.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Right after the create, `kubectl wait` fails on a CRD with no
    // conditions yet: ask again, for at most 60 s.
    for plural in &POLICY_RESOURCES[..2] {
        let crd = format!("crd/{plural}.cilium.io");
        let established = (0..60).any(|_| {
            let wait = [
                "wait",
                "--for",
                "condition=established",
                "--timeout",
                "1s",
                &crd,
            ];
            let ok = cluster.kubectl(&wait).status.success();
            if !ok {
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            ok
        });
        assert!(established, "{crd} established");
    }
}

/// A namespace `shop` and its identities as Cilium writes them: `web` and
/// `db`, and one per Job (`app=batch`, its own `job-name`), all in a
/// namespace labelled `team=payments`.
fn world() -> Vec<Value> {
    let identity = |id: u64, app: &str, job: Option<u64>| {
        let mut labels = json!({
            "k8s:app": app,
            "k8s:io.kubernetes.pod.namespace": "shop",
            "k8s:io.cilium.k8s.namespace.labels.team": "payments",
            "k8s:io.cilium.k8s.policy.cluster": "default",
            "k8s:io.cilium.k8s.policy.serviceaccount": "default",
        });
        if let Some(j) = job {
            labels["k8s:job-name"] = json!(format!("nightly-{j}"));
        }
        json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumIdentity",
            "metadata": {"name": id.to_string(), "labels": {"io.kubernetes.pod.namespace": "shop"}},
            "security-labels": labels,
        })
    };
    let mut objects = vec![
        namespace("shop"),
        identity(1000, "web", None),
        identity(1001, "db", None),
    ];
    objects.extend((0..JOBS).map(|j| identity(2000 + j, "batch", Some(j))));
    objects
}

/// Seven policies: three select on a key the filter drops (one of each
/// kind), three only on keys it keeps, one on `controller-uid`, which the
/// built-in patterns already drop (nothing changes for it).
const POLICIES: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: orders, namespace: shop}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingress: [{fromEndpoints: [{matchLabels: {job-name: nightly-1}}]}]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: web, namespace: shop}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingress: [{fromEndpoints: [{matchLabels: {"k8s:io.kubernetes.pod.namespace": shop}}]}]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: legacy, namespace: shop}
spec:
  endpointSelector: {matchLabels: {controller-uid: 0f0e}}
  ingress: [{fromEndpoints: [{matchLabels: {app: web}}]}]
---
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: batch-egress}
spec:
  endpointSelector: {matchExpressions: [{key: job-name, operator: Exists}]}
  egress: [{toEndpoints: [{matchLabels: {app: db}}]}]
---
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: db}
spec:
  endpointSelector: {matchLabels: {app: db}}
  ingress: [{fromEndpoints: [{matchLabels: {"k8s:io.cilium.k8s.namespace.labels.tier": front}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-team, namespace: shop}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {team: payments}}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: shop}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress: [{from: [{podSelector: {matchLabels: {app: web}}}]}]
"#;

/// The user `viewer`: the published cluster-wide rules (from the same
/// permission table the published ClusterRole is kept equal to) minus the
/// optional policy reads, and the published Role in kube-system. Returns
/// its name, for `--as` as admin (who may impersonate).
fn bind_without_policy_reads(cluster: &Cluster) -> &'static str {
    let rules: Vec<Value> = PERMISSIONS
        .iter()
        .filter(|p| !p.namespaced && !POLICY_RESOURCES.contains(&p.resource))
        .map(|p| json!({"apiGroups": [p.group], "resources": [p.resource], "verbs": [p.verb]}))
        .collect();
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "cilium-gc-no-policies"}, "rules": rules,
    });
    cluster.apply(&serde_json::to_string(&role).unwrap());
    cluster.apply(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cilium-gc-no-policies}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cilium-gc-no-policies}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: cilium-gc-viewer, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cilium-gc}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}]
"#,
    );
    "viewer"
}

/// `kubectl auth can-i list <resource> --all-namespaces --as <user>`.
fn can_list(cluster: &Cluster, user: &str, resource: &str) -> String {
    let out = cluster.kubectl(&[
        "auth",
        "can-i",
        "list",
        resource,
        "--all-namespaces",
        "--as",
        user,
    ]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `(kind, [namespace/]name, key)` of every policy the what-if names.
fn affected(w: &Value) -> BTreeSet<(String, String, String)> {
    w["policies"]
        .as_array()
        .expect("policies")
        .iter()
        .flat_map(|p| {
            let at = match p["namespace"].as_str() {
                Some(ns) => format!("{ns}/{}", p["name"].as_str().unwrap()),
                None => p["name"].as_str().unwrap().to_string(),
            };
            let kind = p["kind"].as_str().unwrap().to_string();
            p["keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |k| (kind.clone(), at.clone(), k.as_str().unwrap().to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}
