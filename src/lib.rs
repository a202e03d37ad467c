//! kubectl-cilium-gc: find and safely delete stale CiliumIdentity objects.
//!
//! The library holds everything; the `kubectl-cilium_gc` binary only parses,
//! runs and maps errors to exit codes. The decision ([`policy::decide`]) is a
//! pure function; the I/O around it lives in `cluster`, `usage`, `scan` and
//! `sweep`. The simulated API server used by `demo` and the tests is [`sim`];
//! nothing in the GC core imports it.

pub mod app;
pub mod cli;
pub mod cluster;
pub mod demo;
pub mod diagnose;
pub mod exit;
pub mod gc;
pub mod markdown;
pub mod metrics;
pub mod model;
pub mod policy;
pub mod preflight;
pub mod progress;
pub mod rbac;
pub mod render;
pub mod report;
pub mod retry;
pub mod scan;
pub mod selector;
pub mod sim;
pub mod stats;
pub mod stop;
pub mod sweep;
pub mod usage;
