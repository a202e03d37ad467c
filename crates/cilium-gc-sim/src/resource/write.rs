//! Writes to Cilium resources: create, update, patch and delete, with the
//! API server's validation, preconditions and status codes (reference
//! §3–§4). Reads are in `read`.

use axum::body::Body;
use axum::http::{header, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use super::keys::{key_of, res, Refusal};
use crate::kinds::{api_version, Kind, CILIUM_GROUP};
use crate::ledger::IdentityDelete;
use crate::object::{rfc3339_secs, uuid, Writer};
use crate::state::{ClientRequest, ServerState};
use crate::status;
use crate::store::StoreError;

/// A read-modify-write step applied under the store lock.
type Edit = Box<dyn FnOnce(&Value) -> Result<Value, StoreError>>;

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
) -> Result<Edit, Refusal> {
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
