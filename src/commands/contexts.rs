//! Which contexts a fleet covers, from the flags and the kubeconfig they
//! name, and the `cluster` label of each (shared by every command that
//! runs over several clusters).

use cilium_gc::kubeconfig_contexts;
use cilium_gc_fleet as fleet;

use crate::cli::KubeArgs;

/// Why the flags select no fleet (a usage error, exit 2). Each message
/// carries its cause (printed as one line).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SelectContextsError {
    /// `--server` or `--cluster` with several contexts.
    #[error("--server and --cluster point every context at one server: with several contexts, each context's own cluster is used")]
    OneServer,
    /// The kubeconfig could not be read.
    #[error("{0}")]
    Kubeconfig(cilium_gc::ConnectError),
    /// The selection matched nothing usable.
    #[error("{0}")]
    Select(fleet::SelectError),
}

/// The contexts the flags select, from the kubeconfig they name.
pub(crate) fn select_contexts(kube: &KubeArgs) -> Result<Vec<String>, SelectContextsError> {
    if kube.server.is_some() || kube.cluster.is_some() {
        return Err(SelectContextsError::OneServer);
    }
    let (available, _) =
        kubeconfig_contexts(kube.kubeconfig.as_deref()).map_err(SelectContextsError::Kubeconfig)?;
    kube.context_filter()
        .select(&available)
        .map_err(SelectContextsError::Select)
}

/// The metrics' `cluster` label of each context: `--cluster-label`, else
/// the context name.
pub(crate) fn cluster_labels(contexts: &[String], chosen: &[(String, String)]) -> Vec<String> {
    contexts
        .iter()
        .map(|c| {
            chosen
                .iter()
                .rev()
                .find(|(ctx, _)| ctx == c)
                .map_or_else(|| c.clone(), |(_, l)| l.clone())
        })
        .collect()
}
