//! What Cilium install the simulated cluster has: versions (which known GC
//! defects apply) and the operator's pods (restarts). Plain data, read by
//! the scenario, the server state and the `kube-system` routes.

use std::time::Duration;

/// Cilium as installed in the simulated cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct CiliumInstall {
    /// Namespace of the workloads.
    pub namespace: String,
    /// Image of the cilium-operator Deployment's container.
    pub operator_image: String,
    /// Image of the cilium DaemonSet's `cilium-agent` container.
    pub agent_image: String,
    /// The operator's pods (label `io.cilium/app=operator`).
    pub operator_pods: Vec<OperatorPod>,
}

/// One cilium-operator pod.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorPod {
    /// Pod name.
    pub name: String,
    /// `restartCount` of its container.
    pub restarts: u32,
    /// How long the container has been running (since its last restart).
    pub running_for: Duration,
    /// How long ago the pod was created.
    pub age: Duration,
}

impl Default for CiliumInstall {
    /// Cilium 1.15.6, two operator replicas that never restarted.
    fn default() -> Self {
        CiliumInstall::version("v1.15.6")
    }
}

impl CiliumInstall {
    /// Operator and agent at the same `tag`, two healthy operator replicas.
    pub fn version(tag: &str) -> Self {
        let day = Duration::from_secs(86_400);
        CiliumInstall {
            namespace: "kube-system".into(),
            operator_image: format!("quay.io/cilium/operator-generic:{tag}"),
            agent_image: format!("quay.io/cilium/cilium:{tag}"),
            operator_pods: [
                "cilium-operator-6d9f7c8b5-2xkqp",
                "cilium-operator-6d9f7c8b5-h7wz4",
            ]
            .into_iter()
            .map(|name| OperatorPod {
                name: name.into(),
                restarts: 0,
                running_for: 12 * day,
                age: 12 * day,
            })
            .collect(),
        }
    }
}
