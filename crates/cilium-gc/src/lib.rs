//! The engine of kubectl-cilium-gc: find stale `CiliumIdentity` objects,
//! decide exactly why each one is or is not stale, and delete the stale ones
//! safely next to a running cilium-operator.
//!
//! The decision ([`policy::decide`]) is a pure function; the I/O around it
//! lives in [`cluster`] (the client), [`preflight`], [`usage`] (live endpoint
//! usage), [`scan`] (the paged list) and [`sweep`] (rate-limited writes).
//! [`gc::run`] ties them into one run that always ends in a
//! [`report::Report`]. [`diagnose`] reads the same cluster for a health report.
//!
//! This crate has no command line and no terminal: settings arrive as plain
//! values ([`settings`]), and progress and confirmation go through the
//! [`gc::Ui`] hooks the caller provides.

pub mod cluster;
pub mod diagnose;
pub mod exit;
pub mod gc;
pub mod humanize;
pub mod model;
pub mod policy;
pub mod preflight;
pub mod rbac;
pub mod report;
pub mod retry;
pub mod scan;
pub mod secrets;
pub mod selector;
pub mod settings;
pub mod stats;
pub mod stop;
pub mod sweep;
pub mod usage;
