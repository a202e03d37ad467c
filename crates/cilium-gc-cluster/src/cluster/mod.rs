//! Talking to the API server: the client built like kubectl builds it, one
//! raw request path that every call goes through, and the server's clock.
//!
//! We send raw requests (not kube's typed `Api`) on the hot paths because the
//! decisions need what typed errors drop: the `Retry-After` header, plain-text
//! bodies (APF's 429, the not-found handler's 404) and the `Date` header.
//! kube's own retry layer is switched off (`default_retry = false`): every
//! retry is ours, so the report can count it.
//!
//! Split the way kube-client splits its `config`: `kubeconfig` (the
//! kubeconfig, flags and credentials), `proxy` (proxy rules), `error` (why
//! a connection could not be set up, used by both), `clock` (the server's
//! clock) and `client` (the raw request path).

pub mod client;
pub mod clock;
mod error;
pub mod kubeconfig;
mod proxy;

pub use client::ServerError;
pub use client::{error_chain, Answer, ApiClient, JSON};
pub use client::{FIELD_MANAGER, MERGE_PATCH};
pub use clock::ServerClock;
pub use error::{ConnectError, PemError};
pub use kubeconfig::kubeconfig_contexts;
pub use kubeconfig::Endpoint;
