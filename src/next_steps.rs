//! What a human should do after a run, as sentences: shared by the text
//! summary and the Markdown report, so both say the same.

use cilium_gc::humanize::{human_duration, thousands};
use cilium_gc::report::{AbortReason, Mode, Report};

/// What a human should do next, one sentence each, most urgent first.
/// Empty when there is nothing to do.
pub fn next_steps(report: &Report) -> Vec<String> {
    let mut steps = Vec::new();
    why_it_stopped(report, &mut steps);
    what_is_left(report, &mut steps);
    steps
}

/// The step an early end calls for (an interruption, a refusal, a limit).
fn why_it_stopped(report: &Report, steps: &mut Vec<String>) {
    let s = &report.summary;
    let aborted = report.aborted.as_ref().map(|a| a.reason);
    if report.interrupted || aborted == Some(AbortReason::Interrupted) {
        steps.push(if s.not_attempted > 0 {
            format!(
                "The run was interrupted with {} {} not attempted: rerun to finish",
                thousands(s.not_attempted),
                plural(s.not_attempted, "candidate", "candidates"),
            )
        } else {
            "The run was interrupted: rerun to finish".to_string()
        });
    }
    match aborted {
        Some(AbortReason::BlastRadius) => {
            let mut limits = Vec::new();
            if let Some(n) = report.options.max_deletions {
                limits.push(format!("--max-deletions {}", thousands(n)));
            }
            if let Some(p) = report.options.max_percent {
                limits.push(format!("--max-percent {p}"));
            }
            let limit = if limits.is_empty() {
                "the blast-radius limit".to_string()
            } else {
                limits.join(" / ")
            };
            steps.push(format!(
                "{} {} exceed {limit}: nothing was deleted; check them, then raise \
                 --max-deletions (or --max-percent) or narrow the run with -l/-n",
                thousands(s.candidates),
                plural(s.candidates, "candidate", "candidates"),
            ));
        }
        Some(AbortReason::PreflightRefused) => steps.push(
            "Preflight refused the run: fix the failed checks listed above and rerun".to_string(),
        ),
        Some(AbortReason::PermissionLost) => steps.push(
            "Permission was lost during the run: check the RBAC (examples/cronjob.yaml lists \
             what is needed) and rerun"
                .to_string(),
        ),
        Some(AbortReason::NotConfirmed) => steps.push(
            "Nothing was deleted without confirmation: rerun with --yes to delete non-interactively"
                .to_string(),
        ),
        Some(AbortReason::UsageLost) => steps.push(format!(
            "Endpoint usage could not be read, so writing stopped with {} {} not attempted: \
             check that CiliumEndpoints/Slices can be listed and watched, then rerun",
            thousands(s.not_attempted),
            plural(s.not_attempted, "candidate", "candidates"),
        )),
        Some(AbortReason::ReadFailed) | Some(AbortReason::Unexpected) => {
            steps.push("The run stopped early: see the errors above and rerun".to_string())
        }
        Some(AbortReason::InternalError) => steps.push(
            "This is a bug: please report it with this report and the output of the same \
             run with RUST_BACKTRACE=1"
                .to_string(),
        ),
        Some(AbortReason::Interrupted) | None => {}
    }
}

/// The steps the counts call for: failures to retry, stale identities to
/// delete, marks to wait for.
fn what_is_left(report: &Report, steps: &mut Vec<String>) {
    let s = &report.summary;
    let r = &s.reasons;
    let timeout = human_duration(report.options.heartbeat_timeout_seconds);
    if s.failed > 0 {
        steps.push(format!(
            "{} {} failed: see the failed items; rerun to retry them",
            thousands(s.failed),
            plural(s.failed, "deletion", "deletions"),
        ));
    }
    match report.mode {
        Mode::Scan if r.stale > 0 => steps.push(format!(
            "{} {} stale: run `kubectl cilium-gc delete` to remove them",
            thousands(r.stale),
            plural(r.stale, "identity is", "identities are"),
        )),
        Mode::DryRunServer if s.validated > 0 => steps.push(format!(
            "The server accepted {} {}: run `kubectl cilium-gc delete` without \
             --dry-run=server to delete them",
            thousands(s.validated),
            plural(s.validated, "deletion", "deletions"),
        )),
        _ => {}
    }
    if r.unmarked > 0 {
        let n = thousands(r.unmarked);
        let are = plural(r.unmarked, "identity is", "identities are");
        match report.mode {
            Mode::Scan => steps.push(format!(
                "{n} unused {are} unmarked: run `kubectl cilium-gc delete --mark`, \
                 then again after {timeout}"
            )),
            Mode::Delete | Mode::DryRunServer if !report.options.mark => steps.push(format!(
                "{n} unused {are} unmarked: rerun with --mark, then again after {timeout}"
            )),
            _ => {}
        }
    }
    if report.mode != Mode::Scan && s.marked > 0 {
        steps.push(format!(
            "{} {} marked: rerun after {timeout} to delete those still unused",
            thousands(s.marked),
            plural(s.marked, "identity was", "identities were"),
        ));
    }
    if report.mode != Mode::Scan && r.mark_too_recent > 0 {
        steps.push(format!(
            "{} marked {} not past the {timeout} heartbeat timeout yet: rerun later",
            thousands(r.mark_too_recent),
            plural(r.mark_too_recent, "identity is", "identities are"),
        ));
    }
}

/// `one` or `many`, by `n`.
pub(crate) fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}
