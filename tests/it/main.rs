//! The one integration test binary. One module per capability; shared code
//! lives in `support`.

mod support;

/// The report contract: the committed schema, its validity, example reports.
mod report;

/// `diagnose`: the diagnosis contract and one scenario per finding.
mod diagnose;

/// Packaging: the krew manifest and the release script.
mod krew;

/// The Dockerfile: the image the CronJob runs.
mod image;

/// `examples/cronjob.yaml`: least-privilege RBAC and the CronJob.
mod cronjob;

/// `scan` and `delete` over the simulator: ledger, counts, exit codes.
mod sweep;

/// Fleet mode: several clusters in one run, one fleet report. Issue 21.
mod fleet;

/// `--metrics-file` and `--pushgateway`: Prometheus metrics of a run.
mod metrics;

/// The published alerts, judged by the real promtool. Issue 26.
mod alerts;

/// Next steps that follow from every refusal of the run. Issue 26.
mod advice;

/// `demo`: the story, side by side with cilium-operator 1.15.
mod demo;
/// Narrowing flags (`-l`, `-n`, `--min-age`) through scan and delete.
mod narrowing;
/// The simulator's cilium-operator GC pass checked against the real code
/// (issue 25).
mod operator_sim;

/// Ctrl-C at every phase, a second Ctrl-C, panics, request timeouts.
mod stopping;

/// The binary: help, exit codes, stdout, jq, signals, kubectl discovery.
mod cli;

/// Issue 12: fail closed, leak nothing (credentials, refusals, proxies,
/// bad input, misbehaving servers).
mod safety;

/// Safety under chaos: random schedules (property tests), malformed
/// objects, spoiled pages, restarts, clock skew, signals at random points.
mod chaos;
