//! kubectl-cilium-gc, the kubectl plugin: flags, rendering, the binary.
//!
//! The engine that decides and deletes is the [`cilium_gc`] crate; the
//! simulated cluster behind `demo` is the `cilium-gc-sim` crate, compiled in
//! only with the `sim` feature (on by default). This crate turns flags into
//! the engine's settings ([`cli`]), runs a subcommand ([`app`]), and writes
//! what it returns ([`render`], [`progress`]).

#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod app;
pub mod cli;
pub mod crash;
#[cfg(feature = "sim")]
pub mod demo;
pub mod diagnose;
pub mod fleet_command;
pub mod gc_command;
pub mod markdown;
pub mod metrics;
pub mod next_steps;
pub mod output;
pub mod progress;
pub mod render;
pub mod signals;
