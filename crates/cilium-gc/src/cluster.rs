//! Talking to the API server: the client built like kubectl builds it, one
//! raw request path that every call goes through, and the server's clock.
//!
//! We send raw requests (not kube's typed `Api`) on the hot paths because the
//! decisions need what typed errors drop: the `Retry-After` header, plain-text
//! bodies (APF's 429, the not-found handler's 404) and the `Date` header.
//! kube's own retry layer is switched off (`default_retry = false`): every
//! retry is ours, so the report can count it.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;
use jiff::Timestamp;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::Deserialize;

use crate::retry::{classify, Backoff, Class};
use crate::settings::ConnectOptions;
use crate::stats::Stats;
pub use crate::watch_tap::WatchTap;
use crate::watch_tap::WatchTapLayer;

/// Failures to set up a connection. All are configuration errors (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig could not be read or used. Displayed through
    /// `crate::secrets::describe`, as an exec plugin's failure carries
    /// its env, arguments and output.
    #[error(
        "kubeconfig: {}{}",
        .path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default(),
        crate::secrets::describe(.source)
    )]
    Kubeconfig {
        /// The file given with `--kubeconfig`, if one was.
        path: Option<std::path::PathBuf>,
        /// Why it could not be read or used.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig and not inside a pod.
    #[error("no kubeconfig found ($KUBECONFIG, ~/.kube/config) and not running in a pod; pass --kubeconfig or --server")]
    NoConfig,
    /// A flag value is unusable.
    #[error("{flag}: {problem}")]
    Flag {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The HTTP client could not be built.
    /// (Displayed through `crate::secrets::describe`: kube's own text of
    /// an exec-plugin failure carries its env, arguments and output.)
    #[error("cannot build the Kubernetes client: {}", crate::secrets::describe(.0))]
    Client(#[source] kube::Error),
}

/// Where we are connected, for the report (never a credential).
#[derive(Debug, Clone, Default)]
pub struct Endpoint {
    /// API server URL.
    pub server: String,
    /// kubeconfig context, when one was used.
    pub context: Option<String>,
    /// Connection settings that weaken security (`--insecure-skip-tls-verify`,
    /// a bearer token over plain `http://`): said on stderr and in the report.
    pub warnings: Vec<String>,
    /// The per-request timeout (`None`: `--request-timeout 0`, no limit).
    pub timeout: Option<Duration>,
}

/// Per-request timeout when `--request-timeout` is not given: long enough
/// for a 500-item page from a loaded server, short enough that a request
/// nobody answers is retried (and the run ends) instead of hanging it.
/// Single requests only: watch streams are long-lived by design and are
/// guarded by kube-runtime's idle timeout (server timeout + 5 s) instead.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The limit on one request: `--request-timeout` (`0` = none, as kubectl's),
/// else `DEFAULT_REQUEST_TIMEOUT`.
pub fn request_timeout(flag: Option<Duration>) -> Option<Duration> {
    match flag {
        Some(t) if t.is_zero() => None,
        Some(t) => Some(t),
        None => Some(DEFAULT_REQUEST_TIMEOUT),
    }
}

/// Build the client config from kubectl-style flags.
pub(crate) async fn load_config(args: &ConnectOptions) -> Result<(Config, Endpoint), ConnectError> {
    let opts = KubeConfigOptions {
        context: args.context.clone(),
        cluster: args.cluster.clone(),
        user: args.user.clone(),
    };
    let kubeconfig = match &args.kubeconfig {
        Some(path) => {
            Some(
                Kubeconfig::read_from(path).map_err(|source| ConnectError::Kubeconfig {
                    path: Some(path.clone()),
                    source,
                })?,
            )
        }
        None => match Kubeconfig::read() {
            Ok(k) => Some(k),
            Err(e) if kubeconfig_missing() => {
                tracing::debug!("no kubeconfig: {e}");
                None
            }
            Err(source) => return Err(ConnectError::Kubeconfig { path: None, source }),
        },
    };
    let mut kubeconfig_proxy = None;
    let (mut config, context) = match kubeconfig {
        Some(k) => {
            let context = args.context.clone().or_else(|| k.current_context.clone());
            kubeconfig_proxy = cluster_proxy_url(&k, args, context.as_deref());
            let config = Config::from_custom_kubeconfig(k, &opts)
                .await
                .map_err(|source| ConnectError::Kubeconfig { path: None, source })?;
            (config, context)
        }
        None if args.server.is_some() => {
            let url = parse_server(args.server.as_deref().unwrap_or_default())?;
            (Config::new(url), None)
        }
        None => match Config::incluster() {
            Ok(c) => (c, None),
            Err(_) => return Err(ConnectError::NoConfig),
        },
    };
    apply_overrides(&mut config, args)?;
    config.proxy_url = resolve_proxy(kubeconfig_proxy.as_deref(), &config.cluster_url, &|k| {
        std::env::var(k).ok()
    })?;
    register_credentials(&config);
    // A CronJob or CI has no one to answer a plugin's prompt, and an
    // interactive plugin writes its stderr straight to ours: capture it.
    if !std::io::stdin().is_terminal() {
        if let Some(exec) = config.auth_info.exec.as_mut() {
            exec.interactive_mode = Some(kube::config::ExecInteractiveMode::Never);
        }
    }
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let mut warnings = Vec::new();
    if config.accept_invalid_certs {
        warnings.push(format!(
            "TLS certificate verification is disabled for {server} (--insecure-skip-tls-verify or the kubeconfig): the connection can be intercepted"
        ));
    }
    if config.cluster_url.scheme_str() == Some("http") && sends_bearer(&config) {
        warnings.push(format!(
            "a bearer token is sent over plain http:// to {server}: anyone on the path can read it"
        ));
    }
    let timeout = request_timeout(args.request_timeout);
    let endpoint = Endpoint {
        server,
        context,
        warnings,
        timeout,
    };
    Ok((config, endpoint))
}

/// Whether requests will carry a bearer token (static, file, exec or
/// auth-provider).
fn sends_bearer(config: &Config) -> bool {
    let a = &config.auth_info;
    a.token.is_some() || a.token_file.is_some() || a.exec.is_some() || a.auth_provider.is_some()
}

/// Remember every credential the config carries, so no message can repeat
/// one (see [`crate::secrets`]).
fn register_credentials(config: &Config) {
    use secrecy::ExposeSecret;
    let a = &config.auth_info;
    for s in [&a.token, &a.password, &a.client_key_data]
        .into_iter()
        .flatten()
    {
        crate::secrets::register(s.expose_secret());
    }
    if let Some(exec) = &a.exec {
        if let Some(c) = &exec.command {
            crate::secrets::set_exec_program(c);
        }
        for arg in exec.args.iter().flatten() {
            crate::secrets::register(arg);
        }
        for env in exec.env.iter().flatten() {
            if let Some(v) = env.get("value") {
                crate::secrets::register(v);
            }
        }
    }
    if let Some(p) = &a.auth_provider {
        for v in p.config.values() {
            crate::secrets::register(v);
        }
    }
}

/// The `proxy-url` of the kubeconfig cluster the flags select.
fn cluster_proxy_url(
    k: &Kubeconfig,
    args: &ConnectOptions,
    context: Option<&str>,
) -> Option<String> {
    let cluster = match &args.cluster {
        Some(c) => c.clone(),
        None => {
            let ctx = k
                .contexts
                .iter()
                .find(|c| Some(c.name.as_str()) == context)?;
            ctx.context.as_ref()?.cluster.clone()
        }
    };
    k.clusters
        .iter()
        .find(|c| c.name == cluster)?
        .cluster
        .as_ref()?
        .proxy_url
        .clone()
        .filter(|p| !p.trim().is_empty())
}

/// The proxy to use, as kubectl chooses it: the kubeconfig cluster's
/// `proxy-url` when set; else `HTTPS_PROXY` (`HTTP_PROXY` for an
/// `http://` server), unless `NO_PROXY` names the server. (kube itself
/// checks `NO_PROXY` against the proxy's address, not the server's, and
/// ignores the environment with `--server`; so we choose here.)
pub(crate) fn resolve_proxy(
    kubeconfig_proxy: Option<&str>,
    server: &http::Uri,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<http::Uri>, ConnectError> {
    let parse = |what: &'static str, raw: &str| -> Result<http::Uri, ConnectError> {
        let uri: http::Uri = raw.trim().parse().map_err(|e| ConnectError::Flag {
            flag: what,
            problem: format!("{raw:?} is not a URL: {e}"),
        })?;
        match uri.scheme_str() {
            Some("http" | "https" | "socks5") if uri.host().is_some() => Ok(uri),
            _ => Err(ConnectError::Flag {
                flag: what,
                problem: format!(
                    "{raw:?}: only http://, https:// and socks5:// proxies are supported"
                ),
            }),
        }
    };
    if let Some(p) = kubeconfig_proxy {
        return parse("kubeconfig proxy-url", p).map(Some);
    }
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| env(n).filter(|v| !v.trim().is_empty()))
    };
    let proxy = if server.scheme_str() == Some("http") {
        var(&["HTTP_PROXY", "http_proxy"])
    } else {
        var(&["HTTPS_PROXY", "https_proxy"])
    };
    let Some(proxy) = proxy else { return Ok(None) };
    if let Some(no) = var(&["NO_PROXY", "no_proxy"]) {
        if no_proxy_matches(&no, server) {
            return Ok(None);
        }
    }
    parse("HTTPS_PROXY", &proxy).map(Some)
}

/// Whether `NO_PROXY` (comma-separated: `*`, host names with or without a
/// leading dot matching subdomains, IP addresses, IPv4/IPv6 CIDRs, each
/// optionally with `:port`) covers `server`.
pub(crate) fn no_proxy_matches(no_proxy: &str, server: &http::Uri) -> bool {
    let Some(host) = server.host() else {
        return false;
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = server
        .port_u16()
        .unwrap_or(if server.scheme_str() == Some("http") {
            80
        } else {
            443
        });
    let ip: Option<std::net::IpAddr> = host.parse().ok();
    no_proxy
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            if let Some((net, bits)) = entry.split_once('/') {
                return match (ip, net.parse::<std::net::IpAddr>(), bits.parse::<u32>()) {
                    (Some(ip), Ok(net), Ok(bits)) => in_cidr(ip, net, bits),
                    _ => false,
                };
            }
            let (name, want_port) = match entry.rsplit_once(':') {
                Some((n, p)) if !n.contains(':') || n.ends_with(']') => (n, p.parse::<u16>().ok()),
                _ => (entry, None),
            };
            if want_port.is_some_and(|p| p != port) {
                return false;
            }
            let name = name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase();
            if let (Some(ip), Ok(n)) = (ip, name.parse::<std::net::IpAddr>()) {
                return ip == n;
            }
            let bare = name.trim_start_matches("*.").trim_start_matches('.');
            host == bare || host.ends_with(&format!(".{bare}"))
        })
}

fn in_cidr(ip: std::net::IpAddr, net: std::net::IpAddr, bits: u32) -> bool {
    use std::net::IpAddr::{V4, V6};
    match (ip, net) {
        (V4(a), V4(b)) if bits <= 32 => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(b) & mask
        }
        (V6(a), V6(b)) if bits <= 128 => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

fn kubeconfig_missing() -> bool {
    if let Some(paths) = std::env::var_os("KUBECONFIG") {
        return std::env::split_paths(&paths).all(|p| !p.exists());
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    !home.join(".kube").join("config").exists()
}

fn parse_server(s: &str) -> Result<http::Uri, ConnectError> {
    let with_scheme = if s.contains("://") {
        s.to_owned()
    } else {
        format!("https://{s}")
    };
    with_scheme.parse().map_err(|e| ConnectError::Flag {
        flag: "--server",
        problem: format!("{s:?} is not a URL: {e}"),
    })
}

/// Flags win over the kubeconfig, as in kubectl.
fn apply_overrides(config: &mut Config, args: &ConnectOptions) -> Result<(), ConnectError> {
    if let Some(s) = &args.server {
        config.cluster_url = parse_server(s)?;
    }
    if let Some(t) = &args.token {
        // As kubectl: --token replaces every kubeconfig credential, keeping
        // only impersonation.
        let a = &mut config.auth_info;
        *a = kube::config::AuthInfo {
            token: Some(t.clone().into()),
            impersonate: a.impersonate.take(),
            impersonate_uid: a.impersonate_uid.take(),
            impersonate_groups: a.impersonate_groups.take(),
            ..Default::default()
        };
    }
    if let Some(ca) = &args.certificate_authority {
        let pem = std::fs::read(ca).map_err(|e| ConnectError::Flag {
            flag: "--certificate-authority",
            problem: format!("{}: {e}", ca.display()),
        })?;
        config.root_cert = Some(pem_certs(&pem).map_err(|problem| ConnectError::Flag {
            flag: "--certificate-authority",
            problem: format!("{}: {problem}", ca.display()),
        })?);
        config.root_cert_file = None;
    }
    if args.insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
    }
    if let Some(n) = &args.tls_server_name {
        config.tls_server_name = Some(n.clone());
    }
    if let Some(u) = &args.as_user {
        config.auth_info.impersonate = Some(u.clone());
    }
    if !args.as_group.is_empty() {
        if args.as_user.is_none() && config.auth_info.impersonate.is_none() {
            return Err(ConnectError::Flag {
                flag: "--as-group",
                problem: "requires --as (impersonating groups needs a user)".into(),
            });
        }
        config.auth_info.impersonate_groups = Some(args.as_group.clone());
    }
    // `--request-timeout` is applied by `Api` around single requests, never
    // as the client's read timeout: that would cut every watch quiet for
    // longer (no event, no bookmark) and make the usage watchers re-list.
    // We own retries: every 429/503/504 is counted and honours Retry-After.
    config.default_retry = false;
    Ok(())
}

/// DER certificates from a PEM bundle (rustls-pki-types' PEM reader).
fn pem_certs(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|der| der.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate bundle: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate found".into());
    }
    Ok(certs)
}

/// The whole cause chain on one line, with no credential in it (see
/// `crate::secrets::describe`).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    crate::secrets::describe(e)
}

/// The server's clock, learned from `Date` headers. Heartbeat marks are
/// written with the operator's clock, which tracks the cluster's, not this
/// laptop's: judging their age by the server's `Date` keeps a skewed client
/// from deleting too early. `Date` has one-second resolution and is
/// truncated, so the estimate errs towards "younger", the safe side.
///
/// So with a server 2 h ahead, a mark 40 min old by the server is collected
/// (our clock would call it 80 min in the future); with a server 2 h behind,
/// a mark 10 min old by the server is kept (our clock would call it over 2 h
/// old). Tests: `chaos_server_clock_two_hours_*`; see `docs/reliability.md`.
#[derive(Debug, Default)]
pub struct ServerClock {
    /// server minus local, in milliseconds; `i64::MIN` until first seen.
    offset_ms: AtomicI64,
    /// An answer came without a usable `Date` header.
    missing_date: AtomicBool,
}

impl ServerClock {
    /// A clock that has not yet seen the server.
    pub fn new() -> Self {
        ServerClock {
            offset_ms: AtomicI64::new(i64::MIN),
            missing_date: AtomicBool::new(false),
        }
    }
    /// Record that an answer had no (parseable) `Date` header.
    pub(crate) fn observe_missing(&self) {
        self.missing_date.store(true, Ordering::Relaxed);
    }
    /// Whether mark ages were (at least partly) judged by the local clock,
    /// because the server sent no usable `Date`: the report says so.
    pub fn local_clock_used(&self) -> bool {
        self.missing_date.load(Ordering::Relaxed)
            || self.offset_ms.load(Ordering::Relaxed) == i64::MIN
    }
    /// Record a `Date` header observed at local time `local`.
    pub(crate) fn observe(&self, date_header: &str, local: Timestamp) {
        match parse_http_date(date_header) {
            Some(server) => {
                let off = server.as_millisecond() - local.as_millisecond();
                self.offset_ms.store(off, Ordering::Relaxed);
            }
            None => self.observe_missing(),
        }
    }
    /// Server time now (local time until a `Date` was seen).
    pub fn now(&self) -> Timestamp {
        let local = Timestamp::now();
        match self.offset_ms.load(Ordering::Relaxed) {
            i64::MIN => local,
            off => local
                .checked_add(jiff::SignedDuration::from_millis(off))
                .unwrap_or(local),
        }
    }
    /// Observed skew (server minus local), if known.
    pub fn skew(&self) -> Option<Duration> {
        match self.offset_ms.load(Ordering::Relaxed) {
            i64::MIN => None,
            off => Some(Duration::from_millis(off.unsigned_abs())),
        }
    }
}

/// Parse an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub(crate) fn parse_http_date(s: &str) -> Option<Timestamp> {
    jiff::fmt::rfc2822::parse(s.trim())
        .ok()
        .map(|z| z.timestamp())
}

/// The parts of a `Status` body we use.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusBody {
    /// Human message.
    #[serde(default)]
    pub message: String,
    /// `details`.
    #[serde(default)]
    pub details: Option<StatusDetails>,
    /// `metadata` (a ListMeta: carries `continue` on 410).
    #[serde(default)]
    pub metadata: Option<StatusMeta>,
}

/// `Status.details`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusDetails {
    /// Seconds to wait.
    #[serde(default)]
    pub retry_after_seconds: Option<u32>,
}

/// `Status.metadata`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StatusMeta {
    /// Continue token for an inconsistent continuation (410).
    #[serde(default, rename = "continue")]
    pub continue_token: Option<String>,
}

/// One answer from the server, or the failure to get one.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status, 0 when no answer came (timeout, reset).
    pub code: u16,
    /// What it means.
    pub class: Class,
    /// The body (empty when no answer came).
    pub body: Bytes,
    /// A one-line description for errors: the Status message, the text body,
    /// or the transport error.
    pub message: String,
}

impl Answer {
    /// No answer came (a timeout, or the run stopped waiting): transient,
    /// and the request may or may not have been applied.
    pub fn lost(message: impl Into<String>) -> Self {
        Answer {
            code: 0,
            class: Class::Transient { retry_after: None },
            body: Bytes::new(),
            message: message.into(),
        }
    }

    /// The body as JSON of type `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// The API as this tool uses it: raw requests with our own clock,
/// timeout and counters around them.
#[derive(Clone)]
pub struct Api {
    client: Client,
    /// Per-request timeout; `None` is no limit (`--request-timeout 0`).
    timeout: Option<Duration>,
    /// Cut short Retry-After waits and backoff on Ctrl-C.
    pub stop: crate::stop::Stop,
    /// Largest body read (`MAX_BODY_BYTES`; lower in tests).
    pub max_body: usize,
    /// The server's clock.
    pub clock: Arc<ServerClock>,
    /// Run-wide counters.
    pub stats: Arc<Stats>,
    /// Backoff for transient failures.
    pub backoff: Backoff,
    /// Which endpoint watch streams are open (usage freshness).
    pub(crate) watch_tap: WatchTap,
}

/// Content type of a JSON body.
pub const JSON: &str = "application/json";
/// Content type of a merge patch.
pub(crate) const MERGE_PATCH: &str = "application/merge-patch+json";
/// Field manager our writes are recorded under.
pub(crate) const FIELD_MANAGER: &str = "kubectl-cilium-gc";

impl Api {
    /// Wrap a client whose stack carries `watch_tap`'s layer.
    pub fn new(
        client: Client,
        watch_tap: WatchTap,
        timeout: Option<Duration>,
        stats: Arc<Stats>,
    ) -> Self {
        Api {
            watch_tap,
            client,
            timeout,
            stop: crate::stop::Stop::default(),
            max_body: MAX_BODY_BYTES,
            clock: Arc::new(ServerClock::new()),
            stats,
            backoff: Backoff::default(),
        }
    }

    /// Build a client from flags.
    pub async fn connect(
        args: &ConnectOptions,
        stats: Arc<Stats>,
    ) -> Result<(Api, Endpoint), ConnectError> {
        let (config, endpoint) = load_config(args).await?;
        let tap = WatchTap::default();
        let client = kube::client::ClientBuilder::try_from(config)
            .map_err(ConnectError::Client)?
            .with_layer(&WatchTapLayer(tap.clone()))
            .build();
        Ok((Api::new(client, tap, endpoint.timeout, stats), endpoint))
    }

    /// The kube client, for kube-runtime watchers.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Send one request, once. Counts throttles and server errors. A 429's
    /// `Retry-After` is the caller's to honour, for this request only: there
    /// is no run-wide gate, so one throttled request never holds the others.
    pub(crate) async fn send_once(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Answer {
        let mut builder = Request::builder()
            .method(method)
            .uri(path_and_query)
            .header(http::header::ACCEPT, JSON);
        if let Some((ct, _)) = &body {
            builder = builder.header(http::header::CONTENT_TYPE, *ct);
        }
        let req = builder
            .body(kube::client::Body::from(
                body.map(|b| b.1).unwrap_or_default(),
            ))
            .expect("request parts are valid");
        let exchange = self.exchange(req);
        let answer = match self.timeout {
            None => exchange.await,
            Some(limit) => match tokio::time::timeout(limit, exchange).await {
                Ok(a) => a,
                Err(_) => Answer::lost(format!(
                    "no answer within {} (--request-timeout)",
                    humantime::format_duration(limit)
                )),
            },
        };
        match &answer.class {
            Class::Throttled { .. } => Stats::bump(&self.stats.throttled),
            Class::Transient { .. } => Stats::bump(&self.stats.server_errors),
            _ => {}
        }
        answer
    }

    async fn exchange(&self, req: Request<kube::client::Body>) -> Answer {
        let res = match self.client.send(req).await {
            Ok(r) => r,
            Err(e) => return transport_failure(&e),
        };
        let local = Timestamp::now();
        let code = res.status().as_u16();
        let header = |name: http::header::HeaderName| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let retry_after = header(http::header::RETRY_AFTER);
        match header(http::header::DATE) {
            Some(date) => self.clock.observe(&date, local),
            None => self.clock.observe_missing(),
        }
        let location = header(http::header::LOCATION);
        let body = match http_body_util::Limited::new(res.into_body(), self.max_body)
            .collect()
            .await
        {
            Ok(b) => b.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return Answer {
                    code,
                    class: Class::Rejected,
                    body: Bytes::new(),
                    message: format!(
                        "the answer's body is larger than {} MiB: refusing to read it",
                        self.max_body >> 20
                    ),
                }
            }
            Err(e) => return transport_failure(&*e),
        };
        if (300..400).contains(&code) {
            // kube does not follow redirects, and an API server never sends
            // one: a proxy or load balancer in the way is misconfigured.
            return Answer {
                code,
                class: Class::Rejected,
                body,
                message: format!(
                    "the server answered {code} {} (redirect to {}): an API server does not redirect; check --server, the kubeconfig and any proxy in between",
                    http::StatusCode::from_u16(code)
                        .ok()
                        .and_then(|c| c.canonical_reason())
                        .unwrap_or(""),
                    location.as_deref().map_or("no Location header".to_owned(), |l| format!("{l:?}"))
                ),
            };
        }
        let status: Option<StatusBody> = if code >= 400 {
            serde_json::from_slice(&body).ok()
        } else {
            None
        };
        let class = classify(
            code,
            retry_after.as_deref(),
            status
                .as_ref()
                .and_then(|s| s.details.as_ref()?.retry_after_seconds),
            status
                .as_ref()
                .and_then(|s| s.metadata.as_ref()?.continue_token.as_deref()),
        );
        let message = match &status {
            Some(s) if !s.message.is_empty() => s.message.clone(),
            _ if code >= 400 => {
                let text = String::from_utf8_lossy(&body);
                format!(
                    "{code}: {}",
                    text.trim().chars().take(200).collect::<String>()
                )
            }
            _ if !(200..300).contains(&code) => format!("unexpected HTTP status {code}"),
            _ => String::new(),
        };
        Answer {
            code,
            class,
            body,
            message,
        }
    }

    /// Send a request, retrying 429s (after Retry-After) and transient
    /// failures (backoff with jitter) up to `max_retries` times.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&'static str, Vec<u8>)>,
        max_retries: u32,
    ) -> Answer {
        let mut attempt = 0;
        loop {
            let answer = self
                .send_once(method.clone(), path_and_query, body.clone())
                .await;
            let retry_after = match &answer.class {
                Class::Throttled { retry_after } | Class::Transient { retry_after } => *retry_after,
                _ => return answer,
            };
            if attempt >= max_retries {
                return answer;
            }
            let delay = self.backoff.delay(attempt, retry_after, &mut rand::rng());
            tracing::debug!(
                path = path_and_query,
                code = answer.code,
                ?delay,
                "retrying: {}",
                answer.message
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.stop.wait() => return answer,
            }
            Stats::bump(&self.stats.retries);
            attempt += 1;
        }
    }

    /// GET with retries.
    pub async fn get(&self, path_and_query: &str, max_retries: u32) -> Answer {
        self.send(Method::GET, path_and_query, None, max_retries)
            .await
    }
}

/// Largest answer body read: a 500-identity page is well under 2 MiB, a
/// 10000-item page with many labels under 40; past this the server (or
/// something posing as it) is not sending a Kubernetes list.
pub(crate) const MAX_BODY_BYTES: usize = 256 << 20;

fn transport_failure(e: &(dyn std::error::Error + 'static)) -> Answer {
    Answer {
        code: 0,
        class: Class::Transient { retry_after: None },
        body: Bytes::new(),
        message: error_chain(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_parse() {
        let t = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(t.to_string(), "1994-11-06T08:49:37Z");
        assert!(parse_http_date("yesterday").is_none());
    }

    #[test]
    fn server_clock_applies_the_offset() {
        let c = ServerClock::new();
        let local: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        c.observe("Thu, 01 Jan 2026 01:00:00 GMT", local);
        assert_eq!(c.skew(), Some(Duration::from_secs(3600)));
        let diff = c.now().as_second() - Timestamp::now().as_second();
        assert!((3599..=3601).contains(&diff), "{diff}");
    }

    /// Issue 12: `--request-timeout 0` meant 60 s; it means no limit, as
    /// kubectl's, and no flag means the default.
    #[test]
    fn request_timeout_zero_is_no_limit() {
        assert_eq!(request_timeout(Some(Duration::ZERO)), None);
        let five = Duration::from_secs(5);
        assert_eq!(request_timeout(Some(five)), Some(five));
        assert_eq!(request_timeout(None), Some(DEFAULT_REQUEST_TIMEOUT));
    }

    #[test]
    fn pem_bundles_decode() {
        let pem = b"junk\n-----BEGIN CERTIFICATE-----\nAAEC\nAwQ=\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_certs(pem).unwrap(), vec![vec![0, 1, 2, 3, 4]]);
        assert!(pem_certs(b"nothing").is_err());
    }
}
