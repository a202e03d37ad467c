//! The state every handler shares ([`ServerState`]) and one parsed client request
//! ([`ClientRequest`]): what the HTTP front hands to the discovery, resource and watch
//! handlers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{header, HeaderMap, Method};
use rand::SeedableRng;
use tokio::sync::broadcast;

use super::chaos::Chaos;
use super::faults::FaultEngine;
use super::install::CiliumInstall;
use super::ledger::LedgerBook;
use super::object::Clock;
use super::scenario::{CrdSet, Denial, Scenario};
use super::store::Store;

/// Query parameters (last value wins).
pub(crate) type Query = HashMap<String, String>;

/// Shared server state.
pub(crate) struct ServerState {
    /// The objects (shared with the actors).
    pub store: Arc<Store>,
    /// Installed CRDs.
    pub crds: CrdSet,
    /// `cilium-config` data.
    pub cilium_config: Option<std::collections::BTreeMap<String, String>>,
    /// The cilium-operator Deployment, cilium DaemonSet and operator pods.
    pub cilium_install: Option<CiliumInstall>,
    /// RBAC denials (changeable at runtime).
    pub rbac: Mutex<Vec<Denial>>,
    /// User name for RBAC messages.
    pub user: String,
    /// Accepted bearer token.
    pub token: String,
    /// Faults for client requests.
    pub faults: FaultEngine,
    /// What clients did.
    pub ledger: LedgerBook,
    /// Server clock.
    pub clock: Clock,
    /// Bookmark period.
    pub bookmark_interval: std::time::Duration,
    /// Fires to end every open watch with a 410 ERROR event.
    pub expire_watches: broadcast::Sender<()>,
    /// RNG for uids of created objects.
    pub rng: Mutex<rand_chacha::ChaCha8Rng>,
    /// Test-only spoilers of list answers.
    pub chaos: Chaos,
}

impl ServerState {
    /// The state of a server for `scenario` over `store` (seeded already),
    /// with no client request seen yet.
    pub(crate) fn new(store: Arc<Store>, scenario: &Scenario, clock: Clock) -> Self {
        let (expire_watches, _) = broadcast::channel(4);
        ServerState {
            store,
            crds: scenario.crds,
            cilium_config: scenario.cilium_config.clone(),
            cilium_install: scenario.cilium_install.clone(),
            rbac: Mutex::new(scenario.rbac_denials.clone()),
            user: scenario.user.clone(),
            token: scenario.token.clone(),
            faults: FaultEngine::new(scenario.faults.clone(), scenario.seed),
            ledger: LedgerBook::default(),
            clock,
            bookmark_interval: scenario.bookmark_interval,
            expire_watches,
            // From the scenario's seed, on a stream apart from the seeding's
            // and the actors': created objects' uids repeat for a seed.
            rng: Mutex::new(rand_chacha::ChaCha8Rng::seed_from_u64(
                scenario.seed.wrapping_add(7),
            )),
            chaos: Chaos::default(),
        }
    }

    /// Whether RBAC lets the scenario's user do `verb` on `resource`.
    pub(crate) fn allowed(&self, verb: &str, resource: &str) -> bool {
        !self
            .rbac
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|d| d.covers(verb, resource))
    }
}

/// One parsed client request.
pub(crate) struct ClientRequest {
    /// HTTP method.
    pub method: Method,
    /// Headers.
    pub headers: HeaderMap,
    /// Query parameters.
    pub query: Query,
    /// Body bytes.
    pub body: Bytes,
    /// User-Agent.
    pub user_agent: String,
}

impl ClientRequest {
    /// Field manager: `?fieldManager=`, else the User-Agent up to the first `/` (§4).
    pub(crate) fn manager(&self) -> String {
        match self.query.get("fieldManager") {
            Some(m) if !m.is_empty() => m.clone(),
            _ => {
                let ua = self.user_agent.split('/').next().unwrap_or_default();
                let ua: String = ua.chars().filter(|c| !c.is_control()).take(128).collect();
                if ua.is_empty() {
                    "unknown".into()
                } else {
                    ua
                }
            }
        }
    }

    /// Whether the client asked for metadata only (`as=PartialObjectMetadata[List]`).
    pub(crate) fn metadata_only(&self) -> bool {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| {
                a.split(',')
                    .next()
                    .unwrap_or("")
                    .contains("as=PartialObjectMetadata")
            })
    }

    /// `?dryRun=All`.
    pub(crate) fn dry_run(&self) -> bool {
        self.query.get("dryRun").is_some_and(|v| v == "All")
    }
}
