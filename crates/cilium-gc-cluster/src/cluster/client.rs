//! The raw client: one request path every call goes through, with our own
//! retries, timeouts, body limits and the decoding of `Status` answers.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;
use jiff::Timestamp;
use kube::Client;
use serde::Deserialize;

use crate::connect::ConnectSettings;
use crate::retry::{classify, Backoff, Class};
use crate::stats::Stats;
use crate::watch_tap::{WatchTap, WatchTapLayer};

use super::clock::ServerClock;
use super::error::ConnectError;
use super::kubeconfig::{load_config, Endpoint};

/// The whole cause chain on one line, with no credential in it (see
/// `crate::secrets::describe`). A client that could not be built names its
/// own exec plugin (the innermost [`ConnectError::Client`] of the chain
/// that knows it), whoever prints the chain.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut exec_program = None;
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(ConnectError::Client {
            exec_program: Some(p),
            ..
        }) = c.downcast_ref::<ConnectError>()
        {
            exec_program = Some(p.as_str());
        }
        cur = c.source();
    }
    crate::secrets::describe_with(e, exec_program)
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

/// A failed answer as an error: its HTTP status (0 when no answer came)
/// and its one-line message (the Status message, the text body, or the
/// transport error). Kept whole so callers can still tell a 403 from a 503.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ServerError {
    /// HTTP status, 0 when no answer came.
    pub code: u16,
    /// What the server said, on one line.
    pub message: String,
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
    /// The connection was refused: the request never reached a server, so
    /// nothing of it can have been applied (a kube-apiserver restarting).
    pub unsent: bool,
}

impl Answer {
    /// This answer as an error, for a caller that cannot go on with it.
    pub(crate) fn into_error(self) -> ServerError {
        ServerError {
            code: self.code,
            message: self.message,
        }
    }

    /// No answer came (a timeout, or the run stopped waiting): transient,
    /// and the request may or may not have been applied.
    pub fn lost(message: impl Into<String>) -> Self {
        Answer {
            code: 0,
            class: Class::Transient { retry_after: None },
            body: Bytes::new(),
            message: message.into(),
            unsent: false,
        }
    }

    /// The body as JSON of type `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// The API as this tool uses it: raw requests with our own clock,
/// timeout and counters around them. (Not `Api`: that is kube's typed
/// handle, which the usage watchers use beside this one.)
#[derive(Clone)]
pub struct ApiClient {
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
    pub watch_tap: WatchTap,
    /// The kubeconfig's exec credential plugin, as configured: named in
    /// this client's authentication errors (each cluster of a fleet has
    /// its own; kube's error text is not parsed reliably).
    exec_program: Option<Arc<str>>,
}

/// Content type of a JSON body.
pub const JSON: &str = "application/json";
/// Content type of a merge patch.
pub const MERGE_PATCH: &str = "application/merge-patch+json";
/// Field manager our writes are recorded under.
pub const FIELD_MANAGER: &str = "kubectl-cilium-gc";

impl ApiClient {
    /// Wrap a client whose stack carries `watch_tap`'s layer.
    pub fn new(
        client: Client,
        watch_tap: WatchTap,
        timeout: Option<Duration>,
        stats: Arc<Stats>,
    ) -> Self {
        ApiClient {
            watch_tap,
            client,
            timeout,
            stop: crate::stop::Stop::default(),
            max_body: MAX_BODY_BYTES,
            clock: Arc::new(ServerClock::new()),
            stats,
            backoff: Backoff::default(),
            exec_program: None,
        }
    }

    /// Build a client from flags.
    pub async fn connect(
        args: &ConnectSettings,
        stats: Arc<Stats>,
    ) -> Result<(ApiClient, Endpoint), ConnectError> {
        let (config, endpoint) = load_config(args).await?;
        let exec_program = config
            .auth_info
            .exec
            .as_ref()
            .and_then(|e| e.command.as_deref())
            .map(Arc::from);
        let tap = WatchTap::default();
        let client = kube::client::ClientBuilder::try_from(config)
            .map_err(|source| ConnectError::Client {
                exec_program: exec_program.as_deref().map(str::to_owned),
                source,
            })?
            .with_layer(&WatchTapLayer(tap.clone()))
            .build();
        let mut api = ApiClient::new(client, tap, endpoint.timeout, stats);
        api.exec_program = exec_program;
        Ok((api, endpoint))
    }

    /// The kube client, for kube-runtime watchers.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Send one request, once. Counts throttles and server errors. A 429's
    /// `Retry-After` is the caller's to honour, for this request only: there
    /// is no run-wide gate, so one throttled request never holds the others.
    pub async fn send_once(
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
            Err(e) => return self.transport_failure(&e),
        };
        let local = Timestamp::now();
        let code = res.status().as_u16();
        // In a block of its own: the closure borrows `res`, and a borrow
        // held across the body's `.await` would make the future not `Send`.
        let (retry_after, date, location) = {
            let header = |name: http::header::HeaderName| {
                res.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            (
                header(http::header::RETRY_AFTER),
                header(http::header::DATE),
                header(http::header::LOCATION),
            )
        };
        match date {
            Some(date) => self.clock.observe(&date, local),
            None => self.clock.observe_missing(),
        }
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
                    unsent: false,
                }
            }
            Err(e) => return self.transport_failure(&*e),
        };
        interpret(code, retry_after.as_deref(), location.as_deref(), body)
    }

    /// Send a request, retrying 429s (after Retry-After) and transient
    /// failures (backoff with jitter) up to `max_retries` times.
    pub(crate) async fn send(
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

    /// `GET /version`: the answer (a run decides by its class whether the
    /// server is reachable) and the server's `gitVersion` when it was read.
    pub async fn version(&self, max_retries: u32) -> ServerVersion {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Version {
            git_version: Option<String>,
        }
        let answer = self.get("/version", max_retries).await;
        let git_version = (answer.class == Class::Success)
            .then(|| answer.json::<Version>().ok().and_then(|v| v.git_version))
            .flatten();
        ServerVersion {
            answer,
            git_version,
        }
    }
}

/// What `GET /version` told.
pub struct ServerVersion {
    /// The answer itself.
    pub answer: Answer,
    /// `gitVersion` (`v1.35.0`), when the server answered it.
    pub git_version: Option<String>,
}

/// What an answer means, from what came on the wire (no I/O): its class
/// for the retry policy, and a one-line message. A `Status` body's own
/// message wins; a plain-text error body is quoted, shortened.
fn interpret(code: u16, retry_after: Option<&str>, location: Option<&str>, body: Bytes) -> Answer {
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
                location.map_or("no Location header".to_owned(), |l| format!("{l:?}"))
            ),
            unsent: false,
        };
    }
    let status: Option<StatusBody> = if code >= 400 {
        serde_json::from_slice(&body).ok()
    } else {
        None
    };
    let class = classify(
        code,
        retry_after,
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
        unsent: false,
    }
}

/// Largest answer body read: a 500-identity page is well under 2 MiB, a
/// 10000-item page with many labels under 40; past this the server (or
/// something posing as it) is not sending a Kubernetes list.
pub(crate) const MAX_BODY_BYTES: usize = 256 << 20;

impl ApiClient {
    /// A request that got no answer; an authentication failure names this
    /// client's exec plugin.
    fn transport_failure(&self, e: &(dyn std::error::Error + 'static)) -> Answer {
        Answer {
            code: 0,
            class: Class::Transient { retry_after: None },
            body: Bytes::new(),
            message: crate::secrets::describe_with(e, self.exec_program.as_deref()),
            unsent: connection_refused(e),
        }
    }
}

/// Whether an error chain ends in a refused connection.
fn connection_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source()).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    })
}
