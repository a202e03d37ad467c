//! The simulator's one error type, [`SimError`]: what a caller of the
//! public API (starting, restarting, test-setup writes) can get back. It
//! sits at the bottom so that `tls` and `simulator` name the same enum.
//! None of its variants is retryable as such: each is a setup mistake or a
//! broken environment (a taken port, a refused write) to fix, not to wait out.

use std::net::SocketAddr;

use crate::store::StoreError;

/// Why the simulator could not start or restart, or a test-setup write
/// failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Generating the CA or server certificate, or configuring TLS, failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// Binding the listening socket failed (port taken?).
    #[error("cannot listen on {addr}")]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A test-setup write was refused by the store.
    #[error("cannot {op} {kind} {name:?}: {cause}")]
    Write {
        /// `create`, `modify` or `delete`.
        op: &'static str,
        /// Resource plural.
        kind: &'static str,
        /// Object key.
        name: String,
        /// What the store said.
        cause: StoreError,
    },
}
