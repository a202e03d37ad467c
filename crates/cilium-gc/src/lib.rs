//! The writer of kubectl-cilium-gc: delete the stale `CiliumIdentity`
//! objects of a cluster safely, next to a running cilium-operator, and say
//! what was done in a report.
//!
//! It stands on `cilium-gc-cluster`, which reads the cluster and holds the
//! pure decision
//! ([`policy::decide`](cilium_gc_cluster::policy::decide)); this crate adds the writes: the run
//! ([`run`]) with its plan, the sweeps that mark and delete under
//! preconditions, the write limiter, the write-time safety checks and the
//! report. `cilium-gc-diagnose` stands on the same reading layer and never
//! on this crate.
//!
//! This crate has no command line and no terminal: settings arrive as plain
//! values ([`ScanSettings`], [`WriteSettings`] with its [`Pacing`],
//! [`ConnectSettings`]), and progress and confirmation go through the
//! [`Ui`] hooks the caller provides.
//!
//! # The API
//!
//! At the root, what a caller runs with: [`run`] a scan or delete with
//! [`GcSettings`] (built from [`ScanSettings`] and [`WriteSettings`]) and
//! [`ConnectSettings`], a [`Stop`] signal and a [`Ui`] around an
//! [`Observer`]; it returns a [`Report`](report::Report) and an [`Exit`].
//! The errors a caller may print or match ([`ConnectError`],
//! [`ServerError`], [`ScanError`], [`DiscoveryError`], [`SettingsError`])
//! and the number and duration formats every view shares
//! ([`thousands`], [`human_duration`]) are here too, some handed on from
//! the reading layer so that a caller of the writer needs no other crate.
//! [`report`] holds the report's types and its JSON Schema.
//!
//! Everything else is `pub(crate)`, and the compiler holds that line:
//! `missing_docs` and `unreachable_pub` are denied.

#![deny(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod report;

mod gc;
mod pace;
mod preflight;
mod settings;
mod sweep;

pub use cilium_gc_cluster::discovery::DiscoveryError;
pub use cilium_gc_cluster::scan::ScanError;
pub use cilium_gc_cluster::{
    human_duration, kubeconfig_contexts, parse_duration, thousands, ConnectError, ConnectSettings,
    DurationError, Exit, PemError, ServerError, Stop, StopReason,
};
pub use cilium_gc_documents::report::Pacing;
pub use gc::{panic_text, run, Headless, Observer, PendingWrites, Ui, TEST_PANIC_ENV};
pub use settings::{GcSettings, ScanSettings, SettingsError, WriteSettings};
