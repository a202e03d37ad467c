//! The forecast's gauges: where the local identity range is heading at the
//! recent creation pace (the report's `forecast`, the same numbers
//! `diagnose` shows). They let an alert fire hours before the range is 80%
//! full, when the pace says it will be (see `examples/prometheusrule.yaml`).
//!
//! Left out when the run's list did not complete (the report then has no
//! forecast). A value that means "never" is `+Inf`, not a missing sample:
//! a Pushgateway `POST` replaces only the names pushed, so a gauge left out
//! would keep an earlier run's "full in 2 hours" and its alert firing.

use cilium_gc::report::Report;

use super::Run;

/// `full_if_gc_stops_seconds`: the name an alert reads.
pub const FULL_IF_GC_STOPS: &str = "cilium_gc_identity_full_if_gc_stops_seconds";
/// `steady_state_ratio`: the name an alert reads.
pub const STEADY_STATE_RATIO: &str = "cilium_gc_identity_steady_state_ratio";

impl Run<'_> {
    /// The forecast's gauges, when the report has a forecast.
    pub(super) fn forecast(&mut self, report: &Report) {
        let Some(f) = &report.forecast else { return };
        self.set(
            "identity_creation_rate_per_hour",
            "New local identities per hour at the recent pace (over the shortest recent window holding ten creations)",
            &[],
            f.pace.rate_per_hour,
        );
        self.set(
            "identity_full_if_gc_stops_seconds",
            "Seconds until the local identity range is full at that pace if no identity is deleted from now on; 0 when full, +Inf when nothing is being created",
            &[],
            f.full_if_gc_stops.seconds.unwrap_or(f64::INFINITY),
        );
        if let Some(s) = &f.steady_state {
            self.set(
                "identity_steady_state_ratio",
                "Identities a working GC holds at that pace (stale ones kept heartbeat timeout plus GC interval, plus those in use) over the local range; above 1 no GC keeps up. Absent when GC is disabled",
                &[],
                s.needed as f64 / s.capacity.max(1) as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use cilium_gc_documents::forecast::{Forecast, FullIfGcStops, Pace, PaceSource, SteadyState};
    use cilium_gc_testkit::samples::report as sample;

    use super::super::encode;
    use super::super::tests::{parsed, value};
    use super::*;

    fn forecast(seconds: Option<f64>, steady: Option<(u64, u64)>) -> Forecast {
        Forecast {
            windows: Vec::new(),
            sample: None,
            pace: Pace {
                rate_per_hour: 1200.0,
                source: PaceSource::CreationTimes,
                window: "5m".into(),
                window_seconds: 300.0,
                created: 100,
            },
            full_if_gc_stops: FullIfGcStops {
                headroom: 6528,
                seconds,
                at: None,
            },
            steady_state: steady.map(|(needed, capacity)| SteadyState {
                heartbeat_timeout_seconds: 1800.0,
                gc_interval_seconds: 900.0,
                held_seconds: 2700.0,
                stale_held: 900,
                stale_held_max: 1200,
                in_use: needed - 900,
                needed,
                capacity,
                percent_of_range: needed as f64 * 100.0 / capacity as f64,
                exceeds_range: needed > capacity,
            }),
            created_per_hour: vec![0; 48],
            fit: None,
        }
    }

    #[test]
    fn the_forecast_gauges_say_the_reports_numbers() {
        let mut r = sample();
        r.forecast = Some(forecast(Some(19_584.0), Some((71_808, 65_280))));
        let text = encode(&r, None);
        let s = parsed(&text);
        assert_eq!(value(&s, FULL_IF_GC_STOPS), Some(19_584.0));
        assert_eq!(value(&s, STEADY_STATE_RATIO), Some(1.1));
        assert_eq!(
            value(&s, "cilium_gc_identity_creation_rate_per_hour"),
            Some(1200.0)
        );
        for name in [FULL_IF_GC_STOPS, STEADY_STATE_RATIO] {
            assert!(text.contains(&format!("# TYPE {name} gauge")), "{text}");
        }
    }

    /// Nothing created: never full, said as +Inf (a missing sample would
    /// leave the previous push's value in a Pushgateway). Full: 0. GC
    /// disabled: no steady state. No forecast (the list did not complete):
    /// none of the three, and every other metric unchanged.
    #[test]
    fn never_full_is_infinite_and_no_forecast_no_gauges() {
        let mut r = sample();
        r.forecast = Some(forecast(None, None));
        let s = parsed(&encode(&r, None));
        assert_eq!(value(&s, FULL_IF_GC_STOPS), Some(f64::INFINITY));
        assert_eq!(value(&s, STEADY_STATE_RATIO), None);
        r.forecast = Some(forecast(Some(0.0), Some((1000, 65_280))));
        assert_eq!(
            value(&parsed(&encode(&r, None)), FULL_IF_GC_STOPS),
            Some(0.0)
        );
        let with = encode(&r, None);
        r.forecast = None;
        let without = encode(&r, None);
        assert!(!without.contains("cilium_gc_identity_creation_rate_per_hour"));
        assert!(!without.contains(FULL_IF_GC_STOPS) && !without.contains(STEADY_STATE_RATIO));
        // (A family's samples come in no fixed order: compare sorted.)
        let mut kept: Vec<&str> = with
            .lines()
            .filter(|l| {
                !["rate_per_hour", "full_if_gc", "steady_state"]
                    .iter()
                    .any(|g| l.contains(g))
            })
            .collect();
        let mut unchanged: Vec<&str> = without.lines().collect();
        kept.sort_unstable();
        unchanged.sort_unstable();
        assert_eq!(kept, unchanged);
    }
}
