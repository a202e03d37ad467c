//! Handlers for Cilium resources: list (selectors, pagination over a
//! consistent snapshot, metadata-only), get, create, update, patch, delete
//! (reference §2–§4); the writes are in `write`. Watch lives in `watch.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Response;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use super::object::StoredObject;
use super::state::{ClientRequest, ServerState};
use super::status::{self, ResourceRef};
use super::store::{api_version, ReadAt, StoreError};
use crate::kinds::{Kind, CILIUM_GROUP};
use crate::labels::Selector;

mod write;

pub(crate) use write::{create, delete, patch, update};

/// Names for messages and details of a kind.
pub(crate) fn res(kind: Kind) -> ResourceRef<'static> {
    ResourceRef {
        group: CILIUM_GROUP,
        plural: kind.plural(),
        kind: kind.kind(),
    }
}

fn key_of(kind: Kind, namespace: Option<&str>, name: &str) -> String {
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
type Refusal = Box<Response<Body>>;

// ---- continue tokens (§2) ----

#[derive(Deserialize)]
struct Token {
    v: String,
    rv: i64,
    start: String,
}

/// Encode a continue token like apiserver's `EncodeContinue`.
pub(crate) fn encode_token(rv: i64, start: &str) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw.to_string())
}

/// Why a continue token is refused, in apiserver's words (the text of
/// the 400 answer).
#[derive(Debug, thiserror::Error)]
enum BadContinue {
    /// Not base64.
    #[error("continue key is not valid: {0}")]
    Base64(base64::DecodeError),
    /// Not the token's JSON.
    #[error("continue key is not valid: {0}")]
    Json(serde_json::Error),
    /// Another version, or a resourceVersion no token carries.
    #[error("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")]
    ResourceVersion,
    /// An empty start key, or one leaving the prefix.
    #[error("continue key is not valid: continue key is not valid")]
    Start,
}

fn decode_token(t: &str) -> Result<(i64, String), BadContinue> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t.trim_end_matches('='))
        .map_err(BadContinue::Base64)?;
    let tok: Token = serde_json::from_slice(&bytes).map_err(BadContinue::Json)?;
    if tok.v != "meta.k8s.io/v1" || tok.rv == 0 || tok.rv < -1 {
        return Err(BadContinue::ResourceVersion);
    }
    let start = tok
        .start
        .strip_suffix('\u{0}')
        .unwrap_or(&tok.start)
        .to_owned();
    if start.is_empty() || start.contains("..") {
        return Err(BadContinue::Start);
    }
    Ok((tok.rv, start))
}

// ---- selectors ----

struct Filter {
    labels: Option<Selector>,
    fields: Vec<(String, bool, String)>,
}

#[derive(Deserialize)]
struct LabelsOnly {
    metadata: LabelsMeta,
}
#[derive(Deserialize)]
struct LabelsMeta {
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

impl Filter {
    fn parse(kind: Kind, r: &ClientRequest) -> Result<Filter, Refusal> {
        let labels =
            match r
                .query
                .get("labelSelector")
                .filter(|s| !s.trim().is_empty())
            {
                None => None,
                Some(s) => Some(Selector::parse(s).map_err(|e| {
                    status::bad_request(&format!("unable to parse requirement: {e}"))
                })?),
            };
        let mut fields = Vec::new();
        for term in r
            .query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or("")
            .split(',')
        {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (k, eq, v) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, true, v)
            } else {
                return Err(Box::new(status::bad_request(&format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                ))));
            };
            let ok = k == "metadata.name" || (k == "metadata.namespace" && kind == Kind::Endpoint);
            if !ok {
                return Err(Box::new(status::bad_request(&format!(
                    "field label not supported: {k}"
                ))));
            }
            fields.push((k.to_owned(), eq, v.to_owned()));
        }
        Ok(Filter { labels, fields })
    }

    fn is_empty(&self) -> bool {
        self.labels.is_none() && self.fields.is_empty()
    }

    fn matches(&self, key: &str, obj: &StoredObject) -> bool {
        let (ns, name) = split_key(key);
        let fields_ok = self.fields.iter().all(|(k, eq, v)| {
            let actual = if k == "metadata.name" {
                name
            } else {
                ns.unwrap_or("")
            };
            (actual == v) == *eq
        });
        fields_ok
            && self.labels.as_ref().is_none_or(|sel| {
                serde_json::from_slice::<LabelsOnly>(&obj.bytes)
                    .is_ok_and(|l| sel.matches(&l.metadata.labels))
            })
    }
}

// ---- rendering ----

/// An object as `PartialObjectMetadata`.
pub(crate) fn partial_metadata(obj: &StoredObject) -> Value {
    let v = obj.value();
    json!({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata": v.get("metadata").cloned().unwrap_or(json!({}))})
}

/// The bytes of an object as the client asked for it.
pub(crate) fn render_obj(obj: &StoredObject, meta_only: bool) -> Vec<u8> {
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
) -> Result<ListPosition, Box<Response<Body>>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_look_like_the_real_ones() {
        let t = encode_token(7340, "100\u{0}");
        assert_eq!(
            t,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NzM0MCwic3RhcnQiOiIxMDBcdTAwMDAifQ"
        );
        assert_eq!(decode_token(&t).unwrap(), (7340, "100".to_owned()));
        assert!(decode_token("not-a-token").is_err());
        assert_eq!(decode_token(&encode_token(-1, "5\u{0}")).unwrap().0, -1);
    }
}
