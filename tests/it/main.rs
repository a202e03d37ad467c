//! The one integration test binary of the plugin: what goes through the
//! binary or its flags (output, exit codes, files). One module per
//! capability; shared code lives in `support` (the world itself in
//! `cilium-gc-testkit`). What the engine does on its own is tested by the
//! engine's crates: `crates/*/tests/`.

mod architecture;
/// The crates' walls, from `cargo metadata`.
mod crates;
mod support;

/// The report contract: the committed schema, its validity, example reports.
mod report;

/// `diagnose`: the diagnosis contract and one scenario per finding.
mod diagnose;

/// `diagnose -o markdown`'s Mermaid charts drawn by the real renderer
/// (mermaid-cli and chromium).
mod mermaid;

/// Packaging: the krew manifest and the release script.
mod krew;

/// The container image the CronJob runs, and the release around it.
mod image;

/// `examples/cronjob.yaml`: least-privilege RBAC and the CronJob.
mod cronjob;

/// `scan` and `delete` through the binary: confirmation, the Markdown ticket.
mod sweep;

/// Fleet mode: several clusters in one run, one fleet report. Issue 21.
mod fleet;

/// `--metrics-file` and `--pushgateway`: Prometheus metrics of a run.
mod metrics;

/// The published alerts, judged by the real promtool. Issue 26.
mod alerts;

/// Next steps that follow from every refusal of the run. Issue 26.
mod advice;

/// `diagnose`'s pictures in a real 80-column terminal (tmux): whole rows,
/// colour only there.
mod terminal;

/// `demo`: the story, side by side with cilium-operator 1.15.
mod demo;
/// The simulator's cilium-operator GC pass checked against the real code
/// (issue 25).
mod operator_sim;

/// Ctrl-C at every phase, a second Ctrl-C, panics.
mod stopping;

/// The binary: help, exit codes, stdout, jq, signals, kubectl discovery.
mod cli;

/// README.md and docs/: the paths they name exist, their links resolve,
/// their `kubectl cilium-gc` commands parse.
mod docs;

/// Issue 12: fail closed, leak nothing (credentials in every output,
/// proxies, bad input).
mod safety;

/// Safety under chaos: signals at random points.
mod chaos;

/// docs/architecture.md's rules on the code's shape: file lengths, import
/// circles (functions' lengths are clippy's `too_many_lines`).
mod structure;
