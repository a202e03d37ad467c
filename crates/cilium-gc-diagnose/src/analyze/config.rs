//! cilium-config as the diagnosis reads it: a setting's value, where the
//! local range's settings came from, and the configuration section with
//! the `labels` exclusion that would keep churn out of identities. One
//! place, so that a finding quoting a setting and the section listing it
//! read it alike (trimmed, empty as unset).

use std::time::Duration;

use cilium_gc_cluster::cilium_config::CiliumSettings;
use cilium_gc_documents::diagnosis::{Churn, Configuration, LocalRangeFrom};
use cilium_gc_documents::report::{ConfigSource, ConfigValue};

use super::labels::{exclusion, LabelFilter};
use crate::input::Input;

/// A heartbeat timeout under this is flagged: agents get too little time
/// to reclaim an identity before it is deleted under them.
pub(super) const LOW_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The config keys reported, with Cilium's defaults.
pub(super) const CONFIG_KEYS: [(&str, &str); 8] = [
    ("identity-allocation-mode", "crd"),
    ("enable-cilium-endpoint-slice", "false"),
    ("disable-endpoint-crd", "false"),
    ("identity-gc-interval", "15m0s"),
    ("identity-heartbeat-timeout", "30m0s"),
    ("identity-gc-rate-limit", "2500"),
    ("identity-gc-rate-interval", "1m0s"),
    ("labels", ""),
];

/// The value cilium-config sets for `key`, trimmed; `None` when it is not
/// read, not set, or blank (Cilium reads a blank value as its default).
pub(super) fn config_value<'a>(input: &'a Input, key: &str) -> Option<&'a str> {
    input
        .config
        .as_ref()
        .and_then(|c| c.get(key))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
}

/// The settings the range follows from, and whether cilium-config set them
/// or Cilium's defaults (cluster 0, 255 clusters) stand in.
pub(super) fn range_from(input: &Input, settings: &CiliumSettings) -> LocalRangeFrom {
    let source = |key: &str| match config_value(input, key) {
        Some(_) => ConfigSource::CiliumConfig,
        None => ConfigSource::Default,
    };
    LocalRangeFrom {
        cluster_id: settings.cluster_id,
        cluster_id_source: source("cluster-id"),
        max_connected_clusters: settings.max_connected_clusters,
        max_connected_clusters_source: source("max-connected-clusters"),
    }
}

/// The reported settings with their source, and the high-cardinality keys
/// of `churn` today's `labels` filter lets through, with the `labels` value
/// that would exclude them (today's patterns kept, exclusions appended).
pub(super) fn configuration(
    input: &Input,
    churn: &Churn,
    heartbeat_timeout: Duration,
    gc_interval: Option<Duration>,
) -> Configuration {
    let values = CONFIG_KEYS
        .iter()
        .map(|(key, default)| match config_value(input, key) {
            Some(v) => ConfigValue {
                key: (*key).into(),
                value: v.into(),
                source: ConfigSource::CiliumConfig,
            },
            None => ConfigValue {
                key: (*key).into(),
                value: (*default).into(),
                source: ConfigSource::Default,
            },
        })
        .collect();
    let labels = config_value(input, "labels").unwrap_or("");
    let filter = LabelFilter::parse(labels).filter;
    let leaky_keys: Vec<String> = churn
        .label_keys
        .iter()
        .filter(|k| k.high_cardinality && filter.accepts(&k.key))
        .map(|k| k.key.clone())
        .collect();
    let suggested_labels = (!leaky_keys.is_empty()).then(|| {
        let mut parts: Vec<String> = labels.split_whitespace().map(str::to_owned).collect();
        parts.extend(leaky_keys.iter().map(|k| exclusion(k)));
        parts.join(" ")
    });
    Configuration {
        found: input.config.is_some(),
        values,
        gc_interval_seconds: gc_interval.map(|d| d.as_secs_f64()),
        heartbeat_timeout_seconds: heartbeat_timeout.as_secs_f64(),
        leaky_keys,
        suggested_labels,
    }
}
