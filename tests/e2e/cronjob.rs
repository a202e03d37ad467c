//! The CronJob, run as the CronJob runs (issues 26, 34): `examples/cronjob.yaml`
//! applied to the real kube-apiserver, a Job created from the CronJob, and
//! the Job's container run from the image it names: the image `.ci/image`
//! builds, pushed to a registry on loopback under the Job's own repository
//! and tag, pulled back by digest and unpacked as a runtime would. Its
//! command runs inside that root filesystem (read-only, as the CronJob's
//! `readOnlyRootFilesystem`), resolved through the image's PATH, as the
//! pod's user 65532, with the Job's args; no kubeconfig, only
//! `KUBERNETES_SERVICE_HOST`/`PORT`, a token of the `cilium-gc`
//! ServiceAccount from the TokenRequest API and the cluster CA at the
//! standard service-account paths, and an /etc/hosts that names the
//! Pushgateway as the cluster's DNS would. Its metrics go to a real
//! Pushgateway. The server then holds exactly the identities that were not
//! stale.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::scale::seed;
use crate::support::cluster::Cluster;
use crate::support::image::{self, Registry};
use crate::support::objects::identity_names;
use crate::support::{repo_path, report, summary, tool_or_skip, tools, RUN_TIMEOUT};

/// Where a pod finds its ServiceAccount's credentials.
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The Pushgateway the Job pushes to; /etc/hosts in the run points its name
/// at the real Pushgateway on loopback, whose port replaces 9091 (the only
/// change to the Job's args).
const CLUSTER_PUSHGATEWAY: &str = "http://pushgateway.monitoring.svc:9091";
const PUSHGATEWAY_HOST: &str = "pushgateway.monitoring.svc";

fn kubectl_json(cluster: &Cluster, args: &[&str]) -> Value {
    let out = cluster.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("kubectl -o json")
}

/// What the container runtime gives the Job's container.
struct Container<'a> {
    /// The image's root filesystem, unpacked.
    rootfs: &'a Path,
    /// The image config's `Env` (PATH).
    image_env: Vec<String>,
    /// token, ca.crt, namespace of the ServiceAccount.
    secrets: &'a Path,
    /// The kube-apiserver's loopback port (the `kubernetes` Service).
    port: u16,
}

/// Runs the Job's `argv` as its pod's container would run from the image:
/// in private mount and PID namespaces, the rootfs bind-mounted read-only
/// with a tmpfs of the ServiceAccount's files, /etc/hosts, /proc and a
/// minimal /dev mounted into it, then `unshare --root` into it as user and
/// group 65532 with only the environment the image and the kubelet give
/// (the command looked up through the image's PATH, inside the rootfs).
fn run_in_image(c: &Container, argv: &[String]) -> Output {
    let script = format!(
        r#"set -eu
R="$ROOTFS"
# Mount points, as a runtime creates them in its copy of the rootfs.
mkdir -p "$R{SA_DIR}" "$R/proc" "$R/dev"
: >"$R/etc/hosts"
mount --bind "$R" "$R"
mount -o remount,bind,ro "$R"
mount -t tmpfs -o mode=0755 kcg-sa "$R{SA_DIR}"
cp "$SECRETS/token" "$SECRETS/ca.crt" "$SECRETS/namespace" "$R{SA_DIR}/"
chmod a+r "$R{SA_DIR}"/*
mount --bind "$HOSTS" "$R/etc/hosts"
mount -t proc proc "$R/proc"
mount -t tmpfs -o mode=0755 kcg-dev "$R/dev"
for d in null zero random urandom; do : >"$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done
exec env -i $IMAGE_ENV HOME=/home/nonroot   KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT={port}   KUBERNETES_SERVICE_PORT_HTTPS={port}   unshare --root="$R" --wd=/ --setuid 65532 --setgid 65532 -- "$@""#,
        port = c.port
    );
    // The kubelet's /etc/hosts, readable by the pod's user (a temporary
    // file's 0600 would leave the run with no names at all).
    let hosts = tempfile::NamedTempFile::new().unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(hosts.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::write(
        hosts.path(),
        format!("127.0.0.1\tlocalhost\n127.0.0.1\t{PUSHGATEWAY_HOST}\n"),
    )
    .unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "--kill-child",
        "sh",
        "-c",
        &script,
        "sh",
    ])
    .args(argv)
    .env_clear()
    .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    .env("ROOTFS", c.rootfs)
    .env("SECRETS", c.secrets)
    .env("HOSTS", hosts.path())
    .env("IMAGE_ENV", c.image_env.join(" "));
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
    if !tool_or_skip("unshare", "the CronJob run as its pod") {
        return;
    }
    let Some(built) = image::built() else {
        return;
    };
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
    let pg_port = pg.url.rsplit(':').next().unwrap();
    let at = argv
        .iter()
        .position(|a| a == CLUSTER_PUSHGATEWAY)
        .expect("the Job pushes to the in-cluster Pushgateway");
    argv[at] = format!("http://{PUSHGATEWAY_HOST}:{pg_port}");
    assert_eq!(
        pod["securityContext"]["runAsUser"], 65532,
        "run_in_image runs as the CronJob's user"
    );

    // The image the Job names, from a registry: the one .ci/image built,
    // pushed under the Job's repository and tag, pulled back by digest.
    let named = container["image"].as_str().unwrap();
    assert_eq!(
        named,
        image::release_reference(),
        "the Job runs the release's image"
    );
    let registry = Registry::start();
    let (pushed, digest) = registry.push(&built.layout_tar, named);
    let pinned = image::by_digest(&pushed, &digest);
    let config = image::config(&pinned);
    assert_eq!(config["config"]["User"], "65532:65532");
    let image_env: Vec<String> = config["config"]["Env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    let rootfs = tempfile::tempdir().unwrap();
    image::unpack_rootfs(&pinned, rootfs.path());
    // The Job's command is the image's entrypoint, found through its PATH.
    assert_eq!(argv[0], "kubectl-cilium_gc");
    let entrypoint = config["config"]["Entrypoint"][0].as_str().unwrap();
    assert!(
        entrypoint.ends_with(&format!("/{}", argv[0])),
        "{entrypoint}"
    );
    assert!(
        !rootfs.path().join("bin/sh").exists(),
        "premise: the run has no shell to fall back on"
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

    let out = run_in_image(
        &Container {
            rootfs: rootfs.path(),
            image_env,
            secrets: secrets.path(),
            port: cluster.port(),
        },
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
    // The run was the image's plugin: its commit is the image's revision.
    let revision = config["config"]["Labels"]["org.opencontainers.image.revision"]
        .as_str()
        .unwrap();
    let commit = r["tool"]["commit"].as_str().unwrap_or_default();
    assert!(
        commit.len() >= 7 && revision.starts_with(commit),
        "report's commit {commit:?}, image's revision {revision}"
    );

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
