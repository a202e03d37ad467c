//! The CronJob, run as the CronJob runs (issue 26): `examples/cronjob.yaml`
//! applied to the real kube-apiserver, a Job created from the CronJob, and
//! the plugin run exactly as that Job's container would be: no kubeconfig,
//! `KUBERNETES_SERVICE_HOST`/`PORT`, a token of the `cilium-gc`
//! ServiceAccount from the TokenRequest API and the cluster CA at the
//! standard service-account paths (inside a private mount namespace, so the
//! machine's own `/var/run` is untouched), as the pod's user 65532, with
//! the Job's own command and args. Its metrics go to a real Pushgateway.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::scale::seed;
use crate::support::cluster::Cluster;
use crate::support::objects::identity_names;
use crate::support::{repo_path, report, summary, tool_or_skip, tools, RUN_TIMEOUT};

/// Where a pod finds its ServiceAccount's credentials.
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The address the Job pushes to in a cluster, replaced by the real
/// Pushgateway's loopback URL (the only change to the Job's args).
const CLUSTER_PUSHGATEWAY: &str = "http://pushgateway.monitoring.svc:9091";

fn kubectl_json(cluster: &Cluster, args: &[&str]) -> Value {
    let out = cluster.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("kubectl -o json")
}

/// Runs `command args` as the pod would: in a private mount namespace with
/// a tmpfs on /run holding the ServiceAccount files and the binary, as user
/// and group 65532 (the CronJob's securityContext), with only the
/// environment the kubelet gives a pod's container.
fn run_as_pod(secrets: &Path, plugin: &Path, port: u16, args: &[String]) -> Output {
    let script = format!(
        r#"set -eu
mount -t tmpfs -o mode=0755 kcg-pod-run /run
mkdir -p {SA_DIR} /run/kcg-bin
cp "$SECRETS/token" "$SECRETS/ca.crt" "$SECRETS/namespace" {SA_DIR}/
cp "$PLUGIN" /run/kcg-bin/kubectl-cilium_gc
chmod -R a+rX /run
cd /
exec setpriv --reuid 65532 --regid 65532 --clear-groups \
  env -i PATH=/run/kcg-bin HOME=/nonexistent \
  KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT={port} \
  KUBERNETES_SERVICE_PORT_HTTPS={port} "$@""#
    );
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
        "sh",
    ])
    .args(args)
    .env_clear()
    .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    .env("SECRETS", secrets)
    .env("PLUGIN", plugin);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("unshare runs");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    rx.recv_timeout(RUN_TIMEOUT)
        .expect("the Job's run finished in time")
        .expect("unshare ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cronjobs_job_deletes_exactly_the_stale_identities_in_cluster_and_pushes_metrics() {
    if !["unshare", "setpriv"]
        .iter()
        .all(|t| tool_or_skip(t, "the CronJob run as its pod"))
    {
        return;
    }
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let Some(pg) = tools::Pushgateway::start() else {
        return;
    };
    // The published manifest, applied as the README says (cluster.sh applied
    // it once already; applying again must change nothing it cannot).
    let out = cluster.kubectl(&[
        "apply",
        "-f",
        repo_path("examples/cronjob.yaml").to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (kind, ns) in [
        ("serviceaccount", Some("kube-system")),
        ("clusterrole", None),
        ("clusterrolebinding", None),
        ("role", Some("kube-system")),
        ("rolebinding", Some("kube-system")),
        ("cronjob", Some("kube-system")),
    ] {
        let mut args = vec!["get", kind, "cilium-gc", "-o", "json"];
        if let Some(ns) = ns {
            args.extend(["-n", ns]);
        }
        let obj = kubectl_json(&cluster, &args);
        assert_eq!(obj["metadata"]["name"], "cilium-gc", "{kind}");
    }
    // A Job from the CronJob, as its schedule would create (no controller
    // manager runs here to start its pod: this test is that pod).
    let out = cluster.kubectl(&[
        "-n",
        "kube-system",
        "create",
        "job",
        "cilium-gc-manual",
        "--from=cronjob/cilium-gc",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = kubectl_json(
        &cluster,
        &[
            "-n",
            "kube-system",
            "get",
            "job",
            "cilium-gc-manual",
            "-o",
            "json",
        ],
    );
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "cilium-gc");
    let container = &pod["containers"][0];
    let mut argv: Vec<String> = container["command"]
        .as_array()
        .unwrap()
        .iter()
        .chain(container["args"].as_array().unwrap())
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(argv[0], "kubectl-cilium_gc", "the image's binary");
    let at = argv
        .iter()
        .position(|a| a == CLUSTER_PUSHGATEWAY)
        .expect("the Job pushes to the in-cluster Pushgateway");
    argv[at] = pg.url.clone();
    assert_eq!(
        pod["securityContext"]["runAsUser"], 65532,
        "run_as_pod runs as the CronJob's user"
    );

    // The ServiceAccount's token from the TokenRequest API.
    let out = cluster.kubectl(&[
        "-n",
        "kube-system",
        "create",
        "token",
        "cilium-gc",
        "--duration",
        "1h",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("token"), out.stdout.trim_ascii()).unwrap();
    std::fs::copy(cluster.ca_cert(), secrets.path().join("ca.crt")).unwrap();
    std::fs::write(secrets.path().join("namespace"), "kube-system").unwrap();

    let seeded = seed(&cluster, 200).await;
    let admin = cluster.admin().await;
    let before = identity_names(&admin).await;
    assert!(!seeded.stale.is_empty());

    let out = run_as_pod(
        secrets.path(),
        Path::new(env!("CARGO_BIN_EXE_kubectl-cilium_gc")),
        cluster.port(),
        &argv,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the Job's run:\n{stderr}");
    assert!(!stderr.contains("metrics not pushed"), "{stderr}");
    let r = report(&out);
    assert_eq!(
        r["cluster"]["server"]
            .as_str()
            .map(|s| s.trim_end_matches('/')),
        Some(format!("https://127.0.0.1:{}", cluster.port()).as_str()),
        "the in-cluster address: {}",
        r["cluster"]
    );
    assert_eq!(summary(&r, "deleted"), seeded.stale.len() as u64);

    // Exactly the stale identities are gone.
    let after = identity_names(&admin).await;
    let expected: std::collections::BTreeSet<String> =
        before.difference(&seeded.stale).cloned().collect();
    assert_eq!(after, expected);

    // And the run's metrics reached the real Pushgateway.
    let api: Value = serde_json::from_str(&pg.get("/api/v1/metrics")).unwrap();
    let group = &api["data"][0];
    assert_eq!(group["labels"]["job"], "kubectl-cilium-gc", "{api}");
    let deleted = group["cilium_gc_deleted_identities"]["metrics"][0]["value"]
        .as_str()
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(deleted, Some(seeded.stale.len() as f64), "{group}");
    let success = group["cilium_gc_run_success"]["metrics"][0]["value"].as_str();
    assert_eq!(success, Some("1"), "{group}");
}
