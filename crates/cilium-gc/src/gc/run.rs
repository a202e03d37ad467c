//! What a run is and what its phases share: the run's state (`Run`), what
//! one phase hands the next (`Ready`, `Prepared`), and the small judgements
//! more than one phase makes (the policy, the sweep settings, the aborts a
//! failed list or stopped writes mean, the endpoints' readability check).
//! The phases themselves are `Run`'s methods, in `mod.rs` and `stream.rs`.

use std::sync::Arc;

use crate::report::{self, AbortReason, CheckName, ErrorKind, Mode};
use crate::settings::GcSettings;
use crate::sweep::SweepSettings;
use cilium_gc_cluster::cilium_config::CiliumSettings;
use cilium_gc_cluster::cluster::{ApiClient, Endpoint};
use cilium_gc_cluster::connect::ConnectSettings;
use cilium_gc_cluster::exit::Exit;
use cilium_gc_cluster::policy::{self, Narrowing, Policy, Rules};
use cilium_gc_cluster::scan::ScanError;
use cilium_gc_cluster::stats::Stats;
use cilium_gc_cluster::stop::{Stop, StopReason};
use cilium_gc_cluster::usage::UsageHandle;

use super::draft::Draft;
use super::observer::Ui;
use super::plan::Plan;

/// One scan or delete run: what it was asked (settings, connection), who
/// watches it (the observer in `ui`), how it is stopped, what it counts,
/// and the report it builds. Its phases are its methods, in the order they
/// run; what one phase hands the next (the client, the usage view, the
/// plan) is passed along, not stored.
pub(super) struct Run<'a> {
    pub(super) kube: &'a ConnectSettings,
    pub(super) settings: &'a GcSettings,
    pub(super) stop: &'a Stop,
    pub(super) ui: &'a Ui,
    pub(super) stats: Arc<Stats>,
    pub(super) report: Draft,
}

/// What the phases up to usage known complete hand on: the list is next.
pub(super) struct Ready {
    pub(super) api: ApiClient,
    pub(super) endpoint: Endpoint,
    pub(super) cilium: CiliumSettings,
    pub(super) usage: UsageHandle,
}

/// What the read-only phases hand to the write phase.
pub(super) struct Prepared {
    pub(super) api: ApiClient,
    pub(super) usage: UsageHandle,
    pub(super) plan: Plan,
    pub(super) rules: Rules,
}

/// Test-only: `KUBECTL_CILIUM_GC_TEST_PANIC=<place>` makes the run panic at
/// `place` (`plan`: in the run's own task, after the scan; `background`: in
/// another task, as a watcher bug would), so tests can prove that a bug
/// still ends in a report. Honoured here and nowhere else.
pub const TEST_PANIC_ENV: &str = "KUBECTL_CILIUM_GC_TEST_PANIC";

pub(super) fn test_panic_at(place: &str) -> bool {
    std::env::var(TEST_PANIC_ENV).is_ok_and(|p| p == place)
}

/// The cluster's rules and the user's narrowing, for deciding each
/// identity listed.
pub(super) fn policy_of(cilium: &CiliumSettings, s: &GcSettings) -> Policy {
    Policy {
        rules: Rules {
            local_range: policy::local_range(cilium.cluster_id, cilium.max_connected_clusters),
            heartbeat_timeout: cilium.heartbeat_timeout,
        },
        narrowing: Narrowing {
            selector: s.selector.clone(),
            namespaces: s.scan.namespaces.clone(),
            min_age: s.scan.min_age,
        },
    }
}

/// What the sweeps of a run are given.
pub(super) fn sweep_settings(s: &GcSettings, rules: Rules) -> SweepSettings {
    SweepSettings {
        pacing: s.pacing,
        dry_run: s.mode == Mode::DryRunServer,
        allow_unreadable_endpoints: s.allow_unreadable_endpoints,
        rules,
    }
}

/// The identity list failed: the abort it means (`after`: what was done
/// before, appended to the message).
pub(super) fn scan_failed(run: &mut Draft, e: ScanError, after: &str) -> Exit {
    let m = format!("{e}{after}");
    match e {
        ScanError::Interrupted => Exit::Interrupted,
        ScanError::Denied(_) => run.abort(AbortReason::PermissionLost, m, Exit::Refused),
        ScanError::NotInstalled(_) => run.abort(AbortReason::PreflightRefused, m, Exit::Refused),
        _ => run.abort(AbortReason::ReadFailed, m, Exit::Unexpected),
    }
}

/// Why the writes stopped early, in the report, and the exit it means.
pub(super) fn writes_stopped(run: &mut Draft, reason: StopReason, usage: &UsageHandle) -> Exit {
    match reason {
        StopReason::PermissionLost => run.abort(
            AbortReason::PermissionLost,
            "permission lost during the run (401/403): no further writes were started",
            Exit::Refused,
        ),
        StopReason::UsageLost => {
            let m = format!(
                "endpoint usage was not known complete for {}s (the endpoint watchers could not list or watch CiliumEndpoints/Slices), so which identities are in use is unknown: no further writes were started",
                cilium_gc_cluster::usage::USAGE_STALL_LIMIT.as_secs()
            );
            run.error(ErrorKind::Watcher, m.clone());
            run.abort(AbortReason::UsageLost, m, Exit::Unexpected)
        }
        StopReason::UnreadableEndpoint => {
            let c = endpoints_readable_check(usage, false);
            run.preflight.checks.push(c.clone());
            let m = format!(
                "{} (appeared during the deletes: no further writes were started)",
                c.message
            );
            run.abort(AbortReason::PreflightRefused, m, Exit::Refused)
        }
        _ => Exit::Interrupted,
    }
}

/// Endpoints whose identity reference cannot be read block deletes: such
/// an endpoint may protect any identity. Names the first few.
pub(super) fn endpoints_readable_check(usage: &UsageHandle, allow: bool) -> report::Check {
    const SHOWN: usize = 5;
    let bad = usage.unreadable();
    let mut names: Vec<String> = bad
        .iter()
        .take(SHOWN)
        .map(|(what, problem)| format!("{what} ({problem})"))
        .collect();
    if bad.len() > SHOWN {
        names.push(format!("and {} more", bad.len() - SHOWN));
    }
    let list = names.join(", ");
    report::Check {
        name: CheckName::EndpointsReadable,
        passed: bad.is_empty() || allow,
        message: if bad.is_empty() {
            "every endpoint's identity reference is readable".into()
        } else if allow {
            format!("{} endpoints have an unreadable identity reference: {list}; deleting anyway because of --allow-unreadable-endpoints", bad.len())
        } else {
            format!("{} endpoints have an unreadable identity reference, so the identities they use are unknown: {list}; refusing to delete. Fix them, or pass --allow-unreadable-endpoints", bad.len())
        },
    }
}
