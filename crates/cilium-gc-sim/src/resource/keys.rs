//! How a request names an object: the table key of a kind, namespace and
//! name (only CiliumEndpoints are namespaced), and the group, plural and
//! kind the API server's messages name it by. Shared by the reads and the
//! writes, so both answer about the same object in the same words.

use axum::body::Body;
use axum::http::Response;

use crate::kinds::{Kind, CILIUM_GROUP};
use crate::status::ResourceRef;

/// Names for messages and details of a kind.
pub(crate) fn res(kind: Kind) -> ResourceRef<'static> {
    ResourceRef {
        group: CILIUM_GROUP,
        plural: kind.plural(),
        kind: kind.kind(),
    }
}

/// The table key of `name` (`namespace/name` for endpoints).
pub(crate) fn key_of(kind: Kind, namespace: Option<&str>, name: &str) -> String {
    match (kind, namespace) {
        (Kind::Endpoint, Some(ns)) => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

/// Split a table key into (namespace, name).
pub(crate) fn split_key(key: &str) -> (Option<&str>, &str) {
    match key.split_once('/') {
        Some((ns, n)) => (Some(ns), n),
        None => (None, key),
    }
}

/// A response that ends a request early (boxed: responses are large).
pub(crate) type Refusal = Box<Response<Body>>;
