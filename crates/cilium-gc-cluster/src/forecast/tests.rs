use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const NOW: &str = "2026-06-01T12:00:00Z";

/// `n` creations spread evenly over the last `over` seconds (the newest
/// at `now`).
fn spread(n: u64, over: i64) -> Vec<Timestamp> {
    let now = ts(NOW).as_second();
    (0..n)
        .map(|i| Timestamp::from_second(now - (i as i64 * over) / n.max(1) as i64).unwrap())
        .collect()
}

fn input<'a>(created: &'a [Timestamp], in_use: u64, headroom: u64) -> ForecastInput<'a> {
    ForecastInput {
        created,
        in_use,
        headroom,
        capacity: 65_280,
        heartbeat_timeout: Duration::from_secs(1800),
        gc_interval: Some(Duration::from_secs(900)),
        sample: None,
        now: ts(NOW),
    }
}

#[test]
fn windows_are_sorted_and_the_timeout_one_is_exact() {
    let created = spread(600, 3600);
    let f = forecast(&input(&created, 0, 60_000));
    let labels: Vec<&str> = f.windows.iter().map(|w| w.label.as_str()).collect();
    assert_eq!(labels, ["5m", "30m", "1h", "6h", "24h"]);
    let complete: Vec<bool> = f.windows.iter().map(|w| w.complete).collect();
    assert_eq!(complete, [true, true, false, false, false]);
    assert_eq!(f.windows[0].created, 50);
    assert_eq!(f.windows[0].rate_per_hour, 600.0);
    assert_eq!(f.windows[2].created, 600);
    assert_eq!(f.windows[4].rate_per_hour, 25.0);
}

#[test]
fn a_timeout_equal_to_a_fixed_window_adds_none() {
    let mut i = input(&[], 0, 10);
    i.heartbeat_timeout = Duration::from_secs(3600);
    let f = forecast(&i);
    assert_eq!(f.windows.len(), 4);
    assert!(f.windows[1].complete, "1h is within a 1h timeout");
    assert!(!f.windows[2].complete);
}

#[test]
fn a_recent_churn_is_read_over_minutes_not_the_day() {
    // 20 a day for a day, then 100 in the last 5 minutes.
    let mut created = spread(20, 86_000);
    created.extend(spread(100, 299));
    let f = forecast(&input(&created, 0, 30_000));
    assert_eq!(f.pace.window, "5m");
    assert_eq!(f.pace.source, PaceSource::CreationTimes);
    assert_eq!(f.pace.created, 101);
    assert_eq!(f.pace.rate_per_hour, 1212.0);
    // 30,000 / 1212 per hour.
    assert_eq!(f.full_if_gc_stops.seconds, Some(89_109.0));
    assert_eq!(
        f.full_if_gc_stops.at,
        Some(
            ts(NOW)
                .checked_add(jiff::SignedDuration::from_secs(89_109))
                .unwrap()
        )
    );
}

#[test]
fn too_few_creations_fall_back_to_a_longer_window() {
    // 9 in 5 minutes is not read; the 30m window holds 12.
    let mut created = spread(9, 299);
    created.extend(
        spread(3, 1200)
            .into_iter()
            .map(|t| t - jiff::SignedDuration::from_secs(360)),
    );
    let f = forecast(&input(&created, 0, 1000));
    assert_eq!(f.windows[0].created, 9);
    assert_eq!(f.pace.window, "30m");
    assert_eq!(f.pace.created, 12);
    assert_eq!(f.pace.rate_per_hour, 24.0);
}

#[test]
fn nothing_created_reads_the_day_and_has_no_time_to_full() {
    let f = forecast(&input(&[], 5, 1000));
    assert_eq!(f.pace.window, "24h");
    assert_eq!(f.pace.rate_per_hour, 0.0);
    assert_eq!(f.full_if_gc_stops.seconds, None);
    assert_eq!(f.full_if_gc_stops.at, None);
    let s = f.steady_state.unwrap();
    assert_eq!((s.stale_held, s.needed, s.exceeds_range), (0, 5, false));
    assert!(f.fit.is_none());
}

#[test]
fn a_full_range_is_full_now_whatever_the_pace() {
    let f = forecast(&input(&[], 0, 0));
    assert_eq!(f.full_if_gc_stops.seconds, Some(0.0));
    assert_eq!(f.full_if_gc_stops.at, Some(ts(NOW)));
}

#[test]
fn a_sample_with_enough_creations_is_the_pace() {
    let created = spread(600, 3600);
    let m = measured(Duration::from_secs(300), 40, 10);
    assert_eq!(m.creation_rate_per_hour, 480.0);
    assert_eq!(m.deletion_rate_per_hour, 120.0);
    assert_eq!(m.net_growth_per_hour, 360.0);
    let mut i = input(&created, 0, 1000);
    i.sample = Some(&m);
    let f = forecast(&i);
    assert_eq!(f.pace.source, PaceSource::Sample);
    assert_eq!((f.pace.window.as_str(), f.pace.created), ("5m", 40));
    assert_eq!(f.pace.rate_per_hour, 480.0);
    assert_eq!(f.sample.as_ref(), Some(&m));
    // Too few: the creation times are read instead, the sample still shown.
    let few = measured(Duration::from_secs(300), 9, 0);
    i.sample = Some(&few);
    let f = forecast(&i);
    assert_eq!(f.pace.source, PaceSource::CreationTimes);
    assert_eq!(f.sample.as_ref(), Some(&few));
}

#[test]
fn a_churn_of_forty_a_second_cannot_fit_the_default_settings() {
    // The reported churn: 40 new identities a second, every one soon unused.
    let m = measured(Duration::from_secs(60), 2400, 0);
    let mut i = input(&[], 1000, 20_000);
    i.sample = Some(&m);
    let f = forecast(&i);
    let s = f.steady_state.unwrap();
    assert_eq!(s.held_seconds, 2700.0);
    assert_eq!(s.stale_held, 108_000);
    assert_eq!(s.stale_held_max, 144_000);
    assert_eq!(s.needed, 109_000);
    assert_eq!(s.percent_of_range, 167.0);
    assert!(s.exceeds_range);
    let fit = f.fit.unwrap();
    // (0.8 × 65,280 − 1,000) / 40 / 2 = 640.3 s.
    assert_eq!(fit.heartbeat_timeout_seconds, Some(640.0));
    assert_eq!(fit.gc_interval_seconds, Some(320.0));
    // (52,224 − 1,000) / 3,600 s × 3,600.
    assert_eq!(fit.fitting_rate_per_hour, 51_224.0);
}

#[test]
fn fit_is_offered_from_the_nearly_full_share_not_only_past_the_range() {
    let m = measured(Duration::from_secs(3600), 20_000, 0);
    let mut i = input(&[], 0, 60_000);
    i.sample = Some(&m);
    let f = forecast(&i);
    let s = f.steady_state.as_ref().unwrap();
    assert_eq!(s.stale_held, 15_000);
    assert!(!s.exceeds_range);
    assert!(f.fit.is_none(), "23% of the range needs no other settings");
    let m = measured(Duration::from_secs(3600), 75_000, 0);
    i.sample = Some(&m);
    let f = forecast(&i);
    let s = f.steady_state.as_ref().unwrap();
    assert_eq!((s.needed, s.exceeds_range), (56_250, false));
    assert!(
        f.fit.is_some(),
        "86% of the range is past the nearly-full line"
    );
}

#[test]
fn no_setting_fits_when_the_identities_in_use_alone_fill_the_target() {
    let m = measured(Duration::from_secs(60), 600, 0);
    let mut i = input(&[], 60_000, 100);
    i.sample = Some(&m);
    let fit = forecast(&i).fit.unwrap();
    assert_eq!(fit.heartbeat_timeout_seconds, None);
    assert_eq!(fit.gc_interval_seconds, None);
    assert_eq!(fit.fitting_rate_per_hour, 0.0);
}

#[test]
fn gc_disabled_has_no_steady_state() {
    for interval in [None, Some(Duration::ZERO)] {
        let created = spread(100, 60);
        let mut i = input(&created, 0, 1000);
        i.gc_interval = interval;
        let f = forecast(&i);
        assert!(f.steady_state.is_none());
        assert!(f.fit.is_none());
        assert!(f.full_if_gc_stops.seconds.is_some());
    }
}

#[test]
fn creations_per_hour_cover_48_hours_oldest_first() {
    let now = ts(NOW);
    let at = |secs: i64| now - jiff::SignedDuration::from_secs(secs);
    // Now, 59m59s ago, one hour ago, 47h59m ago, 48h ago (out), and a
    // time in the future (skew: counted as now).
    let created = [
        at(0),
        at(3599),
        at(3600),
        at(48 * 3600 - 1),
        at(48 * 3600),
        now + jiff::SignedDuration::from_secs(30),
    ];
    let f = forecast(&input(&created, 0, 10));
    assert_eq!(f.created_per_hour.len(), 48);
    assert_eq!(f.created_per_hour[47], 3);
    assert_eq!(f.created_per_hour[46], 1);
    assert_eq!(f.created_per_hour[0], 1);
    assert_eq!(f.created_per_hour.iter().sum::<u64>(), 5);
}

#[test]
fn window_edges_are_exclusive_of_their_length() {
    let now = ts(NOW);
    let created = [
        now - jiff::SignedDuration::from_secs(299),
        now - jiff::SignedDuration::from_secs(300),
    ];
    let f = forecast(&input(&created, 0, 10));
    assert_eq!(f.windows[0].created, 1);
    assert_eq!(f.windows[1].created, 2);
}

#[test]
fn a_zero_capacity_is_zero_percent() {
    let mut i = input(&[], 0, 0);
    i.capacity = 0;
    let s = forecast(&i).steady_state.unwrap();
    assert_eq!(s.percent_of_range, 0.0);
    assert!(!s.exceeds_range);
}
