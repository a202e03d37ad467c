//! The reads of Cilium resources: list (selectors, pagination over a
//! consistent snapshot, metadata-only) and get (reference §2–§3), rendered
//! as the API server renders them. Every identity a client is shown is
//! noted in the store, so the ledger can tell a delete of an identity an
//! actor changed since.

use std::sync::Arc;

use axum::body::Body;
use axum::http::Response;
use serde_json::{json, Value};

use super::filter::Filter;
use super::keys::{key_of, res, Refusal};
use super::token::{decode_token, encode_token};
use crate::kinds::{api_version, Kind};
use crate::object::StoredObject;
use crate::state::{ClientRequest, ServerState};
use crate::status;
use crate::store::{ReadAt, StoreError};

/// An object as `PartialObjectMetadata`.
pub(crate) fn partial_metadata(obj: &StoredObject) -> Value {
    let v = obj.value();
    json!({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata": v.get("metadata").cloned().unwrap_or(json!({}))})
}

/// The bytes of an object as the client asked for it.
fn render_obj(obj: &StoredObject, meta_only: bool) -> Vec<u8> {
    if meta_only {
        serde_json::to_vec(&partial_metadata(obj)).unwrap_or_default()
    } else {
        obj.bytes.to_vec()
    }
}

fn list_kind(kind: Kind) -> String {
    format!("{}List", kind.kind())
}

fn render_list(
    kind: Kind,
    meta: Value,
    items: &[(String, Arc<StoredObject>)],
    meta_only: bool,
) -> Vec<u8> {
    let (api, lk) = if meta_only {
        (
            "meta.k8s.io/v1".to_owned(),
            "PartialObjectMetadataList".to_owned(),
        )
    } else {
        (api_version(kind), list_kind(kind))
    };
    let mut out =
        Vec::with_capacity(items.iter().map(|(_, o)| o.bytes.len() + 1).sum::<usize>() + 256);
    out.extend_from_slice(
        format!(r#"{{"apiVersion":"{api}","kind":"{lk}","metadata":{meta},"items":["#).as_bytes(),
    );
    for (i, (_, o)) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&render_obj(o, meta_only));
    }
    out.extend_from_slice(b"]}");
    out
}

fn note_seen(app: &ServerState, kind: Kind, items: &[(String, Arc<StoredObject>)]) {
    if kind == Kind::Identity {
        app.store
            .note_client_seen(items.iter().map(|(k, o)| (k.as_str(), o.rv)));
    }
}

// ---- list ----

/// `GET` a collection.
pub(crate) fn list(
    app: &ServerState,
    kind: Kind,
    namespace: Option<&str>,
    r: &ClientRequest,
    force_expire: bool,
) -> Response<Body> {
    let filter = match Filter::parse(kind, r) {
        Ok(f) => f,
        Err(resp) => return *resp,
    };
    let prefix = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
    let ListPosition { at, start, limit } = match list_position(app, r, &prefix, force_expire) {
        Ok(p) => p,
        Err(resp) => return *resp,
    };
    let page = match app
        .store
        .list(kind, at, &prefix, start.as_deref(), limit, |k, o| {
            filter.matches(k, o)
        }) {
        Ok(p) => p,
        Err(StoreError::Expired(_)) => return status::expired_list(),
        Err(e) => return status::internal_error(&e.to_string()),
    };
    note_seen(app, kind, &page.items);
    let mut meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some(last) = &page.more_after {
        let rel = last.strip_prefix(&prefix).unwrap_or(last);
        meta["continue"] = json!(encode_token(page.rv as i64, &format!("{rel}\u{0}")));
        if filter.is_empty() {
            meta["remainingItemCount"] = json!(page.remaining);
        }
    }
    status::bytes_response(200, render_list(kind, meta, &page.items, r.metadata_only()))
}

/// Where a list reads from (`resourceVersion`, `resourceVersionMatch`,
/// `continue`), where it starts, and its page size, validated as the
/// apiserver validates them; the error answer otherwise.
fn list_position(
    app: &ServerState,
    r: &ClientRequest,
    prefix: &str,
    force_expire: bool,
) -> Result<ListPosition, Refusal> {
    let rv_param = r
        .query
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    let rv_match = r
        .query
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    let cont = r.query.get("continue").map(String::as_str).unwrap_or("");
    let mut limit = r
        .query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    if !rv_match.is_empty() && rv_param.is_empty() {
        return Err(Box::new(status::invalid(
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            json!({"group":"meta.k8s.io","kind":"ListOptions","causes":[{"reason":"FieldValueForbidden","message":"Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided","field":"resourceVersionMatch"}]}),
        )));
    }
    if !cont.is_empty() && !matches!(rv_param, "" | "0") {
        return Err(Box::new(status::bad_request(
            "specifying resource version is not allowed when using continue",
        )));
    }
    let (at, start) = if !cont.is_empty() {
        let (rv, start) = match decode_token(cont) {
            Ok(t) => t,
            Err(e) => {
                return Err(Box::new(status::bad_request(&format!(
                    "invalid continue token: {e}"
                ))))
            }
        };
        let start = format!("{prefix}{start}");
        if rv > 0 && (force_expire || (rv as u64) < app.store.compacted_rv()) {
            let rel = start.strip_prefix(prefix).unwrap_or(&start);
            return Err(Box::new(status::expired_continue(Some(encode_token(
                -1,
                &format!("{rel}\u{0}"),
            )))));
        }
        let at = if rv > 0 {
            ReadAt::Exact(rv as u64)
        } else {
            ReadAt::Latest
        };
        (at, Some(start))
    } else if rv_param == "0" {
        limit = None;
        (ReadAt::Latest, None)
    } else if let Ok(rv) = rv_param.parse::<u64>() {
        let exact = limit.is_some() || rv_match == "Exact";
        (
            if exact {
                ReadAt::Exact(rv)
            } else {
                ReadAt::Latest
            },
            None,
        )
    } else if rv_param.is_empty() {
        (ReadAt::Latest, None)
    } else {
        return Err(Box::new(status::bad_request(&format!(
            "invalid resource version: {rv_param}"
        ))));
    };
    Ok(ListPosition { at, start, limit })
}

/// Where a list reads: at which resourceVersion, from which key, how many.
struct ListPosition {
    at: ReadAt,
    start: Option<String>,
    limit: Option<usize>,
}

// ---- get ----

/// `GET` one object.
pub(crate) fn get(
    app: &ServerState,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
    r: &ClientRequest,
) -> Response<Body> {
    match app.store.get(kind, &key_of(kind, namespace, name)) {
        None => status::not_found(res(kind), name),
        Some(o) => {
            if kind == Kind::Identity {
                app.store.note_client_seen([(name, o.rv)]);
            }
            status::bytes_response(200, render_obj(&o, r.metadata_only()))
        }
    }
}
