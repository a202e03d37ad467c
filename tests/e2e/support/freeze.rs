//! Holding a churning test world still for a moment: SIGSTOP to the
//! processes that write it (the agents programs this test started, the real
//! cilium-operator), SIGCONT when the [`Freeze`] drops. Nothing is ended:
//! a stopped process resumes where it was, its requests in flight answered.
//!
//! What "still" means is judged by the server, never assumed: [`Snapshot`]
//! is every CiliumIdentity's and CiliumEndpoint's resourceVersion, and a
//! test compares one taken before and one after what it did while frozen.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::cluster::Cluster;
use crate::support::objects::{api, Kind};

/// Writers stopped with SIGSTOP; each gets SIGCONT on drop.
pub struct Freeze {
    pids: Vec<i32>,
}

impl Freeze {
    /// Stop every `cilium-agents` process this test binary started on
    /// `cluster` (its children whose arguments name the cluster's admin
    /// kubeconfig: no other test's) and the operator `operator.sh` started on
    /// it. Fails unless it finds `agents` agents programs and the operator.
    pub fn writers(cluster: &Cluster, agents: usize) -> Freeze {
        let mut pids = agents_of(cluster);
        assert_eq!(
            pids.len(),
            agents,
            "agents programs of this cluster running: {pids:?}"
        );
        pids.push(operator_pid(cluster));
        Freeze::stop(pids)
    }

    /// Stop only the operator `operator.sh` started on `cluster`: the
    /// agents churn on, and no identity is marked, stripped by it or
    /// deleted by it while this lives.
    pub fn operator(cluster: &Cluster) -> Freeze {
        Freeze::stop(vec![operator_pid(cluster)])
    }

    fn stop(pids: Vec<i32>) -> Freeze {
        for &pid in &pids {
            // SAFETY: kill(2) on a process this test started.
            let rc = unsafe { libc::kill(pid, libc::SIGSTOP) };
            assert_eq!(rc, 0, "SIGSTOP {pid}");
        }
        Freeze { pids }
    }
}

/// The pid of the operator `operator.sh` started on `cluster`, checked to
/// be the operator.
fn operator_pid(cluster: &Cluster) -> i32 {
    let operator = std::fs::read_to_string(cluster.dir().join("operator/operator.pid"))
        .expect("operator.pid")
        .trim()
        .parse::<i32>()
        .expect("a pid");
    assert!(
        cmdline(operator).is_some_and(|c| c[0].ends_with("cilium-operator-generic")),
        "pid {operator} is the operator"
    );
    operator
}

impl Drop for Freeze {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: kill(2) on a process this test started and stopped.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
    }
}

/// The arguments of process `pid`, when it exists.
fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    (!args.is_empty()).then_some(args)
}

/// The parent pid of `pid` (`/proc/<pid>/stat`, after the command's `)`).
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Children of this process running `cilium-agents` on `cluster`.
fn agents_of(cluster: &Cluster) -> Vec<i32> {
    let me = std::process::id() as i32;
    let kubeconfig = cluster.admin_kubeconfig();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if parent(pid) != Some(me) {
            continue;
        }
        let Some(args) = cmdline(pid) else { continue };
        let ours = args[0].ends_with("/cilium-agents")
            && args.iter().any(|a| Path::new(a) == kubeconfig.as_path());
        if ours {
            found.push(pid);
        }
    }
    found.sort_unstable();
    found
}

/// Every CiliumIdentity's and CiliumEndpoint's resourceVersion, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub identities: BTreeMap<String, String>,
    pub endpoints: BTreeMap<String, String>,
}

impl Snapshot {
    /// What the server holds now, as `admin`.
    pub async fn read(client: &kube::Client) -> Snapshot {
        let versions = |kind| async move {
            api(client, kind, None)
                .list_metadata(&Default::default())
                .await
                .expect("listed")
                .items
                .into_iter()
                .map(|o| {
                    let m = o.metadata;
                    let name = match m.namespace {
                        Some(ns) => format!("{ns}/{}", m.name.unwrap_or_default()),
                        None => m.name.unwrap_or_default(),
                    };
                    (name, m.resource_version.unwrap_or_default())
                })
                .collect()
        };
        Snapshot {
            identities: versions(Kind::Identity).await,
            endpoints: versions(Kind::Endpoint).await,
        }
    }

    /// Once two reads half a second apart agree (a stopped writer's request
    /// already sent is still answered), at most 20 s: what the server holds
    /// once its writers are stopped.
    pub async fn settled(client: &kube::Client) -> Snapshot {
        let mut last = Snapshot::read(client).await;
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = Snapshot::read(client).await;
            if now == last {
                return now;
            }
            last = now;
        }
        panic!("the identities and endpoints still changed 20 s after their writers stopped");
    }
}
