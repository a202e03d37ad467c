//! Reading a Cilium cluster safely, and the one decision kubectl-cilium-gc
//! makes: is this `CiliumIdentity` stale, and why.
//!
//! This crate only reads. Both jobs above it stand on it: the writer
//! (`cilium-gc`: the run, its sweeps and pacing) and `cilium-gc-diagnose`
//! (a read-only health report), which never links the writer. kube-rs
//! climbs the same ladder: types (`cilium-gc-documents`,
//! `cilium-gc-kinds`), then I/O (this crate), then what runs on it.
//!
//! # The API
//!
//! One module per mechanism, each with its test beside it:
//!
//! - connecting: [`connect`] (kubectl's connection flags as values),
//!   [`cluster`] (the client built like kubectl builds it, the raw request
//!   path, the server's clock), [`secrets`] (credentials never printed),
//!   [`retry`] (how an answer is classified and waited out);
//! - what the cluster runs: [`discovery`] (the served CRDs),
//!   [`cilium_config`] (the settings in `cilium-config`), [`rbac`] (the
//!   permissions a run needs, and the access review);
//! - reading identities and their users: [`scan`] (the paged identity
//!   list), [`usage`] (live usage from CiliumEndpoints and
//!   CiliumEndpointSlices), [`watch_tap`] (what the watches saw on the
//!   wire), [`model`] (how the objects decode);
//! - the decision: [`policy`] (pure: stale, and why), [`selector`]
//!   (label selectors), [`forecast`] (pure: when the range fills);
//! - what every run shares: [`stats`] (counters), [`stop`] (the stop
//!   signal), [`exit`] (exit codes), [`humanize`] (number and duration
//!   formats).
//!
//! Items a caller never needs stay `pub(crate)`, and the compiler holds that
//! line: `missing_docs` and `unreachable_pub` are denied.

#![deny(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod cilium_config;
pub mod cluster;
pub mod connect;
pub mod discovery;
pub mod exit;
pub mod forecast;
pub mod humanize;
pub mod model;
pub mod policy;
pub mod rbac;
pub mod retry;
pub mod scan;
pub mod secrets;
pub mod selector;
pub mod stats;
pub mod stop;
pub mod usage;
pub mod watch_tap;

pub use cluster::{kubeconfig_contexts, ApiClient, ConnectError, PemError, ServerError};
pub use connect::{parse_duration, ConnectSettings, DurationError};
pub use exit::Exit;
pub use humanize::{human_duration, thousands};
pub use stop::{Stop, StopReason};
