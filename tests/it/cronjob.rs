//! `examples/cronjob.yaml`: its RBAC is exactly `cilium_gc_cluster::rbac::PERMISSIONS` for a
//! `delete --mark` run with CiliumEndpointSlices (no more, no wildcards), and
//! its CronJob sweeps every 15 minutes, never overlapping, locked down.

use std::collections::BTreeSet;

use serde_json::Value;

use cilium_gc_cluster::rbac::{required, PERMISSIONS};

use crate::support::repo_path;

/// (group, resource, verb)
type Grant = (String, String, String);

fn documents() -> Vec<Value> {
    let path = repo_path("examples/cronjob.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn one(docs: &[Value], kind: &str) -> Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(
        found.len(),
        1,
        "examples/cronjob.yaml should have one {kind}"
    );
    found[0].clone()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

/// Every (group, resource, verb) the rules grant; panics on wildcards.
fn grants(role: &Value) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        let (groups, resources, verbs) = (
            strings(&rule["apiGroups"]),
            strings(&rule["resources"]),
            strings(&rule["verbs"]),
        );
        for w in groups.iter().chain(&resources).chain(&verbs) {
            assert!(!w.contains('*'), "wildcard {w:?} in {}", role["kind"]);
        }
        for g in &groups {
            for r in &resources {
                for v in &verbs {
                    out.insert((g.clone(), r.clone(), v.clone()));
                }
            }
        }
    }
    out
}

/// Cluster-scoped: what a `delete --mark` run with slices requires.
/// Namespaced: every namespaced permission, the optional ConfigMap read
/// included (without it a run assumes Cilium's defaults).
fn wanted(namespaced: bool) -> BTreeSet<Grant> {
    let perms =
        if namespaced {
            PERMISSIONS.to_vec()
        } else {
            // What the run requires, and the optional cluster-wide reads.
            let mut p = required(true, true, true);
            p.extend(PERMISSIONS.iter().filter(|p| {
                !p.namespaced && p.needed_for == cilium_gc_cluster::rbac::Need::Optional
            }));
            p
        };
    perms
        .iter()
        .filter(|p| p.namespaced == namespaced)
        .map(|p| {
            (
                p.group.to_string(),
                p.resource.to_string(),
                p.verb.to_string(),
            )
        })
        .collect()
}

#[test]
fn cluster_role_grants_exactly_what_a_run_needs() {
    let docs = documents();
    let role = one(&docs, "ClusterRole");
    assert_eq!(
        grants(&role),
        wanted(false),
        "ClusterRole vs PERMISSIONS (cluster-scoped)"
    );
}

#[test]
fn role_grants_only_the_optional_reads_each_on_its_one_object() {
    let docs = documents();
    let role = one(&docs, "Role");
    assert_eq!(role["metadata"]["namespace"], "kube-system");
    assert_eq!(
        grants(&role),
        wanted(true),
        "Role vs PERMISSIONS (namespaced)"
    );
    for rule in role["rules"].as_array().unwrap() {
        assert_eq!(strings(&rule["verbs"]).len(), 1, "one verb a rule");
        let resource = &strings(&rule["resources"])[0];
        let perm = PERMISSIONS
            .iter()
            .find(|p| p.namespaced && p.resource == resource)
            .unwrap_or_else(|| panic!("{resource} is not in PERMISSIONS"));
        let names: Vec<String> = perm.resource_name.iter().map(|n| n.to_string()).collect();
        let listed = match &rule["resourceNames"] {
            Value::Null => Vec::new(),
            v => strings(v),
        };
        assert_eq!(
            listed, names,
            "{resource}: the Role names exactly the object the run reads"
        );
    }
}

#[test]
fn bindings_tie_the_roles_to_the_service_account() {
    let docs = documents();
    let sa = one(&docs, "ServiceAccount");
    assert_eq!(sa["metadata"]["name"], "cilium-gc");
    assert_eq!(sa["metadata"]["namespace"], "kube-system");
    for (binding, role) in [
        ("ClusterRoleBinding", "ClusterRole"),
        ("RoleBinding", "Role"),
    ] {
        let b = one(&docs, binding);
        assert_eq!(b["roleRef"]["kind"], role, "{binding}.roleRef.kind");
        assert_eq!(b["roleRef"]["name"], "cilium-gc", "{binding}.roleRef.name");
        let subjects = b["subjects"].as_array().unwrap();
        assert_eq!(subjects.len(), 1, "{binding} binds one subject");
        assert_eq!(subjects[0]["kind"], "ServiceAccount");
        assert_eq!(subjects[0]["name"], "cilium-gc");
        assert_eq!(subjects[0]["namespace"], "kube-system");
    }
}

#[test]
fn cron_job_sweeps_every_15_minutes_without_overlap() {
    let docs = documents();
    let cj = one(&docs, "CronJob");
    let spec = &cj["spec"];
    assert_eq!(spec["schedule"], "*/15 * * * *");
    assert_eq!(spec["concurrencyPolicy"], "Forbid");
    assert!(spec["startingDeadlineSeconds"]
        .as_u64()
        .is_some_and(|s| s > 0));
    assert!(spec["successfulJobsHistoryLimit"].is_u64());

    let pod = &spec["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "cilium-gc");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(
        c["image"],
        format!(
            "ghcr.io/kubectl-cilium-gc/kubectl-cilium-gc:v{}",
            env!("CARGO_PKG_VERSION")
        )
    );
    let args = strings(&c["args"]);
    assert_eq!(
        args.first().map(String::as_str),
        Some("delete"),
        "args {args:?}"
    );
    assert!(
        args.iter().any(|a| a == "--yes"),
        "args {args:?} lack --yes"
    );
    let json = args.windows(2).any(|w| w[0] == "-o" && w[1] == "json")
        || args
            .iter()
            .any(|a| a == "-ojson" || a == "--output=json" || a == "-o=json");
    assert!(json, "args {args:?} lack -o json");
    let push = args
        .windows(2)
        .find(|w| w[0] == "--pushgateway")
        .map(|w| w[1].clone())
        .expect("the example pushes metrics");
    kubectl_cilium_gc::output::metrics::parse_pushgateway_url(&push)
        .expect("a valid Pushgateway URL");
    // The flags the example passes are flags the binary accepts.
    let mut argv = vec!["kubectl-cilium_gc".to_string()];
    argv.extend(args.iter().cloned());
    kubectl_cilium_gc::cli::command("kubectl-cilium_gc")
        .try_get_matches_from(argv)
        .expect("the example's args parse");

    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
    for kind in ["requests", "limits"] {
        for res in ["cpu", "memory"] {
            assert!(
                c["resources"][kind][res].is_string(),
                "resources.{kind}.{res} missing"
            );
        }
    }
}
