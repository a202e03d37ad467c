//! `policy::plan` on arbitrary identities, reference counts, policies and
//! clocks: never panics, and says stale only when nothing references the
//! identity, its mark parses, and the mark is older than the timeout.
#![no_main]

use std::collections::BTreeMap;
use std::time::Duration;

use arbitrary::Arbitrary;
use jiff::{SignedDuration, Timestamp};
use cilium_gc_cluster::model::Identity;
use cilium_gc_cluster::policy::{local_range, parse_mark, plan, Narrowing, Policy, Reason, Rules};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    name: String,
    numeric: Option<u64>,
    mark: Option<String>,
    mark_offset_secs: Option<i32>,
    refs: u32,
    timeout_secs: u32,
    now_secs: u32,
    cluster_id: u8,
    wide: bool,
    labels: BTreeMap<String, String>,
    min_age_secs: Option<u32>,
}

fuzz_target!(|inp: Input| {
    let now = Timestamp::from_second(1_700_000_000 + i64::from(inp.now_secs)).unwrap();
    let mark = match (inp.mark_offset_secs, inp.mark) {
        (Some(off), _) => Some((now - SignedDuration::from_secs(off.into())).to_string()),
        (None, m) => m,
    };
    let identity = Identity {
        name: inp.numeric.map_or(inp.name, |n| n.to_string()),
        uid: "u".into(),
        resource_version: "1".into(),
        created_at: Some(now - SignedDuration::from_secs(86_400)),
        labels: inp.labels,
        namespace: None,
        mark,
        last_change: None,
    };
    let policy = Policy {
        rules: Rules {
            local_range: local_range(inp.cluster_id.into(), if inp.wide { 511 } else { 255 }),
            heartbeat_timeout: Duration::from_secs(inp.timeout_secs.into()),
        },
        narrowing: Narrowing {
            selector: None,
            namespaces: vec![],
            min_age: inp.min_age_secs.map(|s| Duration::from_secs(s.into())),
        },
    };
    let d = plan(&identity, inp.refs, &policy, now);
    if d.reason == Reason::Stale {
        assert_eq!(inp.refs, 0);
        let id = identity.numeric_id().expect("stale only when numeric");
        assert!(policy.rules.local_range.contains(&id));
        let m = parse_mark(identity.mark.as_deref().unwrap()).expect("stale only with a parsed mark");
        let age: Duration = now.duration_since(m).try_into().expect("mark in the past");
        assert!(age > policy.rules.heartbeat_timeout);
    }
    if inp.refs > 0 && identity.numeric_id().is_some() {
        assert_eq!(d.reason, Reason::InUse);
    }
});
