//! What the forecast of a run's report is read from, counted while the
//! identities are listed: the creation times of those in the local range,
//! how many of them there are, and how many identities are in use.
//!
//! Kept apart from the plan because it is about the whole range, not about
//! what the run decides to write: narrowing (`-l`, `-n`, `--min-age`) does
//! not change it, since every identity is listed whatever the narrowing.
//! The forecast itself is [`cilium_gc_cluster::forecast::forecast`], the function
//! `diagnose` calls, so a report and a diagnosis of the same cluster agree.

use std::ops::RangeInclusive;

use cilium_gc_documents::forecast::Forecast;
use jiff::Timestamp;

use cilium_gc_cluster::cilium_config::CiliumSettings;
use cilium_gc_cluster::forecast::{forecast, ForecastInput};
use cilium_gc_cluster::model::Identity;
use cilium_gc_cluster::policy::Reason;

/// The identities listed so far, as the forecast needs them. A creation
/// time is 8 bytes: 65,280 of them (a full range) are about half a MiB.
#[derive(Debug, Default)]
pub(super) struct Census {
    /// Creation times of the listed identities in the local range.
    created: Vec<Timestamp>,
    /// Listed identities in the local range (with or without a creation
    /// time): what takes up ids.
    local: u64,
    /// Listed identities decided in use, as `diagnose` counts them.
    in_use: u64,
}

impl Census {
    /// Counts one listed identity and the reason it was decided for.
    pub(super) fn count(
        &mut self,
        identity: &Identity,
        reason: Reason,
        range: &RangeInclusive<u64>,
    ) {
        if reason == Reason::InUse {
            self.in_use += 1;
        }
        if identity.numeric_id().is_some_and(|id| range.contains(&id)) {
            self.local += 1;
            self.created.extend(identity.created_at);
        }
    }

    /// The forecast at `now` (the run's clock, once the list is complete),
    /// judged with the run's effective heartbeat timeout and cilium-config's
    /// `identity-gc-interval`.
    pub(super) fn forecast(&self, cilium: &CiliumSettings, now: Timestamp) -> Forecast {
        let range = cilium_gc_cluster::policy::local_range(
            cilium.cluster_id,
            cilium.max_connected_clusters,
        );
        let capacity = range.end() - range.start() + 1;
        forecast(&ForecastInput {
            created: &self.created,
            in_use: self.in_use,
            headroom: capacity.saturating_sub(self.local),
            capacity,
            heartbeat_timeout: cilium.heartbeat_timeout,
            gc_interval: Some(cilium.gc_interval),
            sample: None,
            now,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn identity(id: u64, created_at: Option<Timestamp>) -> Identity {
        Identity {
            name: id.to_string(),
            uid: String::new(),
            resource_version: String::new(),
            created_at,
            labels: Default::default(),
            namespace: None,
            mark: None,
            last_change: None,
        }
    }

    /// Only local identities take up the range and give a pace; in-use ones
    /// count wherever they are (as `diagnose` counts them); an identity
    /// without a creation time still takes up an id.
    #[test]
    fn counts_the_local_range_and_forecasts_with_the_runs_settings() {
        let now: Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
        let cilium = cilium_gc_cluster::cilium_config::settings_from_config(None, None);
        let range = cilium_gc_cluster::policy::local_range(
            cilium.cluster_id,
            cilium.max_connected_clusters,
        );
        assert_eq!((*range.start(), *range.end()), (256, 65535), "premise");
        let mut c = Census::default();
        // 20 local identities created in the last 5 minutes, one a minute
        // ago without a creation time, one not local, one in use.
        for i in 0..20 {
            let at = now - Duration::from_secs(10 + i * 10);
            c.count(&identity(1000 + i, Some(at)), Reason::Unmarked, &range);
        }
        c.count(&identity(2000, None), Reason::Unmarked, &range);
        c.count(&identity(70_000, Some(now)), Reason::NotLocal, &range);
        c.count(
            &identity(3000, Some(now - Duration::from_secs(86_400 * 9))),
            Reason::InUse,
            &range,
        );
        assert_eq!((c.local, c.in_use, c.created.len()), (22, 1, 21));
        let f = c.forecast(&cilium, now);
        assert_eq!(f.pace.window, "5m");
        assert_eq!(f.pace.created, 20);
        assert_eq!(f.pace.rate_per_hour, 240.0);
        assert_eq!(f.full_if_gc_stops.headroom, 65_280 - 22);
        assert_eq!(
            f.full_if_gc_stops.seconds,
            Some(((65_280.0 - 22.0) / 240.0 * 3600.0_f64).round())
        );
        let s = f.steady_state.expect("GC is enabled by default");
        assert_eq!(
            (s.heartbeat_timeout_seconds, s.gc_interval_seconds),
            (1800.0, 900.0)
        );
        assert_eq!((s.in_use, s.capacity), (1, 65_280));
        // 240/h held for 45 minutes.
        assert_eq!(s.stale_held, 180);
        assert_eq!(s.needed, 181);
    }
}
