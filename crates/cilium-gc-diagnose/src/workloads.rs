//! The Cilium workloads a diagnosis reads (optional, like `cilium-config`):
//! the operator's and agents' images, the operator's pods, and where each
//! pod serves its metrics.

use crate::input;
use cilium_gc_cluster::cluster::ApiClient;
use cilium_gc_documents::diagnosis as types;

/// The images of the cilium-operator Deployment and the cilium DaemonSet,
/// and the operator's pods, from the Cilium namespace. Reading them is an
/// optional permission, like `cilium-config`: what cannot be read is said
/// in `problem` and the diagnosis goes on without it.
#[tracing::instrument(skip(api))]
pub(crate) async fn fetch_workloads(api: &ApiClient, namespace: &str) -> input::Workloads {
    use cilium_gc_cluster::retry::Class;
    let mut w = input::Workloads::default();
    let mut problems = Vec::new();
    let mut read = |what: &str, a: &cilium_gc_cluster::cluster::Answer| -> bool {
        match a.class {
            Class::Success => true,
            Class::Forbidden => {
                problems.push(format!("no permission to read {what} (optional)"));
                false
            }
            Class::NotFound => {
                problems.push(format!("{what} not found"));
                false
            }
            _ => {
                problems.push(format!("cannot read {what}: {}", a.message));
                false
            }
        }
    };
    let images = |v: &serde_json::Value| -> Vec<String> {
        let spec = &v["spec"]["template"]["spec"];
        spec["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["image"].as_str().map(str::to_string))
            .collect()
    };
    let deploy = format!("/apis/apps/v1/namespaces/{namespace}/deployments/cilium-operator");
    let a = api.get(&deploy, 1).await;
    if read(&format!("deployment {namespace}/cilium-operator"), &a) {
        w.operator_images = a
            .json::<serde_json::Value>()
            .map(|v| images(&v))
            .unwrap_or_default();
    }
    let ds = format!("/apis/apps/v1/namespaces/{namespace}/daemonsets/cilium");
    let a = api.get(&ds, 1).await;
    if read(&format!("daemonset {namespace}/cilium"), &a) {
        w.agent_images = a
            .json::<serde_json::Value>()
            .map(|v| images(&v))
            .unwrap_or_default();
    }
    let pods =
        format!("/api/v1/namespaces/{namespace}/pods?labelSelector=io.cilium%2Fapp%3Doperator");
    let a = api.get(&pods, 1).await;
    if read(&format!("cilium-operator pods in {namespace}"), &a) {
        let list = a.json::<serde_json::Value>().unwrap_or_default();
        w.operator_pods = operator_pods(&list);
        w.metrics = metrics_targets(&list)
            .into_iter()
            .map(|(pod, port)| types::OperatorMetricsRead {
                pod,
                port: port.unwrap_or(0),
                ..Default::default()
            })
            .collect();
        w.gc_interval_arg = operator_arg(&list, "--identity-gc-interval")
            .and_then(|v| cilium_gc_cluster::connect::parse_duration(&v).ok());
    }
    if !problems.is_empty() {
        w.problem = Some(format!(
            "{}: the operator version, known-defect and restart findings are skipped",
            problems.join("; ")
        ));
    }
    w
}

/// The port of an address like `:9963`, `0.0.0.0:9963` or `[::]:9963`.
pub(crate) fn addr_port(addr: &str) -> Option<u16> {
    addr.trim()
        .trim_matches('"')
        .rsplit_once(':')?
        .1
        .parse()
        .ok()
}

/// The value of `--flag=value` or `--flag value` in any container's
/// command or args of the first pod that has it.
pub(crate) fn operator_arg(list: &serde_json::Value, flag: &str) -> Option<String> {
    let pods = list["items"].as_array()?;
    pods.iter().find_map(|p| {
        let containers = p["spec"]["containers"].as_array()?;
        containers.iter().find_map(|c| {
            let words: Vec<&str> = ["command", "args"]
                .iter()
                .flat_map(|k| c[*k].as_array().into_iter().flatten())
                .filter_map(|w| w.as_str())
                .collect();
            words.iter().enumerate().find_map(|(i, w)| {
                w.strip_prefix(flag)
                    .and_then(|rest| match rest.strip_prefix('=') {
                        Some(v) => Some(v.to_string()),
                        None if rest.is_empty() => words.get(i + 1).map(|v| v.to_string()),
                        None => None,
                    })
            })
        })
    })
}

/// Running operator pods and their metrics port, when the pod says it: a
/// container port named `prometheus` (Cilium's chart), else
/// `--operator-prometheus-serve-addr` in its arguments.
pub(crate) fn metrics_targets(list: &serde_json::Value) -> Vec<(String, Option<u16>)> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["status"]["phase"].as_str() == Some("Running"))
        .filter_map(|p| {
            let name = p["metadata"]["name"].as_str()?.to_string();
            let containers = p["spec"]["containers"].as_array();
            let named = containers
                .into_iter()
                .flatten()
                .flat_map(|c| c["ports"].as_array().into_iter().flatten())
                .find(|port| port["name"].as_str() == Some("prometheus"))
                .and_then(|port| port["containerPort"].as_u64())
                .and_then(|n| u16::try_from(n).ok());
            let single = serde_json::json!({"items": [p]});
            let arg = operator_arg(&single, "--operator-prometheus-serve-addr")
                .and_then(|a| addr_port(&a));
            Some((name, named.or(arg)))
        })
        .collect()
}

/// Name, restarts and start times of each pod in a PodList.
pub(crate) fn operator_pods(list: &serde_json::Value) -> Vec<types::OperatorPodStatus> {
    let time = |v: &serde_json::Value| v.as_str().and_then(|s| s.parse().ok());
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let statuses = p["status"]["containerStatuses"].as_array();
            let restarts = statuses
                .into_iter()
                .flatten()
                .filter_map(|c| c["restartCount"].as_u64())
                .sum();
            let running_since = statuses
                .into_iter()
                .flatten()
                .filter_map(|c| time(&c["state"]["running"]["startedAt"]))
                .max();
            types::OperatorPodStatus {
                name: p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                restarts,
                started_at: time(&p["status"]["startTime"]),
                running_since,
            }
        })
        .collect()
}
