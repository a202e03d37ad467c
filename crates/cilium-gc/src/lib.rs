//! The engine of kubectl-cilium-gc: find stale `CiliumIdentity` objects,
//! decide exactly why each one is or is not stale, and delete the stale ones
//! safely next to a running cilium-operator.
//!
//! The decision ([`policy::decide`]) is a pure function; the I/O around it
//! lives in [`cluster`] (the client), [`preflight`], [`usage`] (live endpoint
//! usage), [`scan`] (the paged list) and `sweep` (rate-limited writes).
//! [`gc::run`] ties them into one run that always ends in a
//! [`report::Report`]. [`mod@diagnose`] reads the same cluster for a health report.
//!
//! This crate has no command line and no terminal: settings arrive as plain
//! values ([`settings`]), and progress and confirmation go through the
//! [`gc::Ui`] hooks the caller provides.
//!
//! # The API
//!
//! A caller needs a handful of names, re-exported here: [`run`] a scan or
//! delete with [`GcSettings`] (built from [`ScanSettings`] and
//! [`WriteSettings`]) and [`ConnectSettings`], a [`Stop`] signal and a
//! [`Ui`] around an [`Observer`]; it returns a [`Report`] and an [`Exit`].
//! [`diagnose()`] reads the same cluster into a [`Diagnosis`]. The modules
//! stay public for the report's and diagnosis' types and for the pure
//! functions tests and fuzzers drive (`policy`, `model`, `selector`);
//! everything a caller never names is `pub(crate)` or private (the write
//! machinery: `sweep`, `pace`, `watch_tap`, `secrets`).

#![warn(missing_docs, unreachable_pub)]

pub use diagnose::{diagnose, DiagnoseError, DiagnoseSettings, Diagnosis};
pub use exit::Exit;
pub use fleet::{run_fleet, FleetObserver, FleetReport, FleetSettings};
pub use gc::{run, Headless, Observer, Ui};
pub use report::Report;
pub use settings::{ConnectSettings, GcSettings, ScanSettings, SettingsError, WriteSettings};
pub use stop::{Stop, StopReason};

pub mod cluster;
pub mod diagnose;
pub mod exit;
pub mod fleet;
pub mod gc;
pub mod humanize;
pub mod model;
mod pace;
pub mod policy;
pub mod preflight;
pub mod rbac;
pub mod report;
pub mod retry;
pub mod scan;
mod secrets;
pub mod selector;
pub mod settings;
pub mod stats;
pub mod stop;
mod sweep;
pub mod usage;
mod watch_tap;
