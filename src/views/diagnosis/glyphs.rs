//! The pictures of the diagnosis text: the local identity range as one bar
//! of block characters, the creations of the last 48 hours as a
//! sparkline, and the forecast in a few words.
//!
//! Pure: counts in, lines out (indented, no newline). Every line fits 80
//! columns whatever the counts, so a terminal never wraps a bar into a
//! second row. The segments differ by glyph as well as by colour, so the
//! bar reads the same with `NO_COLOR` or in a pipe.

use cilium_gc::{human_duration, thousands};
use cilium_gc_documents::diagnosis::IdentitySpace;
use cilium_gc_documents::forecast::{Forecast, PaceSource, SteadyState};

use crate::views::format::Paint;

/// Cells of the identity-space bar: with the indent and the two edges, 76
/// columns.
pub(crate) const BAR_WIDTH: usize = 72;

/// The sparkline's eight heights, lowest first. An hour with no creation
/// is a space, so that "none" never looks like "a few".
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The colour of one segment of the bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ink {
    InUse,
    Stale,
    Marked,
    Unmarked,
    Free,
}

/// One state of the range as the bar draws it.
struct Segment {
    glyph: char,
    label: &'static str,
    count: u64,
    ink: Ink,
}

/// The range's ids by state, in the bar's order (left to right: in use,
/// then the unused ones from closest to deletion, then free). "unmarked"
/// also holds the too-young identities and those with a mark that is not a
/// time: none of them is GC's to delete yet.
fn segments(sp: &IdentitySpace) -> [Segment; 5] {
    let st = &sp.states;
    let seg = |glyph, label, count, ink| Segment {
        glyph,
        label,
        count,
        ink,
    };
    [
        seg('█', "in use", st.in_use, Ink::InUse),
        seg('▓', "stale", st.stale_candidates, Ink::Stale),
        seg('▒', "marked", st.unused_marked, Ink::Marked),
        seg(
            '░',
            "unmarked",
            st.unused_unmarked + st.too_young + st.malformed_mark,
            Ink::Unmarked,
        ),
        seg('·', "free", sp.headroom, Ink::Free),
    ]
}

fn paint(p: &Paint, ink: Ink, s: &str) -> String {
    match ink {
        Ink::InUse => p.green(s),
        Ink::Stale => p.red(s),
        Ink::Marked => p.yellow(s),
        Ink::Unmarked => p.cyan(s),
        Ink::Free => p.dim(s),
    }
}

/// Cells per count, `width` in all: each count's share, rounded by largest
/// remainder, except that a count above zero gets at least one cell (the
/// cell it takes comes from the widest), so a state that holds ids never
/// vanishes from the bar. All zero: no cells. More counts above zero than
/// cells: one each, more than `width` (never with the bar's 72 and 5).
pub(crate) fn widths(counts: &[u64], width: usize) -> Vec<usize> {
    let total: u128 = counts.iter().map(|&c| u128::from(c)).sum();
    if total == 0 || width == 0 {
        return vec![0; counts.len()];
    }
    let share = |c: u64| u128::from(c) * width as u128;
    let mut w: Vec<usize> = counts
        .iter()
        .map(|&c| ((share(c) / total) as usize).max(usize::from(c > 0)))
        .collect();
    // Short: the largest remainders first (ties: leftmost), once each.
    let mut order: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] > 0).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(share(counts[i]) % total), i));
    for &i in order.iter().cycle().take(order.len() * width) {
        if w.iter().sum::<usize>() >= width {
            break;
        }
        w[i] += 1;
    }
    // Long (the minimum cells): take from the widest, never below one.
    while w.iter().sum::<usize>() > width {
        let Some(i) = (0..w.len())
            .filter(|&i| w[i] > 1)
            .max_by_key(|&i| (w[i], i))
        else {
            break;
        };
        w[i] -= 1;
    }
    w
}

/// `part` of `whole` as the legend shows it: one decimal, never "0.0%"
/// for a part above zero nor "100.0%" for a part short of the whole.
fn percent(part: u64, whole: u64) -> String {
    if part == 0 || whole == 0 {
        return "0%".into();
    }
    if part >= whole {
        return "100%".into();
    }
    let pc = part as f64 * 100.0 / whole as f64;
    if pc < 0.05 {
        "<0.1%".into()
    } else if pc >= 99.95 {
        ">99.9%".into()
    } else {
        format!("{pc:.1}%")
    }
}

/// The local range as a bar and its legend: two lines, none when the
/// range holds no id.
pub(crate) fn space_bar(sp: &IdentitySpace, p: &Paint) -> Vec<String> {
    let segs = segments(sp);
    let counts: Vec<u64> = segs.iter().map(|s| s.count).collect();
    let whole = sp.capacity.max(counts.iter().sum());
    if whole == 0 {
        return Vec::new();
    }
    let cells = widths(&counts, BAR_WIDTH);
    let bar: String = segs
        .iter()
        .zip(&cells)
        .filter(|(_, &n)| n > 0)
        .map(|(s, &n)| paint(p, s.ink, &s.glyph.to_string().repeat(n)))
        .collect();
    let legend: Vec<String> = segs
        .iter()
        .map(|s| {
            let key = paint(p, s.ink, &s.glyph.to_string());
            format!("{key} {} {}", s.label, percent(s.count, whole))
        })
        .collect();
    vec![format!("  ▕{bar}▏"), format!("  {}", legend.join("  "))]
}

/// One character per value, oldest first: the largest is `█`, any value
/// above zero at least `▁`, zero a space.
pub(crate) fn sparkline(values: &[u64]) -> String {
    let max = u128::from(values.iter().copied().max().unwrap_or(0));
    values
        .iter()
        .map(|&v| match u128::from(v) {
            0 => ' ',
            v => LEVELS[((v * 8).div_ceil(max) as usize).clamp(1, 8) - 1],
        })
        .collect()
}

/// A rate per hour as people read it: whole above 10, else two decimals
/// at most.
fn per_hour(rate: f64) -> String {
    if rate >= 10.0 {
        format!("{}/h", thousands(rate.round() as u64))
    } else {
        let s = format!("{rate:.2}");
        format!("{}/h", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// A time ahead as a person says it: minutes past an hour, hours past two
/// days (`5h2m`, not `5h2m9s`).
fn roughly(seconds: f64) -> String {
    let unit = if seconds >= 2.0 * 86_400.0 {
        3_600.0
    } else if seconds >= 3_600.0 {
        60.0
    } else {
        1.0
    };
    human_duration((seconds / unit).round() * unit)
}

/// A label and its text, the label in a column of its own.
fn row(label: &str, text: &str) -> String {
    format!("  {label:<10} {text}")
}

/// The creations of the last hours (`f.createdPerHour`) as a sparkline
/// and its scale. Hours older than the heartbeat timeout (`timeout`, in
/// seconds) count only the identities that GC left, which the scale line
/// says so that a fall to the left is not read as churn growing.
pub(crate) fn creations(f: &Forecast, timeout: f64, p: &Paint) -> Vec<String> {
    let v = &f.created_per_hour;
    let max = v.iter().copied().max().unwrap_or(0);
    if max == 0 {
        let text = format!("none in the last {}h", v.len());
        return vec![row("created/h", &text)];
    }
    let spark = p.cyan(&sparkline(v));
    vec![
        row("created/h", &format!("{}h ago {spark} now", v.len())),
        row(
            "",
            &format!(
                "█ = {}/h; hours before the last {} miss what GC deleted",
                thousands(max),
                roughly(timeout)
            ),
        ),
    ]
}

/// The forecast in words: the pace and where it was read, when the range
/// is full if GC stops, and what a working GC holds against the range.
pub(crate) fn forecast_words(f: &Forecast, p: &Paint) -> Vec<String> {
    let pace = &f.pace;
    let read = match pace.source {
        PaceSource::Sample => format!("watched live for {}", pace.window),
        PaceSource::CreationTimes => format!("over the last {}", pace.window),
    };
    let full = &f.full_if_gc_stops;
    let stops = match full.seconds {
        None => "never full: nothing is being created".to_string(),
        Some(s) if s <= 0.0 || full.headroom == 0 => p.red("full now"),
        Some(s) => format!("full in {} ({} free)", roughly(s), thousands(full.headroom)),
    };
    vec![
        row(
            "pace",
            &format!(
                "{} {read} ({} created)",
                per_hour(pace.rate_per_hour),
                thousands(pace.created)
            ),
        ),
        row("GC stops", &stops),
        row("GC works", &steady(f.steady_state.as_ref(), p)),
    ]
}

/// What a working GC holds at the pace, against the range.
fn steady(s: Option<&SteadyState>, p: &Paint) -> String {
    let Some(s) = s else {
        return "disabled (identity-gc-interval 0): every identity stays".into();
    };
    let share = format!("{}%", s.percent_of_range);
    let share = if s.exceeds_range {
        p.red(&share)
    } else if s.percent_of_range > 80.0 {
        p.yellow(&share)
    } else {
        p.green(&share)
    };
    format!(
        "holds {} stale + {} in use: {share} of the range",
        thousands(s.stale_held),
        thousands(s.in_use)
    )
}

/// Columns `line` takes in a terminal: its characters less ANSI escape
/// sequences (every glyph here is one column wide).
#[cfg(test)]
pub(crate) fn display_width(line: &str) -> usize {
    let mut n = 0;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, then one final byte in @..~.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
#[path = "glyphs_tests.rs"]
mod tests;
