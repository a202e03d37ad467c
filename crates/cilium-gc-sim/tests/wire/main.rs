//! The simulated API server's wire semantics, pinned against its answers
//! with the real kube client (and real kubectl when it is on PATH). Each
//! test states the apiserver behaviour it relies on. Only the simulator and kube are used here: the
//! simulator tests itself, without the engine or the plugin.
//!
//! One module per part of the API server's behaviour; shared code in
//! `support`.

mod support;

/// Lists: pages, snapshots, continue tokens, metadata-only, selectors.
mod lists;

/// Writes: deletes, updates, patches, and the ledger that judges them.
mod writes;

/// Watches and kube-runtime's watcher.
mod watches;

/// Authentication, throttling, discovery, restarts, actors.
mod server;

/// Real kubectl.
mod kubectl;
