//! The decision: is this identity stale, and why. Pure: no I/O, no clock.
//!
//! The semantics are cilium-operator's, so running both never fights: an
//! identity is collected only when no endpoint uses it *and* the operator's
//! heartbeat mark on it is older than the heartbeat timeout. An unmarked
//! identity is left to the operator (or marked by us with `--mark`), because
//! an agent may be about to reuse it; the mark is the handshake that proves
//! nobody did for a whole timeout.

use std::ops::RangeInclusive;
use std::time::Duration;

use jiff::Timestamp;

use crate::model::Identity;
use crate::selector::Selector;

pub use cilium_gc_documents::report::Reason;

/// The verdict on one identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Why.
    pub reason: Reason,
    /// The parsed heartbeat mark, when there is a valid one.
    pub marked_at: Option<Timestamp>,
}

impl Decision {
    /// Whether the identity may be deleted now.
    pub fn is_candidate(&self) -> bool {
        self.reason == Reason::Stale
    }
}

/// The cluster's rules, judged at plan time and again right before each
/// write: they judge what can change under us (usage, the mark, and through
/// the write's preconditions, the uid and resourceVersion).
#[derive(Debug, Clone)]
pub struct Rules {
    /// Identities this cluster allocates (from cluster-id and max-connected-clusters).
    pub local_range: RangeInclusive<u64>,
    /// How old a heartbeat mark must be before the identity may go.
    pub heartbeat_timeout: Duration,
}

/// The user's choice of *which* identities to consider (`-l`, `-n`,
/// `--min-age`, and any narrowing flag added later). Applied once, at plan
/// time, by `select`; never again before a write, because the write path
/// does not keep what it needs (labels) and because nothing that a filter
/// reads is what an agent or the operator changes under us.
#[derive(Debug, Clone, Default)]
pub struct Narrowing {
    /// `-l`: only identities whose labels match.
    pub selector: Option<Selector>,
    /// `-n`: only identities of these pod namespaces (empty = all).
    pub namespaces: Vec<String>,
    /// `--min-age`: only identities created at least this long ago.
    pub min_age: Option<Duration>,
}

/// Everything that shapes the plan-time decision.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Re-judged before every write.
    pub rules: Rules,
    /// Judged once, at plan time.
    pub narrowing: Narrowing,
}

/// Smallest identity a cluster allocates; below are reserved identities.
pub(crate) const MIN_LOCAL_IDENTITY: u64 = 256;

/// The local identity range of a cluster, as Cilium's allocator computes it
/// (`GetMinimalAllocationIdentity`, `GetMaximumAllocationIdentity` and
/// `initClusterIDShift` in `pkg/identity/numericidentity.go`, v1.15.6 and
/// v1.19.3 alike): the cluster id takes the bits above the local identity
/// bits (16 with up to 255 connected clusters, 15 with 511); cluster 0
/// starts at 256 (the ids below are reserved), cluster N > 0 at N shifted
/// by those bits (no well-known identities to reserve there).
pub fn local_range(cluster_id: u64, max_connected_clusters: u64) -> RangeInclusive<u64> {
    let shift = if max_connected_clusters > 255 { 15 } else { 16 };
    let base = cluster_id << shift;
    let min = if cluster_id == 0 {
        MIN_LOCAL_IDENTITY
    } else {
        base
    };
    min..=(base + (1u64 << shift) - 1)
}

/// The plan-time verdict: [`decide`] on the cluster's rules, then the
/// user's narrowing (`select`). An identity in use or outside the local
/// range says so even when it is also filtered out, so the reason counts of
/// a narrowed run still show what is in use.
pub fn plan(identity: &Identity, refs: u32, policy: &Policy, now: Timestamp) -> Decision {
    let d = decide(identity, refs, &policy.rules, now);
    match d.reason {
        Reason::InUse | Reason::NotLocal => d,
        _ if !select(identity, &policy.narrowing, now) => Decision {
            reason: Reason::Filtered,
            ..d
        },
        _ => d,
    }
}

/// Judge one identity by what can change under us. `refs` is how many
/// endpoints reference its id right now; `now` is the clock marks are judged
/// by (the server's, see `clock`). Used at plan time (through [`plan`]) and
/// right before each write, where a verdict other than the one planned means
/// an agent or the operator changed the identity (it is then `reclaimed`).
/// Never returns [`Reason::Filtered`].
pub fn decide(identity: &Identity, refs: u32, rules: &Rules, now: Timestamp) -> Decision {
    let marked_at = identity.mark.as_deref().and_then(parse_mark);
    let verdict = |reason| Decision { reason, marked_at };
    let Some(id) = identity.numeric_id() else {
        return verdict(Reason::NotLocal);
    };
    if refs > 0 {
        return verdict(Reason::InUse);
    }
    if !rules.local_range.contains(&id) {
        return verdict(Reason::NotLocal);
    }
    if identity.mark.is_none() {
        return verdict(Reason::Unmarked);
    }
    let Some(mark) = marked_at else {
        return verdict(Reason::MalformedMark);
    };
    // A mark in the future (clock skew) has a negative age: too recent.
    let old_enough = now
        .duration_since(mark)
        .try_into()
        .is_ok_and(|age: Duration| age > rules.heartbeat_timeout);
    if old_enough {
        verdict(Reason::Stale)
    } else {
        verdict(Reason::MarkTooRecent)
    }
}

/// Whether the user's narrowing lets this identity be considered at all.
/// Plan time only: see [`Narrowing`].
pub(crate) fn select(identity: &Identity, narrowing: &Narrowing, now: Timestamp) -> bool {
    if let Some(sel) = &narrowing.selector {
        if !sel.matches(&identity.labels) {
            return false;
        }
    }
    if !narrowing.namespaces.is_empty()
        && !identity
            .namespace
            .as_ref()
            .is_some_and(|ns| narrowing.namespaces.contains(ns))
    {
        return false;
    }
    if let Some(min_age) = narrowing.min_age {
        // Unknown creation time: we cannot prove the age, so it is filtered.
        let old_enough = identity.created_at.is_some_and(|c| {
            now.duration_since(c)
                .try_into()
                .is_ok_and(|age: Duration| age >= min_age)
        });
        if !old_enough {
            return false;
        }
    }
    true
}

/// Parse an `io.cilium.heartbeat` value. The operator writes RFC 3339 with
/// nanoseconds; any RFC 3339 time with an offset is accepted.
pub fn parse_mark(s: &str) -> Option<Timestamp> {
    s.trim().parse::<Timestamp>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const NOW: &str = "2026-06-01T12:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    fn ident(name: &str, mark: Option<&str>) -> Identity {
        Identity {
            name: name.into(),
            uid: "uid".into(),
            resource_version: "1".into(),
            created_at: Some("2026-05-01T00:00:00Z".parse().unwrap()),
            labels: BTreeMap::from([
                (
                    "io.kubernetes.pod.namespace".to_string(),
                    "prod".to_string(),
                ),
                ("app".to_string(), "web".to_string()),
            ]),
            namespace: Some("prod".into()),
            mark: mark.map(str::to_owned),
            last_change: None,
        }
    }

    fn policy() -> Policy {
        Policy {
            rules: Rules {
                local_range: local_range(0, 255),
                heartbeat_timeout: Duration::from_secs(30 * 60),
            },
            narrowing: Narrowing::default(),
        }
    }

    const OLD: &str = "2026-06-01T11:00:00.123456789Z"; // 1 h before NOW
    const YOUNG: &str = "2026-06-01T11:50:00Z"; // 10 min before NOW

    #[test]
    fn decision_table() {
        let p = policy();
        let with = |f: &dyn Fn(&mut Policy)| {
            let mut p = policy();
            f(&mut p);
            p
        };
        let cases: Vec<(&str, Identity, u32, Policy, Reason)> = vec![
            (
                "stale",
                ident("1000", Some(OLD)),
                0,
                p.clone(),
                Reason::Stale,
            ),
            (
                "in use beats everything",
                ident("1000", Some(OLD)),
                1,
                p.clone(),
                Reason::InUse,
            ),
            (
                "in use, unmarked",
                ident("1000", None),
                3,
                p.clone(),
                Reason::InUse,
            ),
            (
                "non-numeric",
                ident("abc", Some(OLD)),
                0,
                p.clone(),
                Reason::NotLocal,
            ),
            (
                "reserved id",
                ident("255", Some(OLD)),
                0,
                p.clone(),
                Reason::NotLocal,
            ),
            (
                "lowest local",
                ident("256", Some(OLD)),
                0,
                p.clone(),
                Reason::Stale,
            ),
            (
                "highest local",
                ident("65535", Some(OLD)),
                0,
                p.clone(),
                Reason::Stale,
            ),
            (
                "above range",
                ident("65536", Some(OLD)),
                0,
                p.clone(),
                Reason::NotLocal,
            ),
            (
                "unmarked",
                ident("1000", None),
                0,
                p.clone(),
                Reason::Unmarked,
            ),
            (
                "young mark",
                ident("1000", Some(YOUNG)),
                0,
                p.clone(),
                Reason::MarkTooRecent,
            ),
            (
                "future mark (skew)",
                ident("1000", Some("2026-06-01T13:00:00Z")),
                0,
                p.clone(),
                Reason::MarkTooRecent,
            ),
            (
                "mark exactly at timeout",
                ident("1000", Some("2026-06-01T11:30:00Z")),
                0,
                p.clone(),
                Reason::MarkTooRecent,
            ),
            (
                "garbage mark",
                ident("1000", Some("yesterday")),
                0,
                p.clone(),
                Reason::MalformedMark,
            ),
            (
                "empty mark",
                ident("1000", Some("")),
                0,
                p.clone(),
                Reason::MalformedMark,
            ),
            (
                "offset mark",
                ident("1000", Some("2026-06-01T13:00:00+02:00")),
                0,
                p.clone(),
                Reason::Stale,
            ),
            (
                "selector miss",
                ident("1000", Some(OLD)),
                0,
                with(&|p| p.narrowing.selector = Some(Selector::parse("app=db").unwrap())),
                Reason::Filtered,
            ),
            (
                "selector hit",
                ident("1000", Some(OLD)),
                0,
                with(&|p| p.narrowing.selector = Some(Selector::parse("app=web").unwrap())),
                Reason::Stale,
            ),
            (
                "namespace miss",
                ident("1000", Some(OLD)),
                0,
                with(&|p| p.narrowing.namespaces = vec!["dev".into()]),
                Reason::Filtered,
            ),
            (
                "namespace hit",
                ident("1000", Some(OLD)),
                0,
                with(&|p| p.narrowing.namespaces = vec!["dev".into(), "prod".into()]),
                Reason::Stale,
            ),
            (
                "too young to touch",
                ident("1000", Some(OLD)),
                0,
                with(&|p| p.narrowing.min_age = Some(Duration::from_secs(90 * 86400))),
                Reason::Filtered,
            ),
            (
                "old enough",
                ident("1000", Some(OLD)),
                0,
                with(&|p| p.narrowing.min_age = Some(Duration::from_secs(86400))),
                Reason::Stale,
            ),
            (
                "filter before mark",
                ident("1000", None),
                0,
                with(&|p| p.narrowing.namespaces = vec!["dev".into()]),
                Reason::Filtered,
            ),
            // A narrowed run still counts what is in use or not local as
            // such, not as filtered out.
            (
                "in use though filtered out",
                ident("1000", Some(OLD)),
                2,
                with(&|p| p.narrowing.namespaces = vec!["dev".into()]),
                Reason::InUse,
            ),
            (
                "not local though filtered out",
                ident("1000", Some(OLD)),
                0,
                with(&|p| {
                    p.narrowing.namespaces = vec!["dev".into()];
                    p.rules.local_range = local_range(3, 255);
                }),
                Reason::NotLocal,
            ),
            (
                "cluster 3 range",
                ident("1000", Some(OLD)),
                0,
                with(&|p| p.rules.local_range = local_range(3, 255)),
                Reason::NotLocal,
            ),
            (
                "cluster 3 id",
                ident(&((3u64 << 16) + 1000).to_string(), Some(OLD)),
                0,
                with(&|p| p.rules.local_range = local_range(3, 255)),
                Reason::Stale,
            ),
            (
                "short timeout",
                ident("1000", Some(YOUNG)),
                0,
                with(&|p| p.rules.heartbeat_timeout = Duration::from_secs(60)),
                Reason::Stale,
            ),
        ];
        for (what, id, refs, pol, want) in cases {
            assert_eq!(plan(&id, refs, &pol, now()).reason, want, "{what}");
        }
    }

    #[test]
    fn unknown_creation_time_is_filtered_by_min_age() {
        let mut id = ident("1000", Some(OLD));
        id.created_at = None;
        let mut p = policy();
        p.narrowing.min_age = Some(Duration::from_secs(1));
        assert_eq!(plan(&id, 0, &p, now()).reason, Reason::Filtered);
        p.narrowing.min_age = None;
        assert_eq!(plan(&id, 0, &p, now()).reason, Reason::Stale);
    }

    #[test]
    fn namespace_filter_excludes_identities_without_namespace() {
        let mut id = ident("1000", Some(OLD));
        id.namespace = None;
        let mut p = policy();
        p.narrowing.namespaces = vec!["prod".into()];
        assert_eq!(plan(&id, 0, &p, now()).reason, Reason::Filtered);
    }

    /// Issue 13: `delete -l` deleted nothing because the write-time check
    /// re-applied the selector to an identity whose labels the plan had
    /// dropped. Narrowing is judged once, at plan time; `decide` never
    /// filters.
    #[test]
    fn write_time_decision_ignores_narrowing() {
        let mut p = policy();
        p.narrowing.selector = Some(Selector::parse("app=web").unwrap());
        p.narrowing.namespaces = vec!["prod".into()];
        p.narrowing.min_age = Some(Duration::from_secs(86400));
        let planned = ident("1000", Some(OLD));
        assert_eq!(plan(&planned, 0, &p, now()).reason, Reason::Stale);
        // What the sweep holds: labels, namespace and creation time gone.
        let mut bare = planned.clone();
        bare.labels.clear();
        bare.namespace = None;
        bare.created_at = None;
        assert_eq!(plan(&bare, 0, &p, now()).reason, Reason::Filtered);
        assert_eq!(decide(&bare, 0, &p.rules, now()).reason, Reason::Stale);
        for (id, refs) in [(ident("1000", None), 0), (ident("1000", Some(OLD)), 2)] {
            assert_ne!(decide(&id, refs, &p.rules, now()).reason, Reason::Filtered);
        }
    }

    /// The values Cilium's own functions give, worked from their code
    /// (`pkg/identity/numericidentity.go`): `initClusterIDShift` sets the
    /// shift to `NumericIdentityBitlength` (24) minus log2(ClusterIDMax+1),
    /// 16 for 255 and 15 for 511; `GetMinimalAllocationIdentity` is
    /// `MinimalNumericIdentity` (256) for cluster 0, else
    /// `(1 << shift) * clusterID`; `GetMaximumAllocationIdentity` is
    /// `(1 << shift) * (clusterID + 1) - 1`.
    #[test]
    fn local_ranges_match_cilium() {
        assert_eq!(local_range(0, 255), 256..=65535);
        assert_eq!(local_range(1, 255), 65536..=131071);
        assert_eq!(local_range(255, 255), 16_711_680..=16_777_215);
        assert_eq!(local_range(0, 511), 256..=32767);
        assert_eq!(local_range(1, 511), 32768..=65535);
        assert_eq!(local_range(2, 511), 65536..=98303);
        assert_eq!(local_range(511, 511), 16_744_448..=16_777_215);
        assert_eq!(local_range(0, 255).count(), 65280);
        assert_eq!(local_range(0, 511).count(), 32512);
        assert_eq!(local_range(1, 255).count(), 65536);
    }

    #[test]
    fn only_stale_is_a_candidate_and_mark_is_returned() {
        let d = plan(&ident("1000", Some(OLD)), 0, &policy(), now());
        assert!(d.is_candidate());
        assert_eq!(d.marked_at, Some(OLD.parse().unwrap()));
        for r in Reason::ALL {
            let d = Decision {
                reason: r,
                marked_at: None,
            };
            assert_eq!(d.is_candidate(), r == Reason::Stale);
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
    }
}
