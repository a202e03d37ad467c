//! The findings: one function per finding, each judging the diagnosis so
//! far and adding what it supports.

use std::time::Duration;

use cilium_gc_cluster::cilium_config::CiliumSettings;
use cilium_gc_cluster::humanize::{human_duration, thousands};
use cilium_gc_documents::diagnosis::{
    Diagnosis, Finding, FindingCode, IdentitySpace, LabelKeyStat, Level, Severity,
};
use cilium_gc_documents::report::ConfigSource;

use super::config::{config_value, LOW_HEARTBEAT_TIMEOUT};
use super::evidence::{Evidence, Findings};
use super::labels::LabelFilter;
use crate::input::Input;

/// Every finding, most severe first: one function per finding, in the
/// order a reader should meet them (usage first: every count leans on it).
pub(super) fn findings(
    input: &Input,
    d: &Diagnosis,
    settings: &CiliumSettings,
    gc_interval: Option<Duration>,
) -> Vec<Finding> {
    let sp = &d.identity_space;
    let st = &sp.states;
    let range = format!("{}-{}", sp.local_range.min, sp.local_range.max);
    let space_line = format!(
        "{} of {} local ids allocated ({}%), {} free (range {range})",
        thousands(sp.allocated),
        thousands(sp.capacity),
        sp.utilisation_percent,
        thousands(sp.headroom)
    );
    let delete_hint = if st.stale_candidates > 0 {
        format!(
            "delete the {} stale candidates (`kubectl cilium-gc scan`, then `kubectl cilium-gc delete`)",
            thousands(st.stale_candidates)
        )
    } else {
        "find what keeps allocating (churn drivers below) and let GC catch up (`kubectl cilium-gc delete --mark`)".to_string()
    };
    let c = Evidence {
        input,
        d,
        settings,
        gc_interval,
        space_line,
        delete_hint,
    };
    let mut out = Findings::default();
    let all: [fn(&Evidence, &mut Findings); 15] = [
        allocation_refused,
        usage_unknown,
        identity_space_nearly_full,
        super::forecast::exhaustion_soon,
        super::forecast::gc_cannot_keep_up,
        stale_backlog,
        high_cardinality_labels,
        labels_filter,
        duplicate_identities,
        dangling_references,
        strip_loop,
        super::writers::conflict_writers,
        super::what_if::breaks_policies,
        settings_that_defeat_gc,
        malformed,
    ];
    for finding in all {
        finding(&c, &mut out);
    }
    let mut out = out.0;
    out.sort_by_key(|f| f.severity);
    out
}

/// The refusals' finding names the findings that say why cilium-operator's
/// GC does not free ids as fast as the agents need them, so that the first
/// finding a reader meets says both what happens and why.
pub(super) fn why_not_keeping_up(findings: &mut [Finding]) {
    const WHY: [FindingCode; 8] = [
        FindingCode::GcPassesFailing,
        FindingCode::GcNotCompleting,
        FindingCode::KnownGcDefect,
        FindingCode::GcDisabled,
        FindingCode::StaleBacklog,
        FindingCode::MarkStripLoop,
        FindingCode::ConflictWriters,
        FindingCode::OperatorRestarts,
    ];
    let why: Vec<String> = WHY
        .iter()
        .filter_map(|code| findings.iter().find(|f| f.code == *code))
        .map(|f| {
            format!(
                "why GC is not keeping up: {} ({}): {}",
                f.code.as_str(),
                f.severity.as_str(),
                f.message
            )
        })
        .collect();
    if let Some(f) = findings
        .iter_mut()
        .find(|f| f.code == FindingCode::IdentityAllocationRefused)
    {
        if why.is_empty() {
            f.evidence.push(
                "why GC is not keeping up: no finding below says (no stale backlog, no failing pass seen): the churn outruns the range"
                    .into(),
            );
        }
        f.evidence.extend(why);
    }
}

/// Usage first: every other count leans on it: endpoints that cannot be read, or none at all.
pub(super) fn usage_unknown(c: &Evidence, out: &mut Findings) {
    let Evidence {
        input, settings, d, ..
    } = c;
    let sp = &d.identity_space;
    // Usage first: every other count leans on it.
    let sources = cilium_gc_cluster::discovery::usage_sources(input.crds, settings);
    if !(sources.endpoints || sources.slices) {
        out.add(
            Severity::Warning,
            FindingCode::UsageUnknown,
            "neither CiliumEndpoints nor CiliumEndpointSlices can be read: every identity is counted as unused".into(),
            vec![format!(
                "ciliumendpoints served: {}, disable-endpoint-crd: {}, ciliumendpointslices served: {}",
                input.crds.endpoints, settings.endpoint_crd_disabled, input.crds.slices
            )],
            Some("check the Cilium CRDs and cilium-config before acting on these numbers".into()),
        );
    } else if input.endpoints + input.endpoint_slices == 0 && sp.total > 0 {
        out.add(
            Severity::Warning,
            FindingCode::UsageUnknown,
            format!(
                "zero CiliumEndpoints and CiliumEndpointSlices while {} identities exist: \"in use\" cannot be trusted",
                thousands(sp.total)
            ),
            vec!["agents down, or a cluster without pods?".into()],
            Some("check that cilium-agent runs on every node before deleting anything".into()),
        );
    }
}

/// The local identity range filling up.
pub(super) fn identity_space_nearly_full(c: &Evidence, out: &mut Findings) {
    let Evidence {
        space_line,
        delete_hint,
        d,
        ..
    } = c;
    let sp = &d.identity_space;
    let st = &sp.states;
    match sp.level {
        Level::Ok => {}
        level => out.add(
            if level == Level::Critical {
                Severity::Critical
            } else {
                Severity::Warning
            },
            FindingCode::IdentitySpaceNearlyFull,
            format!(
                "the local identity range is {}% full: new pods will fail to get an identity when it runs out",
                sp.utilisation_percent
            ),
            vec![
                space_line.clone(),
                format!(
                    "{} in use, {} stale candidates, {} unused and marked, {} unused and unmarked",
                    thousands(st.in_use),
                    thousands(st.stale_candidates),
                    thousands(st.unused_marked),
                    thousands(st.unused_unmarked)
                ),
                range_line(sp),
            ],
            Some(delete_hint.clone()),
        ),
    }
}

/// Which range the counts judge, and where it came from.
pub(super) fn range_line(sp: &IdentitySpace) -> String {
    let r = &sp.local_range;
    let Some(from) = &sp.local_range_from else {
        return format!("local range {}-{}", r.min, r.max);
    };
    let source = |s: ConfigSource| match s {
        ConfigSource::CiliumConfig => "cilium-config",
        _ => "Cilium's default",
    };
    format!(
        "local range {}-{} as Cilium's allocator computes it (GetMinimalAllocationIdentity, GetMaximumAllocationIdentity) from cluster-id {} ({}) and max-connected-clusters {} ({})",
        r.min,
        r.max,
        from.cluster_id,
        source(from.cluster_id_source),
        from.max_connected_clusters,
        source(from.max_connected_clusters_source)
    )
}

/// The agents' own logs show Cilium's allocator refusing new identities:
/// whatever the counts say, pods are waiting. First of all: it is the
/// incident itself, not a forecast.
pub(super) fn allocation_refused(c: &Evidence, out: &mut Findings) {
    let Evidence {
        input,
        d,
        space_line,
        delete_hint,
        ..
    } = c;
    let Some(r) = input.allocation_refusals.as_ref().filter(|r| r.total > 0) else {
        return;
    };
    let mut evidence: Vec<String> = r
        .by_pod
        .iter()
        .take(10)
        .map(|p| {
            let when = match (p.first_at, p.last_at) {
                (Some(f), Some(l)) => format!(", {f} to {l}"),
                _ => String::new(),
            };
            format!(
                "{}: {} refused attempts{when}",
                p.pod,
                thousands(p.refusals)
            )
        })
        .collect();
    if r.by_pod.len() > 10 {
        evidence.push(format!("and {} more pods", r.by_pod.len() - 10));
    }
    if let Some(p) = r.by_pod.first() {
        evidence.push(format!("{}: {}", p.pod, p.example));
    }
    evidence.push(format!("by the identities: {space_line}"));
    evidence.push(range_line(&d.identity_space));
    out.add(
        Severity::Critical,
        FindingCode::IdentityAllocationRefused,
        format!(
            "Cilium's allocator refused {} allocation attempts in {} agent pods' logs ({}): new pods wait for an identity, without networking",
            thousands(r.total),
            r.by_pod.len(),
            crate::agent_logs::NO_MORE_IDS
        ),
        evidence,
        Some(format!(
            "free ids now: {delete_hint}; then see below why cilium-operator's GC is not keeping up"
        )),
    );
}

/// Stale identities GC has not removed.
pub(super) fn stale_backlog(c: &Evidence, out: &mut Findings) {
    let Evidence { d, .. } = c;
    let sp = &d.identity_space;
    let st = &sp.states;
    if st.stale_candidates > 0 {
        let severe = st.stale_candidates * 20 >= sp.allocated.max(1);
        out.add(
            if severe { Severity::Warning } else { Severity::Info },
            FindingCode::StaleBacklog,
            format!(
                "{} identities are stale (unused, mark older than {}): GC has not removed them",
                thousands(st.stale_candidates),
                human_duration(d.configuration.heartbeat_timeout_seconds)
            ),
            d.churn
                .namespaces_by_stale
                .iter()
                .take(5)
                .map(|ns| format!("{}: {} stale", ns.namespace, thousands(ns.stale)))
                .collect(),
            Some(
                "run `kubectl cilium-gc scan`, then `kubectl cilium-gc delete`; check cilium-operator's logs for GC errors".into(),
            ),
        );
    }
}

/// Label keys with almost one value per identity.
pub(super) fn high_cardinality_labels(c: &Evidence, out: &mut Findings) {
    let Evidence { d, .. } = c;
    let high: Vec<&LabelKeyStat> = d
        .churn
        .label_keys
        .iter()
        .filter(|k| k.high_cardinality)
        .collect();
    if !high.is_empty() {
        out.add(
            Severity::Warning,
            FindingCode::HighCardinalityLabels,
            format!(
                "{} security-label {} almost one value per identity: each new value makes a new identity",
                high.len(),
                if high.len() == 1 { "key has" } else { "keys have" }
            ),
            high.iter()
                .map(|k| {
                    format!(
                        "{}: {} values on {} identities ({}% of all)",
                        k.key,
                        thousands(k.distinct_values),
                        thousands(k.identities),
                        k.share_percent
                    )
                })
                .collect(),
            Some("exclude them from identities with the `labels` setting (see configuration)".into()),
        );
    }
}

/// The `labels` setting that would keep those keys out of identities.
pub(super) fn labels_filter(c: &Evidence, out: &mut Findings) {
    let Evidence { input, d, .. } = c;
    let cfg = &d.configuration;
    if let Some(suggested) = &cfg.suggested_labels {
        let current = config_value(input, "labels");
        let (code, message) = match current {
            None => (
                FindingCode::LabelsFilterMissing,
                format!(
                    "no `labels` filter is set, so {} high-cardinality {} into identities",
                    cfg.leaky_keys.len(),
                    if cfg.leaky_keys.len() == 1 {
                        "key goes"
                    } else {
                        "keys go"
                    }
                ),
            ),
            Some(_) => (
                FindingCode::LabelsFilterLeaky,
                format!(
                    "the `labels` filter lets {} high-cardinality {} into identities",
                    cfg.leaky_keys.len(),
                    if cfg.leaky_keys.len() == 1 {
                        "key"
                    } else {
                        "keys"
                    }
                ),
            ),
        };
        let mut evidence: Vec<String> = vec![format!(
            "current labels: {}",
            current.map_or("(not set)".to_string(), |c| format!("{c:?}"))
        )];
        evidence.extend(cfg.leaky_keys.iter().map(|k| format!("passes: {k}")));
        let after = LabelFilter::parse(suggested).filter;
        for k in cfg.leaky_keys.iter().filter(|k| after.accepts(k)) {
            evidence.push(format!(
                "{k} would still pass: an inclusive pattern in labels matches it further than the exclusion; narrow that pattern"
            ));
        }
        out.add(
            Severity::Warning,
            code,
            message,
            evidence,
            Some(format!(
                "set `labels: {suggested:?}` in cilium-config (Helm value `labels`) and restart cilium-agent; identities are recomputed as pods restart, and the old ones become unused and are collected"
            )),
        );
    }
}

/// Label sets carried by more than one identity.
pub(super) fn duplicate_identities(c: &Evidence, out: &mut Findings) {
    let Evidence { d, .. } = c;
    let dup = &d.churn.duplicates;
    if dup.groups > 0 {
        out.add(
            if dup.surplus >= 100 {
                Severity::Warning
            } else {
                Severity::Info
            },
            FindingCode::DuplicateIdentities,
            format!(
                "{} label sets are carried by more than one identity ({} surplus identities)",
                thousands(dup.groups),
                thousands(dup.surplus)
            ),
            dup.examples
                .iter()
                .take(3)
                .map(|g| format!("identities {}", g.identities.join(", ")))
                .collect(),
            Some(
                "agents allocated concurrently; the unused copies become stale and are collected"
                    .into(),
            ),
        );
    }
}

/// Endpoints referencing identities that do not exist.
pub(super) fn dangling_references(c: &Evidence, out: &mut Findings) {
    let Evidence { d, .. } = c;
    let integ = &d.integrity;
    if integ.dangling_ids > 0 {
        out.add(
            Severity::Warning,
            FindingCode::DanglingReferences,
            format!(
                "{} endpoint {} at {} {} that {} not exist: policy for those endpoints is wrong on other nodes",
                thousands(integ.dangling_references),
                if integ.dangling_references == 1 { "reference points" } else { "references point" },
                thousands(integ.dangling_ids),
                if integ.dangling_ids == 1 { "identity" } else { "identities" },
                if integ.dangling_ids == 1 { "does" } else { "do" },
            ),
            vec![format!(
                "missing ids: {}",
                integ
                    .dangling_examples
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )],
            Some("something deleted identities still in use; restart the affected pods (or cilium-agent on their nodes) so they allocate again, and find who deletes (audit log)".into()),
        );
    }
}

/// Marks stripped and set again and again.
pub(super) fn strip_loop(c: &Evidence, out: &mut Findings) {
    let integ = &c.d.integrity;

    if integ.strip_loop > 0 {
        let many = integ.strip_loop >= 5;
        let mut managers: Vec<&str> = integ
            .strip_loop_examples
            .iter()
            .map(|e| e.manager.as_str())
            .collect();
        managers.sort_unstable();
        managers.dedup();
        out.add(
            if many { Severity::Warning } else { Severity::Info },
            FindingCode::MarkStripLoop,
            format!(
                "{} unused identities had their heartbeat mark removed by an agent: GC cannot collect them while this repeats",
                thousands(integ.strip_loop)
            ),
            integ
                .strip_loop_examples
                .iter()
                .take(3)
                .map(|e| format!("{} changed by {} at {}", e.name, e.manager, e.time))
                .chain(std::iter::once(format!("managers: {}", managers.join(", "))))
                .collect(),
            Some("look for agents still holding references to gone endpoints (cilium-dbg identity list on their nodes) and restart them".into()),
        );
    }
}

/// cilium-config settings that defeat or confuse GC.
pub(super) fn settings_that_defeat_gc(c: &Evidence, out: &mut Findings) {
    let Evidence {
        input,
        d,
        settings,
        gc_interval,
        space_line,
        ..
    } = c;
    let sp = &d.identity_space;
    if gc_interval.is_some_and(|d| d.is_zero()) {
        out.add(
            if sp.level == Level::Ok {
                Severity::Warning
            } else {
                Severity::Critical
            },
            FindingCode::GcDisabled,
            "identity-gc-interval is 0: cilium-operator never collects unused identities".into(),
            vec![space_line.clone()],
            Some("set identity-gc-interval (default 15m0s), or run `kubectl cilium-gc delete --mark` on a schedule".into()),
        );
    }
    if settings.heartbeat_timeout < LOW_HEARTBEAT_TIMEOUT {
        out.add(
            Severity::Warning,
            FindingCode::HeartbeatTimeoutLow,
            format!(
                "identity-heartbeat-timeout is {}: agents get little time to reclaim an identity before it is deleted",
                human_duration(settings.heartbeat_timeout.as_secs_f64())
            ),
            vec![format!("identity-heartbeat-timeout below {}", human_duration(LOW_HEARTBEAT_TIMEOUT.as_secs_f64()))],
            Some("use the default 30m0s unless there is a reason not to".into()),
        );
    }
    if settings.allocation_mode != "crd" {
        out.add(
            Severity::Warning,
            FindingCode::NotCrdMode,
            format!(
                "identity-allocation-mode is {:?}: identities live in the kvstore; these CiliumIdentity objects are leftovers or mirrors",
                settings.allocation_mode
            ),
            vec![],
            None,
        );
    }
    if input.config.is_none() {
        out.add(
            Severity::Info,
            FindingCode::ConfigUnavailable,
            "cilium-config could not be read: Cilium's defaults were assumed".into(),
            input.warnings.iter().take(3).cloned().collect(),
            Some("pass --cilium-namespace if Cilium runs elsewhere than kube-system".into()),
        );
    }
}

/// Marks and objects that cannot be read.
pub(super) fn malformed(c: &Evidence, out: &mut Findings) {
    let Evidence { input, d, .. } = c;
    let sp = &d.identity_space;
    let st = &sp.states;
    if st.malformed_mark > 0 {
        out.add(
            Severity::Info,
            FindingCode::MalformedMarks,
            format!(
                "{} identities have a heartbeat mark that is not a time: GC never deletes them",
                thousands(st.malformed_mark)
            ),
            vec![],
            Some("remove the io.cilium.heartbeat annotation from them".into()),
        );
    }
    if !input.malformed.is_empty() {
        out.add(
            Severity::Info,
            FindingCode::MalformedObjects,
            format!(
                "{} CiliumIdentity objects could not be decoded",
                thousands(input.malformed.len() as u64)
            ),
            input.malformed.iter().take(5).cloned().collect(),
            None,
        );
    }
}
