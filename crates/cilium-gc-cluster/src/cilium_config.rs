//! The Cilium settings a run depends on, read from `cilium-config` with
//! where each came from: fetch, then interpret (`settings_from_config` is
//! pure).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::cluster::ApiClient;
use crate::retry::Class;
use cilium_gc_documents::report::{ConfigSource, ConfigValue};

/// Cilium's default `identity-heartbeat-timeout`.
pub const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Cilium's default `identity-gc-interval`.
pub const DEFAULT_GC_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// The Cilium settings a run depends on, with where each came from.
#[derive(Debug, Clone)]
pub struct CiliumSettings {
    /// `identity-allocation-mode` (absent means crd).
    pub allocation_mode: String,
    /// `identity-management-mode` (absent means agent).
    pub management_mode: String,
    /// `enable-cilium-endpoint-slice`. Read back only by the tests: which
    /// endpoint sources are watched follows the served CRDs.
    #[allow(dead_code)]
    pub slices_enabled: bool,
    /// `disable-endpoint-crd`.
    pub endpoint_crd_disabled: bool,
    /// `cluster-id`.
    pub cluster_id: u64,
    /// `max-connected-clusters`.
    pub max_connected_clusters: u64,
    /// Effective heartbeat timeout (flag, else config, else 30m).
    pub heartbeat_timeout: Duration,
    /// Every value above as reported.
    pub values: Vec<ConfigValue>,
    /// Problems met while reading (unparseable values, missing ConfigMap).
    pub warnings: Vec<String>,
    /// Whether cilium-config was read.
    pub config_read: bool,
    /// Whether the allocation mode is known: read from cilium-config, or
    /// stated with `--identity-allocation-mode`.
    pub allocation_mode_known: bool,
    /// `identity-heartbeat-timeout` as cilium-config sets it, if it does.
    pub config_heartbeat_timeout: Option<Duration>,
    /// `cluster-id` or `max-connected-clusters` was not a number.
    pub cluster_values_unparseable: bool,
    /// `identity-gc-interval` (absent or unreadable means 15m; zero: the
    /// operator's GC is disabled). Not a check: the forecast of `diagnose`
    /// and of every run's report reads it.
    pub gc_interval: Duration,
}

impl CiliumSettings {
    /// Use the allocation mode the user stated, when cilium-config could not
    /// be read (a readable cilium-config always wins). Recorded as a flag
    /// value in the report.
    pub fn state_allocation_mode(&mut self, mode: Option<&str>) {
        let Some(mode) = mode else { return };
        if self.config_read {
            return;
        }
        self.allocation_mode = mode.to_owned();
        self.allocation_mode_known = true;
        if let Some(v) = self
            .values
            .iter_mut()
            .find(|v| v.key == "identity-allocation-mode")
        {
            v.value = mode.to_owned();
            v.source = ConfigSource::Flag;
        }
    }
}

/// Interpret `cilium-config` data (None when it could not be read).
pub fn settings_from_config(
    data: Option<&BTreeMap<String, String>>,
    flag_timeout: Option<Duration>,
) -> CiliumSettings {
    let mut values = Vec::new();
    let mut warnings = Vec::new();
    let mut take = |key: &str, default: &str| -> String {
        match data.and_then(|d| d.get(key)) {
            Some(v) if !v.trim().is_empty() => {
                values.push(ConfigValue {
                    key: key.into(),
                    value: v.trim().into(),
                    source: ConfigSource::CiliumConfig,
                });
                v.trim().to_owned()
            }
            _ => {
                values.push(ConfigValue {
                    key: key.into(),
                    value: default.into(),
                    source: ConfigSource::Default,
                });
                default.to_owned()
            }
        }
    };
    let allocation_mode = take("identity-allocation-mode", "crd");
    let management_mode = take("identity-management-mode", "agent");
    let slices = take("enable-cilium-endpoint-slice", "false");
    let no_cep = take("disable-endpoint-crd", "false");
    let cluster_id = take("cluster-id", "0");
    let max_cc = take("max-connected-clusters", "255");
    let timeout_raw = take("identity-heartbeat-timeout", "30m0s");
    let mut number = |key: &str, raw: &str, default: u64| {
        raw.parse::<u64>().unwrap_or_else(|_| {
            warnings.push(format!(
                "cilium-config {key}={raw:?} is not a number; assuming {default}"
            ));
            default
        })
    };
    let cluster_id = number("cluster-id", &cluster_id, 0);
    let max_connected_clusters = number("max-connected-clusters", &max_cc, 255);
    let cluster_values_unparseable = !warnings.is_empty();
    let gc_interval = gc_interval(data, &mut warnings);
    let (heartbeat_timeout, config_heartbeat_timeout) =
        heartbeat_timeout(data, &timeout_raw, flag_timeout, &mut values, &mut warnings);
    if data.is_none() {
        warnings.push(format!(
            "cilium-config could not be read; the allocation mode is unknown (see --identity-allocation-mode); using Cilium's defaults identity-management-mode=agent, cluster-id=0, max-connected-clusters=255, identity-heartbeat-timeout={}",
            humantime::format_duration(heartbeat_timeout)
        ));
    }
    CiliumSettings {
        allocation_mode,
        management_mode,
        slices_enabled: slices == "true",
        endpoint_crd_disabled: no_cep == "true",
        cluster_id,
        max_connected_clusters,
        heartbeat_timeout,
        values,
        warnings,
        config_read: data.is_some(),
        allocation_mode_known: data.is_some(),
        config_heartbeat_timeout,
        cluster_values_unparseable,
        gc_interval,
    }
}

/// cilium-config's `identity-gc-interval` (default 15m); an unreadable one
/// is assumed to be the default, with a warning.
fn gc_interval(data: Option<&BTreeMap<String, String>>, warnings: &mut Vec<String>) -> Duration {
    let raw = data
        .and_then(|d| d.get("identity-gc-interval"))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .unwrap_or("15m0s");
    crate::connect::parse_duration(raw).unwrap_or_else(|_| {
        warnings.push(format!(
            "cilium-config identity-gc-interval={raw:?} is not a duration; assuming 15m"
        ));
        DEFAULT_GC_INTERVAL
    })
}

/// The heartbeat timeout the run judges marks by (the flag's, else
/// cilium-config's, else 30m with a warning), and cilium-config's own value
/// when it parses. A flag is recorded as the value's source.
fn heartbeat_timeout(
    data: Option<&BTreeMap<String, String>>,
    timeout_raw: &str,
    flag_timeout: Option<Duration>,
    values: &mut [ConfigValue],
    warnings: &mut Vec<String>,
) -> (Duration, Option<Duration>) {
    let config_heartbeat_timeout = data
        .and_then(|d| d.get("identity-heartbeat-timeout"))
        .and_then(|v| crate::connect::parse_duration(v.trim()).ok());
    let config_timeout = crate::connect::parse_duration(timeout_raw).unwrap_or_else(|_| {
        warnings.push(format!(
            "cilium-config identity-heartbeat-timeout={timeout_raw:?} is not a duration; assuming 30m"
        ));
        DEFAULT_HEARTBEAT_TIMEOUT
    });
    let heartbeat_timeout = match flag_timeout {
        Some(t) => {
            if let Some(v) = values
                .iter_mut()
                .find(|v| v.key == "identity-heartbeat-timeout")
            {
                v.value = humantime::format_duration(t).to_string();
                v.source = ConfigSource::Flag;
            }
            t
        }
        None => config_timeout,
    };
    (heartbeat_timeout, config_heartbeat_timeout)
}

/// Read `cilium-config`: its data, or why it could not be read (missing,
/// forbidden, malformed). Callers then assume Cilium's defaults and say so.
pub async fn fetch_cilium_config(
    api: &ApiClient,
    namespace: &str,
    max_retries: u32,
) -> Result<BTreeMap<String, String>, String> {
    let a = api
        .get(
            &format!("/api/v1/namespaces/{namespace}/configmaps/cilium-config"),
            max_retries,
        )
        .await;
    match a.class {
        Class::Success => a
            .json::<ConfigMap>()
            .map(|cm| cm.data)
            .map_err(|e| format!("cilium-config in {namespace} is malformed: {e}")),
        _ => Err(format!(
            "cannot read cilium-config in {namespace}: {}",
            a.message
        )),
    }
}

#[derive(Deserialize)]
struct ConfigMap {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use cilium_gc_testkit::config_data as cfg;

    #[test]
    fn defaults_when_config_is_missing() {
        let s = settings_from_config(None, None);
        assert_eq!(s.allocation_mode, "crd");
        assert_eq!(s.heartbeat_timeout, DEFAULT_HEARTBEAT_TIMEOUT);
        assert!(s.values.iter().all(|v| v.source == ConfigSource::Default));
        assert!(s.warnings[0].contains("the allocation mode is unknown"));
    }

    #[test]
    fn config_values_and_flag_override() {
        let d = cfg(&[
            ("identity-allocation-mode", "crd"),
            ("enable-cilium-endpoint-slice", "true"),
            ("cluster-id", "3"),
            ("max-connected-clusters", "511"),
            ("identity-heartbeat-timeout", "15m"),
        ]);
        let s = settings_from_config(Some(&d), None);
        assert!(s.slices_enabled);
        assert_eq!((s.cluster_id, s.max_connected_clusters), (3, 511));
        assert_eq!(s.heartbeat_timeout, Duration::from_secs(900));
        let s = settings_from_config(Some(&d), Some(Duration::from_secs(3600)));
        assert_eq!(s.heartbeat_timeout, Duration::from_secs(3600));
        let v = s
            .values
            .iter()
            .find(|v| v.key == "identity-heartbeat-timeout")
            .unwrap();
        assert_eq!(v.source, ConfigSource::Flag);
        let s = settings_from_config(Some(&cfg(&[("cluster-id", "x")])), None);
        assert_eq!(s.cluster_id, 0);
        assert!(s.warnings[0].contains("cluster-id"));
    }
}
