//! Why no diagnosis could be made, and the exit code each reason maps to.

use cilium_gc_cluster::cluster::ConnectError;
use cilium_gc_cluster::exit::Exit;
use cilium_gc_cluster::scan::ScanError;

/// Why no diagnosis could be made. Each variant maps to one exit code
/// ([`DiagnoseError::exit`]); none is worth retrying at once.
#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    /// A setting is unusable: a page size out of range, a labels filter
    /// that does not compile (exit 2). The plugin refuses such flags before
    /// the engine sees them; this is the engine's own check.
    #[error("{0}")]
    Settings(String),
    /// The saved objects cannot be read or hold nothing to judge (exit 2).
    #[error("{0}")]
    Saved(String),
    /// The kubeconfig or connection flags are unusable (exit 2).
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Discovery of the cilium.io API failed: server unreachable, or
    /// credentials rejected (exit 2).
    #[error("cannot read the cilium.io API: {0}")]
    Discovery(cilium_gc_cluster::discovery::DiscoveryError),
    /// The CiliumIdentity CRD is not served (exit 3).
    #[error("the CiliumIdentity CRD (ciliumidentities.cilium.io/v2) is not installed: is Cilium running in CRD identity mode?")]
    CrdMissing,
    /// The endpoint watchers did not finish their first list in time (exit 2).
    #[error("{}", cilium_gc_cluster::usage::SyncTimedOut(*.0))]
    SyncTimeout(u64),
    /// The identity list failed (exit 3 when the CRD vanished, else 2).
    #[error(transparent)]
    List(#[from] ScanError),
}

impl DiagnoseError {
    /// This error on one line, safe to print (`cilium_gc_cluster::secrets::describe`):
    /// a connection error from the connection error down, since the
    /// variant is transparent and its chain would start below the part
    /// that names this client's exec plugin.
    pub fn message(&self) -> String {
        match self {
            DiagnoseError::Connect(c) => cilium_gc_cluster::cluster::error_chain(c),
            e => cilium_gc_cluster::cluster::error_chain(e),
        }
    }

    /// The exit code this error ends the process with.
    pub fn exit(&self) -> Exit {
        match self {
            DiagnoseError::CrdMissing | DiagnoseError::List(ScanError::NotInstalled(_)) => {
                Exit::Refused
            }
            DiagnoseError::List(ScanError::Interrupted) => Exit::Interrupted,
            _ => Exit::Usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: u16) -> cilium_gc_cluster::cluster::ServerError {
        cilium_gc_cluster::cluster::ServerError {
            code,
            message: code.to_string(),
        }
    }

    #[test]
    fn errors_map_to_documented_exit_codes() {
        let cases = [
            (DiagnoseError::CrdMissing, 3),
            (DiagnoseError::List(ScanError::NotInstalled(server(404))), 3),
            (DiagnoseError::List(ScanError::Denied(server(403))), 2),
            (DiagnoseError::List(ScanError::Failed(server(503))), 2),
            (
                DiagnoseError::Discovery(cilium_gc_cluster::discovery::DiscoveryError::Request {
                    version: "v2",
                    message: "refused".into(),
                }),
                2,
            ),
            (DiagnoseError::Connect(ConnectError::NoConfig), 2),
            (DiagnoseError::SyncTimeout(120), 2),
            (DiagnoseError::Settings("x".into()), 2),
            (DiagnoseError::Saved("x".into()), 2),
            (DiagnoseError::List(ScanError::Interrupted), 130),
        ];
        for (e, code) in cases {
            assert_eq!(e.exit().code(), code, "{e}");
        }
    }
}
