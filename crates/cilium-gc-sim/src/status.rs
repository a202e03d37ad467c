//! Error and success bodies exactly as kube-apiserver writes them
//! (reference §0, §3, §5, §7), plus the non-JSON ones (`404 page not found`,
//! APF's plain-text 429).

use axum::body::Body;
use axum::http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};

/// Resource identity used in messages and `details`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResourceRef<'a> {
    /// API group (`cilium.io`, or `""` for core).
    pub group: &'a str,
    /// Plural resource.
    pub plural: &'a str,
    /// Kind (for the precondition message, which uses it).
    pub kind: &'a str,
}

impl ResourceRef<'_> {
    /// `ciliumidentities.cilium.io`, or `configmaps` for the core group.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `details` with name, group and the plural as kind.
    pub(crate) fn details(&self, name: &str) -> Value {
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !self.group.is_empty() {
            d.insert("group".into(), json!(self.group));
        }
        d.insert("kind".into(), json!(self.plural));
        Value::Object(d)
    }
}

/// A JSON response with status `code`.
pub(crate) fn json_response(code: u16, body: &Value) -> Response<Body> {
    bytes_response(code, serde_json::to_vec(body).unwrap_or_default())
}

/// A pre-serialized JSON response.
pub(crate) fn bytes_response(code: u16, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A failure `Status`; sets `Retry-After` when details carry
/// `retryAfterSeconds`, as `ErrorNegotiated` does.
pub(crate) fn failure(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<Value>,
) -> Response<Body> {
    let mut body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason,
    });
    let retry = details
        .as_ref()
        .and_then(|d| d.get("retryAfterSeconds"))
        .and_then(Value::as_u64);
    if let Some(d) = details {
        body["details"] = d;
    }
    body["code"] = json!(code);
    let mut r = json_response(code, &body);
    if let Some(secs) = retry.filter(|s| *s > 0) {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

/// `404 page not found` in text, for paths nothing serves (absent CRDs, scope mismatches).
pub(crate) fn page_not_found() -> Response<Body> {
    let mut r = Response::new(Body::from("404 page not found\n"));
    *r.status_mut() = StatusCode::NOT_FOUND;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// APF's rejection: plain text and `Retry-After`.
pub(crate) fn apf_throttled(retry_after: u64) -> Response<Body> {
    let mut r = Response::new(Body::from("Too many requests, please try again later.\n"));
    *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// `NewTooManyRequests`: a Status 429 with `retryAfterSeconds`.
pub(crate) fn too_many_requests(retry_after: u64) -> Response<Body> {
    failure(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
        Some(json!({"retryAfterSeconds": retry_after})),
    )
}

/// 401.
pub(crate) fn unauthorized() -> Response<Body> {
    failure(401, "Unauthorized", "Unauthorized", None)
}

/// 403 with the RBAC message shape of §7.
pub(crate) fn forbidden(
    res: ResourceRef,
    name: &str,
    namespace: Option<&str>,
    user: &str,
    verb: &str,
) -> Response<Body> {
    let subject = if name.is_empty() {
        res.qualified()
    } else {
        format!("{} {name:?}", res.qualified())
    };
    let scope = match namespace {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".to_owned(),
    };
    let msg = format!(
        "{subject} is forbidden: User {user:?} cannot {verb} resource {:?} in API group {:?} {scope}",
        res.plural, res.group
    );
    let mut r = failure(403, "Forbidden", &msg, Some(res.details(name)));
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// 404 NotFound for an object.
pub(crate) fn not_found(res: ResourceRef, name: &str) -> Response<Body> {
    failure(
        404,
        "NotFound",
        &format!("{} {name:?} not found", res.qualified()),
        Some(res.details(name)),
    )
}

/// 409 AlreadyExists.
pub(crate) fn already_exists(res: ResourceRef, name: &str) -> Response<Body> {
    failure(
        409,
        "AlreadyExists",
        &format!("{} {name:?} already exists", res.qualified()),
        Some(res.details(name)),
    )
}

/// The optimistic-lock message of a stale update (§4).
pub(crate) fn modified_message(res: ResourceRef, name: &str) -> String {
    format!(
        "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
        res.qualified()
    )
}

/// 409 Conflict with `message`. Precondition failures carry the Kind in
/// `details.kind` (they are built from the Kind, §3); others the plural.
pub(crate) fn conflict(
    res: ResourceRef,
    name: &str,
    message: &str,
    kind_in_details: bool,
) -> Response<Body> {
    let details = if kind_in_details {
        json!({"name": name, "group": res.group, "kind": res.kind})
    } else {
        res.details(name)
    };
    failure(409, "Conflict", message, Some(details))
}

/// 422 Invalid.
pub(crate) fn invalid(message: &str, details: Value) -> Response<Body> {
    failure(422, "Invalid", message, Some(details))
}

/// 400 BadRequest.
pub(crate) fn bad_request(message: &str) -> Response<Body> {
    failure(400, "BadRequest", message, None)
}

/// 405 MethodNotAllowed.
pub(crate) fn method_not_allowed() -> Response<Body> {
    failure(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        None,
    )
}

/// 415 for a patch type CRs do not support.
pub(crate) fn unsupported_patch() -> Response<Body> {
    failure(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        None,
    )
}

/// 410 Expired for a compacted continue token, carrying a token (rv -1)
/// for an inconsistent continuation when one can be made (§2).
pub(crate) fn expired_continue(new_token: Option<String>) -> Response<Body> {
    let (message, meta) = match new_token {
        Some(t) => (
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
            json!({"continue": t}),
        ),
        None => (
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
            json!({}),
        ),
    };
    let body = json!({"kind":"Status","apiVersion":"v1","metadata": meta,"status":"Failure","message":message,"reason":"Expired","code":410});
    json_response(410, &body)
}

/// 410 for a list at a compacted resourceVersion.
pub(crate) fn expired_list() -> Response<Body> {
    failure(
        410,
        "Expired",
        "The resourceVersion for the provided list is too old.",
        None,
    )
}

/// The Status object of a watch ERROR event for a too-old resourceVersion.
pub(crate) fn too_old_watch_status(asked: u64, oldest: u64) -> Value {
    json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
           "message": format!("too old resource version: {asked} ({oldest})"),
           "reason":"Expired","code":410})
}

/// 500 InternalError.
pub(crate) fn internal_error(err: &str) -> Response<Body> {
    failure(
        500,
        "InternalError",
        &format!("Internal error occurred: {err}"),
        Some(json!({"causes":[{"message": err}]})),
    )
}

/// 503 ServiceUnavailable.
pub(crate) fn service_unavailable() -> Response<Body> {
    failure(
        503,
        "ServiceUnavailable",
        "the request has been made before all known HTTP paths have been installed, please try again",
        Some(json!({"retryAfterSeconds": 5})),
    )
}

/// 504 Timeout.
pub(crate) fn gateway_timeout() -> Response<Body> {
    failure(
        504,
        "Timeout",
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
        None,
    )
}

/// The Success Status of an immediate delete; no `code` (§3).
pub(crate) fn delete_success(res: ResourceRef, name: &str, uid: &str) -> Response<Body> {
    let body = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",
        "details":{"name": name, "group": res.group, "kind": res.plural, "uid": uid}});
    json_response(200, &body)
}
