//! The pictures, exactly: segments and their rounding, an empty range, an
//! all-free and an all-in-use one, the sparkline and the forecast's words;
//! every line within 80 columns with and without colour.

use super::*;
use crate::views::format::Style;
use cilium_gc_documents::diagnosis::{Level, StateCounts};
use cilium_gc_documents::forecast::{FullIfGcStops, Pace};
use cilium_gc_documents::report::IdRange;

/// No colour.
fn plain() -> Paint {
    Paint::new(Style { color: false })
}

fn space(states: StateCounts, capacity: u64) -> IdentitySpace {
    let allocated = states.in_use
        + states.stale_candidates
        + states.unused_marked
        + states.unused_unmarked
        + states.too_young
        + states.malformed_mark;
    IdentitySpace {
        total: allocated + states.not_local,
        states,
        local_range: IdRange {
            min: 256,
            max: 256 + capacity.saturating_sub(1),
        },
        capacity,
        allocated,
        utilisation_percent: 0.0,
        headroom: capacity.saturating_sub(allocated),
        level: Level::Ok,
        local_range_from: None,
    }
}

fn states(in_use: u64, stale: u64, marked: u64, unmarked: u64) -> StateCounts {
    StateCounts {
        in_use,
        stale_candidates: stale,
        unused_marked: marked,
        unused_unmarked: unmarked,
        ..StateCounts::default()
    }
}

fn forecast(per_hour: Vec<u64>, steady: Option<SteadyState>) -> Forecast {
    Forecast {
        windows: Vec::new(),
        sample: None,
        pace: Pace {
            rate_per_hour: 56.0,
            source: PaceSource::CreationTimes,
            window: "30m".into(),
            window_seconds: 1800.0,
            created: 28,
        },
        full_if_gc_stops: FullIfGcStops {
            headroom: 282,
            seconds: Some(18_129.0),
            at: None,
        },
        steady_state: steady,
        created_per_hour: per_hour,
        fit: None,
    }
}

fn steady_state(stale_held: u64, in_use: u64, capacity: u64) -> SteadyState {
    let needed = stale_held + in_use;
    SteadyState {
        heartbeat_timeout_seconds: 1800.0,
        gc_interval_seconds: 900.0,
        held_seconds: 2700.0,
        stale_held,
        stale_held_max: stale_held * 4 / 3,
        in_use,
        needed,
        capacity,
        percent_of_range: (needed as f64 * 1000.0 / capacity as f64).round() / 10.0,
        exceeds_range: needed > capacity,
    }
}

fn r(glyph: &str, n: usize) -> String {
    glyph.repeat(n)
}

#[test]
fn widths_are_shares_by_largest_remainder() {
    assert_eq!(widths(&[1, 1, 1, 1], 8), [2, 2, 2, 2]);
    // 10/3 each: 3, 3, 3 and the first remainder gets the last cell.
    assert_eq!(widths(&[1, 1, 1], 10), [4, 3, 3]);
    // 1.4, 2.6, 6: the largest remainder (0.6) wins the last cell.
    assert_eq!(widths(&[14, 26, 60], 10), [1, 3, 6]);
    assert_eq!(widths(&[0, 0], 10), [0, 0]);
    assert_eq!(widths(&[5], 0), [0]);
}

#[test]
fn a_count_above_zero_never_rounds_to_no_cell() {
    // 1 in 65,280 is 0.001 of a cell: it still gets one, taken from the widest.
    assert_eq!(widths(&[1, 0, 1, 65_278], 72), [1, 0, 1, 70]);
    assert_eq!(widths(&[1, 1, 1, 1, 1_000_000], 72), [1, 1, 1, 1, 68]);
    // More states than cells (never with the bar's 72 and 5): each shows.
    assert_eq!(widths(&[1, 1, 1], 2), [1, 1, 1]);
}

#[test]
fn the_bar_draws_each_state_with_its_own_glyph() {
    // 36 cells in use, 18 stale, 9 marked, 9 unmarked of a range of 72.
    let sp = space(states(36_000, 18_000, 9_000, 9_000), 72_000);
    assert_eq!(
        space_bar(&sp, &plain()),
        [
            format!("  ▕{}{}{}{}▏", r("█", 36), r("▓", 18), r("▒", 9), r("░", 9)),
            "  █ in use 50.0%  ▓ stale 25.0%  ▒ marked 12.5%  ░ unmarked 12.5%  · free 0%"
                .to_string(),
        ]
    );
}

#[test]
fn unmarked_holds_the_young_and_the_malformed_marks() {
    let st = StateCounts {
        unused_unmarked: 1,
        too_young: 1,
        malformed_mark: 1,
        not_local: 9,
        ..StateCounts::default()
    };
    let lines = space_bar(&space(st, 6), &plain());
    assert_eq!(lines[0], format!("  ▕{}{}▏", r("░", 36), r("·", 36)));
    assert!(
        lines[1].contains("░ unmarked 50.0%  · free 50.0%"),
        "{lines:?}"
    );
}

#[test]
fn a_few_stale_in_a_big_range_still_show() {
    let sp = space(states(15_650, 1, 0, 0), 65_280);
    let lines = space_bar(&sp, &plain());
    assert_eq!(
        lines,
        [
            format!("  ▕{}▓{}▏", r("█", 17), r("·", 54)),
            "  █ in use 24.0%  ▓ stale <0.1%  ▒ marked 0%  ░ unmarked 0%  · free 76.0%".to_string(),
        ]
    );
}

#[test]
fn all_free_all_in_use_and_an_empty_range() {
    let free = space(StateCounts::default(), 65_280);
    assert_eq!(
        space_bar(&free, &plain())[0],
        format!("  ▕{}▏", r("·", BAR_WIDTH))
    );
    let full = space(states(65_280, 0, 0, 0), 65_280);
    let lines = space_bar(&full, &plain());
    assert_eq!(lines[0], format!("  ▕{}▏", r("█", BAR_WIDTH)));
    assert_eq!(
        lines[1],
        "  █ in use 100%  ▓ stale 0%  ▒ marked 0%  ░ unmarked 0%  · free 0%"
    );
    assert!(space_bar(&space(StateCounts::default(), 0), &plain()).is_empty());
    // 15 of 65,280: neither end of the legend rounds to 0% or 100%.
    let few = space(states(0, 3, 0, 12), 65_280);
    assert_eq!(
        space_bar(&few, &plain()),
        [
            format!("  ▕▓░{}▏", r("·", 70)),
            "  █ in use 0%  ▓ stale <0.1%  ▒ marked 0%  ░ unmarked <0.1%  · free >99.9%".into(),
        ]
    );
}

#[test]
fn sparkline_scales_to_the_largest_hour() {
    assert_eq!(sparkline(&[0, 1, 2, 3, 4, 5, 6, 7, 8]), " ▁▂▃▄▅▆▇█");
    // One creation against a thousand is still more than none.
    assert_eq!(sparkline(&[0, 1, 1_000]), " ▁█");
    assert_eq!(sparkline(&[0, 0]), "  ");
    assert_eq!(sparkline(&[]), "");
}

#[test]
fn creations_and_the_forecast_in_words() {
    let mut hours = vec![0; 46];
    hours.extend([40, 81]);
    let f = forecast(hours, Some(steady_state(42, 15_650, 65_280)));
    let lines: Vec<String> = creations(&f, 1800.0, &plain())
        .into_iter()
        .chain(forecast_words(&f, &plain()))
        .collect();
    assert_eq!(
        lines,
        [
            format!("  created/h  48h ago {}▄█ now", r(" ", 46)),
            "             █ = 81/h; hours before the last 30m miss what GC deleted".into(),
            "  pace       56/h over the last 30m (28 created)".into(),
            "  GC stops   full in 5h2m (282 free)".into(),
            "  GC works   holds 42 stale + 15,650 in use: 24% of the range".to_string(),
        ]
    );
}

#[test]
fn no_creation_no_gc_and_a_watched_pace() {
    let mut f = forecast(vec![0; 48], None);
    f.pace.source = PaceSource::Sample;
    f.pace.window = "5m".into();
    f.pace.rate_per_hour = 0.25;
    f.full_if_gc_stops.seconds = None;
    let lines: Vec<String> = creations(&f, 1800.0, &plain())
        .into_iter()
        .chain(forecast_words(&f, &plain()))
        .collect();
    assert_eq!(
        lines,
        [
            "  created/h  none in the last 48h",
            "  pace       0.25/h watched live for 5m (28 created)",
            "  GC stops   never full: nothing is being created",
            "  GC works   disabled (identity-gc-interval 0): every identity stays",
        ]
    );
}

#[test]
fn the_widest_numbers_fit_80_columns_with_and_without_colour() {
    // The widest a cluster has: a 16-bit local range, full; every id made
    // in one hour; a pace of ten million an hour; a 100-day timeout.
    let cap = 65_535;
    let sp = IdentitySpace {
        headroom: cap,
        ..space(states(cap, cap, cap, cap), cap)
    };
    let mut f = forecast(vec![cap; 48], Some(steady_state(7_500_000, cap, cap)));
    f.pace.rate_per_hour = 1e7;
    f.pace.created = 10_000_000;
    f.pace.window = "1d12h30m".into();
    f.full_if_gc_stops.headroom = cap;
    f.full_if_gc_stops.seconds = Some(1e12);
    let timeout = 100.0 * 86_400.0 - 1.0;
    for color in [false, true] {
        let p = Paint::new(Style { color });
        let lines: Vec<String> = space_bar(&sp, &p)
            .into_iter()
            .chain(creations(&f, timeout, &p))
            .chain(forecast_words(&f, &p))
            .collect();
        assert_eq!(lines.len(), 7, "{lines:?}");
        assert_eq!(lines.iter().any(|l| l.contains('\u{1b}')), color);
        for l in &lines {
            assert!(display_width(l) <= 80, "{} columns: {l}", display_width(l));
        }
    }
    assert_eq!(display_width(&plain().red("▓▓")), 2);
    assert_eq!(
        display_width(&Paint::new(Style { color: true }).red("▓▓")),
        2
    );
}

#[test]
fn a_range_gc_cannot_hold_draws_a_full_bar_in_80_columns() {
    let sp = space(states(15_650, 24_535, 7_408, 17_405), 65_280);
    let f = forecast(
        (0..48).map(|h| h * 10).collect(),
        Some(steady_state(70_000, 15_650, 65_280)),
    );
    for color in [false, true] {
        let p = Paint::new(Style { color });
        let lines: Vec<String> = space_bar(&sp, &p)
            .into_iter()
            .chain(creations(&f, 1800.0, &p))
            .chain(forecast_words(&f, &p))
            .collect();
        assert!(lines[0].starts_with("  ▕") && lines[0].ends_with("▏"));
        assert_eq!(display_width(&lines[0]), 4 + BAR_WIDTH);
        for l in &lines {
            assert!(display_width(l) <= 80, "{l}");
        }
    }
}
