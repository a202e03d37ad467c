//! Why cilium-operator's identity GC is not keeping up: the
//! evidence the cluster shows, and the four findings built on it.
//!
//! Pure: plain data in, [`GcHealth`] and [`Finding`]s out.
//!
//! - **GC not completing passes.** A working operator deletes an unused
//!   identity about `identity-heartbeat-timeout + identity-gc-interval`
//!   after marking it. A mark far older than that means no pass has
//!   completed since (every completed pass deletes every mark older than the
//!   timeout): passes are abandoned (a conflict aborts them in old
//!   versions) or the operator is not running.
//! - **Known defects**, mapped from the operator's and the agents' image
//!   tags. Only what upstream sources confirm is stated as fact; where the
//!   fixed release could not be confirmed the defect is `unconfirmed` and
//!   says what to check. Sources, read for this mapping:
//!   * cilium/cilium#33142 "Cilium abandons identity garbage collection if
//!     a CiliumIdentity deletion is conflicted"; fixed by #33143 "operator:
//!     ignore identity delete conflicts", merged 2024-06-13 into main, which
//!     was then the 1.16 development branch (v1.15 was already a stable
//!     branch with its own backport PRs): so 1.16.0 and later carry it.
//!     Whether a 1.14/1.15 patch release got a backport was not confirmed.
//!   * #28339 "Delayed identity cleanup on operator restart": on start the
//!     operator marks every identity alive, delaying GC by a heartbeat
//!     timeout per restart; reported on 1.12, closed without a fix we could
//!     confirm. Used by the restarts finding, for every version.
//!   * #35946 "newly allocated ciliumidentity may become dirty data and the
//!     amount of ciliumidentity increase forever": an agent's allocator
//!     keeps a dead key and strips the operator's mark every 5 minutes; the
//!     report gives the affected versions as ">= v1.16.0 and < v1.17.0". No
//!     fix version confirmed.
//!   * #47571 "operator: continue identity GC after update races": a
//!     conflict on the *mark* update still aborts a pass; the pull request
//!     was open (2026-07-28) when last read, so no released version is
//!     known to carry it.
//! - **Operator restarts**: restart counts and start times of its pods.
//! - **Held by an agent, used by no endpoint** (the #35946 pattern): unused,
//!   unmarked, last written by an agent within `AGENT_RECENT`, and older
//!   than `POD_START`. One snapshot cannot tell such an identity from one
//!   a pod is just starting to use; the finding says so.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use super::input::{agent_like, IdentityRecord, Workloads};
use cilium_gc_cluster::humanize::human_duration;
use cilium_gc_documents::diagnosis::{
    AgeBucket, CiliumWorkloads, DefectStatus, Finding, FindingCode, GcHealth, KnownDefect,
    NamespaceCount, OperatorGcMetrics, OperatorPodStatus, PassEvidence, PassVerdict, Severity,
};

/// Cilium's default `identity-gc-interval`: here, below `analyze`, which
/// reads the configured one and falls back to this.
pub(crate) const DEFAULT_GC_INTERVAL: Duration =
    cilium_gc_cluster::cilium_config::DEFAULT_GC_INTERVAL;
/// A mark older than this many expected collection times is overdue.
pub(crate) const OVERDUE_FACTOR: f64 = 3.0;
/// An agent write within this long counts as recent: agents resync the
/// identities they hold every 5 minutes (#35946), so a held identity is
/// rewritten at least that often.
pub(crate) const AGENT_RECENT: Duration = Duration::from_secs(15 * 60);
/// Longer than any pod takes to start: an identity this old that no
/// endpoint uses is not one a starting pod is about to use.
pub(crate) const POD_START: Duration = Duration::from_secs(10 * 60);

/// `major.minor.patch` of an image tag like `quay.io/cilium/cilium:v1.15.6@sha256:..`.
pub(crate) fn image_version(image: &str) -> Option<(u64, u64, u64)> {
    let no_digest = image.split('@').next()?;
    let (_, tag) = no_digest.rsplit_once(':')?;
    if tag.contains('/') {
        return None; // a registry port, not a tag
    }
    let tag = tag.strip_prefix('v').unwrap_or(tag);
    let core = tag.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let (major, minor) = (parts.next()??, parts.next()??);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

fn version_string(v: (u64, u64, u64)) -> String {
    format!("{}.{}.{}", v.0, v.1, v.2)
}

/// The first image whose tag is a version.
fn version_of(images: &[String]) -> Option<(u64, u64, u64)> {
    images.iter().find_map(|i| image_version(i))
}

const ISSUE: &str = "https://github.com/cilium/cilium/issues/";
const PULL: &str = "https://github.com/cilium/cilium/pull/";

/// Known identity-GC defects of these versions. `None` versions (a tag that
/// is not a version) match nothing: the caller says to check by hand.
pub(crate) fn known_defects(
    operator: Option<(u64, u64, u64)>,
    agent: Option<(u64, u64, u64)>,
) -> Vec<KnownDefect> {
    let mut out = Vec::new();
    if let Some(v) = operator {
        let at = format!("cilium-operator {}", version_string(v));
        if v < (1, 16, 0) {
            out.push(KnownDefect {
                issue: format!("{ISSUE}33142"),
                fixed_by: Some(format!("{PULL}33143")),
                summary: "a GC pass is abandoned at the first 409 Conflict on a delete, so in a busy cluster stale identities pile up".into(),
                component: at.clone(),
                status: if v.0 == 1 && v.1 >= 14 {
                    DefectStatus::Unconfirmed
                } else {
                    DefectStatus::Affected
                },
                check: if v.0 == 1 && v.1 >= 14 {
                    format!(
                        "fixed in 1.16.0 (#33143 merged 2024-06-13 during 1.16 development); whether {} carries a backport could not be confirmed: search its release notes for #33143 (\"ignore identity delete conflicts\")",
                        version_string(v)
                    )
                } else {
                    "fixed in 1.16.0 (#33143); upgrade".into()
                },
            });
        }
        out.push(KnownDefect {
            issue: format!("{PULL}47571"),
            fixed_by: None,
            summary: "a 409 Conflict on the heartbeat-mark update still aborts the GC pass".into(),
            component: at,
            status: DefectStatus::Unconfirmed,
            check: "the upstream fix (#47571) was an open pull request when last read: check whether it is merged and in a release newer than yours".into(),
        });
    }
    if let Some(v) = agent {
        if ((1, 16, 0)..(1, 17, 0)).contains(&v) {
            out.push(KnownDefect {
                issue: format!("{ISSUE}35946"),
                fixed_by: None,
                summary: "an agent keeps a dead allocator key and strips the operator's mark every 5 minutes, so the identity is never collected".into(),
                component: format!("cilium-agent {}", version_string(v)),
                status: DefectStatus::Affected,
                check: "reported against >= 1.16.0 and < 1.17.0; the fixed release could not be confirmed: see the issue, and the agent-held-unused finding for whether it happens here".into(),
            });
        }
    }
    out
}

/// The evidence, before findings.
pub(crate) fn gc_health(
    identities: &[IdentityRecord],
    stale_marks: &[(usize, Timestamp)],
    unused_unmarked: &[usize],
    workloads: Option<&Workloads>,
    heartbeat_timeout: Duration,
    gc_interval: Option<Duration>,
    now: Timestamp,
) -> GcHealth {
    let expected = heartbeat_timeout + gc_interval.unwrap_or_default();
    let exp = expected.as_secs_f64().max(1.0);
    let age = |t: Timestamp| now.duration_since(t).as_secs_f64();
    let mut buckets = [0u64; 4];
    for (_, m) in stale_marks {
        let k = age(*m) / exp;
        buckets[match k {
            k if k <= 1.0 => 0,
            k if k <= OVERDUE_FACTOR => 1,
            k if k <= 24.0 => 2,
            _ => 3,
        }] += 1;
    }
    let labels = ["<= 1x", "1x-3x", "3x-24x", "> 24x"];
    let bounds = [
        (0.0, Some(1.0)),
        (1.0, Some(3.0)),
        (3.0, Some(24.0)),
        (24.0, None),
    ];
    let overdue_distribution = labels
        .iter()
        .zip(bounds)
        .zip(buckets)
        .map(|((label, (from, to)), count)| AgeBucket {
            label: (*label).into(),
            from_seconds: from * exp,
            to_seconds: to.map(|t| t * exp),
            count,
        })
        .collect();
    let oldest = stale_marks.iter().min_by_key(|(_, m)| *m);
    let not_completed_since = oldest
        .filter(|(_, m)| age(*m) > OVERDUE_FACTOR * exp)
        .and_then(|(_, m)| m.checked_add(heartbeat_timeout).ok());

    let (held, agent_held_namespaces) = agent_held(identities, unused_unmarked, now);
    let cilium = workloads.and_then(cilium_workloads);
    let operator_metrics = workloads.filter(|w| !w.metrics.is_empty()).map(|w| {
        let interval = w
            .gc_interval_arg
            .or(gc_interval)
            .unwrap_or(DEFAULT_GC_INTERVAL);
        super::operator_metrics::summarise(w.metrics.clone(), interval)
    });
    let pass_evidence = match (&operator_metrics, oldest, &cilium) {
        (Some(m), _, _) if m.verdict != PassVerdict::Unknown => PassEvidence::OperatorMetrics,
        (_, Some(_), _) => PassEvidence::HeartbeatMarks,
        (_, _, Some(c)) if c.operator_version.is_some() => PassEvidence::Version,
        _ => PassEvidence::None,
    };
    GcHealth {
        expected_collection_seconds: expected.as_secs_f64(),
        overdue_marks: buckets[2] + buckets[3],
        overdue_distribution,
        oldest_mark: oldest.map(|(_, m)| *m),
        oldest_mark_identity: oldest.map(|(i, _)| identities[*i].identity.name.clone()),
        not_completed_since,
        cilium,
        workloads_problem: workloads.and_then(|w| w.problem.clone()),
        agent_held_unused: held,
        agent_held_namespaces,
        operator_metrics,
        pass_evidence,
    }
}

/// Unused identities an agent still holds: unmarked, last written by an
/// agent within `AGENT_RECENT`, older than `POD_START`. How many, and the
/// ten namespaces with the most.
fn agent_held(
    identities: &[IdentityRecord],
    unused_unmarked: &[usize],
    now: Timestamp,
) -> (u64, Vec<NamespaceCount>) {
    let age = |t: Timestamp| now.duration_since(t).as_secs_f64();
    let mut by_ns: BTreeMap<String, u64> = BTreeMap::new();
    let mut held = 0;
    for &i in unused_unmarked {
        let r = &identities[i].identity;
        let (Some(change), Some(created)) = (r.last_change.as_ref(), r.created_at) else {
            continue;
        };
        let Some(t) = change.time else { continue };
        let recent = age(t) <= AGENT_RECENT.as_secs_f64();
        let old = age(created) >= POD_START.as_secs_f64();
        if agent_like(&change.manager) && recent && old && t > created {
            held += 1;
            *by_ns
                .entry(r.namespace.clone().unwrap_or_else(|| "(none)".into()))
                .or_default() += 1;
        }
    }
    let mut namespaces: Vec<NamespaceCount> = by_ns
        .into_iter()
        .map(|(namespace, identities)| NamespaceCount {
            namespace,
            identities,
        })
        .collect();
    namespaces.sort_by_key(|n| std::cmp::Reverse(n.identities));
    namespaces.truncate(10);
    (held, namespaces)
}

/// The Cilium workloads seen, their versions and the known defects of
/// those versions; `None` when nothing of Cilium was found.
fn cilium_workloads(w: &Workloads) -> Option<CiliumWorkloads> {
    if w.operator_images.is_empty() && w.agent_images.is_empty() && w.operator_pods.is_empty() {
        return None;
    }
    let (op, ag) = (version_of(&w.operator_images), version_of(&w.agent_images));
    Some(CiliumWorkloads {
        operator_images: w.operator_images.clone(),
        operator_version: op.map(version_string),
        agent_images: w.agent_images.clone(),
        agent_version: ag.map(version_string),
        operator_pods: w.operator_pods.clone(),
        known_defects: known_defects(op, ag),
    })
}

/// The identities now: how many, and the unused ones by how far along GC
/// they are. All three are given because "overdue" alone read as "nothing
/// unused" on a churning cluster where most unused identities were freshly
/// marked or too young to judge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IdentityCounts {
    /// Every identity listed.
    pub total: u64,
    /// Unused ones the operator should already have marked or deleted.
    pub overdue: u64,
    /// Unused, marked less than a heartbeat timeout ago: on their way out.
    pub marked: u64,
    /// Unused, unmarked, younger than one identity-gc-interval.
    pub too_young: u64,
}

impl IdentityCounts {
    /// One clause for the evidence line, e.g.
    /// `1200 (unused: 3 overdue for GC, 480 marked within the heartbeat timeout, 20 too young to judge)`.
    fn describe(&self) -> String {
        format!(
            "{} (unused: {} overdue for GC, {} marked within the heartbeat timeout, {} too young to judge)",
            self.total, self.overdue, self.marked, self.too_young
        )
    }
}

/// The findings `h` supports, for [`fn@super::analyze`]'s list.
pub(crate) fn findings(
    h: &GcHealth,
    ids: IdentityCounts,
    heartbeat_timeout: Duration,
    now: Timestamp,
) -> Vec<Finding> {
    let cilium = h.cilium.as_ref();
    let seen = h.operator_metrics.as_ref().map(|m| m.verdict);
    [
        gc_not_completing(h, now),
        h.operator_metrics
            .as_ref()
            .and_then(|m| gc_passes_failing(m, ids)),
        cilium.and_then(|c| known_defect_finding(c, seen)),
        cilium.and_then(unversioned_operator),
        cilium.and_then(|c| operator_restarts(c, heartbeat_timeout, now)),
        agent_held_unused(h),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Marks far older than a working operator would leave them: no GC pass
/// has completed since the oldest.
fn gc_not_completing(h: &GcHealth, now: Timestamp) -> Option<Finding> {
    let exp = h.expected_collection_seconds;
    let (Some(since), Some(oldest), Some(id)) = (
        h.not_completed_since,
        h.oldest_mark,
        &h.oldest_mark_identity,
    ) else {
        return None;
    };
    let oldest_age = now.duration_since(oldest).as_secs_f64();
    let dist = h
        .overdue_distribution
        .iter()
        .map(|b| format!("{}: {}", b.label, b.count))
        .collect::<Vec<_>>()
        .join(", ");
    Some(Finding {
        severity: Severity::Warning,
        code: FindingCode::GcNotCompleting,
        message: format!(
            "cilium-operator's GC has not completed a pass since {since}: {} stale marks are more than {}x older than the {} a working operator needs",
            h.overdue_marks,
            OVERDUE_FACTOR,
            human_duration(exp)
        ),
        evidence: vec![
            format!(
                "oldest mark: identity {id}, marked {} ago at {oldest} ({:.0}x {})",
                human_duration(oldest_age),
                oldest_age / exp.max(1.0),
                human_duration(exp)
            ),
            format!("stale marks by age, in multiples of identity-heartbeat-timeout + identity-gc-interval ({}): {dist}", human_duration(exp)),
            format!("a completed pass deletes every mark older than the heartbeat timeout, so none completed after {since}"),
        ],
        suggestion: Some("check that cilium-operator runs and holds the leader lease, and grep its logs for identity GC errors (conflicts abort passes in affected versions, see known-gc-defect); meanwhile `kubectl cilium-gc delete` collects them without abandoning the run".into()),
    })
}

/// cilium-operator's own metrics: its GC passes start but do not complete
/// (cilium#33142 or #47571 seen, not inferred from its version).
fn gc_passes_failing(m: &OperatorGcMetrics, ids: IdentityCounts) -> Option<Finding> {
    if m.verdict != PassVerdict::NotCompleting {
        return None;
    }
    let leader = m
        .pods
        .iter()
        .find(|p| p.verdict == PassVerdict::NotCompleting)?;
    let last = leader.second.as_ref().or(leader.first.as_ref())?;
    let mut evidence: Vec<String> = leader
        .evidence
        .iter()
        .map(|e| format!("pod {}: {e}", leader.pod))
        .collect();
    evidence.push(match last.entries_alive {
        Some(alive) => format!(
            "identities now: {}; at the end of the last completed pass: {alive} alive, {} deleted",
            ids.describe(),
            last.entries_deleted.unwrap_or(0)
        ),
        None => format!(
            "identities now: {}; no pass has completed since the operator started",
            ids.describe()
        ),
    });
    evidence.push("cilium-operator counts only completed passes (identity_gc_runs outcome=success); a pass that ends at an error (a 409 on a delete before 1.16, cilium/cilium#33142; a 404 on a delete or a failed mark update in later versions, #47571) is counted nowhere".into());
    Some(Finding {
        severity: Severity::Warning,
        code: FindingCode::GcPassesFailing,
        message: format!(
            "cilium-operator's own metrics show its identity-GC passes do not complete (pod {}): {}",
            leader.pod,
            leader.evidence.first().cloned().unwrap_or_default()
        ),
        evidence,
        suggestion: Some("grep the operator's log for \"Deleting unused identity\" / \"Marking identity for later deletion\" errors (409 Conflict: another writer, usually agents, changed the identity during the pass); upgrade past cilium/cilium#33143, and meanwhile schedule `kubectl cilium-gc delete`, which re-decides each conflict instead of abandoning the pass".into()),
    })
}

/// Upstream GC defects known for this cluster's Cilium versions; what the
/// operator's metrics `seen` overrides the version's inference.
fn known_defect_finding(c: &CiliumWorkloads, seen: Option<PassVerdict>) -> Option<Finding> {
    if c.known_defects.is_empty() {
        return None;
    }
    let major = c
        .known_defects
        .iter()
        .any(|d| d.issue.ends_with("/33142") || d.issue.ends_with("/35946"));
    // Passes seen completing: the version's defect is not what happens now.
    let completing = seen == Some(PassVerdict::Completing);
    let seen_line = match seen {
        Some(PassVerdict::Completing) => Some("cilium-operator's metrics show its GC passes completing: the pass-abandoning defects are not happening now (inferred from the version only)"),
        Some(PassVerdict::NotCompleting) => Some("cilium-operator's metrics show its GC passes not completing: see gc-passes-failing"),
        _ => None,
    };
    Some(Finding {
        severity: if major && !completing { Severity::Warning } else { Severity::Info },
        code: FindingCode::KnownGcDefect,
        message: format!(
            "{} known identity-GC {} may affect this cluster's Cilium ({})",
            c.known_defects.len(),
            if c.known_defects.len() == 1 { "defect" } else { "defects" },
            [c.operator_version.as_ref().map(|v| format!("operator {v}")), c.agent_version.as_ref().map(|v| format!("agent {v}"))]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ")
        ),
        evidence: c
            .known_defects
            .iter()
            .map(|d| {
                let status = match d.status {
                    DefectStatus::Affected => "affected",
                    DefectStatus::Unconfirmed => "unconfirmed",
                };
                format!("{} ({}, {status}): {}; {}", d.issue, d.component, d.summary, d.check)
            })
            .chain(seen_line.map(String::from))
            .collect(),
        suggestion: Some("upgrade Cilium past the fixes; until then schedule `kubectl cilium-gc delete` (examples/cronjob.yaml), which re-decides each conflict instead of abandoning the pass".into()),
    })
}

/// An operator image tag that is not a version: defects cannot be matched.
fn unversioned_operator(c: &CiliumWorkloads) -> Option<Finding> {
    if c.operator_version.is_some() || c.operator_images.is_empty() {
        return None;
    }
    Some(Finding {
        severity: Severity::Info,
        code: FindingCode::KnownGcDefect,
        message: "the cilium-operator image tag is not a version: known GC defects could not be matched".into(),
        evidence: c.operator_images.iter().map(|i| format!("image {i}")).collect(),
        suggestion: Some(format!("run `kubectl -n <cilium namespace> exec deploy/cilium-operator -- cilium-operator-generic --version` and compare with {ISSUE}33142 (fixed in 1.16.0 by #33143), {ISSUE}35946 (1.16.x agents) and {PULL}47571")),
    })
}

/// Operator restarts: each one delays GC by a heartbeat timeout.
fn operator_restarts(
    c: &CiliumWorkloads,
    heartbeat_timeout: Duration,
    now: Timestamp,
) -> Option<Finding> {
    let restarted: Vec<&OperatorPodStatus> = c
        .operator_pods
        .iter()
        .filter(|p| {
            p.restarts > 0
                || p.running_since.is_some_and(|t| {
                    now.duration_since(t).as_secs_f64() < heartbeat_timeout.as_secs_f64()
                })
        })
        .collect();
    if restarted.is_empty() {
        return None;
    }
    let total: u64 = restarted.iter().map(|p| p.restarts).sum();
    let latest = restarted.iter().filter_map(|p| p.running_since).max();
    let recent = latest.is_some_and(|t| {
        now.duration_since(t).as_secs_f64() < 2.0 * heartbeat_timeout.as_secs_f64()
    });
    Some(Finding {
        severity: if recent || total >= 3 { Severity::Warning } else { Severity::Info },
        code: FindingCode::OperatorRestarts,
        message: format!(
            "cilium-operator restarted {total} times{}: after each restart it treats every identity as alive again, delaying GC by a heartbeat timeout ({ISSUE}28339)",
            latest.map(|t| format!(", last at {t}")).unwrap_or_default()
        ),
        evidence: restarted
            .iter()
            .map(|p| {
                format!(
                    "pod {}: {} restarts, running since {}, pod started {}",
                    p.name,
                    p.restarts,
                    p.running_since.map(|t| t.to_string()).unwrap_or_else(|| "?".into()),
                    p.started_at.map(|t| t.to_string()).unwrap_or_else(|| "?".into()),
                )
            })
            .chain(std::iter::once(format!(
                "GC of an unused identity takes at least one heartbeat timeout ({}) after the operator's last start",
                human_duration(heartbeat_timeout.as_secs_f64())
            )))
            .collect(),
        suggestion: Some("find why it restarts (`kubectl -n <cilium namespace> logs deploy/cilium-operator --previous`: OOM, lost leader election, API timeouts) and fix that; frequent restarts stall GC entirely".into()),
    })
}

/// Unused identities an agent keeps refreshing.
fn agent_held_unused(h: &GcHealth) -> Option<Finding> {
    if h.agent_held_unused == 0 {
        return None;
    }
    let many = h.agent_held_unused >= 5;
    Some(Finding {
        severity: if many { Severity::Warning } else { Severity::Info },
        code: FindingCode::AgentHeldUnused,
        message: format!(
            "{} unused identities were refreshed by an agent in the last {} and are older than a pod start: agents hold them though no endpoint uses them ({ISSUE}35946 pattern)",
            h.agent_held_unused,
            human_duration(AGENT_RECENT.as_secs_f64())
        ),
        evidence: std::iter::once(format!(
            "namespaces: {}",
            h.agent_held_namespaces
                .iter()
                .map(|n| format!("{} ({})", n.namespace, n.identities))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .chain(std::iter::once(format!(
            "one snapshot: an identity a pod is starting to use looks the same for a moment; those still listed by a second `diagnose` {} later are held",
            human_duration(POD_START.as_secs_f64())
        )))
        .collect(),
        suggestion: Some("on the nodes whose agents wrote them (`cilium-dbg identity list` shows local references), restart cilium-agent to drop the dead keys; `kubectl cilium-gc delete --mark` cannot help while an agent strips the marks".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags_become_versions() {
        for (image, v) in [
            ("quay.io/cilium/operator-generic:v1.15.6", Some((1, 15, 6))),
            (
                "quay.io/cilium/cilium:v1.16.3@sha256:abcd",
                Some((1, 16, 3)),
            ),
            ("registry:5000/cilium/cilium:1.17.0-rc.1", Some((1, 17, 0))),
            ("registry:5000/cilium/cilium", None),
            ("quay.io/cilium/cilium:latest", None),
            ("quay.io/cilium/cilium@sha256:abcd", None),
        ] {
            assert_eq!(image_version(image), v, "{image}");
        }
    }

    fn issues(d: &[KnownDefect]) -> Vec<(&str, DefectStatus)> {
        d.iter()
            .map(|d| (d.issue.rsplit('/').next().unwrap(), d.status))
            .collect()
    }

    #[test]
    fn versions_map_to_the_defects_upstream_confirms() {
        use DefectStatus::*;
        // 1.15: #33142 unless a backport (unconfirmed), #47571 open.
        assert_eq!(
            issues(&known_defects(Some((1, 15, 6)), Some((1, 15, 6)))),
            [("33142", Unconfirmed), ("47571", Unconfirmed)]
        );
        // Before 1.14 no backport is expected: affected.
        assert_eq!(
            issues(&known_defects(Some((1, 12, 0)), None))[0],
            ("33142", Affected)
        );
        // 1.16 carries #33143; its agents have #35946.
        assert_eq!(
            issues(&known_defects(Some((1, 16, 3)), Some((1, 16, 3)))),
            [("47571", Unconfirmed), ("35946", Affected)]
        );
        assert_eq!(
            issues(&known_defects(Some((1, 17, 0)), Some((1, 17, 0)))),
            [("47571", Unconfirmed)]
        );
        assert!(known_defects(None, None).is_empty());
        for d in known_defects(Some((1, 15, 6)), Some((1, 16, 0))) {
            assert!(d.issue.starts_with("https://github.com/cilium/cilium/"));
            assert!(!d.check.is_empty());
        }
    }
}
