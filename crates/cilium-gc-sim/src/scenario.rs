//! What a simulated cluster looks like when it starts: a plain struct with
//! public fields so tests can start from a preset and change what they need.
//!
//! Seeding from a scenario is deterministic ([`Scenario::seed`] drives every
//! random choice), so a failing test can be replayed exactly.

use std::collections::BTreeMap;
use std::time::Duration;

use super::actors::{ActorRates, Population};
use super::faults::Faults;
use crate::kinds::Kind;

/// Which Cilium CRDs are installed. An absent CRD makes its paths answer
/// `404 page not found` in text, as a real server does (reference §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrdSet {
    /// `ciliumidentities.cilium.io`.
    pub identities: bool,
    /// `ciliumendpoints.cilium.io`.
    pub endpoints: bool,
    /// `ciliumendpointslices.cilium.io`.
    pub slices: bool,
    /// CiliumEndpointSlices are also served at `cilium.io/v2` (Cilium
    /// 1.18+), the preferred version; `v2alpha1` stays served.
    pub slices_v2: bool,
}

impl CrdSet {
    /// All three CRDs installed.
    pub const ALL: CrdSet = CrdSet {
        identities: true,
        endpoints: true,
        slices: true,
        slices_v2: false,
    };

    /// Whether `kind` is served at `version`.
    pub fn serves(&self, kind: Kind, version: &str) -> bool {
        self.has(kind)
            && (kind.version() == version
                || (kind == Kind::EndpointSlice && self.slices_v2 && version == "v2"))
    }

    /// Whether the CRD of `kind` is installed.
    pub fn has(&self, kind: Kind) -> bool {
        match kind {
            Kind::Identity => self.identities,
            Kind::Endpoint => self.endpoints,
            Kind::EndpointSlice => self.slices,
        }
    }
}

/// An RBAC "no": the scenario's user may not do `verb` on `resource`.
/// `"*"` matches any verb or resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, ... or `*`.
    pub verb: String,
    /// Plural resource (`ciliumidentities`, `configmaps`) or `*`.
    pub resource: String,
}

impl Denial {
    /// Deny `verb` on `resource`.
    pub fn new(verb: &str, resource: &str) -> Self {
        Denial {
            verb: verb.to_owned(),
            resource: resource.to_owned(),
        }
    }

    /// Whether this denial covers the request.
    pub fn covers(&self, verb: &str, resource: &str) -> bool {
        (self.verb == "*" || self.verb == verb)
            && (self.resource == "*" || self.resource == resource)
    }
}

/// How the identities that no endpoint references are split; weights, not
/// counts (they are normalised).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnusedMix {
    /// No heartbeat annotation yet (the operator has not marked them).
    pub unmarked: f64,
    /// Marked within the last few minutes (not stale yet).
    pub recent_mark: f64,
    /// Marked hours to days ago (stale).
    pub old_mark: f64,
    /// Heartbeat annotation that is not an RFC 3339 time.
    pub malformed_mark: f64,
}

impl Default for UnusedMix {
    fn default() -> Self {
        UnusedMix {
            unmarked: 0.3,
            recent_mark: 0.15,
            old_mark: 0.5,
            malformed_mark: 0.05,
        }
    }
}

/// A simulated cluster: objects, permissions, actors and faults.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Preset name, or anything descriptive.
    pub name: String,
    /// Seed of every random choice (objects, actors, faults).
    pub seed: u64,
    /// Number of CiliumIdentity objects.
    pub identities: usize,
    /// First numeric identity; names are consecutive from here (the local
    /// range of a cluster starts at 256).
    pub first_id: u64,
    /// Share of identities no endpoint references (split per [`Self::unused_mix`]).
    /// If there are fewer endpoints than referenced identities would need,
    /// the surplus also becomes unreferenced.
    pub stale_ratio: f64,
    /// How the unreferenced identities are marked.
    pub unused_mix: UnusedMix,
    /// Share of identities carrying high-cardinality job labels
    /// (`k8s:job-name`, `k8s:batch.kubernetes.io/controller-uid`).
    pub job_ratio: f64,
    /// Add one identity outside the local range (a cluster-mesh id, cluster 1).
    pub not_local_identity: bool,
    /// Number of endpoints (pods). CiliumEndpoints, or entries in
    /// CiliumEndpointSlices when [`Self::slices`] is set.
    pub endpoints: usize,
    /// Namespaces endpoints and identities are spread over.
    pub namespaces: usize,
    /// Publish endpoints as CiliumEndpointSlices instead of CiliumEndpoints.
    pub slices: bool,
    /// Endpoints per CiliumEndpointSlice.
    pub endpoints_per_slice: usize,
    /// With [`Self::slices`], publish the CiliumEndpoints too (Cilium's CES
    /// mode: agents write CEPs, the operator batches them into slices).
    pub ceps_with_slices: bool,
    /// `data` of `kube-system/cilium-config`; `None` = no such ConfigMap (404).
    pub cilium_config: Option<BTreeMap<String, String>>,
    /// The cilium-operator Deployment, cilium DaemonSet and operator pods
    /// in `kube-system`; `None` = not there (404).
    pub cilium_install: Option<super::install::CiliumInstall>,
    /// Which CRDs are installed.
    pub crds: CrdSet,
    /// RBAC denials for the scenario's user.
    pub rbac_denials: Vec<Denial>,
    /// The user name RBAC messages quote.
    pub user: String,
    /// The bearer token the server accepts (written into the kubeconfig).
    pub token: String,
    /// Cluster actors and their rates.
    pub actors: ActorRates,
    /// Faults injected into client requests.
    pub faults: Faults,
    /// Server clock minus real clock, in seconds (for clock-skew tests).
    pub clock_offset_secs: i64,
    /// How long continue tokens and watch resourceVersions stay valid; etcd
    /// compacts every 5 minutes by default.
    pub compaction_interval: Duration,
    /// How often a watch with `allowWatchBookmarks` gets a BOOKMARK.
    pub bookmark_interval: Duration,
    /// How far back creationTimestamps are spread.
    pub age_spread: Duration,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            name: "custom".into(),
            seed: 1,
            identities: 300,
            first_id: 256,
            stale_ratio: 0.5,
            unused_mix: UnusedMix::default(),
            job_ratio: 0.2,
            not_local_identity: true,
            endpoints: 200,
            namespaces: 10,
            slices: false,
            endpoints_per_slice: 100,
            ceps_with_slices: false,
            cilium_config: Some(default_cilium_config("crd")),
            cilium_install: Some(super::install::CiliumInstall::default()),
            crds: CrdSet::ALL,
            rbac_denials: Vec::new(),
            user: "sim-admin".into(),
            token: "sim-token-0123456789abcdef".into(),
            actors: ActorRates::default(),
            faults: Faults::default(),
            clock_offset_secs: 0,
            compaction_interval: Duration::from_secs(300),
            bookmark_interval: Duration::from_secs(5),
            age_spread: Duration::from_secs(6 * 7 * 24 * 3600),
        }
    }
}

/// A plausible `cilium-config` ConfigMap `data`.
pub fn default_cilium_config(allocation_mode: &str) -> BTreeMap<String, String> {
    [
        ("identity-allocation-mode", allocation_mode),
        ("cluster-name", "default"),
        ("cluster-id", "0"),
        ("identity-gc-interval", "15m0s"),
        ("identity-heartbeat-timeout", "30m0s"),
        ("enable-cilium-endpoint-slice", "false"),
        ("ipam", "cluster-pool"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// `cilium-config` of a cluster in CiliumEndpointSlice mode.
fn ces_config() -> BTreeMap<String, String> {
    let mut c = default_cilium_config("crd");
    c.insert("enable-cilium-endpoint-slice".into(), "true".into());
    c
}

impl Scenario {
    /// The same cluster, quiet: no agents or operator acting during the
    /// run, and no injected faults. Tests that count exact outcomes use it.
    pub fn calm(mut self) -> Self {
        self.actors = ActorRates::default();
        self.faults = Faults::default();
        self
    }

    /// What the cluster actors need to know of this scenario.
    pub fn population(&self) -> Population {
        Population {
            first_id: self.first_id,
            next_id: self.first_id + self.identities as u64,
            namespaces: self.namespaces,
            job_ratio: self.job_ratio,
            endpoints: self.crds.endpoints && (!self.slices || self.ceps_with_slices),
        }
    }

    /// Names [`Scenario::preset`] knows.
    pub const PRESETS: &'static [&'static str] = &[
        "demo",
        "small",
        "seed",
        "hostile",
        "struggling",
        "usage-dark",
        "no-endpoints",
        "no-cep-crd",
        "forbidden",
        "kvstore",
        "missing-crd",
        "slices",
        "churn",
    ];

    /// Names [`Scenario::preset`] knows.
    pub fn preset_names() -> &'static [&'static str] {
        Self::PRESETS
    }

    /// A named preset, or `None` for an unknown name.
    pub fn preset(name: &str) -> Option<Scenario> {
        let small = Scenario {
            name: name.to_owned(),
            ..Scenario::default()
        };
        Self::busy_preset(name, small.clone()).or_else(|| Self::small_preset(name, small))
    }

    /// The presets that are the small cluster with one thing changed.
    fn small_preset(name: &str, small: Scenario) -> Option<Scenario> {
        let s = match name {
            "small" => small,
            // `demo`'s default: the small cluster with agents reclaiming
            // marked identities while GC runs, so deletes meet 409s.
            "demo" => Scenario {
                actors: ActorRates {
                    agent_reclaim: 5.0,
                    agent_strip: 20.0,
                    reuse: 2.0,
                    ..ActorRates::default()
                },
                ..small
            },
            "no-endpoints" => Scenario {
                endpoints: 0,
                ..small
            },
            "no-cep-crd" => Scenario {
                endpoints: 0,
                crds: CrdSet {
                    endpoints: false,
                    slices: false,
                    ..CrdSet::ALL
                },
                ..small
            },
            "forbidden" => Scenario {
                rbac_denials: vec![
                    Denial::new("delete", "ciliumidentities"),
                    Denial::new("deletecollection", "ciliumidentities"),
                ],
                ..small
            },
            "kvstore" => Scenario {
                cilium_config: Some(default_cilium_config("kvstore")),
                ..small
            },
            "missing-crd" => Scenario {
                crds: CrdSet {
                    identities: false,
                    ..CrdSet::ALL
                },
                ..small
            },
            "slices" => Scenario {
                slices: true,
                cilium_config: Some(ces_config()),
                ..small
            },
            _ => return None,
        };
        Some(s)
    }

    /// The presets of a busy cluster: thousands of identities, actors at
    /// work, and for some a struggling API server.
    fn busy_preset(name: &str, small: Scenario) -> Option<Scenario> {
        let s = match name {
            "seed" => Scenario {
                identities: 65_000,
                stale_ratio: 0.6,
                job_ratio: 0.45,
                endpoints: 15_000,
                namespaces: 200,
                actors: ActorRates {
                    agent_reclaim: 20.0,
                    reuse: 5.0,
                    operator_mark: 20.0,
                    identity_churn: 2.0,
                    endpoint_churn: 5.0,
                    ..ActorRates::default()
                },
                ..small
            },
            // A struggling API server in a busy CES-mode cluster: 3,000+
            // identities (~800 stale), 1,500 CEPs batched into slices, agents
            // reclaiming, and every fault of `Faults::hostile`.
            "hostile" => Scenario {
                identities: 3_000,
                stale_ratio: 0.53,
                endpoints: 1_500,
                slices: true,
                ceps_with_slices: true,
                endpoints_per_slice: 50,
                cilium_config: Some(ces_config()),
                faults: Faults::hostile(),
                actors: ActorRates {
                    agent_reclaim: 2.0,
                    reuse: 1.0,
                    operator_mark: 2.0,
                    identity_churn: 1.0,
                    endpoint_churn: 1.0,
                    ..ActorRates::default()
                },
                ..small
            },
            // Built like a struggling API server met in the field, which
            // admits about 40 deletes/s: `hostile`'s objects and actors
            // (3,000 identities, ~800 stale, CES mode) behind
            // `Faults::struggling` alone (a 50 deletes/s cap answered 429 +
            // `Retry-After`, a 3 s burst of 429s every 15 s, 3% 5xx), none
            // of `hostile`'s other noise.
            "struggling" => Scenario {
                faults: Faults::struggling(),
                ..Self::busy_preset("hostile", small)?
            },
            // Endpoint usage goes dark for good: CEP/CES watches end within
            // 5 s, from 8 s every list and watch of them fails with 500, and
            // from 30 s endpoints appear for marked identities with no write
            // to the identity (an operator that marked from a stale view):
            // only live usage could protect those.
            "usage-dark" => Scenario {
                identities: 1_000,
                stale_ratio: 0.6,
                endpoints: 400,
                slices: true,
                ceps_with_slices: true,
                endpoints_per_slice: 50,
                cilium_config: Some(ces_config()),
                faults: Faults::usage_dark(),
                actors: ActorRates {
                    shadow_reuse: 5.0,
                    shadow_reuse_after: Duration::from_secs(30),
                    ..ActorRates::default()
                },
                ..small
            },
            // Churn the forecast sees: 3,000 identities all created in the
            // last 48 hours (about 62 an hour), most of them jobs', 60 %
            // unused; quiet, so a diagnosis is quick.
            "churn" => Scenario {
                identities: 3_000,
                stale_ratio: 0.6,
                job_ratio: 0.6,
                endpoints: 1_200,
                namespaces: 20,
                age_spread: Duration::from_secs(48 * 3_600),
                ..small
            },
            _ => return None,
        };
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_preset_exists_and_unknown_does_not() {
        for name in Scenario::PRESETS {
            let s = Scenario::preset(name).expect(name);
            assert_eq!(&s.name, name);
        }
        assert!(Scenario::preset("nope").is_none());
    }

    #[test]
    fn denial_wildcards() {
        assert!(Denial::new("*", "ciliumidentities").covers("delete", "ciliumidentities"));
        assert!(!Denial::new("delete", "*").covers("list", "ciliumidentities"));
    }
}
