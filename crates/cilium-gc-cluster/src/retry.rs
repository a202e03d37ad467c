//! What an API answer means for the caller, and how long to wait before
//! trying again. Pure: tested without a server.
//!
//! The rules are the Kubernetes API conventions' ("HTTP Status codes"):
//! 409 means the object changed, so re-read and decide again (never a blind
//! retry, never the end of the run); 404 on delete means someone else already
//! collected it; 429 asks us to wait at least `Retry-After`; 5xx and
//! transport failures are retried with capped exponential backoff and jitter;
//! 401/403 stop the run; 410 on a list continue token restarts or continues
//! the list.

use std::time::Duration;

use rand::Rng;

/// The class of one answer (or of a request that got none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    /// 2xx.
    Success,
    /// 404: the object (or, as text, the path) does not exist.
    NotFound,
    /// 409: a precondition or optimistic lock failed: the object changed.
    Conflict,
    /// 410 Expired: a continue token or watch resourceVersion is too old.
    /// Carries the server's token for an inconsistent continuation, if any.
    Expired {
        /// `metadata.continue` of the Status, if the server offered one.
        continue_token: Option<String>,
    },
    /// 429: wait, then retry.
    Throttled {
        /// `Retry-After` (header, or `details.retryAfterSeconds`).
        retry_after: Option<Duration>,
    },
    /// 5xx, timeout or connection failure: retry with backoff.
    Transient {
        /// `Retry-After`, if the server sent one.
        retry_after: Option<Duration>,
    },
    /// 401: credentials rejected.
    Unauthorized,
    /// 403: not allowed.
    Forbidden,
    /// Any other 4xx (400, 415, 422, ...): our request is wrong; do not retry.
    Rejected,
}

impl Class {
    /// Whether the same request may be sent again after waiting.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Class::Throttled { .. } | Class::Transient { .. })
    }
}

/// Classify an HTTP answer from its status code, `Retry-After` header and
/// decoded `Status` body (if the body was a Status).
pub(crate) fn classify(
    code: u16,
    retry_after_header: Option<&str>,
    status_retry_after: Option<u32>,
    status_continue: Option<&str>,
) -> Class {
    let retry_after = retry_after_header.and_then(parse_retry_after).or_else(|| {
        status_retry_after
            .filter(|s| *s > 0)
            .map(|s| Duration::from_secs(s.into()).min(MAX_RETRY_AFTER))
    });
    match code {
        200..=299 => Class::Success,
        401 => Class::Unauthorized,
        403 => Class::Forbidden,
        404 => Class::NotFound,
        409 => Class::Conflict,
        410 => Class::Expired {
            continue_token: status_continue.filter(|t| !t.is_empty()).map(str::to_owned),
        },
        429 => Class::Throttled { retry_after },
        500..=599 => Class::Transient { retry_after },
        _ => Class::Rejected,
    }
}

/// The longest wait a `Retry-After` can impose: a server (or proxy) asking
/// for more is wrong, and an unbounded wait would overflow the timer or
/// hang a CronJob.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// `Retry-After` in delta-seconds (what kube-apiserver sends), capped at
/// [`MAX_RETRY_AFTER`]. An HTTP date is not used by the API server; we
/// ignore it and fall back to backoff. A huge number (`9.2e18`, or more
/// digits than a u64 holds) is the cap, not an error.
pub(crate) fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    match v.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 => Some(Duration::from_secs_f64(
            f.min(MAX_RETRY_AFTER.as_secs_f64()),
        )),
        _ if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => Some(MAX_RETRY_AFTER),
        _ => None,
    }
}

/// Capped exponential backoff with full jitter: attempt `n` (0-based) waits a
/// random time in `[base*2^n / 2, base*2^n]`, at most `cap`; never less than
/// the server's `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// First delay.
    pub base: Duration,
    /// Longest delay.
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(200),
            cap: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (0-based).
    pub fn delay(
        &self,
        attempt: u32,
        retry_after: Option<Duration>,
        rng: &mut impl Rng,
    ) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.cap);
        let half = exp / 2;
        let jitter = if half.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_nanos(rng.random_range(0..=half.as_nanos() as u64))
        };
        (half + jitter).max(retry_after.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn classification_follows_api_conventions() {
        assert_eq!(classify(200, None, None, None), Class::Success);
        assert_eq!(classify(202, None, None, None), Class::Success);
        assert_eq!(classify(404, None, None, None), Class::NotFound);
        assert_eq!(classify(409, None, None, None), Class::Conflict);
        assert_eq!(classify(401, None, None, None), Class::Unauthorized);
        assert_eq!(classify(403, None, None, None), Class::Forbidden);
        assert_eq!(classify(422, None, None, None), Class::Rejected);
        assert_eq!(classify(415, None, None, None), Class::Rejected);
        assert_eq!(
            classify(429, Some("3"), None, None),
            Class::Throttled {
                retry_after: Some(Duration::from_secs(3))
            }
        );
        // A Status-shaped 429 without the header still carries retryAfterSeconds.
        assert_eq!(
            classify(429, None, Some(2), None),
            Class::Throttled {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        assert_eq!(
            classify(429, Some("soon"), None, None),
            Class::Throttled { retry_after: None }
        );
        // retryAfterSeconds 0 (the Status field's zero value) says nothing:
        // no wait from it, the caller's backoff applies.
        assert_eq!(
            classify(429, None, Some(0), None),
            Class::Throttled { retry_after: None }
        );
        assert_eq!(
            classify(503, None, Some(5), None),
            Class::Transient {
                retry_after: Some(Duration::from_secs(5))
            }
        );
        assert_eq!(
            classify(500, None, None, None),
            Class::Transient { retry_after: None }
        );
        assert_eq!(
            classify(410, None, None, Some("tok")),
            Class::Expired {
                continue_token: Some("tok".into())
            }
        );
        assert_eq!(
            classify(410, None, None, Some("")),
            Class::Expired {
                continue_token: None
            }
        );
        assert_eq!(
            classify(429, Some("86400"), None, None),
            Class::Throttled {
                retry_after: Some(MAX_RETRY_AFTER)
            }
        );
        assert!(classify(504, None, None, None).is_retryable());
        assert!(!classify(409, None, None, None).is_retryable());
    }

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        let b = Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for attempt in 0..20 {
            let exp =
                (Duration::from_millis(100) * (1 << attempt.min(16))).min(Duration::from_secs(1));
            let d = b.delay(attempt, None, &mut rng);
            assert!(d >= exp / 2 && d <= exp, "attempt {attempt}: {d:?}");
        }
        let d = b.delay(0, Some(Duration::from_secs(4)), &mut rng);
        assert_eq!(d, Duration::from_secs(4));
    }

    /// A `Retry-After` of 9.2e18 seconds once overflowed the timer.
    #[test]
    fn retry_after_is_capped_at_ten_minutes() {
        for v in [
            "9.2e18",
            "9223372036854775807",
            "99999999999999999999999",
            "601",
        ] {
            assert_eq!(parse_retry_after(v), Some(MAX_RETRY_AFTER), "{v}");
        }
        // More digits than an f64 holds (it reads them as infinity): the cap.
        assert_eq!(parse_retry_after(&"9".repeat(400)), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after(""), None);
        assert_eq!(parse_retry_after("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("-3"), None);
        assert_eq!(parse_retry_after("NaN"), None);
        assert_eq!(
            classify(429, None, Some(u32::MAX), None),
            Class::Throttled {
                retry_after: Some(MAX_RETRY_AFTER)
            }
        );
    }
}
