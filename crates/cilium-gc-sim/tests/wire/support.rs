//! What every wire test shares: clients, raw requests, timeouts, and the
//! tools they may need.

pub(crate) use std::path::Path;
pub(crate) use std::time::Duration;

pub(crate) use cilium_gc_sim::Kind;
pub(crate) use cilium_gc_sim::{ActorRates, Denial, Faults, Scenario, Simulator, ThrottleShape};
pub(crate) use futures::{StreamExt, TryStreamExt};
pub(crate) use http::{HeaderMap, Method, Request, StatusCode};
pub(crate) use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
pub(crate) use kube::config::{KubeConfigOptions, Kubeconfig};
pub(crate) use kube::runtime::watcher;
pub(crate) use kube::{Client, Config};
pub(crate) use serde_json::{json, Value};

pub(crate) const IDS: &str = "/apis/cilium.io/v2/ciliumidentities";
pub(crate) const LIMIT: Duration = Duration::from_secs(60);

pub(crate) use cilium_gc_testkit::in_ci;

/// Fail, showing stderr, unless the command succeeded.
pub(crate) fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run a test body with a timeout so a hung server fails instead of hanging.
pub(crate) async fn timed<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test timed out");
}

/// The small preset with actors off (tests turn on what they need).
pub(crate) fn quiet(name: &str) -> Scenario {
    Scenario {
        actors: ActorRates::default(),
        ..Scenario::preset(name).expect("preset")
    }
}

pub(crate) async fn client_from_yaml(yaml: &str) -> Client {
    let kc = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    cfg.default_retry = false;
    Client::try_from(cfg).expect("client")
}

pub(crate) async fn client(sim: &Simulator) -> Client {
    client_from_yaml(&sim.kubeconfig_yaml()).await
}

pub(crate) struct Resp {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Resp {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

pub(crate) async fn raw(
    c: &Client,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Resp {
    let mut b = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let body = body.map(|v| v.to_string().into_bytes()).unwrap_or_default();
    if !body.is_empty()
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        b = b.header("content-type", "application/json");
    }
    let resp = c
        .send(b.body(kube::client::Body::from(body)).unwrap())
        .await
        .expect("send");
    let (parts, body) = resp.into_parts();
    let bytes = body.collect_bytes().await.expect("body");
    Resp {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub(crate) async fn get(c: &Client, path: &str) -> Resp {
    raw(c, Method::GET, path, &[], None).await
}

pub(crate) fn identity_api(c: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cilium.io", "v2", "CiliumIdentity"),
        "ciliumidentities",
    );
    Api::all_with(c.clone(), &ar)
}

pub(crate) fn decode_token(t: &str) -> Value {
    use base64::Engine;
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t)
        .expect("base64url");
    serde_json::from_slice(&b).expect("token json")
}

/// All pages of a list, following `continue`; returns (items, rv of each page).
pub(crate) async fn list_all(c: &Client, base: &str, limit: usize) -> (Vec<Value>, Vec<String>) {
    let (mut items, mut rvs) = (Vec::new(), Vec::new());
    let mut cont = String::new();
    loop {
        let sep = if base.contains('?') { '&' } else { '?' };
        let r = get(c, &format!("{base}{sep}limit={limit}&continue={cont}")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        items.extend(v["items"].as_array().unwrap().iter().cloned());
        rvs.push(
            v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        match v["metadata"]["continue"].as_str() {
            Some(t) => cont = t.to_owned(),
            None => return (items, rvs),
        }
    }
}

pub(crate) async fn r_get(c: &Client, path: &str) -> Value {
    get(c, path).await.json()
}
