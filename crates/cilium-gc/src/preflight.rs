//! Checks before any write: is this a cluster where deleting identities is
//! safe and allowed? Pure: they judge what `cilium_gc_cluster` read
//! (the served CRDs, `cilium-config`, the missing permissions).

use std::time::Duration;

use crate::report::{Check, CheckName};
use cilium_gc_cluster::cilium_config::CiliumSettings;
use cilium_gc_cluster::discovery::{usage_sources, Crds};
use cilium_gc_cluster::rbac::Permission;

/// Cilium's own check of `cluster-id` against `max-connected-clusters`
/// (pkg/clustermesh/types `ValidateClusterID` and the option's validation):
/// `max-connected-clusters` is 255 or 511, and `cluster-id` at most that.
/// An agent refuses to start otherwise, so the local identity range we
/// would compute from such values means nothing.
pub(crate) fn cluster_id_check(s: &CiliumSettings) -> Check {
    let problem = if s.cluster_values_unparseable {
        Some("cluster-id or max-connected-clusters in cilium-config is not a number".to_owned())
    } else if !matches!(s.max_connected_clusters, 255 | 511) {
        Some(format!(
            "max-connected-clusters is {}: Cilium accepts only 255 or 511",
            s.max_connected_clusters
        ))
    } else if s.cluster_id > s.max_connected_clusters {
        Some(format!(
            "cluster-id {} is out of range 0..={} for max-connected-clusters {}: Cilium would refuse it",
            s.cluster_id, s.max_connected_clusters, s.max_connected_clusters
        ))
    } else {
        None
    };
    Check {
        name: CheckName::ClusterId,
        passed: problem.is_none(),
        message: problem.map_or_else(
            || {
                format!(
                    "cluster-id {} of max-connected-clusters {}",
                    s.cluster_id, s.max_connected_clusters
                )
            },
            |p| format!("{p}; the local identity range cannot be known, refusing"),
        ),
    }
}

/// A `--heartbeat-timeout` shorter than cilium-config's
/// `identity-heartbeat-timeout` deletes identities the operator would still
/// keep; refused for writes unless `allow_short`, a warning for scans.
pub(crate) fn heartbeat_check(
    s: &CiliumSettings,
    flag: Option<Duration>,
    allow_short: bool,
    writes: bool,
) -> Check {
    let fmt = |d: Duration| humantime::format_duration(d).to_string();
    match (flag, s.config_heartbeat_timeout) {
        (Some(f), Some(c)) if f < c => Check {
            name: CheckName::HeartbeatTimeout,
            passed: allow_short || !writes,
            message: if allow_short {
                format!("--heartbeat-timeout {} is shorter than cilium-config's identity-heartbeat-timeout {}; continuing because of --allow-short-heartbeat-timeout", fmt(f), fmt(c))
            } else {
                format!("--heartbeat-timeout {} is shorter than cilium-config's identity-heartbeat-timeout {}: identities the operator still keeps would be deleted. Pass --allow-short-heartbeat-timeout to do it anyway", fmt(f), fmt(c))
            },
        },
        _ => Check {
            name: CheckName::HeartbeatTimeout,
            passed: true,
            message: format!("heartbeat timeout {}", fmt(s.heartbeat_timeout)),
        },
    }
}

/// The checks that need no endpoint data. A failed check refuses the run
/// when `writing` (scan only reports it, except a missing identity CRD).
pub(crate) fn evaluate(crds: Crds, s: &CiliumSettings, missing: &[Permission]) -> Vec<Check> {
    let mut checks = vec![Check {
        name: CheckName::IdentityCrd,
        passed: crds.identities,
        message: if crds.identities {
            "ciliumidentities.cilium.io/v2 is served".into()
        } else {
            "the CiliumIdentity CRD (ciliumidentities.cilium.io/v2) is not installed: is Cilium running in CRD identity mode?".into()
        },
    }];
    let sources = usage_sources(crds, s);
    let usage_ok = sources.endpoints || sources.slices;
    checks.push(Check {
        name: CheckName::UsageCrds,
        passed: usage_ok,
        message: match (sources.endpoints, sources.slices) {
            (true, true) => "usage from CiliumEndpoints and CiliumEndpointSlices".into(),
            (true, false) => "usage from CiliumEndpoints".into(),
            (false, true) => "usage from CiliumEndpointSlices".into(),
            (false, false) => "cannot tell which identities are in use: neither CiliumEndpoints (CRD missing or disable-endpoint-crd) nor CiliumEndpointSlices are available".into(),
        },
    });
    let mode_ok =
        s.allocation_mode_known && s.allocation_mode == "crd" && s.management_mode == "agent";
    checks.push(Check {
        name: CheckName::AllocationMode,
        passed: mode_ok,
        message: if !s.allocation_mode_known {
            "cilium-config could not be read, so the identity allocation mode is unknown (in kvstore mode every CiliumIdentity looks unused); refusing. Check --cilium-namespace, or pass --identity-allocation-mode crd if you know it".into()
        } else if s.allocation_mode != "crd" {
            format!("identity-allocation-mode is {:?}: identities live in the kvstore, not in CiliumIdentity objects; this tool only handles crd mode", s.allocation_mode)
        } else if s.management_mode != "agent" {
            management_refusal(&s.management_mode)
        } else {
            "identity-allocation-mode crd, managed by agents".into()
        },
    });
    checks.push(Check {
        name: CheckName::Permissions,
        passed: missing.is_empty(),
        message: if missing.is_empty() {
            "all needed permissions granted".into()
        } else {
            let names: Vec<String> = missing
                .iter()
                .map(cilium_gc_cluster::rbac::describe_permission)
                .collect();
            format!("missing permission: {}", names.join("; "))
        },
    });
    checks
}

/// Why a management mode other than `agent` is refused. Read in Cilium
/// v1.19.3 and seen with its real operator (docs/real-cilium.md): in
/// `operator` and `both` the agents only read identities (the allocator's
/// `operatorIDManagement` returns before any write), and the operator's
/// CID controller hands an existing identity to a new Pod without writing
/// it, so nothing strips a heartbeat mark or bumps the resourceVersion:
/// the 409 that stops a delete of a reused identity in `agent` mode never
/// comes, and a Pod's use shows in no CiliumEndpoint until its agent writes one.
fn management_refusal(mode: &str) -> String {
    format!(
        "identity-management-mode is {mode:?}: cilium-operator allocates identities for Pods and nothing strips its heartbeat mark when one is reused \
         (agents only read identities in this mode), so a delete's {{uid, resourceVersion}} preconditions cannot stop deleting an identity a Pod was just given; \
         refusing (the operator's own identity GC collects them; see docs/real-cilium.md)"
    )
}

/// The zero-endpoints check, once usage is synced.
pub(crate) fn endpoints_check(endpoints: u64, slices: u64, identities: u64, force: bool) -> Check {
    let passed = endpoints + slices > 0 || identities == 0;
    Check {
        name: CheckName::EndpointsPresent,
        passed: passed || force,
        message: if passed {
            format!("{endpoints} CiliumEndpoints, {slices} CiliumEndpointSlices")
        } else if force {
            format!("zero CiliumEndpoints and CiliumEndpointSlices while {identities} identities exist; continuing because of --force")
        } else {
            format!("zero CiliumEndpoints and CiliumEndpointSlices while {identities} identities exist: usage cannot be trusted (agents down? wrong cluster?); refusing to delete. Use --force if the cluster really has no pods")
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cilium_gc_cluster::cilium_config::settings_from_config;
    use cilium_gc_documents::report::ConfigSource;
    use cilium_gc_testkit::config_data as cfg;

    /// The check of that name (not its position in the list).
    fn check(checks: &[Check], name: CheckName) -> Check {
        checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name:?} check"))
            .clone()
    }

    #[test]
    fn refusals() {
        let all = Crds {
            identities: true,
            endpoints: true,
            slices: false,
            slices_v2: false,
        };
        let ok = settings_from_config(Some(&cfg(&[])), None);
        assert!(evaluate(all, &ok, &[]).iter().all(|c| c.passed));
        let kv = settings_from_config(Some(&cfg(&[("identity-allocation-mode", "kvstore")])), None);
        let c = check(&evaluate(all, &kv, &[]), CheckName::AllocationMode);
        assert!(!c.passed && c.message.contains("kvstore"));
        let op = settings_from_config(
            Some(&cfg(&[("identity-management-mode", "operator")])),
            None,
        );
        let refused = &check(&evaluate(all, &op, &[]), CheckName::AllocationMode);
        assert!(!refused.passed);
        assert!(
            refused.message.contains("\"operator\"") && refused.message.contains("strips"),
            "{}",
            refused.message
        );
        let both = settings_from_config(Some(&cfg(&[("identity-management-mode", "both")])), None);
        assert!(!check(&evaluate(all, &both, &[]), CheckName::AllocationMode).passed);
        let no_usage = Crds {
            identities: true,
            endpoints: false,
            slices: false,
            slices_v2: false,
        };
        assert!(!check(&evaluate(no_usage, &ok, &[]), CheckName::UsageCrds).passed);
        let no_cep = settings_from_config(Some(&cfg(&[("disable-endpoint-crd", "true")])), None);
        assert!(!check(&evaluate(all, &no_cep, &[]), CheckName::UsageCrds).passed);
        let none = Crds::default();
        assert!(!check(&evaluate(none, &ok, &[]), CheckName::IdentityCrd).passed);
        let del = cilium_gc_cluster::rbac::required(true, false, false);
        let denied: Vec<_> = del.iter().copied().filter(|p| p.verb == "delete").collect();
        let c = check(&evaluate(all, &ok, &denied), CheckName::Permissions);
        assert!(
            !c.passed && c.message.contains("delete ciliumidentities.cilium.io"),
            "{}",
            c.message
        );
    }

    /// What cannot be read fails closed.
    #[test]
    fn unknown_mode_bad_cluster_id_and_short_timeouts_are_refused() {
        let all = Crds {
            identities: true,
            endpoints: true,
            slices: false,
            slices_v2: false,
        };
        let mut unread = settings_from_config(None, None);
        assert!(!check(&evaluate(all, &unread, &[]), CheckName::AllocationMode).passed);
        unread.state_allocation_mode(Some("crd"));
        assert!(check(&evaluate(all, &unread, &[]), CheckName::AllocationMode).passed);
        let v = unread
            .values
            .iter()
            .find(|v| v.key == "identity-allocation-mode")
            .unwrap();
        assert_eq!(v.source, ConfigSource::Flag);
        // A readable cilium-config wins over the flag.
        let mut kv =
            settings_from_config(Some(&cfg(&[("identity-allocation-mode", "kvstore")])), None);
        kv.state_allocation_mode(Some("crd"));
        assert!(!check(&evaluate(all, &kv, &[]), CheckName::AllocationMode).passed);

        let ok = |pairs: &[(&str, &str)]| {
            cluster_id_check(&settings_from_config(Some(&cfg(pairs)), None)).passed
        };
        assert!(ok(&[]));
        assert!(ok(&[("cluster-id", "255")]));
        assert!(ok(&[
            ("cluster-id", "511"),
            ("max-connected-clusters", "511")
        ]));
        assert!(!ok(&[("cluster-id", "256")]));
        assert!(!ok(&[("max-connected-clusters", "300")]));
        assert!(!ok(&[("cluster-id", "one")]));

        let s = settings_from_config(Some(&cfg(&[("identity-heartbeat-timeout", "30m")])), None);
        let ten = Some(Duration::from_secs(600));
        assert!(!heartbeat_check(&s, ten, false, true).passed);
        assert!(heartbeat_check(&s, ten, true, true).passed);
        assert!(heartbeat_check(&s, ten, false, false).passed); // scan: a warning
        assert!(heartbeat_check(&s, Some(Duration::from_secs(3600)), false, true).passed);
    }

    #[test]
    fn zero_endpoints_needs_force() {
        assert!(endpoints_check(5, 0, 100, false).passed);
        assert!(endpoints_check(0, 0, 0, false).passed);
        assert!(!endpoints_check(0, 0, 100, false).passed);
        let forced = endpoints_check(0, 0, 100, true);
        assert!(forced.passed && forced.message.contains("--force"));
    }
}
