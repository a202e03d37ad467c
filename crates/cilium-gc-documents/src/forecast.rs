//! The forecast: where a cluster's local identity range is heading at the
//! recent pace, judged with how cilium-operator's identity GC works.
//!
//! Carried by the diagnosis (`diagnose`) and by the report of every `scan`
//! and `delete` run, so that a scheduled run's metrics can alert before the
//! range is full. Both documents gained it as an optional field (v1 stays
//! v1).
//!
//! Why "knows GC": cilium-operator keeps every unused identity at least
//! `identity-heartbeat-timeout` (it marks it on one pass and deletes it on a
//! later pass once the mark is that old), and up to about the timeout plus
//! two `identity-gc-interval`s. By Little's law a cluster whose new
//! identities fall unused at λ per second holds about λ × (timeout +
//! interval) stale identities at any moment, however well GC works. When
//! that plus the identities in use is more than the range, no GC pass can
//! save the cluster: only less churn or shorter GC settings can.

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the local identity range is heading at the recent creation pace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Forecast {
    /// Identities created in windows ending now, shortest first, counted from the creation times of the local identities that exist now. A window no longer than the heartbeat timeout is `complete`: GC cannot have deleted an identity that young. A longer one is a lower bound.
    pub windows: Vec<CreationWindow>,
    /// Creations and deletions watched on a live cluster (`diagnose --sample`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<MeasuredRates>,
    /// The creation pace the answers below use, and where it was read.
    pub pace: Pace,
    /// When the local range is full if GC stops now.
    pub full_if_gc_stops: FullIfGcStops,
    /// How many identities a working GC holds at this pace, and whether that fits the range. Absent when GC is disabled (`identity-gc-interval` 0): it then holds every identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyState>,
    /// Local identities created in each of the last 48 hours, oldest first: the last entry is the hour ending now. Hours older than the heartbeat timeout miss the identities GC has deleted since.
    pub created_per_hour: Vec<u64>,
    /// When the steady state does not fit: the GC settings that would make it fit. Absent when it fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fit>,
}

/// Local identities created in one window ending now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreationWindow {
    /// The window as a person reads it, e.g. `5m`.
    pub label: String,
    /// Its length, in seconds.
    pub seconds: f64,
    /// Existing local identities created in it.
    pub created: u64,
    /// `created` per hour of the window.
    pub rate_per_hour: f64,
    /// True when no identity created in the window can have been deleted by GC yet (the window is no longer than the heartbeat timeout): the count is exact. False: a lower bound.
    pub complete: bool,
}

/// Identity creations and deletions watched over a while on a live cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeasuredRates {
    /// How long the identities were watched, in seconds.
    pub seconds: f64,
    /// Identities that appeared meanwhile.
    pub created: u64,
    /// Identities that disappeared meanwhile.
    pub deleted: u64,
    /// `created` per hour.
    pub creation_rate_per_hour: f64,
    /// `deleted` per hour.
    pub deletion_rate_per_hour: f64,
    /// Creations less deletions, per hour: how fast the range fills with GC as it works now.
    pub net_growth_per_hour: f64,
}

/// Where the pace was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PaceSource {
    /// Creations watched live (`diagnose --sample`).
    Sample,
    /// The creation times of the identities, over one of `windows`.
    CreationTimes,
}

/// The creation pace the forecast uses: the most recent one with enough creations to be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pace {
    /// New local identities per hour.
    pub rate_per_hour: f64,
    /// Where it was read.
    pub source: PaceSource,
    /// The window it was read over, as a person reads it.
    pub window: String,
    /// That window, in seconds.
    pub window_seconds: f64,
    /// Creations seen in that window.
    pub created: u64,
}

/// When the local range is full if GC stops now (every new identity stays).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FullIfGcStops {
    /// Ids free in the local range now.
    pub headroom: u64,
    /// Seconds until the range is full at the pace; 0 when it is full now; absent when nothing is being created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The time it is full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
}

/// What a working GC holds at the pace (Little's law), against the range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SteadyState {
    /// `identity-heartbeat-timeout` from cilium-config (or Cilium's default), in seconds.
    pub heartbeat_timeout_seconds: f64,
    /// `identity-gc-interval` from cilium-config (or Cilium's default), in seconds.
    pub gc_interval_seconds: f64,
    /// How long GC keeps an unused identity on average: timeout + interval, in seconds.
    pub held_seconds: f64,
    /// Stale identities a working GC holds on average: pace × `heldSeconds`.
    pub stale_held: u64,
    /// At most: pace × (timeout + 2 × interval).
    pub stale_held_max: u64,
    /// Identities in use now.
    pub in_use: u64,
    /// `staleHeld` + `inUse`: the local ids the cluster needs at this pace.
    pub needed: u64,
    /// Ids in the local range.
    pub capacity: u64,
    /// `needed` as a percent of `capacity`, one decimal.
    pub percent_of_range: f64,
    /// True when `needed` is more than `capacity`: no GC keeps up, the range runs out.
    pub exceeds_range: bool,
}

/// GC settings under which the steady state fits the range with room to spare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fit {
    /// The share of the range the suggestion aims to stay under, at most (timeout + 2 × interval), in percent.
    pub target_percent: f64,
    /// The longest `identity-heartbeat-timeout` that fits, in seconds (with the interval below); absent when none does (the identities in use alone exceed the target, or the pace needs a timeout under a second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_timeout_seconds: Option<f64>,
    /// The `identity-gc-interval` that goes with it (half the timeout, as Cilium's defaults are), in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_interval_seconds: Option<f64>,
    /// The pace at which the current settings would fit, new identities per hour.
    pub fitting_rate_per_hour: f64,
}
