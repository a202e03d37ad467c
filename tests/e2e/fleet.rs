//! Fleet mode against real servers: two real clusters and a context nobody
//! answers in one kubeconfig, as the least-privileged user on each.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::scale::seed;
use crate::support::cluster::Cluster;
use crate::support::objects::identity_names;
use crate::support::{assert_exit, repo_path, run};

/// `server`, `certificate-authority` and `token` of a kubeconfig
/// `cluster.sh` wrote.
fn connection(kubeconfig: &std::path::Path) -> (String, String, String) {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap_or_else(|| panic!("{key} missing in {}", kubeconfig.display()))
            .trim()
            .to_owned()
    };
    (
        field("server:"),
        field("certificate-authority:"),
        field("token:"),
    )
}

/// One kubeconfig: `(context, server, CA file, token)` each.
fn merged(contexts: &[(&str, String, String, String)]) -> String {
    let mut y = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (n, server, ca, _) in contexts {
        y += &format!(
            "- name: {n}\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n"
        );
    }
    y += "users:\n";
    for (n, _, _, token) in contexts {
        y += &format!("- name: {n}\n  user:\n    token: {token}\n");
    }
    y += "contexts:\n";
    for (n, ..) in contexts {
        y += &format!("- name: {n}\n  context: {{cluster: {n}, user: {n}}}\n");
    }
    y + &format!("current-context: {}\n", contexts[0].0)
}

/// `east` is collected; `west` runs in kvstore mode (cilium-config says so)
/// and is refused with nothing written; `gone` is unreachable. The fleet
/// exits 3, every report validates, and `east`'s diagnosis was made with
/// the published Role's reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_real_clusters() {
    let Some(east) = Cluster::up(&[]) else {
        return;
    };
    let Some(west) = Cluster::up(&[]) else {
        return;
    };
    let seeded = seed(&east, 300).await;
    let west_seeded = seed(&west, 100).await;
    west.set_cilium_config(&[("identity-allocation-mode", "kvstore")]);
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (es, eca, et) = connection(&east.gc_kubeconfig());
    let (ws, wca, wt) = connection(&west.gc_kubeconfig());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("fleet.kubeconfig");
    std::fs::write(
        &kubeconfig,
        merged(&[
            ("east", es, eca.clone(), et),
            ("west", ws, wca, wt),
            ("gone", format!("https://{closed}"), eca, "x".into()),
        ]),
    )
    .unwrap();
    let out = run(
        &kubeconfig,
        &[
            "delete",
            "--all-contexts",
            "--yes",
            "--qps",
            "0",
            "-o",
            "json",
        ],
    )
    .await;
    assert_exit(&out, 3);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let validate = |schema_file: &str, v: &Value| {
        let schema: Value =
            serde_json::from_str(&std::fs::read_to_string(repo_path(schema_file)).unwrap())
                .unwrap();
        let errors: Vec<String> = jsonschema::validator_for(&schema)
            .unwrap()
            .iter_errors(v)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{schema_file}: {errors:?}");
    };
    validate("schema/fleet-report-v1.json", &doc);
    let entries = doc["clusters"].as_array().unwrap();
    for e in entries {
        validate("schema/report-v1.json", &e["report"]);
    }
    let (e, w, g) = (&entries[0], &entries[1], &entries[2]);
    assert_eq!(e["status"], "succeeded", "{}", e["error"]);
    assert_eq!(e["report"]["summary"]["deleted"], seeded.stale.len() as u64);
    assert!(e["report"]["cluster"]["kubernetesVersion"]
        .as_str()
        .unwrap()
        .starts_with(crate::support::cluster::k8s_version()));
    assert!(
        e["diagnosis"]["findings"].is_array(),
        "diagnosed: {}",
        e["diagnosisError"]
    );
    let east_left = identity_names(&east.admin().await).await;
    let expected: BTreeSet<String> = seeded.all.difference(&seeded.stale).cloned().collect();
    assert_eq!(
        east_left, expected,
        "exactly the stale ones deleted on east"
    );
    assert_eq!(w["exitCode"], 3);
    assert!(w["error"]["message"].as_str().unwrap().contains("kvstore"));
    assert_eq!(w["gcVerdict"], "not in CRD mode");
    assert_eq!(
        identity_names(&west.admin().await).await,
        west_seeded.all,
        "nothing deleted on west"
    );
    assert_eq!(g["exitCode"], 2);
    assert_eq!(g["error"]["reason"], "read-failed");
    assert_eq!(doc["summary"]["deleted"], seeded.stale.len() as u64);
}
