//! Talking to the API server: the client built like kubectl builds it, one
//! raw request path that every call goes through, and the server's clock.
//!
//! We send raw requests (not kube's typed `Api`) on the hot paths because the
//! decisions need what typed errors drop: the `Retry-After` header, plain-text
//! bodies (APF's 429, the not-found handler's 404) and the `Date` header.
//! kube's own retry layer is switched off (`default_retry = false`): every
//! retry is ours, so the report can count it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;
use jiff::Timestamp;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::retry::{classify, Backoff, Class};
use crate::settings::ConnectOptions;
use crate::stats::Stats;

/// Failures to set up a connection. All are configuration errors (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
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
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

/// Where we are connected, for the report (never a credential).
#[derive(Debug, Clone, Default)]
pub struct Endpoint {
    /// API server URL.
    pub server: String,
    /// kubeconfig context, when one was used.
    pub context: Option<String>,
}

/// Default per-request timeout when `--request-timeout` is not given: long
/// enough for a 500-item page from a loaded server, short enough that a hung
/// connection is retried.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Build the client config from kubectl-style flags.
pub async fn load_config(args: &ConnectOptions) -> Result<(Config, Endpoint), ConnectError> {
    let opts = KubeConfigOptions {
        context: args.context.clone(),
        cluster: args.cluster.clone(),
        user: args.user.clone(),
    };
    let kubeconfig = match &args.kubeconfig {
        Some(path) => Some(Kubeconfig::read_from(path).map_err(|e| {
            ConnectError::Kubeconfig(format!("{}: {}", path.display(), error_chain(&e)))
        })?),
        None => match Kubeconfig::read() {
            Ok(k) => Some(k),
            Err(e) if kubeconfig_missing() => {
                tracing::debug!("no kubeconfig: {e}");
                None
            }
            Err(e) => return Err(ConnectError::Kubeconfig(error_chain(&e))),
        },
    };
    let (mut config, context) = match kubeconfig {
        Some(k) => {
            let context = args.context.clone().or_else(|| k.current_context.clone());
            let config = Config::from_custom_kubeconfig(k, &opts)
                .await
                .map_err(|e| ConnectError::Kubeconfig(error_chain(&e)))?;
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
    let endpoint = Endpoint {
        server: config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_owned(),
        context,
    };
    Ok((config, endpoint))
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
        config.auth_info.token = Some(t.clone().into());
        config.auth_info.token_file = None;
        config.auth_info.exec = None;
        config.auth_info.client_certificate_data = None;
        config.auth_info.client_key_data = None;
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
    if let Some(t) = args.request_timeout.filter(|t| !t.is_zero()) {
        config.read_timeout = Some(t);
        config.write_timeout = Some(t);
    }
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

/// The whole cause chain on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = c.source();
    }
    s
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
}

impl ServerClock {
    /// A clock that has not yet seen the server.
    pub fn new() -> Self {
        ServerClock {
            offset_ms: AtomicI64::new(i64::MIN),
        }
    }
    /// Record a `Date` header observed at local time `local`.
    pub fn observe(&self, date_header: &str, local: Timestamp) {
        if let Some(server) = parse_http_date(date_header) {
            let off = server.as_millisecond() - local.as_millisecond();
            self.offset_ms.store(off, Ordering::Relaxed);
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
pub fn parse_http_date(s: &str) -> Option<Timestamp> {
    jiff::fmt::rfc2822::parse(s.trim())
        .ok()
        .map(|z| z.timestamp())
}

/// Closed while the server has asked us to wait (429 `Retry-After`): no
/// request of ours is sent before it reopens.
#[derive(Debug, Default)]
pub struct Gate {
    until: Mutex<Option<Instant>>,
}

impl Gate {
    /// Wait until the gate is open.
    pub async fn wait(&self) {
        loop {
            let until = *self.until.lock().await;
            match until {
                Some(t) if t > Instant::now() => tokio::time::sleep_until(t).await,
                _ => return,
            }
        }
    }
    /// Keep the gate closed for at least `d` from now.
    pub async fn close_for(&self, d: Duration) {
        let t = Instant::now() + d;
        let mut g = self.until.lock().await;
        if g.is_none_or(|u| u < t) {
            *g = Some(t);
        }
    }
}

/// The parts of a `Status` body we use.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusBody {
    /// `kind`, `Status` when it is one.
    #[serde(default)]
    pub kind: String,
    /// Human message.
    #[serde(default)]
    pub message: String,
    /// Machine reason (`Conflict`, `NotFound`, `Expired`...).
    #[serde(default)]
    pub reason: String,
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
pub struct StatusDetails {
    /// Seconds to wait.
    #[serde(default)]
    pub retry_after_seconds: Option<u32>,
}

/// `Status.metadata`.
#[derive(Debug, Default, Deserialize)]
pub struct StatusMeta {
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
    /// The body as JSON of type `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// The API as this tool uses it: raw requests with our own gate, clock,
/// timeout and counters around them.
#[derive(Clone)]
pub struct Api {
    client: Client,
    timeout: Duration,
    /// Closed while a Retry-After runs.
    pub gate: Arc<Gate>,
    /// The server's clock.
    pub clock: Arc<ServerClock>,
    /// Run-wide counters.
    pub stats: Arc<Stats>,
    /// Backoff for transient failures.
    pub backoff: Backoff,
}

/// Content type of a JSON body.
pub const JSON: &str = "application/json";
/// Content type of a merge patch.
pub const MERGE_PATCH: &str = "application/merge-patch+json";
/// Field manager our writes are recorded under.
pub const FIELD_MANAGER: &str = "kubectl-cilium-gc";

impl Api {
    /// Wrap a client.
    pub fn new(client: Client, timeout: Duration, stats: Arc<Stats>) -> Self {
        Api {
            client,
            timeout,
            gate: Arc::new(Gate::default()),
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
        let timeout = args
            .request_timeout
            .filter(|t| !t.is_zero())
            .unwrap_or(DEFAULT_REQUEST_TIMEOUT);
        let client = Client::try_from(config).map_err(ConnectError::Client)?;
        Ok((Api::new(client, timeout, stats), endpoint))
    }

    /// The kube client, for kube-runtime watchers.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Send one request, once. Waits for the Retry-After gate first, and
    /// closes it when the answer is a 429. Counts throttles and server errors.
    pub async fn send_once(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Answer {
        self.gate.wait().await;
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
        let answer = match tokio::time::timeout(self.timeout, self.exchange(req)).await {
            Ok(a) => a,
            Err(_) => Answer {
                code: 0,
                class: Class::Transient { retry_after: None },
                body: Bytes::new(),
                message: format!("no answer within {:?}", self.timeout),
            },
        };
        match &answer.class {
            Class::Throttled { retry_after } => {
                Stats::bump(&self.stats.throttled);
                let wait = retry_after.unwrap_or(Duration::from_secs(1));
                self.gate.close_for(wait).await;
            }
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
        if let Some(date) = header(http::header::DATE) {
            self.clock.observe(&date, local);
        }
        let body = match res.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => return transport_failure(&e),
        };
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
            tokio::time::sleep(delay).await;
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

fn transport_failure(e: &dyn std::error::Error) -> Answer {
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

    #[test]
    fn pem_bundles_decode() {
        let pem = b"junk\n-----BEGIN CERTIFICATE-----\nAAEC\nAwQ=\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_certs(pem).unwrap(), vec![vec![0, 1, 2, 3, 4]]);
        assert!(pem_certs(b"nothing").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn gate_holds_requests_until_retry_after() {
        let g = Gate::default();
        g.close_for(Duration::from_secs(3)).await;
        g.close_for(Duration::from_secs(1)).await; // never shortens
        let start = Instant::now();
        g.wait().await;
        assert!(Instant::now() - start >= Duration::from_secs(3));
    }
}
