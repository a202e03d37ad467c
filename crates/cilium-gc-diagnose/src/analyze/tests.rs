//! The diagnosis from plain data: one scenario per finding and state.

use std::collections::BTreeMap;
use std::time::Duration;

use cilium_gc_cluster::discovery::Crds;
use cilium_gc_cluster::model::{Change, Identity};
use cilium_gc_documents::diagnosis::*;
use cilium_gc_documents::report::{ConfigSource, IdRange};
use jiff::Timestamp;

use super::ages::{DAY, HOUR};
use super::analyze;
use super::churn::protected_key;
use super::config::CONFIG_KEYS;
use super::labels::{exclusion, LabelFilter};
use crate::input::{agent_like, IdentityRecord, Input};

mod forecast;

const NOW: &str = "2026-06-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}
/// `NOW` minus `secs`.
fn ago(secs: i64) -> Timestamp {
    now()
        .checked_sub(jiff::SignedDuration::from_secs(secs))
        .unwrap()
}

/// An identity `id` in namespace `ns`, created `age` seconds ago.
fn ident(id: u64, ns: &str, age: i64) -> IdentityRecord {
    IdentityRecord {
        identity: Identity {
            name: id.to_string(),
            uid: format!("uid-{id}"),
            resource_version: "1".into(),
            created_at: Some(ago(age)),
            labels: BTreeMap::from([(cilium_gc_cluster::model::NAMESPACE_LABEL.into(), ns.into())]),
            namespace: Some(ns.into()),
            mark: None,
            last_change: None,
        },
        security_labels: BTreeMap::from([
            (
                format!("k8s:{}", cilium_gc_cluster::model::NAMESPACE_LABEL),
                ns.into(),
            ),
            ("k8s:app".into(), format!("app-{id}")),
        ]),
    }
}

fn marked(mut r: IdentityRecord, mark_age: i64) -> IdentityRecord {
    r.identity.mark = Some(ago(mark_age).to_string());
    r
}

fn label(mut r: IdentityRecord, k: &str, v: &str) -> IdentityRecord {
    r.security_labels.insert(k.into(), v.into());
    r
}

fn changed(mut r: IdentityRecord, manager: &str, age: i64) -> IdentityRecord {
    r.identity.last_change = Some(Change {
        manager: manager.into(),
        operation: "Update".into(),
        time: Some(ago(age)),
    });
    r
}

fn input(identities: Vec<IdentityRecord>) -> Input {
    Input {
        identities,
        crds: Crds {
            identities: true,
            endpoints: true,
            slices: false,
            slices_v2: false,
        },
        endpoints: 1,
        config: Some(BTreeMap::new()),
        ..Default::default()
    }
}

fn cfg(i: &mut Input, k: &str, v: &str) {
    i.config
        .get_or_insert_with(BTreeMap::new)
        .insert(k.into(), v.into());
}

fn codes(d: &Diagnosis) -> Vec<FindingCode> {
    d.findings.iter().map(|f| f.code).collect()
}

fn finding(d: &Diagnosis, c: FindingCode) -> &Finding {
    d.findings
        .iter()
        .find(|f| f.code == c)
        .unwrap_or_else(|| panic!("no {c:?} in {:#?}", d.findings))
}

#[test]
fn every_state_is_counted_once() {
    let mut i = input(vec![
        ident(1000, "a", DAY),                   // in use
        marked(ident(1001, "a", DAY), 2 * HOUR), // stale
        marked(ident(1002, "a", DAY), 60),       // marked, too recent
        ident(1003, "b", DAY),                   // unmarked
        ident(1004, "b", 60),                    // too young
        ident(70000, "b", DAY),                  // not local
        {
            let mut r = ident(1005, "b", DAY);
            r.identity.mark = Some("soon".into());
            r
        }, // malformed mark
    ]);
    i.refs.insert(1000, 2);
    let d = analyze(&i, now());
    assert_eq!(
        d.identity_space.states,
        StateCounts {
            in_use: 1,
            stale_candidates: 1,
            unused_marked: 1,
            unused_unmarked: 1,
            too_young: 1,
            not_local: 1,
            malformed_mark: 1,
        }
    );
    assert_eq!(d.identity_space.total, 7);
    assert_eq!(d.identity_space.allocated, 6);
    assert_eq!(d.identity_space.capacity, 65_280);
    assert!(codes(&d).contains(&FindingCode::MalformedMarks));
    assert!(codes(&d).contains(&FindingCode::StaleBacklog));
}

#[test]
fn utilisation_levels_and_headroom() {
    // cluster-id 1 with 511 clusters: range 32768..=65535 (32,768 ids), as
    // Cilium's GetMinimalAllocationIdentity and GetMaximumAllocationIdentity
    // (pkg/identity/numericidentity.go) give it: no reserved ids above cluster 0.
    let build = |count: u64| {
        let mut i = input(
            (0..count)
                .map(|k| {
                    let mut r = ident(32768 + k, "a", 30 * DAY);
                    r.security_labels.clear();
                    r
                })
                .collect(),
        );
        cfg(&mut i, "cluster-id", "1");
        cfg(&mut i, "max-connected-clusters", "511");
        for k in 0..count {
            i.refs.insert(32768 + k, 1);
        }
        analyze(&i, now())
    };
    let d = build(100);
    assert_eq!(
        d.identity_space.local_range,
        IdRange {
            min: 32768,
            max: 65535
        }
    );
    assert_eq!(d.identity_space.capacity, 32_768);
    assert_eq!(
        d.identity_space.local_range_from,
        Some(LocalRangeFrom {
            cluster_id: 1,
            cluster_id_source: ConfigSource::CiliumConfig,
            max_connected_clusters: 511,
            max_connected_clusters_source: ConfigSource::CiliumConfig,
        })
    );
    assert_eq!(d.identity_space.level, Level::Ok);
    assert!(!codes(&d).contains(&FindingCode::IdentitySpaceNearlyFull));
    let d = build(26_215); // 80.0%
    assert_eq!(d.identity_space.level, Level::Warning);
    assert_eq!(d.identity_space.utilisation_percent, 80.0);
    assert_eq!(
        finding(&d, FindingCode::IdentitySpaceNearlyFull).severity,
        Severity::Warning
    );
    let d = build(31_130); // 95.0%
    assert_eq!(d.identity_space.level, Level::Critical);
    assert_eq!(d.identity_space.headroom, 32_768 - 31_130);
    let f = finding(&d, FindingCode::IdentitySpaceNearlyFull);
    assert_eq!(f.severity, Severity::Critical);
    assert!(
        f.evidence[0].contains("31,130 of 32,768"),
        "{:?}",
        f.evidence
    );
    assert_eq!(
        d.findings[0].severity,
        Severity::Critical,
        "most severe first"
    );
}

#[test]
fn the_papers_example_figure() {
    // 64,890 of 65,280 = 99.4%.
    let i = input(
        (256..256 + 64_890)
            .map(|id| {
                let mut r = ident(id, "a", 30 * DAY);
                r.security_labels.clear();
                r
            })
            .collect(),
    );
    let d = analyze(&i, now());
    assert_eq!(d.identity_space.utilisation_percent, 99.4);
    assert_eq!(d.identity_space.headroom, 390);
}

#[test]
fn histograms_rate_and_exhaustion() {
    let mut ids = vec![
        ident(300, "a", 10),       // < 1h
        ident(301, "a", HOUR + 1), // 1h-24h
        ident(302, "a", 2 * DAY),  // 1d-7d
        ident(303, "a", 8 * DAY),  // >= 7d
        ident(304, "a", -30),      // future: < 1h
        marked(ident(305, "a", 8 * DAY), 60),
        marked(ident(306, "a", 8 * DAY), 2 * HOUR),
    ];
    let mut unknown = ident(307, "a", 0);
    unknown.identity.created_at = None;
    ids.push(unknown);
    let d = analyze(&input(ids), now());
    let counts: Vec<u64> = d.age.created.iter().map(|b| b.count).collect();
    assert_eq!(counts, vec![2, 1, 1, 3]);
    assert_eq!(d.age.created_unknown, 1);
    let marks: Vec<u64> = d.age.marks.iter().map(|b| b.count).collect();
    assert_eq!(marks, vec![1, 0, 0, 1, 0]);
    assert_eq!(d.age.marks_past_timeout, 1);
    assert_eq!(d.age.created_last24h, 3);
    assert_eq!(d.age.creation_rate_per_hour, 0.13);
    // headroom 65,280 - 8 at 3 per 24h: 522,176 hours.
    let secs = d.age.exhaustion_in_seconds.unwrap();
    assert_eq!(secs, ((65_280.0 - 8.0) / (3.0 / 24.0) * 3600.0_f64).round());
    assert!(!codes(&d).contains(&FindingCode::ExhaustionSoon));
    assert_eq!(d.age.created[3].to_seconds, None);
}

#[test]
fn only_local_creations_count_towards_exhaustion() {
    // 50 local ids left; 50 local and 500 cluster-mesh ids created
    // today. The other cluster's do not use up this range.
    let mut ids: Vec<IdentityRecord> = (0..65_180).map(|k| ident(256 + k, "a", 30 * DAY)).collect();
    ids.extend((0..50).map(|k| ident(65_436 + k, "jobs", 600)));
    ids.extend((0..500).map(|k| ident(70_000 + k, "remote", 600)));
    let d = analyze(&input(ids), now());
    assert_eq!(d.identity_space.headroom, 50);
    assert_eq!(d.age.created_last24h, 50);
    assert_eq!(d.age.created[0].count, 550, "the histogram shows them all");
    // The day's rate: 50 ids at 50/24 per hour, 24 hours, not 2.
    assert_eq!(d.age.exhaustion_in_seconds, Some(86_400.0));
    // The recent pace: the 50 local ones over the last 30m (the heartbeat
    // timeout's window), not 550: 50 ids at 100/h, 30 minutes.
    let forecast = d.forecast.as_ref().unwrap();
    assert_eq!(
        (forecast.pace.window.as_str(), forecast.pace.created),
        ("30m", 50)
    );
    assert_eq!(forecast.full_if_gc_stops.seconds, Some(1_800.0));
    let f = finding(&d, FindingCode::ExhaustionSoon);
    assert_eq!(f.severity, Severity::Critical);
    assert!(f.message.contains("full in 30m"), "{}", f.message);
}

#[test]
fn fast_churn_near_the_end_is_critical() {
    // 64,000 old + 1,200 created in the last day: 80 ids left at 50/h.
    let mut ids: Vec<IdentityRecord> = (0..64_000).map(|k| ident(256 + k, "a", 30 * DAY)).collect();
    ids.extend((0..1_200).map(|k| ident(64_256 + k, "jobs", 600)));
    let d = analyze(&input(ids), now());
    assert_eq!(d.age.created_last24h, 1_200);
    assert_eq!(d.age.creation_rate_per_hour, 50.0);
    assert_eq!(d.identity_space.headroom, 80);
    assert_eq!(d.age.exhaustion_in_seconds, Some(5_760.0));
    assert_eq!(
        d.age.exhausted_at,
        Some(
            now()
                .checked_add(jiff::SignedDuration::from_secs(5_760))
                .unwrap()
        )
    );
    // The day's average says 1h36m; the 1,200 came in the last 30 minutes
    // (2,400/h): the range is full in 2 minutes.
    let f = finding(&d, FindingCode::ExhaustionSoon);
    assert_eq!(f.severity, Severity::Critical);
    assert!(
        f.message.contains("full in 2m if GC stops"),
        "{}",
        f.message
    );
    assert!(
        f.evidence[0].starts_with("pace: 2,400/h over the last 30m (1,200 created)"),
        "{:?}",
        f.evidence
    );
}

#[test]
fn job_churn_keys_are_found_and_a_filter_is_suggested() {
    let ids: Vec<IdentityRecord> = (0..40)
        .map(|k| {
            let r = ident(1000 + k, "batch", DAY);
            let r = label(r, "k8s:job-name", &format!("job-{k}"));
            // Job pods' labels since Kubernetes 1.27; Cilium's defaults
            // drop `batch.kubernetes.io/controller-uid` but not this one.
            let r = label(r, "k8s:batch.kubernetes.io/job-name", &format!("job-{k}"));
            label(r, "k8s:tier", if k % 2 == 0 { "a" } else { "b" })
        })
        .collect();
    let d = analyze(&input(ids), now());
    let keys: Vec<(&str, u64, bool)> = d
        .churn
        .label_keys
        .iter()
        .map(|k| (k.key.as_str(), k.distinct_values, k.high_cardinality))
        .collect();
    assert_eq!(
        keys,
        vec![
            // One app per job here, yet `app` is never blamed: policies
            // select on it.
            ("k8s:app", 40, false),
            ("k8s:batch.kubernetes.io/job-name", 40, true),
            ("k8s:job-name", 40, true),
            ("k8s:tier", 2, false),
            ("k8s:io.kubernetes.pod.namespace", 1, false),
        ]
    );
    assert_eq!(d.churn.label_keys[0].share_percent, 100.0);
    assert!(codes(&d).contains(&FindingCode::HighCardinalityLabels));
    let f = finding(&d, FindingCode::LabelsFilterMissing);
    assert_eq!(
        d.configuration.suggested_labels.as_deref(),
        Some(r"k8s:!batch\.kubernetes\.io/job-name k8s:!job-name")
    );
    assert!(f.suggestion.as_ref().unwrap().contains("labels:"));
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterLeaky));
}

#[test]
fn a_leaky_filter_is_extended_not_replaced() {
    let ids: Vec<IdentityRecord> = (0..20)
        .map(|k| {
            let r = ident(1000 + k, "batch", DAY);
            let r = label(r, "k8s:job-name", &format!("job-{k}"));
            label(r, "k8s:run-id", &format!("u-{k}"))
        })
        .collect();
    let mut i = input(ids);
    cfg(&mut i, "labels", "k8s:!job-name k8s:!app");
    let d = analyze(&i, now());
    assert_eq!(d.configuration.leaky_keys, vec!["k8s:run-id"]);
    assert_eq!(
        d.configuration.suggested_labels.as_deref(),
        Some("k8s:!job-name k8s:!app k8s:!run-id")
    );
    let f = finding(&d, FindingCode::LabelsFilterLeaky);
    assert!(f.evidence.iter().any(|e| e == "passes: k8s:run-id"));
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterMissing));
    // A filter that already excludes everything: no finding.
    cfg(&mut i, "labels", "k8s:!job-name k8s:!app k8s:!run-id");
    let d = analyze(&i, now());
    assert!(d.configuration.suggested_labels.is_none());
    assert!(codes(&d).contains(&FindingCode::HighCardinalityLabels));
    assert!(!codes(&d).contains(&FindingCode::LabelsFilterLeaky));
}

#[test]
fn label_filter_follows_cilium() {
    let crate::ParsedFilter {
        filter: f,
        problems,
    } = LabelFilter::parse("");
    assert!(problems.is_empty());
    assert!(f.accepts("k8s:job-name"));
    assert!(f.accepts("k8s:app"));
    assert!(!f.accepts("k8s:pod-template-hash"));
    assert!(!f.accepts("k8s:io.kubernetes.foo"));
    assert!(
        f.accepts("k8s:io.kubernetes.pod.namespace"),
        "include beats shorter ignore"
    );
    // Source must match; `!` goes after the source.
    let f = LabelFilter::parse("k8s:!job-name").filter;
    assert!(!f.accepts("k8s:job-name"));
    assert!(f.accepts("container:job-name"));
    // `!` before the source is a different thing: an inclusive pattern of
    // source `!k8s` that matches nothing, which turns the filter into a
    // whitelist and drops every non-default label.
    let f = LabelFilter::parse("!k8s:job-name").filter;
    assert!(!f.accepts("k8s:job-name") && !f.accepts("k8s:app"));
    assert!(f.accepts("k8s:io.kubernetes.pod.namespace"));
    // An inclusive pattern makes it a whitelist.
    let f = LabelFilter::parse("k8s:app").filter;
    assert!(f.accepts("k8s:app"));
    assert!(!f.accepts("k8s:job-name"));
    // Anchored at the start of the key.
    let f = LabelFilter::parse("k8s:!name").filter;
    assert!(f.accepts("k8s:job-name"));
    let problems = LabelFilter::parse("k8s:!job-(name").problems;
    assert_eq!(problems.len(), 1);
    assert_eq!(exclusion("k8s:a.b/c"), r"k8s:!a\.b/c");
}

#[test]
fn namespaces_are_ranked_and_protected_keys_never_blamed() {
    let mut ids: Vec<IdentityRecord> = (0..5).map(|k| ident(1000 + k, "big", DAY)).collect();
    ids.extend((0..3).map(|k| marked(ident(2000 + k, "stale-ns", DAY), 2 * HOUR)));
    ids.push(ident(3000, "small", DAY));
    // Many namespaces with one identity each: the namespace key has one
    // value per identity but is never a churn driver.
    ids.extend((0..30).map(|k| {
        let mut r = ident(4000 + k, &format!("ns-{k}"), DAY);
        r.security_labels.remove("k8s:app");
        r
    }));
    let d = analyze(&input(ids), now());
    let top = &d.churn.namespaces_by_identities[0];
    assert_eq!(
        (top.namespace.as_str(), top.identities, top.unused),
        ("big", 5, 5)
    );
    assert_eq!(d.churn.namespaces_by_identities.len(), 10);
    let stale: Vec<(&str, u64)> = d
        .churn
        .namespaces_by_stale
        .iter()
        .map(|n| (n.namespace.as_str(), n.stale))
        .collect();
    assert_eq!(stale, vec![("stale-ns", 3)]);
    let ns_key = d
        .churn
        .label_keys
        .iter()
        .find(|k| k.key == "k8s:io.kubernetes.pod.namespace")
        .unwrap();
    assert!(ns_key.distinct_values >= 30 && !ns_key.high_cardinality);
    assert!(protected_key("reserved:host"));
    assert!(protected_key("k8s:io.cilium.k8s.policy.serviceaccount"));
    assert!(!protected_key("k8s:job-name"));
}

#[test]
fn duplicates_are_grouped() {
    let same = |id| {
        let mut r = ident(id, "a", DAY);
        r.security_labels.insert("k8s:app".into(), "web".into());
        r
    };
    let d = analyze(
        &input(vec![
            same(1000),
            same(1002),
            same(1001),
            ident(1003, "a", DAY),
        ]),
        now(),
    );
    assert_eq!(d.churn.duplicates.groups, 1);
    assert_eq!(d.churn.duplicates.surplus, 2);
    assert_eq!(
        d.churn.duplicates.examples[0].identities,
        vec!["1000", "1001", "1002"]
    );
    assert_eq!(d.churn.duplicates.examples[0].labels["k8s:app"], "web");
    assert_eq!(
        finding(&d, FindingCode::DuplicateIdentities).severity,
        Severity::Info
    );
}

#[test]
fn dangling_references_count_only_local_ids() {
    let mut i = input(vec![ident(1000, "a", DAY)]);
    i.refs = BTreeMap::from([(1000, 1), (4, 3), (1500, 2), (1501, 1), (70_000, 5)]);
    let d = analyze(&i, now());
    assert_eq!(d.integrity.dangling_ids, 2);
    assert_eq!(d.integrity.dangling_references, 3);
    assert_eq!(d.integrity.dangling_examples, vec![1500, 1501]);
    let f = finding(&d, FindingCode::DanglingReferences);
    assert!(f.evidence[0].contains("1500, 1501"));
}

#[test]
fn strip_loop_needs_unused_unmarked_and_an_agent_after_creation() {
    let mut ids: Vec<IdentityRecord> = (0..6)
        .map(|k| changed(ident(1000 + k, "a", DAY), "cilium-agent", 600 + k as i64))
        .collect();
    ids.push(changed(
        ident(2000, "a", DAY),
        "cilium-operator-generic",
        60,
    )); // not an agent
    ids.push(changed(ident(2001, "a", DAY), "cilium-agent", DAY)); // at creation
    ids.push(changed(
        marked(ident(2002, "a", DAY), 60),
        "cilium-agent",
        30,
    )); // marked
    ids.push(changed(ident(2003, "a", DAY), "cilium-agent", 60)); // in use
    let mut i = input(ids);
    i.refs.insert(2003, 1);
    let d = analyze(&i, now());
    assert_eq!(d.integrity.strip_loop, 6);
    let first = &d.integrity.strip_loop_examples[0];
    assert_eq!(
        (first.name.as_str(), first.manager.as_str()),
        ("1000", "cilium-agent")
    );
    assert_eq!(first.time, ago(600));
    assert_eq!(
        finding(&d, FindingCode::MarkStripLoop).severity,
        Severity::Warning
    );
    assert!(agent_like("Cilium-Agent") && !agent_like("kubectl-cilium-gc"));
}

#[test]
fn modifiers_group_by_newest_manager() {
    let d = analyze(
        &input(vec![
            changed(ident(1000, "a", DAY), "cilium-agent", 600),
            changed(ident(1001, "a", DAY), "cilium-agent", 60),
            changed(ident(1002, "a", DAY), "cilium-operator-generic", 120),
            changed(ident(1003, "a", DAY), "cilium-agent", DAY), // creation only
            ident(1004, "a", DAY),
        ]),
        now(),
    );
    assert_eq!(d.modifiers.changed_identities, 3);
    assert_eq!(
        d.modifiers.managers,
        vec![
            ManagerActivity {
                manager: "cilium-agent".into(),
                identities: 2,
                latest: ago(60)
            },
            ManagerActivity {
                manager: "cilium-operator-generic".into(),
                identities: 1,
                latest: ago(120)
            },
        ]
    );
}

#[test]
fn configuration_findings() {
    let mut i = input(vec![ident(1000, "a", DAY)]);
    cfg(&mut i, "identity-gc-interval", "0s");
    cfg(&mut i, "identity-heartbeat-timeout", "2m");
    cfg(&mut i, "identity-allocation-mode", "kvstore");
    let d = analyze(&i, now());
    assert_eq!(d.configuration.gc_interval_seconds, Some(0.0));
    assert_eq!(d.configuration.heartbeat_timeout_seconds, 120.0);
    let gc = finding(&d, FindingCode::GcDisabled);
    assert_eq!(gc.severity, Severity::Warning);
    assert!(codes(&d).contains(&FindingCode::HeartbeatTimeoutLow));
    assert!(codes(&d).contains(&FindingCode::NotCrdMode));
    let v: Vec<(&str, &str, ConfigSource)> = d
        .configuration
        .values
        .iter()
        .map(|v| (v.key.as_str(), v.value.as_str(), v.source))
        .collect();
    assert_eq!(
        v[3],
        ("identity-gc-interval", "0s", ConfigSource::CiliumConfig)
    );
    assert_eq!(
        v[5],
        ("identity-gc-rate-limit", "2500", ConfigSource::Default)
    );
    assert_eq!(v.len(), CONFIG_KEYS.len());
    // Unreadable config: defaults and an info finding.
    i.config = None;
    i.warnings
        .push("cannot read cilium-config in kube-system: 404".into());
    let d = analyze(&i, now());
    assert!(!d.configuration.found);
    assert_eq!(d.configuration.gc_interval_seconds, Some(900.0));
    assert_eq!(
        finding(&d, FindingCode::ConfigUnavailable).severity,
        Severity::Info
    );
    assert!(d.warnings.iter().any(|w| w.contains("404")));
}

#[test]
fn usage_unknown_without_sources_or_endpoints() {
    let mut i = input(vec![ident(1000, "a", DAY)]);
    i.endpoints = 0;
    let d = analyze(&i, now());
    assert!(finding(&d, FindingCode::UsageUnknown)
        .message
        .contains("zero"));
    i.crds.endpoints = false;
    let d = analyze(&i, now());
    assert!(finding(&d, FindingCode::UsageUnknown)
        .message
        .contains("neither"));
}

#[test]
fn a_healthy_cluster_has_no_findings() {
    let mut i = input((0..5).map(|k| ident(1000 + k, "a", DAY)).collect());
    for k in 0..5 {
        i.refs.insert(1000 + k, 1);
    }
    let d = analyze(&i, now());
    assert!(d.findings.is_empty(), "{:#?}", d.findings);
    assert_eq!(d.header.kind, KIND);
    assert_eq!(d.header.schema, SCHEMA_ID);
    assert_eq!(d.generated_at, now());
}

#[test]
fn findings_are_sorted_most_severe_first() {
    let mut i = input(
        (256..256 + 63_000)
            .map(|id| {
                let mut r = ident(id, "a", 30 * DAY);
                r.security_labels.clear();
                r
            })
            .collect(),
    );
    cfg(&mut i, "identity-gc-interval", "0");
    i.identities.push(marked(ident(64_000, "a", DAY), 60));
    i.identities[0].identity.mark = Some("junk".into());
    let d = analyze(&i, now());
    let sev: Vec<Severity> = d.findings.iter().map(|f| f.severity).collect();
    let mut sorted = sev.clone();
    sorted.sort();
    assert_eq!(sev, sorted);
    assert_eq!(
        finding(&d, FindingCode::GcDisabled).severity,
        Severity::Critical
    );
    assert_eq!(sev.last(), Some(&Severity::Info));
}

fn write(manager: &str, age: i64, owns_mark: bool) -> crate::input::Write {
    crate::input::Write {
        manager: manager.into(),
        operation: "Update".into(),
        time: Some(ago(age)),
        owns_mark,
    }
}

/// Issue 36, 1: every managedFields entry counts; a write after the mark by
/// a manager not holding it is counted, the marker's own is not; Cilium's
/// writers are named as what they are and raise no finding of their own.
#[test]
fn writers_after_the_mark_are_counted_per_manager() {
    let mut i = input(vec![
        marked(ident(1000, "a", DAY), 600),
        marked(ident(1001, "a", DAY), 600),
        marked(ident(1002, "a", DAY), 600),
        ident(1003, "a", DAY),
    ]);
    for name in ["1000", "1001", "1002"] {
        let mut w = vec![
            write("cilium-agent", DAY, false),
            write("cilium-operator-generic", 600, true),
        ];
        if name != "1002" {
            w.push(write("label-sync", 60, false));
        }
        i.writes.insert(name.into(), w);
    }
    // An agent writes 1003 lately; nothing marks it.
    i.writes
        .insert("1003".into(), vec![write("cilium-agent", 120, false)]);
    let d = analyze(&i, now());
    let w = d.writers.as_ref().expect("writers");
    assert_eq!(w.marked_identities, 3);
    assert_eq!(w.written_after_mark, 2);
    let by = |m: &str| w.managers.iter().find(|a| a.manager == m).unwrap();
    let sync = by("label-sync");
    assert_eq!((sync.role, sync.written_after_mark), (WriterRole::Other, 2));
    assert_eq!(sync.written_lately, 2);
    let op = by("cilium-operator-generic");
    assert_eq!(
        (op.role, op.marks_held, op.written_after_mark),
        (WriterRole::CiliumOperator, 3, 0)
    );
    let agent = by("cilium-agent");
    assert_eq!(
        (agent.role, agent.identities, agent.written_lately),
        (WriterRole::CiliumAgent, 4, 1)
    );
    assert_eq!(
        w.managers[0].manager, "label-sync",
        "most after-mark writes first"
    );
    let f = finding(&d, FindingCode::ConflictWriters);
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("label-sync (2)"), "{}", f.message);
    assert!(!f.message.contains("cilium-agent"), "{}", f.message);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.starts_with("cilium-agent (Update, a Cilium agent)")),
        "{:?}",
        f.evidence
    );

    // Only Cilium's own writers: no finding.
    for w in i.writes.values_mut() {
        w.retain(|w| w.manager != "label-sync");
    }
    assert!(!codes(&analyze(&i, now())).contains(&FindingCode::ConflictWriters));
}

/// A diagnosis is judged at the whole second of its "now": a saved capture
/// time (a sysdump's `<ts>`) has no sub-second, and the live diagnosis of
/// the same moment must judge alike. Here a mark sits 0.4 s inside the
/// "3x overdue" edge (3 x (30m + 15m)) at the second, and past it 0.9 s later.
#[test]
fn a_diagnosis_is_judged_at_its_whole_second() {
    let edge = jiff::SignedDuration::from_millis(8_100_000 - 400);
    let mut late = ident(1000, "a", DAY);
    late.identity.mark = Some(now().checked_sub(edge).unwrap().to_string());
    let i = input(vec![late, marked(ident(1001, "a", DAY), 9_000)]);
    let at_second = analyze(&i, now());
    let later = now()
        .checked_add(jiff::SignedDuration::from_millis(900))
        .unwrap();
    let within = analyze(&i, later);
    assert_eq!(within.generated_at, now());
    let buckets = |d: &Diagnosis| {
        let h = d.gc_health.as_ref().unwrap();
        h.overdue_distribution
            .iter()
            .map(|b| b.count)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        buckets(&at_second),
        [0, 1, 1, 0],
        "the premise: one mark under 3x"
    );
    assert_eq!(
        serde_json::to_value(&within).unwrap(),
        serde_json::to_value(&at_second).unwrap()
    );
}
