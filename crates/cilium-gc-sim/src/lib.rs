//! A simulated Kubernetes API server for Cilium objects, over real HTTPS.
//!
//! [`Simulator::start`] seeds a store from a [`Scenario`], starts cluster
//! actors, serves on 127.0.0.1 with a freshly generated CA and writes a
//! kubeconfig both `kube` and `kubectl` accept. It follows kube-apiserver's
//! wire semantics (resourceVersions, pagination, preconditions, Status
//! bodies, watches): where it and a real kube-apiserver differ, the
//! simulator is wrong (`tests/e2e/wire` compares their answers request by
//! request; docs/real-apiserver.md lists what was found). Only the demo,
//! tests and benchmarks use this crate; the GC core never imports it.
//!
//! Layout, from the top down. `simulator` ([`Simulator`], [`SimState`]):
//! the handle, standing over everything below; this root only names what
//! a caller may use. The server: `routes` (HTTP front), `watch`,
//! `resource` (list/get/write handlers), `discovery`, `workloads` (the
//! Cilium workloads in `kube-system`), `serve` (TLS connections), `status`
//! (error and success bodies), `body` (request caps, injected resets), over
//! `state` (what handlers share, the parsed request), `store` (versioned
//! store with history) and `object` (stored objects and their metadata
//! bookkeeping); `tls` (CA and kubeconfigs). The cluster it starts from:
//! `scenario`, `seed`, `cilium_objects` (object builders), `install`
//! (versions, operator pods), `crds` (Cilium's CRDs, verbatim). What acts
//! on it: `actors`, `identity_gc` (cilium-operator's identity GC pass, as
//! 1.15 and current releases run it), `faults`, `chaos` (malformed objects
//! and spoiled list answers, for tests). What judges the client: `ledger`.
//! Its own reading of Cilium objects: `kinds` (endpoint references, over
//! the shared `cilium-gc-kinds` vocabulary) and `labels` (label
//! selectors). At the bottom, `error` ([`SimError`]), which `tls` and
//! `simulator` share.

#![warn(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

mod actors;
mod body;
mod chaos;
mod cilium_objects;
mod crds;
mod discovery;
mod error;
mod faults;
mod identity_gc;
mod install;
mod kinds;
mod labels;
mod ledger;
mod object;
mod resource;
mod routes;
mod scenario;
mod seed;
mod serve;
mod simulator;
mod state;
mod status;
mod store;
mod tls;
mod watch;
mod workloads;

pub use actors::ActorRates;
pub use chaos::PageFault;
pub use error::SimError;
pub use faults::{ApfRetryAfter, Faults, ResetMode, ThrottleShape};
pub use identity_gc::{OperatorPass, OperatorRelease, OperatorSettings, OPERATOR_1_15};
pub use install::{CiliumInstall, OperatorMetrics, OperatorPod, OPERATOR_METRICS_PORT};
pub use kinds::{
    parse_id, referenced_ids, Kind, CILIUM_GROUP, HEARTBEAT_ANNOTATION, NAMESPACE_LABEL,
};
pub use ledger::{IdentityDelete, Ledger, RequestRecord};
pub use scenario::{default_cilium_config, CrdSet, Denial, Scenario, UnusedMix};
pub use simulator::{SimState, Simulator};
