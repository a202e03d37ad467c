//! The server's clock, learned from the `Date` header of every answer.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use jiff::Timestamp;

/// The server's clock, learned from `Date` headers. Heartbeat marks are
/// written with the operator's clock, which tracks the cluster's, not this
/// laptop's: judging their age by the server's `Date` keeps a skewed client
/// from deleting too early. `Date` has one-second resolution and is
/// truncated, so the estimate errs towards "younger", the safe side.
///
/// So with a server 2 h ahead, a mark 40 min old by the server is collected
/// (our clock would call it 80 min in the future); with a server 2 h behind,
/// a mark 10 min old by the server is kept (our clock would call it over 2 h
/// old). Tests: `chaos_server_clock_two_hours_*`; see `docs/reliability.md`.
#[derive(Debug, Default)]
pub struct ServerClock {
    /// server minus local, in milliseconds; `i64::MIN` until first seen.
    offset_ms: AtomicI64,
    /// An answer came without a usable `Date` header.
    missing_date: AtomicBool,
}

impl ServerClock {
    /// A clock that has not yet seen the server.
    pub fn new() -> Self {
        ServerClock {
            offset_ms: AtomicI64::new(i64::MIN),
            missing_date: AtomicBool::new(false),
        }
    }
    /// Record that an answer had no (parseable) `Date` header.
    pub(crate) fn observe_missing(&self) {
        self.missing_date.store(true, Ordering::Relaxed);
    }
    /// Whether mark ages were (at least partly) judged by the local clock,
    /// because the server sent no usable `Date`: the report says so.
    pub fn local_clock_used(&self) -> bool {
        self.missing_date.load(Ordering::Relaxed)
            || self.offset_ms.load(Ordering::Relaxed) == i64::MIN
    }
    /// Record a `Date` header observed at local time `local`.
    pub(crate) fn observe(&self, date_header: &str, local: Timestamp) {
        match parse_http_date(date_header) {
            Some(server) => {
                let off = server.as_millisecond() - local.as_millisecond();
                self.offset_ms.store(off, Ordering::Relaxed);
            }
            None => self.observe_missing(),
        }
    }
    /// Server time now (local time until a `Date` was seen).
    pub fn now(&self) -> Timestamp {
        let local = Timestamp::now();
        match self.offset_ms.load(Ordering::Relaxed) {
            i64::MIN => local,
            off => local
                .checked_add(jiff::SignedDuration::from_millis(off))
                .unwrap_or(local),
        }
    }
    /// Observed skew (server minus local), if known.
    #[cfg(test)]
    pub(crate) fn skew(&self) -> Option<std::time::Duration> {
        match self.offset_ms.load(Ordering::Relaxed) {
            i64::MIN => None,
            off => Some(std::time::Duration::from_millis(off.unsigned_abs())),
        }
    }
}

/// Parse an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub(crate) fn parse_http_date(s: &str) -> Option<Timestamp> {
    jiff::fmt::rfc2822::parse(s.trim())
        .ok()
        .map(|z| z.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn http_dates_parse() {
        let t = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(t.to_string(), "1994-11-06T08:49:37Z");
        assert!(parse_http_date("yesterday").is_none());
    }

    #[test]
    fn server_clock_applies_the_offset() {
        let c = ServerClock::new();
        let local: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        c.observe("Thu, 01 Jan 2026 01:00:00 GMT", local);
        assert_eq!(c.skew(), Some(Duration::from_secs(3600)));
        let diff = c.now().as_second() - Timestamp::now().as_second();
        assert!((3599..=3601).contains(&diff), "{diff}");
    }
}
