//! The sample documents every crate's tests start from, built once here:
//! [`report`], a small delete the renderers' tests print byte for byte, and
//! [`full_report`], every optional field set, for the schema tests. They
//! are the documents crate's types, as the engine re-exports them.

use std::time::Duration;

use cilium_gc_documents::header::{Header, Span};
use cilium_gc_documents::report::*;
use jiff::Timestamp;

fn ts(s: &str) -> Timestamp {
    s.parse().expect("sample timestamp")
}

/// An item of [`report`]'s kind: named `name` (its id when a number), in
/// `prod`, not yet attempted.
pub fn item(name: &str, reason: Reason, outcome: Outcome) -> Item {
    Item {
        name: name.into(),
        id: name.parse().ok(),
        namespace: Some("prod".into()),
        created_at: Some(ts("2026-05-01T00:00:00Z")),
        marked_at: None,
        reason,
        outcome,
        attempts: 0,
        conflicts: vec![],
        last_error: None,
    }
}

/// A delete that deleted one identity and failed one (exit code 4), with
/// large counts: the renderers' byte-for-byte tests (text, JSON, YAML,
/// Markdown, metrics) assert its numbers.
pub fn report() -> Report {
    let mut failed = item("70001", Reason::Stale, Outcome::Failed);
    failed.attempts = 4;
    failed.last_error = Some("503 Service Unavailable after 3 retries".into());
    failed.conflicts = vec![Conflict {
        expected_resource_version: "10".into(),
        observed_resource_version: Some("11".into()),
        manager: Some("cilium-agent".into()),
        operation: Some("Update".into()),
        time: Some(ts("2026-06-01T11:59:00Z")),
    }];
    let mut deleted = item("70002", Reason::Stale, Outcome::Deleted);
    deleted.attempts = 1;
    Report {
        header: Header::new(Tool {
            name: "kubectl-cilium-gc".into(),
            version: "0.1.0".into(),
            commit: Some("abc123".into()),
        }),
        cluster: ClusterInfo {
            server: Some("https://10.0.0.1:6443".into()),
            context: Some("prod-eu".into()),
            kubernetes_version: Some("v1.33.1".into()),
            cilium_config: vec![ConfigValue {
                key: "identity-allocation-mode".into(),
                value: "crd".into(),
                source: ConfigSource::CiliumConfig,
            }],
        },
        span: Span::new(
            ts("2026-06-01T12:00:00Z"),
            ts("2026-06-01T12:00:12.5Z"),
            Duration::from_millis(12500),
        ),
        mode: Mode::Delete,
        options: Options {
            cilium_namespace: "kube-system".into(),
            selector: None,
            namespaces: vec![],
            min_age_seconds: None,
            heartbeat_timeout_seconds: 1800.0,
            local_range: IdRange {
                min: 256,
                max: 65535,
            },
            page_size: 500,
            pacing: Pacing {
                concurrency: 4,
                qps: 50.0,
                burst: 10,
                max_conflict_retries: 3,
                max_retries: 5,
            },
            max_deletions: None,
            max_percent: None,
            mark: false,
            force: false,
            items: ItemsMode::Unused,
            request_timeout_seconds: None,
            identity_allocation_mode: None,
            allow_short_heartbeat_timeout: false,
            allow_unreadable_endpoints: false,
        },
        exit_code: 4,
        interrupted: false,
        aborted: None,
        preflight: Preflight::default(),
        summary: Summary {
            scanned: 1_234_567,
            reasons: ReasonCounts {
                in_use: 1_000,
                unmarked: 12_403,
                stale: 2,
                ..Default::default()
            },
            candidates: 2,
            deleted: 1,
            failed: 1,
            conflicts: 1,
            list_pages: 2_470,
            list_restarts: 1,
            delete_rate_per_second: 8.0,
            ..Default::default()
        },
        items: vec![failed, deleted],
        errors: vec![RunError {
            kind: ErrorKind::MalformedObject,
            message: "ciliumidentities/abc: missing security-labels".into(),
        }],
        next_steps: Vec::new(),
        forecast: None,
    }
}

fn conflict(expected: &str, observed: &str, manager: &str, at: &str) -> Conflict {
    Conflict {
        expected_resource_version: expected.into(),
        observed_resource_version: Some(observed.into()),
        manager: Some(manager.into()),
        operation: Some("Update".into()),
        time: Some(ts(at)),
    }
}

fn full_item(id: u64, reason: Reason, outcome: Outcome) -> Item {
    Item {
        name: id.to_string(),
        id: Some(id),
        namespace: Some("shop".into()),
        created_at: Some(ts("2026-04-30T08:15:00Z")),
        marked_at: Some(ts("2026-06-01T10:00:00Z")),
        reason,
        outcome,
        attempts: 1,
        conflicts: vec![],
        last_error: None,
    }
}

/// A fully populated report: every optional field set, every enum value
/// that fits used somewhere, several items with conflicts. The schema
/// tests and the docs' examples start from it.
pub fn full_report() -> Report {
    let mut reclaimed = full_item(70_003, Reason::InUse, Outcome::Reclaimed);
    reclaimed.attempts = 2;
    reclaimed.conflicts = vec![conflict(
        "4711",
        "4720",
        "cilium-agent",
        "2026-06-01T12:00:03Z",
    )];
    let mut failed = full_item(70_004, Reason::Stale, Outcome::Failed);
    failed.attempts = 4;
    failed.conflicts = vec![
        conflict("5001", "5002", "cilium-operator", "2026-06-01T12:00:04Z"),
        conflict("5002", "5003", "kubectl-edit", "2026-06-01T12:00:05Z"),
    ];
    failed.last_error = Some("503 Service Unavailable: etcdserver: request timed out".into());
    let mut marked = full_item(70_005, Reason::Unmarked, Outcome::Marked);
    marked.marked_at = Some(ts("2026-06-01T12:00:06Z"));
    let mut not_attempted = full_item(70_006, Reason::Stale, Outcome::NotAttempted);
    not_attempted.attempts = 0;
    let mut gone = full_item(70_007, Reason::Stale, Outcome::AlreadyGone);
    gone.conflicts = vec![Conflict {
        expected_resource_version: "6001".into(),
        observed_resource_version: None,
        manager: None,
        operation: None,
        time: None,
    }];
    let mut skipped = full_item(70_008, Reason::MalformedMark, Outcome::Skipped);
    skipped.attempts = 0;
    let mut would = full_item(70_009, Reason::Stale, Outcome::WouldDelete);
    would.attempts = 0;

    Report {
        header: Header::new(Tool {
            name: "kubectl-cilium-gc".into(),
            version: "0.1.0".into(),
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
        }),
        cluster: ClusterInfo {
            server: Some("https://203.0.113.10:6443".into()),
            context: Some("prod-eu-1".into()),
            kubernetes_version: Some("v1.33.2".into()),
            cilium_config: vec![
                ConfigValue {
                    key: "identity-allocation-mode".into(),
                    value: "crd".into(),
                    source: ConfigSource::CiliumConfig,
                },
                ConfigValue {
                    key: "identity-heartbeat-timeout".into(),
                    value: "30m0s".into(),
                    source: ConfigSource::Default,
                },
                ConfigValue {
                    key: "cluster-id".into(),
                    value: "1".into(),
                    source: ConfigSource::Flag,
                },
                ConfigValue {
                    key: "cilium-endpoint-slices".into(),
                    value: "true".into(),
                    source: ConfigSource::Discovered,
                },
            ],
        },
        span: Span::new(
            ts("2026-06-01T12:00:00Z"),
            ts("2026-06-01T12:00:09.75Z"),
            Duration::from_millis(9750),
        ),
        mode: Mode::Delete,
        options: Options {
            cilium_namespace: "kube-system".into(),
            selector: Some("app.kubernetes.io/part-of=shop,tier!=db".into()),
            namespaces: vec!["shop".into(), "shop-staging".into()],
            min_age_seconds: Some(86_400.0),
            heartbeat_timeout_seconds: 1_800.0,
            local_range: IdRange {
                min: 65_792,
                max: 131_071,
            },
            page_size: 500,
            pacing: Pacing {
                concurrency: 4,
                qps: 20.0,
                burst: 5,
                max_conflict_retries: 3,
                max_retries: 5,
            },
            max_deletions: Some(10_000),
            max_percent: Some(50.0),
            mark: true,
            force: true,
            items: ItemsMode::Actionable,
            request_timeout_seconds: Some(30.0),
            identity_allocation_mode: None,
            allow_short_heartbeat_timeout: false,
            allow_unreadable_endpoints: false,
        },
        exit_code: 130,
        interrupted: true,
        aborted: Some(Abort {
            reason: AbortReason::Interrupted,
            message: "SIGINT: 1 candidate not attempted".into(),
        }),
        preflight: Preflight {
            checks: vec![
                Check {
                    name: CheckName::IdentityCrd,
                    passed: true,
                    message: "ciliumidentities.cilium.io v2".into(),
                },
                Check {
                    name: CheckName::UsageCrds,
                    passed: true,
                    message: "ciliumendpoints, ciliumendpointslices".into(),
                },
                Check {
                    name: CheckName::AllocationMode,
                    passed: true,
                    message: "identity-allocation-mode=crd".into(),
                },
                Check {
                    name: CheckName::Permissions,
                    passed: true,
                    message: "all 9 permissions granted".into(),
                },
                Check {
                    name: CheckName::EndpointsPresent,
                    passed: false,
                    message: "0 endpoints (overridden by --force)".into(),
                },
            ],
            forced: true,
        },
        summary: Summary {
            scanned: 12,
            reasons: ReasonCounts {
                in_use: 3,
                not_local: 1,
                filtered: 1,
                unmarked: 1,
                mark_too_recent: 1,
                malformed_mark: 1,
                stale: 4,
            },
            candidates: 4,
            deleted: 1,
            validated: 0,
            already_gone: 1,
            reclaimed: 1,
            failed: 1,
            not_attempted: 1,
            marked: 1,
            conflicts: 4,
            retries: 6,
            throttled: 2,
            server_errors: 3,
            list_pages: 1,
            list_restarts: 1,
            watcher_restarts: 1,
            malformed: 1,
            endpoints: 3,
            endpoint_slices: 1,
            delete_rate_per_second: 0.5,
            throttled_seconds: Some(2.5),
            lowest_rate_per_second: Some(25.0),
            lowest_in_flight: None,
            retry_after_wait_seconds: Some(3.0),
        },
        items: vec![
            full_item(70_001, Reason::Stale, Outcome::Deleted),
            would,
            reclaimed,
            failed,
            marked,
            not_attempted,
            gone,
            skipped,
        ],
        errors: vec![
            RunError {
                kind: ErrorKind::MalformedObject,
                message: "ciliumidentities/foo: security-labels missing".into(),
            },
            RunError {
                kind: ErrorKind::ListExpired,
                message: "continue token expired (410): list restarted".into(),
            },
            RunError {
                kind: ErrorKind::Watcher,
                message: "ciliumendpoints watch: connection reset; restarted".into(),
            },
        ],
        next_steps: Vec::new(),
        forecast: None,
    }
}
