//! The HTTP front: path parsing into a target, authentication, fault
//! injection, RBAC, the request log, and dispatch to discovery, resource
//! and watch handlers. One fallback handler does all the routing so
//! unknown paths answer `404 page not found` in text as a real server does.

use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::extract::State;
use axum::http::{header, HeaderValue, Method, Request, Response};
use axum::Router;

use super::body::{cut, MAX_BODY};
use super::faults::Rejection;
use super::ledger::RequestRecord;
use super::scenario::CrdSet;
use super::state::{ClientRequest, Query, ServerState};
use super::status::{self, ResourceRef};
use super::{discovery, resource, watch};
use crate::kinds::{Kind, CILIUM_GROUP};

/// The router: everything goes through [`handle`].
pub(crate) fn app(state: Arc<ServerState>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

/// What a path addresses.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    /// `/version`.
    Version,
    /// `/api`.
    Api,
    /// `/api/v1`.
    ApiV1,
    /// `/apis`.
    Apis,
    /// `/apis/<group>`.
    Group(String),
    /// `/apis/<group>/<version>`.
    GroupVersion(String, String),
    /// CRDs, one or all.
    Crd(Option<String>),
    /// SelfSubjectAccessReview.
    AccessReview,
    /// A ConfigMap in a namespace.
    ConfigMap(String, String),
    /// Deployments, DaemonSets or Pods of a namespace (one, or the list).
    Workload {
        /// Namespace in the path.
        namespace: String,
        /// `deployments`, `daemonsets` or `pods`.
        plural: &'static str,
        /// Object name, for object paths.
        name: Option<String>,
    },
    /// `pods/<name>:<port>/proxy/<path>`: the API server's proxy to a pod.
    PodProxy {
        /// Namespace in the path.
        namespace: String,
        /// `<name>` or `<name>:<port>`.
        pod: String,
        /// What follows `proxy`, with its leading slash.
        path: String,
    },
    /// A Cilium resource.
    Resource {
        /// Which.
        kind: Kind,
        /// Namespace in the path.
        namespace: Option<String>,
        /// Object name, for object paths.
        name: Option<String>,
    },
    /// Nothing is served here.
    NotFound,
}

fn kind_of(version: &str, plural: &str, crds: &CrdSet) -> Option<Kind> {
    [Kind::Identity, Kind::Endpoint, Kind::EndpointSlice]
        .into_iter()
        .find(|k| k.plural() == plural && crds.serves(*k, version))
}

/// Parse a path (reference §8: scope mismatches are "page not found").
pub(crate) fn parse_target(path: &str, crds: &CrdSet) -> Target {
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    match segs.as_slice() {
        ["version"] => Target::Version,
        ["api"] => Target::Api,
        ["api", "v1"] => Target::ApiV1,
        ["api", "v1", "namespaces", ns, "configmaps", name] => {
            Target::ConfigMap((*ns).into(), (*name).into())
        }
        ["api", "v1", "namespaces", ns, "pods", pod, "proxy", rest @ ..] => Target::PodProxy {
            namespace: (*ns).into(),
            pod: (*pod).into(),
            path: format!("/{}", rest.join("/")),
        },
        ["api", "v1", "namespaces", ns, "pods", rest @ ..] if rest.len() <= 1 => Target::Workload {
            namespace: (*ns).into(),
            plural: "pods",
            name: rest.first().map(|n| (*n).into()),
        },
        ["apis", "apps", "v1", "namespaces", ns, kind @ ("deployments" | "daemonsets"), rest @ ..]
            if rest.len() <= 1 =>
        {
            Target::Workload {
                namespace: (*ns).into(),
                plural: if *kind == "deployments" {
                    "deployments"
                } else {
                    "daemonsets"
                },
                name: rest.first().map(|n| (*n).into()),
            }
        }
        ["apis"] => Target::Apis,
        ["apis", g] => Target::Group((*g).into()),
        ["apis", "apiextensions.k8s.io", "v1", "customresourcedefinitions"] => Target::Crd(None),
        ["apis", "apiextensions.k8s.io", "v1", "customresourcedefinitions", n] => {
            Target::Crd(Some((*n).into()))
        }
        ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"] => Target::AccessReview,
        ["apis", g, v] => Target::GroupVersion((*g).into(), (*v).into()),
        ["apis", CILIUM_GROUP, v, rest @ ..] => cilium_target(v, rest, crds),
        _ => Target::NotFound,
    }
}

fn cilium_target(version: &str, rest: &[&str], crds: &CrdSet) -> Target {
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
        _ => (None, rest),
    };
    let (plural, name) = match rest {
        [p] => (*p, None),
        [p, n] => (*p, Some((*n).to_owned())),
        _ => return Target::NotFound,
    };
    let Some(kind) = kind_of(version, plural, crds) else {
        return Target::NotFound;
    };
    let namespaced = kind == Kind::Endpoint;
    let ok = match (namespaced, &namespace, &name) {
        (false, None, _) => true,
        (false, Some(_), _) => false,
        (true, Some(_), _) => true,
        (true, None, None) => true,
        (true, None, Some(_)) => false,
    };
    if !ok {
        return Target::NotFound;
    }
    Target::Resource {
        kind,
        namespace,
        name,
    }
}

fn parse_query(q: Option<&str>) -> Query {
    q.map(|q| {
        q.split('&')
            .filter(|s| !s.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (pct_decode(k), pct_decode(v))
            })
            .collect()
    })
    .unwrap_or_default()
}

/// Percent-decoding (and `+` as space) of a query component.
pub(crate) fn pct_decode(s: &str) -> String {
    let plus_as_space = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus_as_space)
        .decode_utf8_lossy()
        .into_owned()
}

/// Is this a watch request (`watch=true` or `watch=1`)?
pub(crate) fn is_watch(q: &Query) -> bool {
    matches!(q.get("watch").map(String::as_str), Some("true" | "1"))
}

/// The Kubernetes verb of a request (reference §0).
pub(crate) fn verb_of(method: &Method, target: &Target, q: &Query) -> &'static str {
    let named = match target {
        Target::Resource { name, .. } => name.is_some(),
        Target::Crd(n) => n.is_some(),
        Target::ConfigMap(..) => true,
        Target::Workload { name, .. } => name.is_some(),
        Target::PodProxy { .. } => true,
        _ => {
            return if *method == Method::POST {
                "create"
            } else {
                "get"
            }
        }
    };
    match (method.as_str(), named) {
        ("GET", false) if is_watch(q) => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

async fn handle(State(app): State<Arc<ServerState>>, req: Request<Body>) -> Response<Body> {
    let time = app.clock.now();
    let (parts, body) = req.into_parts();
    let body = to_bytes(body, MAX_BODY).await.unwrap_or_default();
    let query = parse_query(parts.uri.query());
    let target = parse_target(parts.uri.path(), &app.crds);
    let verb = verb_of(&parts.method, &target, &query);
    let user_agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let r = ClientRequest {
        method: parts.method.clone(),
        headers: parts.headers,
        query,
        body,
        user_agent,
    };
    let mut resp = serve(&app, &r, &target, verb).await;
    let retry_after = resp
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse().ok());
    app.ledger.request(RequestRecord {
        time,
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        verb: verb.to_owned(),
        status: resp.status().as_u16(),
        retry_after,
    });
    if app.faults.get().omit_date_header {
        return resp;
    }
    if let Ok(d) = HeaderValue::from_str(
        &app.clock
            .now()
            .strftime("%a, %d %b %Y %H:%M:%S GMT")
            .to_string(),
    ) {
        resp.headers_mut().insert(header::DATE, d);
    }
    resp
}

fn authenticated(app: &ServerState, r: &ClientRequest) -> bool {
    r.headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t.trim() == app.token)
}

async fn serve(
    app: &Arc<ServerState>,
    r: &ClientRequest,
    target: &Target,
    verb: &'static str,
) -> Response<Body> {
    if !authenticated(app, r) {
        return status::unauthorized();
    }
    let Target::Resource {
        kind,
        namespace,
        name,
    } = target
    else {
        return serve_other(app, r, target, verb);
    };
    let endpoint_read =
        matches!(kind, Kind::Endpoint | Kind::EndpointSlice) && matches!(verb, "list" | "watch");
    let verdict = app.faults.judge(
        verb,
        endpoint_read,
        r.query.get("continue").is_some_and(|c| !c.is_empty()),
    );
    if let Some(d) = verdict.delay {
        tokio::time::sleep(d).await;
    }
    if let Some(rej) = verdict.reject.filter(|_| !verdict.after_commit) {
        return rejection(rej);
    }
    // A limited number of deletes at once (APF seats, `Reject`): held
    // from here until the delete is answered.
    let _seat = if verb == "delete" {
        match app.faults.take_seat() {
            Err(retry_after) => return rejection(Rejection::ThrottleApf(retry_after)),
            Ok(Some((seat, service))) => {
                tokio::time::sleep(service).await;
                Some(seat)
            }
            Ok(None) => None,
        }
    } else {
        None
    };
    let res = resource::res(*kind);
    if !app.allowed(verb, kind.plural()) {
        return status::forbidden(
            res,
            name.as_deref().unwrap_or(""),
            namespace.as_deref(),
            &app.user,
            verb,
        );
    }
    let resp = dispatch(
        app,
        r,
        *kind,
        namespace.as_deref(),
        name.as_deref(),
        verb,
        verdict.expire_continue,
    )
    .await;
    if let Some(rej) = verdict.reject {
        // The write is committed; the client only sees the error.
        return rejection(rej);
    }
    match verdict.reset {
        Some(mode) => cut(resp, mode).await,
        None => resp,
    }
}

/// The handler for `verb` on a Cilium resource, once the request is
/// authenticated, allowed and past the injected faults.
async fn dispatch(
    app: &Arc<ServerState>,
    r: &ClientRequest,
    kind: Kind,
    namespace: Option<&str>,
    name: Option<&str>,
    verb: &str,
    expire_continue: bool,
) -> Response<Body> {
    let name = name.unwrap_or("");
    match verb {
        "watch" => watch::watch(app.clone(), kind, namespace.map(str::to_owned), r),
        "list" => {
            let resp = resource::list(app, kind, namespace, r, expire_continue);
            app.chaos.tamper(kind, resp).await
        }
        "get" => resource::get(app, kind, namespace, name, r),
        "create" => resource::create(app, kind, namespace, r),
        "update" => resource::update(app, kind, namespace, name, r),
        "patch" => resource::patch(app, kind, namespace, name, r),
        "delete" => resource::delete(app, kind, namespace, name, r),
        _ => status::method_not_allowed(),
    }
}

fn serve_other(
    app: &ServerState,
    r: &ClientRequest,
    target: &Target,
    verb: &str,
) -> Response<Body> {
    let json = |v: Option<serde_json::Value>| {
        v.map_or_else(status::page_not_found, |v| status::json_response(200, &v))
    };
    let is_get = r.method == Method::GET;
    match target {
        Target::Version if is_get => json(Some(discovery::version())),
        Target::Api if is_get => json(Some(discovery::api_versions())),
        Target::ApiV1 if is_get => json(Some(discovery::core_v1())),
        Target::Apis if is_get => json(Some(discovery::api_groups(&app.crds))),
        Target::Group(g) if is_get => json(discovery::group(&app.crds, g)),
        Target::GroupVersion(g, v) if is_get => {
            json(discovery::group_version_resources(&app.crds, g, v))
        }
        Target::Crd(name) if is_get => discovery::crds(app, name.as_deref()),
        Target::AccessReview if r.method == Method::POST => discovery::access_review(app, &r.body),
        Target::ConfigMap(ns, name) if is_get => {
            let res = ResourceRef {
                group: "",
                plural: "configmaps",
                kind: "ConfigMap",
            };
            if !app.allowed(verb, "configmaps") {
                status::forbidden(res, name, Some(ns), &app.user, verb)
            } else if ns == "kube-system" && name == "cilium-config" {
                discovery::cilium_config(app)
            } else {
                status::not_found(res, name)
            }
        }
        Target::Workload {
            namespace,
            plural,
            name,
        } if is_get => super::workloads::serve(app, r, namespace, plural, name.as_deref(), verb),
        Target::PodProxy {
            namespace,
            pod,
            path,
        } if is_get => super::workloads::proxy(app, namespace, pod, path, verb),
        Target::NotFound => status::page_not_found(),
        _ => status::method_not_allowed(),
    }
}

fn rejection(r: Rejection) -> Response<Body> {
    match r {
        Rejection::ThrottleApf(s) => status::apf_throttled(s),
        Rejection::ThrottleStatus(s) => status::too_many_requests(s),
        Rejection::Internal => status::internal_error("etcdserver: request timed out"),
        Rejection::Unavailable => status::service_unavailable(),
        Rejection::Timeout => status::gateway_timeout(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_follow_scope_rules() {
        let all = CrdSet::ALL;
        assert_eq!(
            parse_target("/apis/cilium.io/v2/ciliumidentities/5", &all),
            Target::Resource {
                kind: Kind::Identity,
                namespace: None,
                name: Some("5".into())
            }
        );
        assert_eq!(
            parse_target("/apis/cilium.io/v2/namespaces/a/ciliumidentities", &all),
            Target::NotFound
        );
        assert_eq!(
            parse_target("/apis/cilium.io/v2/ciliumendpoints/x", &all),
            Target::NotFound
        );
        assert!(matches!(
            parse_target("/apis/cilium.io/v2/ciliumendpoints", &all),
            Target::Resource { .. }
        ));
        assert!(matches!(
            parse_target("/apis/cilium.io/v2alpha1/ciliumendpointslices", &all),
            Target::Resource { .. }
        ));
        let none = CrdSet {
            identities: false,
            ..all
        };
        assert_eq!(
            parse_target("/apis/cilium.io/v2/ciliumidentities", &none),
            Target::NotFound
        );
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(pct_decode("a%3Db%2Cc+d"), "a=b,c d");
        assert_eq!(pct_decode("100%"), "100%");
    }
}
