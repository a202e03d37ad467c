//! What a run is asked to do, as plain values: no flag parser here.
//!
//! The plugin turns its flags into these (ripgrep's low/high split: the flags
//! only parse, [`GcSettings`] validates), and everything downstream reads one
//! settings value per run.

use std::time::Duration;

use crate::report::{ItemsMode, Mode, Pacing};
use cilium_gc_cluster::selector::Selector;

/// Which identities to consider and how to list them: shared by scan and
/// delete. Narrowing (`selector`, `namespaces`, `min_age`) is applied once,
/// at plan time.
#[derive(Debug, Clone)]
pub struct ScanSettings {
    /// Namespace of the cilium-config ConfigMap.
    pub cilium_namespace: String,
    /// `-l`, as typed (parsed into [`GcSettings::selector`]).
    pub selector: Option<String>,
    /// `-n`: pod namespaces.
    pub namespaces: Vec<String>,
    /// `--min-age`.
    pub min_age: Option<Duration>,
    /// `--heartbeat-timeout` (else cilium-config's).
    pub heartbeat_timeout: Option<Duration>,
    /// Identities per list request.
    pub page_size: u32,
    /// Which identities get an item in the report.
    pub items: ItemsMode,
    /// `--identity-allocation-mode`: the mode, stated for when cilium-config
    /// cannot be read (as cilium-config spells it: `crd`, `kvstore`, ...).
    pub identity_allocation_mode: Option<String>,
    /// `--allow-short-heartbeat-timeout`.
    pub allow_short_heartbeat_timeout: bool,
}

/// Shortest `--heartbeat-timeout` accepted without
/// `--allow-short-heartbeat-timeout`: agents refresh the identities they
/// hold every 5 minutes, so a shorter timeout can outrun a live agent.
pub(crate) const MIN_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Slowest `--qps` other than 0: one delete per 1000 s. Below it the
/// limiter's period overflows, and no run would finish anyway.
pub(crate) const MIN_QPS: f64 = 0.001;
/// Fastest `--qps`: far beyond any API server's write rate.
pub(crate) const MAX_QPS: f64 = 1_000_000.0;

/// Default identities per list page (kubectl's chunk size is 500 too).
const PAGE_SIZE: u32 = 500;

impl Default for ScanSettings {
    fn default() -> Self {
        ScanSettings {
            cilium_namespace: "kube-system".into(),
            selector: None,
            namespaces: Vec::new(),
            min_age: None,
            heartbeat_timeout: None,
            page_size: PAGE_SIZE,
            items: ItemsMode::default(),
            identity_allocation_mode: None,
            allow_short_heartbeat_timeout: false,
        }
    }
}

/// How to write: the delete-only settings, as typed.
#[derive(Debug, Clone)]
pub struct WriteSettings {
    /// Workers, rate, burst and retries. The burst as typed: `None` means
    /// one per `qps` ([`GcSettings::for_delete`] resolves it).
    pub pacing: Pacing<Option<u32>>,
    /// Send every write with `dryRun=All`.
    pub dry_run: bool,
    /// Blast radius: count.
    pub max_deletions: Option<u64>,
    /// Blast radius: percent of scanned.
    pub max_percent: Option<f64>,
    /// No confirmation prompt.
    pub yes: bool,
    /// Delete despite zero endpoints.
    pub force: bool,
    /// Mark unmarked unused identities.
    pub mark: bool,
    /// `--allow-unreadable-endpoints`.
    pub allow_unreadable_endpoints: bool,
}

impl Default for WriteSettings {
    fn default() -> Self {
        WriteSettings {
            pacing: Pacing {
                concurrency: 8,
                qps: 40.0,
                burst: None,
                max_conflict_retries: 3,
                max_retries: 5,
            },
            dry_run: false,
            max_deletions: None,
            max_percent: None,
            yes: false,
            force: false,
            mark: false,
            allow_unreadable_endpoints: false,
        }
    }
}

/// Everything a run was asked to do, validated: the one settings value of a
/// run.
#[derive(Debug, Clone)]
pub struct GcSettings {
    /// Scan, delete, or server dry-run.
    pub mode: Mode,
    /// Listing and narrowing.
    pub scan: ScanSettings,
    /// Parsed `-l`.
    pub selector: Option<Selector>,
    /// Workers, rate, burst (resolved) and retries; a scan reads with its
    /// `max_retries` and never writes.
    pub pacing: Pacing,
    /// Blast radius: count.
    pub max_deletions: Option<u64>,
    /// Blast radius: percent of scanned.
    pub max_percent: Option<f64>,
    /// No confirmation prompt.
    pub yes: bool,
    /// Delete despite zero endpoints.
    pub force: bool,
    /// Mark unmarked unused identities.
    pub mark: bool,
    /// Delete despite endpoints whose identity reference is unreadable.
    pub allow_unreadable_endpoints: bool,
}

/// A setting, or a combination, that makes no sense (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// `-l` does not parse.
    #[error(transparent)]
    Selector(#[from] cilium_gc_cluster::selector::SelectorError),
    /// A value out of its range.
    #[error("{flag} {problem}")]
    OutOfRange {
        /// The flag.
        flag: &'static str,
        /// What is wrong with its value.
        problem: String,
    },
}

impl GcSettings {
    /// Settings of `scan`.
    pub fn for_scan(scan: ScanSettings) -> Result<Self, SettingsError> {
        let selector = parse_selector(&scan)?;
        Ok(GcSettings {
            mode: Mode::Scan,
            scan,
            selector,
            pacing: Pacing {
                concurrency: 1,
                qps: 0.0,
                burst: 1,
                max_conflict_retries: 0,
                max_retries: 5,
            },
            max_deletions: None,
            max_percent: None,
            yes: false,
            force: false,
            mark: false,
            allow_unreadable_endpoints: false,
        })
    }

    /// Settings of `delete`.
    pub fn for_delete(scan: ScanSettings, w: WriteSettings) -> Result<Self, SettingsError> {
        let qps = w.pacing.qps;
        if !qps.is_finite() || qps < 0.0 || (qps > 0.0 && !(MIN_QPS..=MAX_QPS).contains(&qps)) {
            return Err(SettingsError::OutOfRange {
                flag: "--qps",
                problem: format!(
                    "must be 0 (unlimited) or between {MIN_QPS} and {MAX_QPS}, not {qps:?}"
                ),
            });
        }
        if let Some(t) = scan.heartbeat_timeout {
            if t < MIN_HEARTBEAT_TIMEOUT && !scan.allow_short_heartbeat_timeout {
                return Err(SettingsError::OutOfRange {
                    flag: "--heartbeat-timeout",
                    problem: format!(
                        "{} is shorter than 5m, the interval at which agents refresh the identities they hold: identities in use could be deleted. Pass --allow-short-heartbeat-timeout to do it anyway",
                        humantime::format_duration(t)
                    ),
                });
            }
        }
        if let Some(p) = w.max_percent {
            if !(p > 0.0 && p <= 100.0) {
                return Err(SettingsError::OutOfRange {
                    flag: "--max-percent",
                    problem: format!("must be in (0, 100], not {p}"),
                });
            }
        }
        if w.pacing.burst == Some(0) {
            return Err(SettingsError::OutOfRange {
                flag: "--burst",
                problem: "must be at least 1".into(),
            });
        }
        let selector = parse_selector(&scan)?;
        let burst = w.pacing.burst.unwrap_or_else(|| (qps.ceil() as u32).max(1));
        Ok(GcSettings {
            mode: if w.dry_run {
                Mode::DryRunServer
            } else {
                Mode::Delete
            },
            scan,
            selector,
            pacing: w.pacing.with_burst(burst),
            max_deletions: w.max_deletions,
            max_percent: w.max_percent,
            yes: w.yes,
            force: w.force,
            mark: w.mark,
            allow_unreadable_endpoints: w.allow_unreadable_endpoints,
        })
    }

    /// Whether the run may write.
    pub fn writes(&self) -> bool {
        self.mode != Mode::Scan
    }
}

fn parse_selector(scan: &ScanSettings) -> Result<Option<Selector>, SettingsError> {
    Ok(scan.selector.as_deref().map(Selector::parse).transpose()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(w: WriteSettings) -> Result<GcSettings, SettingsError> {
        GcSettings::for_delete(ScanSettings::default(), w)
    }

    #[test]
    fn delete_settings_validate() {
        let w = |qps| {
            let mut w = WriteSettings::default();
            w.pacing.qps = qps;
            w
        };
        assert_eq!(delete(w(100.0)).unwrap().pacing.burst, 100);
        assert_eq!(delete(w(0.0)).unwrap().pacing.burst, 1);
        let dry = WriteSettings {
            dry_run: true,
            ..WriteSettings::default()
        };
        assert_eq!(delete(dry).unwrap().mode, Mode::DryRunServer);
        assert!(delete(w(-1.0)).is_err());
        // Issue 12: these panicked, or deleted too early.
        assert!(delete(w(1e-300)).is_err());
        assert!(delete(w(1e300)).is_err());
        let hb = |t: u64, allow: bool| {
            let scan = ScanSettings {
                heartbeat_timeout: Some(Duration::from_secs(t)),
                allow_short_heartbeat_timeout: allow,
                ..ScanSettings::default()
            };
            GcSettings::for_delete(scan, WriteSettings::default()).is_ok()
        };
        assert!(!hb(0, false) && !hb(240, false));
        assert!(hb(240, true) && hb(300, false));
        assert!(delete(w(f64::NAN)).is_err());
        for p in [0.0, 101.0] {
            let bad = WriteSettings {
                max_percent: Some(p),
                ..WriteSettings::default()
            };
            assert!(delete(bad).is_err(), "{p}");
        }
        let typed = WriteSettings {
            pacing: Pacing {
                concurrency: 3,
                qps: 10.0,
                burst: Some(7),
                max_conflict_retries: 2,
                max_retries: 9,
            },
            ..WriteSettings::default()
        };
        let resolved = Pacing {
            concurrency: 3,
            qps: 10.0,
            burst: 7,
            max_conflict_retries: 2,
            max_retries: 9,
        };
        assert_eq!(delete(typed).unwrap().pacing, resolved, "as typed");
        let mut bad = WriteSettings::default();
        bad.pacing.burst = Some(0);
        assert!(delete(bad).is_err());
        let scan = ScanSettings {
            selector: Some("a in x".into()),
            ..ScanSettings::default()
        };
        assert!(GcSettings::for_delete(scan, WriteSettings::default()).is_err());
    }
}
