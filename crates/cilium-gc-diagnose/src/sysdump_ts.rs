//! The capture time cilium-cli writes into every sysdump file's name
//! (`<name>-<ts>.<ext>`, `<ts>` = `20060102-150405`): what `--from` takes
//! as "now", and how an agent log's file name ends. Its own module because
//! both the saved-objects reader and the agent-log reader read it.

use jiff::Timestamp;

/// Whether `ts` is a sysdump's `<ts>` (`20060102-150405`).
fn is_sysdump_ts(ts: &str) -> bool {
    ts.split_once('-').is_some_and(|(d, t)| {
        d.len() == 8 && t.len() == 6 && d.bytes().chain(t.bytes()).all(|b| b.is_ascii_digit())
    })
}

/// `stem`'s last 15 characters when they are a `<ts>`, and what comes
/// before them (a file name's `<name>-`).
pub(super) fn trailing_ts(stem: &str) -> Option<(&str, &str)> {
    let (before, ts) = stem.split_at_checked(stem.len().checked_sub(15)?)?;
    is_sysdump_ts(ts).then_some((before, ts))
}

/// A sysdump file's `<ts>` (`20060102-150405`), read as UTC; a previous
/// run's log (`-<ts>-prev.log`) carries it too.
pub(super) fn sysdump_time(name: &str) -> Option<Timestamp> {
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let stem = stem.strip_suffix("-prev").unwrap_or(stem);
    let (_, ts) = trailing_ts(stem)?;
    let (d, t) = ts.split_once('-')?;
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &d[0..4],
        &d[4..6],
        &d[6..8],
        &t[0..2],
        &t[2..4],
        &t[4..6]
    );
    iso.parse().ok()
}
