//! The pictures of `diagnose -o markdown`: Mermaid blocks, which GitHub and
//! GitLab draw in issues and merge requests, where a diagnosis is attached.
//! Elsewhere a reader sees the block's text, which still reads as numbers.
//!
//! Pure: a diagnosis' counts in, a fenced ```` ```mermaid ```` block out.
//! Every label is a fixed string of this file and every value a number, so
//! nothing from the cluster (a namespace, a label value) reaches a chart,
//! redacted or not, and nothing can break Mermaid's syntax.
//!
//! Mermaid's own limits shape them (checked with the real renderer by
//! `tests/it/mermaid.rs`): an xychart has no legend, so the title says which
//! series is which; its category axis needs distinct labels and every
//! series one value per category; a pie draws a zero slice as nothing but
//! keeps it in the legend, with `showData` its count.

use std::fmt::Write as _;

use cilium_gc::{human_duration, thousands};
use cilium_gc_documents::diagnosis::IdentitySpace;
use cilium_gc_documents::forecast::{Forecast, PaceSource};

/// Hours the creation chart continues the pace past now.
pub(super) const HOURS_AHEAD: usize = 6;

/// The creation chart's size and colours (bars blue, the pace red), as
/// Mermaid's front matter: wider than the default so that 54 hour labels
/// stay apart.
const XY_CONFIG: &str = "---
config:
  xyChart:
    width: 1200
    height: 450
    xAxis:
      labelFontSize: 12
  themeVariables:
    xyChart:
      plotColorPalette: \"#4c78a8, #e45756\"
---";

/// The pie's colours, slice by slice, those of the text view's bar: in use
/// green, stale red, marked yellow, unmarked blue, free grey (Mermaid's
/// default palette makes the first two near white).
const PIE_CONFIG: &str = "---
config:
  themeVariables:
    pie1: \"#2e9e4f\"
    pie2: \"#d62728\"
    pie3: \"#f2b705\"
    pie4: \"#5fb4d9\"
    pie5: \"#d9d9d9\"
    pieStrokeColor: \"#ffffff\"
---";

/// The local range by state as a Mermaid pie with its counts
/// (`showData`): in use, stale, marked too recently, not marked yet, free.
/// "Not marked yet" also holds the identities too young to judge and those
/// whose mark is not a time: none of them is GC's to delete yet (the text
/// view's bar groups them the same way).
pub(super) fn composition(sp: &IdentitySpace) -> String {
    let st = &sp.states;
    let slices = [
        ("In use", st.in_use),
        ("Stale: GC may delete", st.stale_candidates),
        ("Unused, marked too recently", st.unused_marked),
        (
            "Unused, not marked yet",
            st.unused_unmarked + st.too_young + st.malformed_mark,
        ),
        ("Free", sp.headroom),
    ];
    let mut o = format!("```mermaid\n{PIE_CONFIG}\n");
    let _ = writeln!(
        o,
        "pie showData title The local identity range, {} ids",
        thousands(sp.capacity)
    );
    for (label, count) in slices {
        let _ = writeln!(o, "    \"{label}\" : {count}");
    }
    o.push_str("```\n");
    o
}

/// Identities created in each of the last hours (bars, oldest first) and
/// the pace the forecast uses (a line across them, continued
/// [`HOURS_AHEAD`] hours past now), with a caption saying how to read it.
/// `timeout` is the heartbeat timeout in seconds: hours older than it miss
/// the identities GC has deleted since. Nothing when there are no hours.
pub(super) fn creations(f: &Forecast, timeout: f64) -> String {
    let past = f.created_per_hour.len();
    if past == 0 {
        return String::new();
    }
    let hours: Vec<String> = (0..past + HOURS_AHEAD)
        .map(|i| match i as i64 - (past as i64 - 1) {
            0 => "\"0\"".to_string(),
            h if h < 0 => format!("\"{h}\""),
            h => format!("\"+{h}\""),
        })
        .collect();
    let bars: Vec<String> = f
        .created_per_hour
        .iter()
        .map(u64::to_string)
        .chain(std::iter::repeat_n("0".to_string(), HOURS_AHEAD))
        .collect();
    let pace = number(f.pace.rate_per_hour);
    let line = vec![pace.as_str(); past + HOURS_AHEAD];
    let mut o = format!("```mermaid\n{XY_CONFIG}\nxychart-beta\n");
    let _ = writeln!(
        o,
        "    title \"Identities created per hour (bars) and the forecast's pace (line)\""
    );
    let _ = writeln!(
        o,
        "    x-axis \"Hours from now (each bar is the hour ending there)\" [{}]",
        hours.join(", ")
    );
    // From 0, always: Mermaid's own axis starts at the smallest value, and
    // with every value 0 it draws the zero bars half the chart high. A
    // tenth above the largest value, so the pace line never runs along the
    // chart's top edge.
    let top = (f
        .created_per_hour
        .iter()
        .map(|&n| n as f64)
        .fold(f.pace.rate_per_hour, f64::max)
        * 1.1)
        .ceil()
        .max(1.0);
    let _ = writeln!(
        o,
        "    y-axis \"Identities per hour\" 0 --> {}",
        number(top)
    );
    let _ = writeln!(o, "    bar [{}]", bars.join(", "));
    let _ = writeln!(o, "    line [{}]", line.join(", "));
    o.push_str("```\n\n");
    let read = match f.pace.source {
        PaceSource::Sample => format!("watched live for {}", f.pace.window),
        PaceSource::CreationTimes => format!("read over the last {}", f.pace.window),
    };
    let _ = writeln!(
        o,
        "Bars: the local identities that exist now, by the hour they were created. \
         Line: the pace the forecast uses, {}/h ({read}), continued {HOURS_AHEAD} hours ahead. \
         Hours older than the {} heartbeat timeout miss the identities GC has deleted since: \
         their bars are lower bounds.\n",
        pace,
        human_duration(timeout)
    );
    o
}

/// A value for Mermaid: never negative or not a number, at most two
/// decimals, no trailing zeros (`56`, `0.25`).
pub(super) fn number(v: f64) -> String {
    let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cilium_gc_documents::diagnosis::{Level, StateCounts};
    use cilium_gc_documents::forecast::{FullIfGcStops, Pace};
    use cilium_gc_documents::report::IdRange;

    fn space() -> IdentitySpace {
        IdentitySpace {
            total: 13,
            states: StateCounts {
                in_use: 5,
                stale_candidates: 3,
                unused_marked: 0,
                unused_unmarked: 2,
                too_young: 1,
                not_local: 1,
                malformed_mark: 1,
            },
            local_range: IdRange {
                min: 256,
                max: 65_535,
            },
            capacity: 65_280,
            allocated: 12,
            utilisation_percent: 0.0,
            headroom: 65_268,
            level: Level::Ok,
            local_range_from: None,
        }
    }

    fn forecast(per_hour: Vec<u64>, rate: f64) -> Forecast {
        Forecast {
            windows: Vec::new(),
            sample: None,
            pace: Pace {
                rate_per_hour: rate,
                source: PaceSource::CreationTimes,
                window: "30m".into(),
                window_seconds: 1_800.0,
                created: 10,
            },
            full_if_gc_stops: FullIfGcStops {
                headroom: 65_268,
                seconds: None,
                at: None,
            },
            steady_state: None,
            created_per_hour: per_hour,
            fit: None,
        }
    }

    #[test]
    fn the_pie_has_every_state_even_at_zero_and_sums_to_the_range() {
        let sp = space();
        let pie = composition(&sp);
        assert_eq!(
            pie,
            format!(
                "```mermaid\n{PIE_CONFIG}\n\
             pie showData title The local identity range, 65,280 ids\n    \
             \"In use\" : 5\n    \
             \"Stale: GC may delete\" : 3\n    \
             \"Unused, marked too recently\" : 0\n    \
             \"Unused, not marked yet\" : 4\n    \
             \"Free\" : 65268\n\
             ```\n"
            )
        );
        let sum: u64 = pie
            .lines()
            .filter_map(|l| l.rsplit_once(" : "))
            .map(|(_, n)| n.parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, sp.capacity, "the slices are the range");
    }

    #[test]
    fn the_creation_chart_has_one_value_per_hour_in_every_series() {
        let mut per_hour = vec![0; 48];
        per_hour[0] = 7;
        per_hour[47] = 12;
        let chart = creations(&forecast(per_hour, 56.0), 1_800.0);
        let series = |name: &str| -> Vec<String> {
            let line = chart
                .lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("{name} in {chart}"));
            let list = line.split_once('[').unwrap().1.trim_end_matches(']');
            list.split(", ").map(str::to_owned).collect()
        };
        let x = series("x-axis");
        assert_eq!(x.len(), 48 + HOURS_AHEAD);
        assert_eq!(
            [&x[0], &x[46], &x[47], &x[48], &x[53]],
            ["\"-47\"", "\"-1\"", "\"0\"", "\"+1\"", "\"+6\""]
        );
        let bar = series("bar");
        assert_eq!(bar.len(), x.len());
        assert_eq!(
            [&bar[0], &bar[1], &bar[47], &bar[48]],
            ["7", "0", "12", "0"]
        );
        assert_eq!(series("line"), vec!["56"; x.len()]);
        assert!(chart.contains(" 0 --> 62\n"), "{chart}");
    }

    #[test]
    fn the_creation_chart_exactly_for_two_hours() {
        let chart = creations(&forecast(vec![3, 1], 0.25), 900.0);
        let expected = format!(
            "```mermaid\n{XY_CONFIG}\nxychart-beta\n    \
             title \"Identities created per hour (bars) and the forecast's pace (line)\"\n    \
             x-axis \"Hours from now (each bar is the hour ending there)\" \
             [\"-1\", \"0\", \"+1\", \"+2\", \"+3\", \"+4\", \"+5\", \"+6\"]\n    \
             y-axis \"Identities per hour\" 0 --> 4\n    \
             bar [3, 1, 0, 0, 0, 0, 0, 0]\n    \
             line [0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25]\n\
             ```\n\n\
             Bars: the local identities that exist now, by the hour they were created. \
             Line: the pace the forecast uses, 0.25/h (read over the last 30m), continued 6 hours ahead. \
             Hours older than the 15m heartbeat timeout miss the identities GC has deleted since: \
             their bars are lower bounds.\n\n"
        );
        assert_eq!(chart, expected);
        assert_eq!(creations(&forecast(Vec::new(), 1.0), 900.0), "");
        let quiet = creations(&forecast(vec![0, 0], 0.0), 900.0);
        assert!(
            quiet.contains("y-axis \"Identities per hour\" 0 --> 1\n"),
            "{quiet}"
        );
    }

    #[test]
    fn numbers_are_never_negative_nor_nan() {
        assert_eq!(number(56.0), "56");
        assert_eq!(number(0.254), "0.25");
        assert_eq!(number(1_234.5), "1234.5");
        assert_eq!(number(-3.0), "0");
        assert_eq!(number(f64::NAN), "0");
        assert_eq!(number(f64::INFINITY), "0");
    }
}
