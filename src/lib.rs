//! kubectl-cilium-gc, the kubectl plugin: flags, commands, views, the
//! binary.
//!
//! The engine that decides and deletes is the [`cilium_gc`] crate; the
//! simulated cluster behind `demo` is the `cilium-gc-sim` crate, compiled in
//! only with the `sim` feature (on by default). The layers, each calling
//! only those below it: [`cli`] (the flags) → [`commands`] (one module per
//! subcommand family; each validates its flags once and hands the engine
//! its settings) → the engine → [`views`] (one module per document: its
//! text and Markdown; the metrics beside them) → `output` (the chosen
//! format, written to stdout or a file).

#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod cli;
pub mod commands;
pub mod crash;
pub mod output;
mod signals;
pub mod views;
