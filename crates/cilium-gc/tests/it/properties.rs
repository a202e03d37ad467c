//! The fuzz targets' properties, as property tests (issue 8): `fuzz/` holds
//! cargo-fuzz targets for the same four paths (identity decoding, usage
//! decoding, the decision, label selectors); these run the same properties
//! on every `cargo test`, with JSON shaped like the objects (the keys the
//! decoders look for, values of every type). Only the engine's API and the
//! simulator's ground truth are used: the engine tests itself.
//!
//! `CHAOS_CASES=N` scales the number of cases.

use std::time::Duration;

use cilium_gc_cluster::model::{Kind, HEARTBEAT_ANNOTATION};
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use serde_json::{json, Value};

// Random cases per property: `CHAOS_CASES`, else 6.
use cilium_gc_testkit::chaos_cases as cases;

fn ago(now: Timestamp, secs: i64) -> String {
    (now - SignedDuration::from_secs(secs)).to_string()
}

fn fuzz_cases() -> u32 {
    cases().saturating_mul(64).max(384)
}

fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("metadata".to_owned()),
        Just("name".to_owned()),
        Just("namespace".to_owned()),
        Just("uid".to_owned()),
        Just("resourceVersion".to_owned()),
        Just("labels".to_owned()),
        Just("annotations".to_owned()),
        Just(HEARTBEAT_ANNOTATION.to_owned()),
        Just("managedFields".to_owned()),
        Just("status".to_owned()),
        Just("identity".to_owned()),
        Just("id".to_owned()),
        Just("endpoints".to_owned()),
        Just("security-labels".to_owned()),
        "[a-z0-9.:/-]{0,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e20..1e20f64).prop_map(Value::from),
        (0u32..70_000).prop_map(|n| Value::from(f64::from(n))),
        "[0-9]{0,6}".prop_map(Value::from),
        "2026-0[1-9]-1[0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?Z"
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: fuzz_cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// fuzz target `decode_identity`.
    #[test]
    fn fuzz_prop_decode_identity_accepts_only_deletable_identities(v in json_value()) {
        let raw = serde_json::value::RawValue::from_string(v.to_string()).unwrap();
        match cilium_gc_cluster::model::decode_identity(&raw) {
            Ok(i) => prop_assert!(
                !i.name.is_empty() && !i.uid.is_empty() && !i.resource_version.is_empty()
            ),
            Err(bad) => prop_assert!(!bad.problem.is_empty()),
        }
    }

    /// fuzz target `decode_usage`: any JSON value decodes (an error would
    /// fail a whole watcher page), and finds every id the simulator's own
    /// decoder (the cluster's ground truth, written apart from the engine's)
    /// says the object protects, read as a CiliumEndpoint or as a slice.
    #[test]
    fn fuzz_prop_decode_usage_never_fails_and_misses_no_reference(v in json_value()) {
        // The value as a whole object, and in the id positions themselves
        // (random objects seldom grow `status.identity.id` on their own).
        let in_place = json!({
            "metadata": {"name": "p", "namespace": "n"},
            "status": {"identity": {"id": v.clone()}},
            "endpoints": [{"id": v.clone()}, {"id": 7}],
        });
        for v in [&v, &in_place] {
            let text = v.to_string();
            let usage = serde_json::from_str::<cilium_gc_cluster::usage::UsageObject>(&text);
            prop_assert!(usage.is_ok(), "{text}");
            let lenient = usage.unwrap();
            for kind in [Kind::Endpoint, Kind::EndpointSlice] {
                for id in cilium_gc_sim::referenced_ids(kind, v) {
                    prop_assert!(lenient.ids().contains(&id), "{text}: {kind:?} {id}");
                }
            }
        }
    }

    /// fuzz target `decide`: stale only when unreferenced, local, and marked
    /// longer ago than the timeout; referenced always wins.
    #[test]
    fn fuzz_prop_decide_is_stale_only_when_it_must_be(
        name in prop_oneof!["[0-9]{1,7}", ".{0,8}"],
        mark in prop_oneof![
            (-7200i64..7200).prop_map(Some),
            Just(None),
        ],
        raw_mark in prop::option::of(".{0,30}"),
        refs in prop_oneof![Just(0u32), any::<u32>()],
        timeout_secs in 0u64..7200,
        cluster_id in 0u64..4,
        wide in any::<bool>(),
    ) {
        use cilium_gc_cluster::policy::{decide, local_range, parse_mark, Reason, Rules};
        let now: Timestamp = "2026-06-01T12:00:00Z".parse().unwrap();
        let identity = cilium_gc_cluster::model::Identity {
            name,
            uid: "u".into(),
            resource_version: "1".into(),
            created_at: None,
            labels: Default::default(),
            namespace: None,
            mark: mark.map(|s| ago(now, s)).or(raw_mark),
            last_change: None,
        };
        let policy = Rules {
            local_range: local_range(cluster_id, if wide { 511 } else { 255 }),
            heartbeat_timeout: Duration::from_secs(timeout_secs),
        };
        let d = decide(&identity, refs, &policy, now);
        if d.reason == Reason::Stale {
            prop_assert_eq!(refs, 0);
            let id = identity.numeric_id().unwrap();
            prop_assert!(policy.local_range.contains(&id));
            let m = parse_mark(identity.mark.as_deref().unwrap()).unwrap();
            let age: Result<Duration, _> = now.duration_since(m).try_into();
            prop_assert!(age.is_ok_and(|a| a > policy.heartbeat_timeout));
        }
        if refs > 0 && identity.numeric_id().is_some() {
            prop_assert_eq!(d.reason, Reason::InUse);
        }
    }

    /// fuzz target `selector`: parse and match never panic; a parsed
    /// selector prints back to one that matches the same labels.
    #[test]
    fn fuzz_prop_selector_round_trips(
        text in prop_oneof![
            "[a-z!=(), ]{0,24}",
            "(!?[a-z]{1,3}((=|==|!=)[a-z]{0,3}| (in|notin) \\([a-z,]{0,6}\\))?,?){1,3}",
            ".{0,24}",
        ],
        labels in prop::collection::btree_map("[a-z]{1,3}", "[a-z]{0,3}", 0..5),
    ) {
        use cilium_gc_cluster::selector::Selector;
        // parse -> render -> parse gives the same structure (Display renders
        // from the parsed requirements, and equality compares them).
        if let Ok(sel) = Selector::parse(&text) {
            let rendered = sel.to_string();
            let again = Selector::parse(&rendered);
            prop_assert!(again.is_ok(), "{} rendered as {}", text, rendered);
            let again = again.unwrap();
            prop_assert_eq!(&again, &sel, "{} rendered as {}", text, rendered);
            prop_assert_eq!(again.to_string(), rendered);
            prop_assert_eq!(again.matches(&labels), sel.matches(&labels));
        }
    }
}
