//! The documents kubectl-cilium-gc publishes, as data: the report every
//! `scan`, `delete` and `demo` run ends with, the `diagnose` health report,
//! and their fleet forms. These types *are* the contract of `schema/*.json`:
//! each published schema is generated from them, and the workspace's tests
//! fail when a committed file drifts.
//!
//! It is its own crate, as kube-core is kube's, so that a consumer that only
//! reads the documents needs no client, no runtime and no engine: it depends
//! on serde, schemars and jiff only. The engine (`cilium-gc`) builds these
//! documents and re-exports them from its own modules
//! (`cilium_gc::report`, `cilium_gc::diagnose`, `cilium_gc::fleet`), so a
//! caller of the engine never needs this crate by name.
//!
//! - [`report`]: the report, the decision's [`Reason`](report::Reason),
//!   [`Pacing`](report::Pacing) (the write settings a run records),
//!   the shared [`API_VERSION`](report::API_VERSION) and
//!   [`Tool`](report::Tool), and [`publishable_schema`](report::publishable_schema),
//!   the one way every document's schema is published;
//! - [`diagnosis`]: the `diagnose` health report;
//! - [`forecast`]: where the identity range is heading, carried by both;
//! - [`fleet`]: the fleet report and the fleet diagnosis.

#![deny(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod diagnosis;
pub mod fleet;
pub mod forecast;
pub mod header;
pub mod report;
