//! Numbers and durations as people read them, for reports and findings:
//! pure text, no terminal.

use std::fmt::Write;

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Seconds as a short human duration: `30m`, `2h`, `1h30m`, `45s`, `2d`.
/// Rounded to whole seconds; `0s` for zero or less.
pub fn human_duration(seconds: f64) -> String {
    let total = if seconds.is_finite() && seconds > 0.0 {
        seconds.round() as u64
    } else {
        0
    };
    if total == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    let mut rest = total;
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        let n = rest / size;
        rest %= size;
        if n > 0 {
            let _ = write!(out, "{n}{unit}");
        }
    }
    out
}

/// A regular expression's error in one line: the regex crate's syntax
/// errors span three (the pattern, a caret under the fault, the reason),
/// and an error message here is one line. Keeps the reason.
pub fn regex_error(e: &regex::Error) -> String {
    match e {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("error: "))
            .unwrap_or(text.as_str())
            .to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_durations_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(human_duration(0.0), "0s");
        assert_eq!(human_duration(-3.0), "0s");
        assert_eq!(human_duration(f64::NAN), "0s");
        assert_eq!(human_duration(1800.0), "30m");
        assert_eq!(human_duration(5400.0), "1h30m");
        assert_eq!(human_duration(2.0 * 86_400.0 + 45.0), "2d45s");
    }
}
