//! A real etcd + kube-apiserver per test, started by `tests/apiserver/cluster.sh`
//! on free loopback ports and stopped when the test's [`Cluster`] drops (and by
//! the script's watchdog if the test binary is killed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::audit::Audit;
use crate::support::repo_path;

/// One running real cluster: etcd, kube-apiserver, the Cilium CRDs,
/// `cilium-config` and the published RBAC bound to the user `cilium-gc`.
pub struct Cluster {
    dir: PathBuf,
    env: BTreeMap<String, String>,
    /// Judge the audit log when dropped (a negative control turns it off).
    judge_on_drop: AtomicBool,
}

/// The tools the build and the script need, beyond the Rust toolchain.
const TOOLS: [&str; 4] = ["go", "openssl", "curl", "flock"];

/// The Kubernetes release the suite runs against: `KCG_K8S_VERSION` when set
/// (`.ci/run`'s second pass sets the seed's v1.28.15), else the default
/// `K8S_VERSION` of `tests/apiserver/versions.env`. build.sh refuses a
/// release it has no Go module for.
pub fn k8s_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        if let Some(v) = std::env::var("KCG_K8S_VERSION")
            .ok()
            .filter(|v| !v.is_empty())
        {
            return v;
        }
        std::fs::read_to_string(repo_path("tests/apiserver/versions.env"))
            .expect("tests/apiserver/versions.env")
            .lines()
            .find_map(|l| l.strip_prefix("K8S_VERSION=").map(str::to_string))
            .expect("versions.env names K8S_VERSION")
    })
}

/// The minor number of [`k8s_version`] (28, 35): what a test branches on
/// where the two releases differ (docs/real-apiserver.md lists each).
pub fn k8s_minor() -> u32 {
    k8s_version()
        .strip_prefix("v1.")
        .and_then(|rest| rest.split('.').next())
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("not a Kubernetes release: {}", k8s_version()))
}

/// The directory of the built binaries (kube-apiserver, etcd, kubectl) of
/// [`k8s_version`], building them once per test binary (cached across runs
/// by build.sh). `None` when a tool is missing outside CI; in CI that fails
/// the test.
pub fn binaries() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        if !TOOLS
            .iter()
            .all(|t| crate::support::tool_or_skip(t, "the real-apiserver suite"))
        {
            return None;
        }
        let out = Command::new(repo_path("tests/apiserver/build.sh"))
            .arg(k8s_version())
            .output()
            .expect("build.sh runs");
        assert!(
            out.status.success(),
            "building kube-apiserver/etcd failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = String::from_utf8(out.stdout).expect("utf-8 path");
        Some(PathBuf::from(dir.trim()).join("bin"))
    })
    .as_deref()
}

impl Cluster {
    /// Start a cluster, with extra kube-apiserver flags. `None` only when the
    /// tools are missing on a developer's machine (the test then returns).
    pub fn up(extra_apiserver_flags: &[&str]) -> Option<Cluster> {
        let bin = binaries()?;
        // cluster.sh picks free ports, which a process of a test running
        // beside this one may take before etcd binds them: start again
        // (new ports) when that is why it failed.
        let mut attempt = 0;
        let (dir, out) = loop {
            attempt += 1;
            let dir = tempfile::Builder::new()
                .prefix("kcg-e2e.")
                .tempdir()
                .expect("tempdir")
                .keep();
            let out = Command::new(repo_path("tests/apiserver/cluster.sh"))
                .arg("up")
                .arg(&dir)
                .args(["--owner", &std::process::id().to_string(), "--"])
                .args(extra_apiserver_flags)
                .env("KCG_APISERVER_BIN", bin)
                .env("KCG_K8S_VERSION", k8s_version())
                .output()
                .expect("cluster.sh runs");
            let port_taken =
                String::from_utf8_lossy(&out.stderr).contains("address already in use");
            if out.status.success() || !port_taken || attempt == 3 {
                break (dir, out);
            }
        };
        assert!(
            out.status.success(),
            "cluster.sh up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = std::fs::read_to_string(dir.join("env"))
            .expect("env file")
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>();
        // The premise of a pass on another release: that release answers.
        assert_eq!(
            env.get("K8S_VERSION").map(String::as_str),
            Some(k8s_version()),
            "the release cluster.sh started ({})",
            dir.display()
        );
        Some(Cluster {
            dir,
            env,
            judge_on_drop: AtomicBool::new(true),
        })
    }

    /// The directory that holds everything of the cluster (and of a real
    /// cilium-operator started on it, under `operator/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kubeconfig of `admin` (system:masters).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// The kubeconfig of `cilium-gc`, bound only to the published RBAC.
    pub fn gc_kubeconfig(&self) -> PathBuf {
        self.dir.join("cilium-gc.kubeconfig")
    }

    /// The kube-apiserver's loopback port (its certificate covers 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.env["APISERVER_PORT"].parse().expect("APISERVER_PORT")
    }

    /// The cluster CA's certificate (what a pod finds in `ca.crt`).
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// A kube client as `admin`.
    pub async fn admin(&self) -> kube::Client {
        client_for(&self.admin_kubeconfig()).await
    }

    /// Real `kubectl` (the same release as the server) as `admin`.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(Path::new(&self.env["BIN"]).join("kubectl"))
            .arg("--kubeconfig")
            .arg(self.admin_kubeconfig())
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// Sets keys of kube-system's `cilium-config` (a merge patch as
    /// `admin`), as Helm writes them: what the plugin's diagnosis and the
    /// real operator read.
    pub fn set_cilium_config(&self, data: &[(&str, &str)]) {
        let data: serde_json::Map<String, serde_json::Value> = data
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
            .collect();
        let patch = serde_json::json!({ "data": data }).to_string();
        let out = self.kubectl(&[
            "-n",
            "kube-system",
            "patch",
            "configmap",
            "cilium-config",
            "--type=merge",
            "-p",
            &patch,
        ]);
        assert!(
            out.status.success(),
            "patching cilium-config failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A third writer, as a label-syncing controller would be: `kubectl
    /// patch` of one identity's labels with its own field manager,
    /// `label-sync` (what `diagnose` must name among the writers).
    pub fn patch_as_label_sync(&self, identity: &str) {
        let out = self.kubectl(&[
            "patch",
            "ciliumidentities.cilium.io",
            identity,
            "--type=merge",
            "--field-manager=label-sync",
            "-p",
            r#"{"metadata":{"labels":{"team":"payments"}}}"#,
        ]);
        assert!(
            out.status.success(),
            "kubectl patch {identity} as label-sync: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `kubectl apply` of a YAML document as `admin`.
    pub fn apply(&self, yaml: &str) {
        let path = self.dir.join(format!("apply-{}.yaml", rand_suffix()));
        std::fs::write(&path, yaml).expect("write manifest");
        let out = self.kubectl(&["apply", "-f", path.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "kubectl apply failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn script(&self, verb: &str) -> Output {
        let out = Command::new(repo_path("tests/apiserver/cluster.sh"))
            .arg(verb)
            .arg(&self.dir)
            .output()
            .expect("cluster.sh runs");
        assert!(
            out.status.success(),
            "cluster.sh {verb} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Stop kube-apiserver (etcd keeps every object).
    pub fn stop_apiserver(&self) {
        self.script("stop-apiserver");
    }

    /// Start kube-apiserver again on the same port and etcd.
    pub fn start_apiserver(&self) {
        self.script("start-apiserver");
    }

    /// The kube-apiserver's audit log so far (`DIR/audit.log`).
    pub fn audit(&self) -> Audit {
        Audit::read(&self.dir)
    }

    /// This test deleted identities in use as the plugin's user on purpose
    /// (a negative control of the checker): skip the check on drop.
    pub fn violations_expected(&self) {
        self.judge_on_drop.store(false, Ordering::Relaxed);
    }

    /// Compact etcd at its current revision: every continue token and
    /// resourceVersion taken before is expired. Returns the revision.
    pub fn compact(&self) -> u64 {
        let out = self.script("compact");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("compaction revision")
    }
}

impl Drop for Cluster {
    /// Stop the cluster, then judge its audit log: a test whose cluster saw
    /// the plugin's user delete an identity in use, or send an identity
    /// delete without `{uid, resourceVersion}` preconditions, fails here,
    /// whatever it asserted itself (unless it is already failing).
    fn drop(&mut self) {
        let judge = self.judge_on_drop.load(Ordering::Relaxed);
        let audit =
            (judge && !std::thread::panicking() && audit_on()).then(|| Audit::read(&self.dir));
        let _ = Command::new(repo_path("tests/apiserver/cluster.sh"))
            .arg("down")
            .arg(&self.dir)
            .output();
        if let Some(audit) = audit {
            audit.judge(Duration::ZERO).assert_no_plugin_violation();
            audit.assert_plugin_deletes_carry_preconditions();
        }
    }
}

/// cluster.sh writes the audit log unless `KCG_APISERVER_AUDIT=off`.
fn audit_on() -> bool {
    std::env::var("KCG_APISERVER_AUDIT").as_deref() != Ok("off")
}

/// A kube client from a kubeconfig file, without kube's own retries (so a
/// test sees every 429 and 5xx the server sends).
pub async fn client_for(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kube config");
    config.default_retry = false;
    kube::Client::try_from(config).expect("kube client")
}

fn rand_suffix() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default()
}
