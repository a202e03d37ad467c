//! Handlers for Cilium resources: list (selectors, pagination over a
//! consistent snapshot, metadata-only), get, create, update, patch, delete
//! (reference §2–§4). Watch lives in `watch.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use super::ledger::IdentityDelete;
use super::object::{rfc3339_secs, uuid, StoredObject, Writer};
use super::state::{ClientRequest, ServerState};
use super::status::{self, ResourceRef};
use super::store::{api_version, ReadAt, StoreError};
use crate::kinds::{Kind, CILIUM_GROUP};
use crate::labels::Selector;

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

/// A read-modify-write step applied under the store lock.
type Edit = Box<dyn FnOnce(&Value) -> Result<Value, StoreError>>;

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

// ---- writes ----

fn parse_body(r: &ClientRequest) -> Result<Value, Refusal> {
    let v: Value = if r
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.contains("yaml"))
    {
        serde_saphyr::from_slice(&r.body)
            .map_err(|e| Box::new(status::bad_request(&format!("error decoding YAML: {e}"))))?
    } else {
        serde_json::from_slice(&r.body).map_err(|e| {
            Box::new(status::bad_request(&format!(
                "couldn't get version/kind; json parse error: {e}"
            )))
        })?
    };
    if !v.is_object() {
        return Err(Box::new(status::bad_request(
            "the body of the request is not an object",
        )));
    }
    Ok(v)
}

fn store_error(kind: Kind, name: &str, e: StoreError) -> Response<Body> {
    let r = res(kind);
    match e {
        StoreError::NotFound => status::not_found(r, name),
        StoreError::AlreadyExists => status::already_exists(r, name),
        StoreError::Conflict(m) => status::conflict(r, name, &m, false),
        StoreError::Precondition(m) => status::conflict(r, name, &m, true),
        StoreError::Invalid(m) => status::invalid(&m, r.details(name)),
        StoreError::Expired(_) => status::expired_list(),
    }
}

fn invalid_required(kind: Kind, name: &str, field: &str) -> StoreError {
    StoreError::Invalid(format!(
        "{}.{CILIUM_GROUP} {name:?} is invalid: {field}: Required value",
        kind.kind()
    ))
}

/// Schema checks the CRDs make that matter here.
fn validate(kind: Kind, name: &str, v: &Value) -> Result<(), StoreError> {
    if kind == Kind::Identity && !v.get("security-labels").is_some_and(Value::is_object) {
        return Err(invalid_required(kind, name, "security-labels"));
    }
    Ok(())
}

/// `POST` a new object.
pub(crate) fn create(
    app: &ServerState,
    kind: Kind,
    namespace: Option<&str>,
    r: &ClientRequest,
) -> Response<Body> {
    let mut v = match parse_body(r) {
        Ok(v) => v,
        Err(e) => return *e,
    };
    if kind == Kind::Endpoint && namespace.is_none() {
        return status::page_not_found();
    }
    let uid = uuid(&mut *app.rng.lock().unwrap_or_else(|e| e.into_inner()));
    let meta = v["metadata"].as_object().cloned().unwrap_or_default();
    let name = match meta.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_owned(),
        _ => match meta.get("generateName").and_then(Value::as_str) {
            Some(g) => format!("{g}{}", &uid[..5]),
            None => {
                return status::invalid(
                    &format!("{}.{CILIUM_GROUP} \"\" is invalid: metadata.name: Required value: name or generateName is required", kind.kind()),
                    json!({"group": CILIUM_GROUP, "kind": kind.kind()}),
                )
            }
        },
    };
    if let (Some(ns), Some(body_ns)) = (namespace, meta.get("namespace").and_then(Value::as_str)) {
        if ns != body_ns {
            return status::bad_request("the namespace of the provided object does not match the namespace sent on the request");
        }
    }
    v["apiVersion"] = json!(api_version(kind));
    v["kind"] = json!(kind.kind());
    let m = v["metadata"].as_object_mut().expect("object");
    for k in [
        "resourceVersion",
        "managedFields",
        "deletionTimestamp",
        "generation",
    ] {
        m.remove(k);
    }
    m.insert("name".into(), json!(name));
    if let Some(ns) = namespace {
        m.insert("namespace".into(), json!(ns));
    }
    m.insert("uid".into(), json!(uid));
    m.insert(
        "creationTimestamp".into(),
        json!(rfc3339_secs(app.clock.now())),
    );
    if let Err(e) = validate(kind, &name, &v) {
        return store_error(kind, &name, e);
    }
    let writer = Writer::client(r.manager());
    match app.store.create(
        kind,
        &key_of(kind, namespace, &name),
        v,
        &writer,
        app.clock.now(),
        r.dry_run(),
    ) {
        Ok(o) => status::bytes_response(201, o.bytes.to_vec()),
        Err(e) => store_error(kind, &name, e),
    }
}

fn rv_of(v: &Value) -> Option<&str> {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

/// `PUT` a whole object; needs a current `metadata.resourceVersion` (§4).
pub(crate) fn update(
    app: &ServerState,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
    r: &ClientRequest,
) -> Response<Body> {
    let body = match parse_body(r) {
        Ok(v) => v,
        Err(e) => return *e,
    };
    if body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_some_and(|n| n != name)
    {
        return status::bad_request("the name of the object does not match the name on the URL");
    }
    let qualified = res(kind).qualified();
    let writer = Writer::client(r.manager());
    let result = app.store.modify(kind, &key_of(kind, namespace, name), &writer, app.clock.now(), r.dry_run(), |cur| {
        let Some(want) = rv_of(&body).filter(|s| !s.is_empty()) else {
            return Err(StoreError::Invalid(format!(
                "{qualified} {name:?} is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
            )));
        };
        let body_uid = body.pointer("/metadata/uid").and_then(Value::as_str);
        let cur_uid = cur.pointer("/metadata/uid").and_then(Value::as_str);
        if Some(want) != rv_of(cur) || body_uid.is_some_and(|u| Some(u) != cur_uid) {
            return Err(StoreError::Conflict(status::modified_message(res(kind), name)));
        }
        let mut new = body.clone();
        new["apiVersion"] = json!(api_version(kind));
        new["kind"] = json!(kind.kind());
        new["metadata"]["name"] = json!(name);
        if let Some(ns) = namespace {
            new["metadata"]["namespace"] = json!(ns);
        }
        validate(kind, name, &new)?;
        Ok(new)
    });
    match result {
        Ok(o) => status::bytes_response(200, o.bytes.to_vec()),
        Err(e) => store_error(kind, name, e),
    }
}

/// `PATCH` an object: merge, JSON or apply patches; strategic merge is 415 for CRs (§4).
pub(crate) fn patch(
    app: &ServerState,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
    r: &ClientRequest,
) -> Response<Body> {
    let ct = r
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    let mut writer = Writer::client(r.manager());
    let op = match patch_edit(kind, name, &ct, r, &mut writer) {
        Ok(op) => op,
        Err(resp) => return *resp,
    };
    let result = app.store.modify(
        kind,
        &key_of(kind, namespace, name),
        &writer,
        app.clock.now(),
        r.dry_run(),
        |cur| {
            let mut new = op(cur)?;
            new["metadata"]["name"] = json!(name);
            new["apiVersion"] = json!(api_version(kind));
            new["kind"] = json!(kind.kind());
            validate(kind, name, &new)?;
            Ok(new)
        },
    );
    match result {
        Ok(o) => status::bytes_response(200, o.bytes.to_vec()),
        Err(StoreError::Invalid(m)) if m.starts_with("the server rejected") => {
            status::invalid(&m, json!({}))
        }
        Err(e) => store_error(kind, name, e),
    }
}

/// The edit a PATCH body asks for, by content type (merge, apply, JSON
/// patch), or the apiserver's answer to a patch it cannot take. An apply
/// patch is recorded as an `Apply` by its field manager.
fn patch_edit(
    kind: Kind,
    name: &str,
    ct: &str,
    r: &ClientRequest,
    writer: &mut Writer,
) -> Result<Edit, Box<Response<Body>>> {
    match ct {
        "application/merge-patch+json" | "application/apply-patch+yaml" => {
            let apply = ct.ends_with("yaml");
            if apply {
                if !r.query.contains_key("fieldManager") {
                    return Err(Box::new(status::invalid(
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                        json!({"group":"meta.k8s.io","kind":"PatchOptions"}),
                    )));
                }
                writer.operation = "Apply";
            }
            let p: Value = match if apply {
                serde_saphyr::from_slice(&r.body).map_err(|e| e.to_string())
            } else {
                serde_json::from_slice(&r.body).map_err(|e| e.to_string())
            } {
                Ok(p) => p,
                Err(e) => {
                    return Err(Box::new(status::bad_request(&format!(
                        "error decoding patch: {e}"
                    ))))
                }
            };
            let modified = status::modified_message(res(kind), name);
            Ok(Box::new(move |cur: &Value| {
                if let Some(want) = rv_of(&p) {
                    if Some(want) != rv_of(cur) {
                        return Err(StoreError::Conflict(modified));
                    }
                }
                let mut new = cur.clone();
                json_patch::merge(&mut new, &p);
                Ok(new)
            }))
        }
        "application/json-patch+json" => {
            let p: json_patch::Patch = match serde_json::from_slice(&r.body) {
                Ok(p) => p,
                Err(e) => {
                    return Err(Box::new(status::bad_request(&format!(
                        "error decoding patch: {e}"
                    ))))
                }
            };
            Ok(Box::new(move |cur: &Value| {
                let mut new = cur.clone();
                json_patch::patch(&mut new, &p).map_err(|_| {
                    StoreError::Invalid(
                        "the server rejected our request due to an error in our request".into(),
                    )
                })?;
                Ok(new)
            }))
        }
        _ => Err(Box::new(status::unsupported_patch())),
    }
}

/// The parts of `DeleteOptions` we honour.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DeleteOptions {
    #[serde(default)]
    preconditions: Option<Preconditions>,
    #[serde(default)]
    propagation_policy: Option<String>,
    #[serde(default)]
    orphan_dependents: Option<bool>,
    #[serde(default)]
    dry_run: Vec<String>,
}
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
}

/// Options from the body when it is non-empty, else from the query (§3).
fn delete_options(r: &ClientRequest) -> Result<DeleteOptions, Refusal> {
    if !r.body.iter().all(u8::is_ascii_whitespace) {
        return serde_json::from_slice(&r.body).map_err(|e| {
            Box::new(status::bad_request(&format!(
                "error decoding DeleteOptions: {e}"
            )))
        });
    }
    Ok(DeleteOptions {
        propagation_policy: r.query.get("propagationPolicy").cloned(),
        dry_run: r.query.get("dryRun").cloned().into_iter().collect(),
        orphan_dependents: r.query.get("orphanDependents").map(|v| v == "true"),
        preconditions: None,
    })
}

fn validate_delete(o: &DeleteOptions) -> Result<(), Refusal> {
    let bad = |field: &str, msg: String| {
        Box::new(status::invalid(
            &format!("DeleteOptions.meta.k8s.io \"\" is invalid: {field}: {msg}"),
            json!({"group":"meta.k8s.io","kind":"DeleteOptions","causes":[{"reason":"FieldValueNotSupported","message":msg,"field":field}]}),
        ))
    };
    if let Some(p) = &o.propagation_policy {
        if !matches!(p.as_str(), "Foreground" | "Background" | "Orphan") {
            return Err(bad("propagationPolicy", format!("Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\"")));
        }
        if o.orphan_dependents.is_some() {
            return Err(bad(
                "propagationPolicy",
                "Invalid value: ...: orphanDependents and deletionPropagation cannot be both set"
                    .into(),
            ));
        }
    }
    if let Some(d) = o.dry_run.iter().find(|d| *d != "All") {
        return Err(bad(
            "dryRun",
            format!("Unsupported value: {d:?}: supported values: \"All\""),
        ));
    }
    Ok(())
}

/// `DELETE` one object, honouring preconditions and dry run; identity
/// deletes go to the ledger.
pub(crate) fn delete(
    app: &ServerState,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
    r: &ClientRequest,
) -> Response<Body> {
    let opts = match delete_options(r) {
        Ok(o) => o,
        Err(e) => return *e,
    };
    if let Err(e) = validate_delete(&opts) {
        return *e;
    }
    let dry_run = !opts.dry_run.is_empty();
    let pre = opts.preconditions.unwrap_or_default();
    let has_pre = pre.uid.is_some() || pre.resource_version.is_some();
    let subject = format!(
        "Operation cannot be fulfilled on {}.{CILIUM_GROUP} {name:?}",
        kind.kind()
    );
    let writer = Writer::client(r.manager());
    let result = app.store.delete(kind, &key_of(kind, namespace, name), &writer, dry_run, |cur| {
        if let Some(uid) = pre.uid.as_deref().filter(|u| *u != &*cur.uid) {
            return Err(StoreError::Precondition(format!(
                "{subject}: the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                cur.uid
            )));
        }
        if let Some(rv) = pre.resource_version.as_deref().filter(|rv| *rv != cur.rv.to_string()) {
            return Err(StoreError::Precondition(format!(
                "{subject}: the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                cur.rv
            )));
        }
        Ok(())
    });
    match result {
        Ok(d) => {
            if kind == Kind::Identity && !dry_run {
                app.ledger.delete(IdentityDelete {
                    name: name.to_owned(),
                    time: app.clock.now(),
                    referenced: d.referenced,
                    actor_changed_since_read: d.actor_changed_since_read,
                    preconditions: has_pre,
                    user_agent: r.user_agent.clone(),
                });
            }
            status::delete_success(res(kind), name, &d.obj.uid)
        }
        Err(e) => store_error(kind, name, e),
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
