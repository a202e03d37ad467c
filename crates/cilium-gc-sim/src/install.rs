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
    /// Its identity-GC metrics, served on port [`OPERATOR_METRICS_PORT`]
    /// behind the API server's pod proxy; `None`: nothing listens there
    /// (the proxy answers 503).
    pub metrics: Option<OperatorMetrics>,
}

pub use cilium_gc_kinds::OPERATOR_METRICS_PORT;

/// What a cilium-operator pod's `/metrics` says about its identity GC, as
/// the real operator writes it (operator/identitygc/metrics.go): gauges
/// set at the end of a completed pass only, and the error log count.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OperatorMetrics {
    /// `cilium_operator_identity_gc_runs{outcome="success"}`; `None` on a
    /// standby replica or before the first completed pass.
    pub runs_success: Option<u64>,
    /// `cilium_operator_identity_gc_entries{status="alive"}` and
    /// `{status="deleted"}` of the last completed pass.
    pub entries: Option<(u64, u64)>,
    /// `cilium_operator_errors_warnings_total{level="error",subsystem="identity-heartbeat"}`
    /// (`level="ERROR"` in the current format, as 1.19 writes it).
    pub gc_errors: u64,
    /// Current releases' format: an `identity_type="crd"` label on the GC
    /// series (1.15 has none).
    pub current_format: bool,
    /// `cilium_operator_identity_gc_latency{outcome="success"}`, the last
    /// completed pass's seconds: only current releases publish it.
    pub last_pass_seconds: Option<f64>,
}

impl OperatorMetrics {
    /// The text exposition the operator serves, its process started
    /// `started_unix` seconds after the epoch.
    pub fn exposition(&self, started_unix: f64) -> String {
        let t = if self.current_format {
            "identity_type=\"crd\","
        } else {
            ""
        };
        let mut o = String::from("# HELP cilium_operator_process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE cilium_operator_process_start_time_seconds gauge\n");
        o += &format!("cilium_operator_process_start_time_seconds {started_unix:.2}\n");
        let level = if self.current_format {
            "ERROR"
        } else {
            "error"
        };
        o += "# TYPE cilium_operator_errors_warnings_total counter\n";
        o += &format!(
            "cilium_operator_errors_warnings_total{{level=\"{level}\",subsystem=\"identity-heartbeat\"}} {}\n",
            self.gc_errors
        );
        if let Some(n) = self.runs_success {
            o += "# TYPE cilium_operator_identity_gc_runs gauge\n";
            o += &format!("cilium_operator_identity_gc_runs{{{t}outcome=\"success\"}} {n}\n");
        }
        if let (true, Some(secs)) = (self.current_format, self.last_pass_seconds) {
            o += "# TYPE cilium_operator_identity_gc_latency gauge\n";
            o += &format!("cilium_operator_identity_gc_latency{{{t}outcome=\"success\"}} {secs}\n");
        }
        if let Some((alive, deleted)) = self.entries {
            o += "# TYPE cilium_operator_identity_gc_entries gauge\n";
            o += &format!("cilium_operator_identity_gc_entries{{{t}status=\"alive\"}} {alive}\n");
            o += &format!(
                "cilium_operator_identity_gc_entries{{{t}status=\"deleted\"}} {deleted}\n"
            );
        }
        o
    }
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
                metrics: None,
            })
            .collect(),
        }
    }
}
