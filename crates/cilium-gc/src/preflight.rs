//! Checks before any write: is this a cluster where deleting identities is
//! safe and allowed? Fetch, then interpret: the `fetch_*` functions do the
//! requests, `settings_from_config` and `evaluate` are pure.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::cluster::ApiClient;
use crate::model::{Kind, CILIUM_GROUP};
use crate::rbac::Permission;
use crate::report::{Check, CheckName, ConfigSource, ConfigValue};
use crate::retry::Class;

/// Cilium's default `identity-heartbeat-timeout`.
pub(crate) const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Cilium's default `identity-gc-interval`.
pub(crate) const DEFAULT_GC_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// Which Cilium CRDs the API server serves (from discovery).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Crds {
    /// `ciliumidentities.cilium.io/v2`.
    pub identities: bool,
    /// `ciliumendpoints.cilium.io/v2`.
    pub endpoints: bool,
    /// `ciliumendpointslices.cilium.io`, at v2 or v2alpha1.
    pub slices: bool,
    /// CiliumEndpointSlices are served at `v2` (Cilium 1.18+), which is
    /// then preferred over the deprecated `v2alpha1`.
    pub slices_v2: bool,
}

impl Crds {
    /// The version to read CiliumEndpointSlices at.
    pub(crate) fn slices_version(&self) -> &'static str {
        if self.slices_v2 {
            "v2"
        } else {
            "v2alpha1"
        }
    }
}

/// The Cilium settings a run depends on, with where each came from.
#[derive(Debug, Clone)]
pub(crate) struct CiliumSettings {
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
    pub(crate) fn state_allocation_mode(&mut self, mode: Option<&str>) {
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
pub(crate) fn settings_from_config(
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
    crate::settings::parse_duration(raw).unwrap_or_else(|_| {
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
        .and_then(|v| crate::settings::parse_duration(v.trim()).ok());
    let config_timeout = crate::settings::parse_duration(timeout_raw).unwrap_or_else(|_| {
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

/// Cilium's own check of `cluster-id` against `max-connected-clusters`
/// (pkg/clustermesh/types `ValidateClusterID` and the option's validation):
/// `max-connected-clusters` is 255 or 511, and `cluster-id` at most that.
/// An agent refuses to start otherwise, so the local identity range we
/// would compute from such values means nothing.
pub(crate) fn cluster_id_check(s: &CiliumSettings) -> Check {
    let problem = if s.cluster_values_unparseable {
        Some("cluster-id or max-connected-clusters in cilium-config is not a number".to_owned())
    } else if !matches!(s.max_connected_clusters, 255 | 511) {
        Some(format!(
            "max-connected-clusters is {}: Cilium accepts only 255 or 511",
            s.max_connected_clusters
        ))
    } else if s.cluster_id > s.max_connected_clusters {
        Some(format!(
            "cluster-id {} is out of range 0..={} for max-connected-clusters {}: Cilium would refuse it",
            s.cluster_id, s.max_connected_clusters, s.max_connected_clusters
        ))
    } else {
        None
    };
    Check {
        name: CheckName::ClusterId,
        passed: problem.is_none(),
        message: problem.map_or_else(
            || {
                format!(
                    "cluster-id {} of max-connected-clusters {}",
                    s.cluster_id, s.max_connected_clusters
                )
            },
            |p| format!("{p}; the local identity range cannot be known, refusing"),
        ),
    }
}

/// A `--heartbeat-timeout` shorter than cilium-config's
/// `identity-heartbeat-timeout` deletes identities the operator would still
/// keep; refused for writes unless `allow_short`, a warning for scans.
pub(crate) fn heartbeat_check(
    s: &CiliumSettings,
    flag: Option<Duration>,
    allow_short: bool,
    writes: bool,
) -> Check {
    let fmt = |d: Duration| humantime::format_duration(d).to_string();
    match (flag, s.config_heartbeat_timeout) {
        (Some(f), Some(c)) if f < c => Check {
            name: CheckName::HeartbeatTimeout,
            passed: allow_short || !writes,
            message: if allow_short {
                format!("--heartbeat-timeout {} is shorter than cilium-config's identity-heartbeat-timeout {}; continuing because of --allow-short-heartbeat-timeout", fmt(f), fmt(c))
            } else {
                format!("--heartbeat-timeout {} is shorter than cilium-config's identity-heartbeat-timeout {}: identities the operator still keeps would be deleted. Pass --allow-short-heartbeat-timeout to do it anyway", fmt(f), fmt(c))
            },
        },
        _ => Check {
            name: CheckName::HeartbeatTimeout,
            passed: true,
            message: format!("heartbeat timeout {}", fmt(s.heartbeat_timeout)),
        },
    }
}

/// Which usage sources to watch.
pub(crate) fn usage_sources(crds: Crds, s: &CiliumSettings) -> crate::usage::Sources {
    crate::usage::Sources {
        endpoints: crds.endpoints && !s.endpoint_crd_disabled,
        slices: crds.slices,
        slices_version: crds.slices_version(),
    }
}

/// The checks that need no endpoint data. A failed check refuses the run
/// when `writing` (scan only reports it, except a missing identity CRD).
pub(crate) fn evaluate(crds: Crds, s: &CiliumSettings, missing: &[Permission]) -> Vec<Check> {
    let mut checks = vec![Check {
        name: CheckName::IdentityCrd,
        passed: crds.identities,
        message: if crds.identities {
            "ciliumidentities.cilium.io/v2 is served".into()
        } else {
            "the CiliumIdentity CRD (ciliumidentities.cilium.io/v2) is not installed: is Cilium running in CRD identity mode?".into()
        },
    }];
    let sources = usage_sources(crds, s);
    let usage_ok = sources.endpoints || sources.slices;
    checks.push(Check {
        name: CheckName::UsageCrds,
        passed: usage_ok,
        message: match (sources.endpoints, sources.slices) {
            (true, true) => "usage from CiliumEndpoints and CiliumEndpointSlices".into(),
            (true, false) => "usage from CiliumEndpoints".into(),
            (false, true) => "usage from CiliumEndpointSlices".into(),
            (false, false) => "cannot tell which identities are in use: neither CiliumEndpoints (CRD missing or disable-endpoint-crd) nor CiliumEndpointSlices are available".into(),
        },
    });
    let mode_ok =
        s.allocation_mode_known && s.allocation_mode == "crd" && s.management_mode == "agent";
    checks.push(Check {
        name: CheckName::AllocationMode,
        passed: mode_ok,
        message: if !s.allocation_mode_known {
            "cilium-config could not be read, so the identity allocation mode is unknown (in kvstore mode every CiliumIdentity looks unused); refusing. Check --cilium-namespace, or pass --identity-allocation-mode crd if you know it".into()
        } else if s.allocation_mode != "crd" {
            format!("identity-allocation-mode is {:?}: identities live in the kvstore, not in CiliumIdentity objects; this tool only handles crd mode", s.allocation_mode)
        } else if s.management_mode != "agent" {
            management_refusal(&s.management_mode)
        } else {
            "identity-allocation-mode crd, managed by agents".into()
        },
    });
    checks.push(Check {
        name: CheckName::Permissions,
        passed: missing.is_empty(),
        message: if missing.is_empty() {
            "all needed permissions granted".into()
        } else {
            let names: Vec<String> = missing
                .iter()
                .map(crate::rbac::describe_permission)
                .collect();
            format!("missing permission: {}", names.join("; "))
        },
    });
    checks
}

/// Why a management mode other than `agent` is refused. Read in Cilium
/// v1.19.3 and seen with its real operator (docs/real-cilium.md): in
/// `operator` and `both` the agents only read identities (the allocator's
/// `operatorIDManagement` returns before any write), and the operator's
/// CID controller hands an existing identity to a new Pod without writing
/// it, so nothing strips a heartbeat mark or bumps the resourceVersion:
/// the 409 that stops a delete of a reused identity in `agent` mode never
/// comes, and a Pod's use shows in no CiliumEndpoint until its agent writes one.
fn management_refusal(mode: &str) -> String {
    format!(
        "identity-management-mode is {mode:?}: cilium-operator allocates identities for Pods and nothing strips its heartbeat mark when one is reused \
         (agents only read identities in this mode), so a delete's {{uid, resourceVersion}} preconditions cannot stop deleting an identity a Pod was just given; \
         refusing (the operator's own identity GC collects them; see docs/real-cilium.md)"
    )
}

/// The zero-endpoints check, once usage is synced.
pub(crate) fn endpoints_check(endpoints: u64, slices: u64, identities: u64, force: bool) -> Check {
    let passed = endpoints + slices > 0 || identities == 0;
    Check {
        name: CheckName::EndpointsPresent,
        passed: passed || force,
        message: if passed {
            format!("{endpoints} CiliumEndpoints, {slices} CiliumEndpointSlices")
        } else if force {
            format!("zero CiliumEndpoints and CiliumEndpointSlices while {identities} identities exist; continuing because of --force")
        } else {
            format!("zero CiliumEndpoints and CiliumEndpointSlices while {identities} identities exist: usage cannot be trusted (agents down? wrong cluster?); refusing to delete. Use --force if the cluster really has no pods")
        },
    }
}

#[derive(Deserialize)]
struct ResourceList {
    #[serde(default)]
    resources: Vec<ResourceEntry>,
}
#[derive(Deserialize)]
struct ResourceEntry {
    name: String,
}

/// Discovery of the cilium.io API failed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The request failed (unreachable, rejected, a server error).
    #[error("discovery of {CILIUM_GROUP}/{version}: {message}")]
    Request {
        /// The group version asked for.
        version: &'static str,
        /// What the answer (or its absence) said.
        message: String,
    },
    /// The answer was not an APIResourceList.
    #[error("discovery of {CILIUM_GROUP}/{version}: {cause}")]
    Decode {
        /// The group version asked for.
        version: &'static str,
        /// Why it did not decode.
        cause: serde_json::Error,
    },
}

/// Discover which Cilium CRDs are served. A 404 (text or JSON) means the
/// group version is not served.
pub(crate) async fn fetch_crds(api: &ApiClient, max_retries: u32) -> Result<Crds, DiscoveryError> {
    let mut crds = Crds::default();
    for version in ["v2", "v2alpha1"] {
        let a = api
            .get(&format!("/apis/{CILIUM_GROUP}/{version}"), max_retries)
            .await;
        match a.class {
            Class::Success => {}
            Class::NotFound => continue,
            _ => {
                return Err(DiscoveryError::Request {
                    version,
                    message: a.message,
                })
            }
        }
        let list: ResourceList = a
            .json()
            .map_err(|cause| DiscoveryError::Decode { version, cause })?;
        let has = |plural: &str| list.resources.iter().any(|r| r.name == plural);
        if version == "v2" {
            crds.identities = has(Kind::Identity.plural());
            crds.endpoints = has(Kind::Endpoint.plural());
            crds.slices_v2 = has(Kind::EndpointSlice.plural());
        }
        crds.slices |= has(Kind::EndpointSlice.plural());
    }
    Ok(crds)
}

#[derive(Deserialize)]
struct ConfigMap {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

/// Read `cilium-config`: its data, or why it could not be read (missing,
/// forbidden, malformed). Callers then assume Cilium's defaults and say so.
pub(crate) async fn fetch_cilium_config(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

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

    /// The check of that name (not its position in the list).
    fn check(checks: &[Check], name: CheckName) -> Check {
        checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name:?} check"))
            .clone()
    }

    #[test]
    fn refusals() {
        let all = Crds {
            identities: true,
            endpoints: true,
            slices: false,
            slices_v2: false,
        };
        let ok = settings_from_config(Some(&cfg(&[])), None);
        assert!(evaluate(all, &ok, &[]).iter().all(|c| c.passed));
        let kv = settings_from_config(Some(&cfg(&[("identity-allocation-mode", "kvstore")])), None);
        let c = check(&evaluate(all, &kv, &[]), CheckName::AllocationMode);
        assert!(!c.passed && c.message.contains("kvstore"));
        let op = settings_from_config(
            Some(&cfg(&[("identity-management-mode", "operator")])),
            None,
        );
        let refused = &check(&evaluate(all, &op, &[]), CheckName::AllocationMode);
        assert!(!refused.passed);
        assert!(
            refused.message.contains("\"operator\"") && refused.message.contains("strips"),
            "{}",
            refused.message
        );
        let both = settings_from_config(Some(&cfg(&[("identity-management-mode", "both")])), None);
        assert!(!check(&evaluate(all, &both, &[]), CheckName::AllocationMode).passed);
        let no_usage = Crds {
            identities: true,
            endpoints: false,
            slices: false,
            slices_v2: false,
        };
        assert!(!check(&evaluate(no_usage, &ok, &[]), CheckName::UsageCrds).passed);
        let no_cep = settings_from_config(Some(&cfg(&[("disable-endpoint-crd", "true")])), None);
        assert!(!check(&evaluate(all, &no_cep, &[]), CheckName::UsageCrds).passed);
        let none = Crds::default();
        assert!(!check(&evaluate(none, &ok, &[]), CheckName::IdentityCrd).passed);
        let del = crate::rbac::required(true, false, false);
        let denied: Vec<_> = del.iter().copied().filter(|p| p.verb == "delete").collect();
        let c = check(&evaluate(all, &ok, &denied), CheckName::Permissions);
        assert!(
            !c.passed && c.message.contains("delete ciliumidentities.cilium.io"),
            "{}",
            c.message
        );
    }

    /// What cannot be read fails closed.
    #[test]
    fn unknown_mode_bad_cluster_id_and_short_timeouts_are_refused() {
        let all = Crds {
            identities: true,
            endpoints: true,
            slices: false,
            slices_v2: false,
        };
        let mut unread = settings_from_config(None, None);
        assert!(!check(&evaluate(all, &unread, &[]), CheckName::AllocationMode).passed);
        unread.state_allocation_mode(Some("crd"));
        assert!(check(&evaluate(all, &unread, &[]), CheckName::AllocationMode).passed);
        let v = unread
            .values
            .iter()
            .find(|v| v.key == "identity-allocation-mode")
            .unwrap();
        assert_eq!(v.source, ConfigSource::Flag);
        // A readable cilium-config wins over the flag.
        let mut kv =
            settings_from_config(Some(&cfg(&[("identity-allocation-mode", "kvstore")])), None);
        kv.state_allocation_mode(Some("crd"));
        assert!(!check(&evaluate(all, &kv, &[]), CheckName::AllocationMode).passed);

        let ok = |pairs: &[(&str, &str)]| {
            cluster_id_check(&settings_from_config(Some(&cfg(pairs)), None)).passed
        };
        assert!(ok(&[]));
        assert!(ok(&[("cluster-id", "255")]));
        assert!(ok(&[
            ("cluster-id", "511"),
            ("max-connected-clusters", "511")
        ]));
        assert!(!ok(&[("cluster-id", "256")]));
        assert!(!ok(&[("max-connected-clusters", "300")]));
        assert!(!ok(&[("cluster-id", "one")]));

        let s = settings_from_config(Some(&cfg(&[("identity-heartbeat-timeout", "30m")])), None);
        let ten = Some(Duration::from_secs(600));
        assert!(!heartbeat_check(&s, ten, false, true).passed);
        assert!(heartbeat_check(&s, ten, true, true).passed);
        assert!(heartbeat_check(&s, ten, false, false).passed); // scan: a warning
        assert!(heartbeat_check(&s, Some(Duration::from_secs(3600)), false, true).passed);
    }

    #[test]
    fn zero_endpoints_needs_force() {
        assert!(endpoints_check(5, 0, 100, false).passed);
        assert!(endpoints_check(0, 0, 0, false).passed);
        assert!(!endpoints_check(0, 0, 100, false).passed);
        let forced = endpoints_check(0, 0, 100, true);
        assert!(forced.passed && forced.message.contains("--force"));
    }
}
