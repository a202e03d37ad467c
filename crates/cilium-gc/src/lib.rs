//! The engine of kubectl-cilium-gc: find stale `CiliumIdentity` objects,
//! decide exactly why each one is or is not stale, and delete the stale ones
//! safely next to a running cilium-operator.
//!
//! The decision ([`policy::decide`]) is a pure function; the I/O around it
//! (the client, preflight, live endpoint usage, the paged list, the
//! rate-limited writes) is private to this crate. [`run`] ties them into one
//! run that always ends in a [`Report`](report::Report);
//! [`diagnose()`](diagnose::diagnose) reads the same cluster for a health
//! report.
//!
//! This crate has no command line and no terminal: settings arrive as plain
//! values ([`ScanSettings`], [`WriteSettings`] with its [`Pacing`],
//! [`ConnectSettings`]), and
//! progress and confirmation go through the [`Ui`] hooks the caller
//! provides.
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
//! ([`thousands`], [`human_duration`]) are here too.
//!
//! Five documented modules hold the rest, as kube-runtime keeps `watcher`
//! and `reflector`:
//!
//! - [`report`]: the report's types and its JSON Schema;
//! - [`mod@diagnose`]: [`diagnose()`](diagnose::diagnose), the diagnosis'
//!   types and schema, and the pure [`analyze`](diagnose::analyze) of
//!   plain [`Input`](diagnose::Input);
//! - [`fleet`]: [`run_fleet`](fleet::run_fleet) and
//!   [`diagnose_fleet`](fleet::diagnose_fleet) over many kubeconfig
//!   contexts, and their documents;
//! - [`policy`]: the pure decision (is this identity stale, and why);
//! - [`model`]: how identities and endpoints decode.
//!
//! Everything else is `pub(crate)`, and the compiler holds that line:
//! `missing_docs` and `unreachable_pub` are denied.
//!
//! # Feature `internals`
//!
//! Off by default. Benches, fuzz targets and tests that need what lies
//! below the API (the raw `ApiClient`, retry
//! classification, counters, the paged list, the permission table, test
//! hooks) turn it on and reach it through `cilium_gc::internals`. It
//! makes those `pub(crate)` items public in place; it adds no code and
//! carries no stability promise. The workspace's dev-dependencies enable
//! it, so a plain `cargo build` of the plugin never sees it.

#![deny(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod diagnose;
pub mod fleet;
pub mod model;
pub mod policy;
pub mod report;

mod cluster;
mod exit;
mod forecast;
mod gc;
mod humanize;
mod pace;
mod preflight;
mod rbac;
mod retry;
mod scan;
mod secrets;
mod selector;
mod settings;
mod stats;
mod stop;
mod sweep;
mod usage;
mod watch_tap;

pub use cilium_gc_documents::report::Pacing;
pub use cluster::{kubeconfig_contexts, ConnectError, PemError, ServerError};
pub use exit::Exit;
pub use gc::{panic_text, run, Headless, Observer, PendingWrites, Ui};
pub use humanize::{human_duration, thousands};
pub use preflight::DiscoveryError;
pub use scan::ScanError;
pub use selector::{Selector, SelectorError};
pub use settings::{
    parse_duration, ConnectSettings, DurationError, GcSettings, ScanSettings, SettingsError,
    WriteSettings,
};
pub use stop::{Stop, StopReason};

/// What benches, fuzz targets and tests reach below the API: the raw
/// client, retry classification, counters, the paged list, the permission
/// table and test hooks. Only with the `internals` feature (off by
/// default; the workspace's dev-dependencies turn it on), and no promise
/// of stability.
#[cfg(feature = "internals")]
pub mod internals {
    pub use crate::{
        cluster::client::{Answer, ApiClient},
        cluster::clock::ServerClock,
        cluster::kubeconfig::Endpoint,
        gc::TEST_PANIC_ENV,
        rbac::{required, Need, Permission, PERMISSIONS},
        retry::{Backoff, Class},
        scan::list_raw,
        stats::Stats,
        usage::FRESHNESS_LIMIT,
        watch_tap::WatchTap,
    };
}
