//! What a human should do after a run, as sentences: shared by the text
//! summary, the Markdown report and the JSON report's `nextSteps`, so all
//! three say the same. Every step follows from the run: each failed
//! preflight check names its own remedy, and a step never suggests a
//! command that the same checks would refuse.

use cilium_gc::report::Report;
use cilium_gc::{human_duration, thousands};
use cilium_gc_documents::report::{AbortReason, Check, CheckName, Mode};

/// What a human should do next, one sentence each, most urgent first.
/// Empty when there is nothing to do.
pub fn next_steps(report: &Report) -> Vec<String> {
    let mut steps = Vec::new();
    why_it_stopped(report, &mut steps);
    for check in failed_checks(report) {
        steps.push(remedy(check, report));
    }
    what_is_left(report, &mut steps);
    steps
}

/// `report` with its `nextSteps` filled in, as every written report carries.
pub fn with_next_steps(mut report: Report) -> Report {
    report.next_steps = next_steps(&report);
    report
}

/// The failed preflight checks, each kind once, in the order they ran.
fn failed_checks(report: &Report) -> Vec<&Check> {
    let mut seen = Vec::new();
    let mut failed = Vec::new();
    for c in report.preflight.checks.iter().filter(|c| !c.passed) {
        if !seen.contains(&c.name) {
            seen.push(c.name);
            failed.push(c);
        }
    }
    failed
}

/// What to do about one failed check: the step that makes the next run pass it.
fn remedy(check: &Check, report: &Report) -> String {
    let ns = &report.options.cilium_namespace;
    match check.name {
        CheckName::IdentityCrd => "The CiliumIdentity CRD is not served here: check that this is the \
             right cluster (--context) and that Cilium runs with identity-allocation-mode crd"
            .to_string(),
        CheckName::UsageCrds => "Neither CiliumEndpoints nor CiliumEndpointSlices can be read, so no \
             identity can be known unused: enable the CiliumEndpoint CRD (disable-endpoint-crd: \
             false) or CiliumEndpointSlices in cilium-config"
            .to_string(),
        CheckName::AllocationMode if check.message.contains("could not be read") => format!(
            "cilium-config was not readable in {ns}: pass --cilium-namespace where Cilium runs (and \
             let the user get that ConfigMap), or --identity-allocation-mode crd if you know the mode"
        ),
        CheckName::AllocationMode if check.message.contains("identity-management-mode") => {
            "cilium-operator manages identities in this cluster and collects them itself: there is \
             nothing for kubectl cilium-gc to do; check the operator with `kubectl cilium-gc diagnose`"
                .to_string()
        }
        CheckName::AllocationMode => "This cluster keeps identities in the kvstore, not in \
             CiliumIdentity objects: there is nothing for kubectl cilium-gc to do here"
            .to_string(),
        CheckName::Permissions => format!(
            "Grant what is missing ({}): the ClusterRole and Role in examples/cronjob.yaml have \
             exactly what a run needs; `kubectl auth can-i --list` shows what you have",
            check
                .message
                .strip_prefix("missing permission: ")
                .unwrap_or(&check.message)
        ),
        CheckName::EndpointsPresent => format!(
            "No CiliumEndpoint or CiliumEndpointSlice exists while identities do: check that the \
             Cilium agents run (`kubectl -n {ns} get pods -l k8s-app=cilium`) and that this is the \
             right cluster; only if it really has no pods, rerun with --force"
        ),
        CheckName::ClusterId => "Fix cluster-id / max-connected-clusters in cilium-config (cluster-id \
             at most max-connected-clusters, which is 255 or 511), then rerun"
            .to_string(),
        CheckName::HeartbeatTimeout => "Leave --heartbeat-timeout unset, or make it at least \
             cilium-config's identity-heartbeat-timeout (--allow-short-heartbeat-timeout only if \
             you know the agents refresh marks faster)"
            .to_string(),
        CheckName::EndpointsReadable => "Fix the endpoints whose identity reference cannot be read \
             (listed in the check), or rerun with --allow-unreadable-endpoints if you accept that \
             an identity they use may be deleted"
            .to_string(),
    }
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
        // Each failed check names its own remedy (see `remedy`).
        Some(AbortReason::PreflightRefused) if !failed_checks(report).is_empty() => {}
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
    // A scan whose checks failed: `delete` would be refused the same way.
    let refused = !failed_checks(report).is_empty();
    match report.mode {
        Mode::Scan if r.stale > 0 && refused => steps.push(format!(
            "{} {} stale, but `kubectl cilium-gc delete` refuses to remove them until the \
             failed {} above {} resolved",
            thousands(r.stale),
            plural(r.stale, "identity is", "identities are"),
            plural(failed_checks(report).len() as u64, "check", "checks"),
            plural(failed_checks(report).len() as u64, "is", "are"),
        )),
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
    // Marking is a write the failed checks refuse too.
    if r.unmarked > 0 && !refused {
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
