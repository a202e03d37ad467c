//! How to reach a cluster, as plain values: kubectl's connection flags
//! without a flag parser, and the duration format every setting shares.

use std::path::PathBuf;
use std::time::Duration;

/// Parse a human duration: `30m`, `2h`, `90s`, `1h30m`, or plain seconds (`45`).
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(t).map_err(|source| DurationError {
        input: t.to_owned(),
        source,
    })
}

/// A duration nobody would type.
#[derive(Debug, thiserror::Error)]
#[error("invalid duration {input:?} (examples: 30m, 2h, 90s, 1h30m)")]
pub struct DurationError {
    /// What was given.
    pub input: String,
    /// Why humantime refused it.
    #[source]
    pub source: humantime::DurationError,
}

/// How to reach the API server: kubectl's connection flags, as values.
///
/// kubectl passes none of its flags to plugins, so the plugin parses them and
/// hands them here; `crate::cluster` applies them as kubectl does.
#[derive(Debug, Clone, Default)]
pub struct ConnectSettings {
    /// `--kubeconfig` (else `$KUBECONFIG`, else `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `--cluster`.
    pub cluster: Option<String>,
    /// `--user`.
    pub user: Option<String>,
    /// `-s/--server`.
    pub server: Option<String>,
    /// `--token`.
    pub token: Option<String>,
    /// `--certificate-authority`.
    pub certificate_authority: Option<PathBuf>,
    /// `--insecure-skip-tls-verify`.
    pub insecure_skip_tls_verify: bool,
    /// `--tls-server-name`.
    pub tls_server_name: Option<String>,
    /// `--as`.
    pub as_user: Option<String>,
    /// `--as-group`.
    pub as_group: Vec<String>,
    /// `--request-timeout` (zero: no limit).
    pub request_timeout: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_humans_type_them() {
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        assert!(parse_duration("soon").is_err());
    }
}
