//! The forecast's findings: `gc-cannot-keep-up` and the recent pace behind
//! `exhaustion-soon`.

use super::*;
use cilium_gc_documents::forecast::PaceSource;

/// `in_use` identities referenced by an endpoint and created a month ago,
/// plus `fresh` unused ones, each with its own `job-name`, created over the
/// last `over` seconds.
fn churning(in_use: u64, fresh: u64, over: i64) -> Input {
    let mut ids: Vec<IdentityRecord> = (0..in_use).map(|k| ident(256 + k, "a", 30 * DAY)).collect();
    ids.extend((0..fresh).map(|k| {
        let r = ident(40_000 + k, "jobs", (k as i64 * over) / fresh as i64);
        label(r, "k8s:job-name", &format!("job-{k}"))
    }));
    let mut i = input(ids);
    i.refs = (0..in_use).map(|k| (256 + k, 1)).collect();
    i
}

#[test]
fn a_burst_no_gc_can_keep_up_with_is_critical_with_what_would_fit() {
    // 8,000 new identities in the last 5 minutes: 96,000/h. A working GC
    // holds 96,000 × 45m = 72,000, more than the 65,280 local ids.
    let d = analyze(&churning(1_000, 8_000, 300), now());
    let f = d.forecast.as_ref().unwrap();
    assert_eq!((f.pace.window.as_str(), f.pace.created), ("5m", 8_000));
    assert_eq!(f.pace.rate_per_hour, 96_000.0);
    let s = f.steady_state.as_ref().unwrap();
    assert_eq!((s.stale_held, s.in_use, s.needed), (72_000, 1_000, 73_000));
    assert!(s.exceeds_range);
    let keep_up = finding(&d, FindingCode::GcCannotKeepUp);
    assert_eq!(keep_up.severity, Severity::Critical);
    assert!(
        keep_up.message.contains("no GC pass can keep up"),
        "{}",
        keep_up.message
    );
    let evidence = keep_up.evidence.join("\n");
    assert!(
        evidence.contains("pace: 96,000/h over the last 5m (8,000 created)"),
        "{evidence}"
    );
    assert!(
        evidence.contains("72,000 to 96,000 stale held"),
        "{evidence}"
    );
    assert!(
        evidence.contains("churn driven by: k8s:job-name (8,000 values)"),
        "{evidence}"
    );
    // (52,224 - 1,000) / (96,000/h) / 2 = 16m0s; interval 8m.
    let suggestion = keep_up.suggestion.as_deref().unwrap();
    assert!(
        suggestion.contains("identity-heartbeat-timeout 16m with identity-gc-interval 8m"),
        "{suggestion}"
    );
    assert!(suggestion.contains("under 51,224/h"), "{suggestion}");
    // The day's rate says the same range lasts hours; the pace says minutes.
    let soon = finding(&d, FindingCode::ExhaustionSoon);
    assert!(soon.message.contains("full in 35m"), "{}", soon.message);
    assert!(d.age.exhaustion_in_seconds.unwrap() > 10.0 * 3600.0);
}

#[test]
fn the_nearly_full_share_is_a_warning() {
    // 6,000 in 5 minutes: 54,000 held + 1,000 in use = 84.3% of the range.
    let d = analyze(&churning(1_000, 6_000, 300), now());
    let s = d.forecast.as_ref().unwrap().steady_state.clone().unwrap();
    assert_eq!(
        (s.needed, s.percent_of_range, s.exceeds_range),
        (55_000, 84.3, false)
    );
    let f = finding(&d, FindingCode::GcCannotKeepUp);
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("little room is left"), "{}", f.message);
}

#[test]
fn a_churn_gc_keeps_up_with_is_no_finding() {
    // 600 over the last 6 hours: 100/h, 75 held.
    let d = analyze(&churning(1_000, 600, 6 * HOUR), now());
    let f = d.forecast.as_ref().unwrap();
    // 8 in the last 5 minutes is too few to read: the 30m window's 50.
    assert_eq!(
        (f.pace.window.as_str(), f.pace.rate_per_hour),
        ("30m", 100.0)
    );
    assert!(!codes(&d).contains(&FindingCode::GcCannotKeepUp));
    assert!(f.fit.is_none());
    assert_eq!(f.created_per_hour[42..].iter().sum::<u64>(), 600);
}

#[test]
fn gc_disabled_forecasts_no_steady_state_and_no_such_finding() {
    let mut i = churning(1_000, 8_000, 300);
    cfg(&mut i, "identity-gc-interval", "0s");
    let d = analyze(&i, now());
    assert!(d.forecast.as_ref().unwrap().steady_state.is_none());
    assert!(!codes(&d).contains(&FindingCode::GcCannotKeepUp));
    assert!(codes(&d).contains(&FindingCode::GcDisabled));
}

#[test]
fn the_clusters_own_gc_settings_and_a_sample_drive_it() {
    let mut i = churning(1_000, 20, 300);
    cfg(&mut i, "identity-heartbeat-timeout", "20s");
    cfg(&mut i, "identity-gc-interval", "10s");
    // Watched live: 6,000 created in 60 s, 1,000 deleted.
    i.sample = Some(cilium_gc_cluster::forecast::measured(
        Duration::from_secs(60),
        6_000,
        1_000,
    ));
    let d = analyze(&i, now());
    let f = d.forecast.as_ref().unwrap();
    assert_eq!(f.pace.source, PaceSource::Sample);
    assert_eq!(f.pace.rate_per_hour, 360_000.0);
    assert_eq!(f.windows[0].label, "20s", "the timeout's own window first");
    let s = f.steady_state.as_ref().unwrap();
    // 100/s × 30 s.
    assert_eq!((s.held_seconds, s.stale_held), (30.0, 3_000));
    assert!(!codes(&d).contains(&FindingCode::GcCannotKeepUp));
    let soon = finding(&d, FindingCode::ExhaustionSoon);
    assert!(
        soon.evidence
            .join("\n")
            .contains("watched for 1m: 6,000 created, 1,000 deleted (net 300000/h)"),
        "{:?}",
        soon.evidence
    );
}

#[test]
fn a_labels_what_if_is_part_of_the_evidence() {
    let mut i = churning(1_000, 8_000, 300);
    i.proposed_labels = Some("k8s:!job-name".into());
    let d = analyze(&i, now());
    let f = finding(&d, FindingCode::GcCannotKeepUp);
    let line = f
        .evidence
        .iter()
        .find(|l| l.starts_with("with labels \"k8s:!job-name\""))
        .unwrap_or_else(|| panic!("{:?}", f.evidence));
    assert!(line.contains("9,000 identities would be"), "{line}");
}
