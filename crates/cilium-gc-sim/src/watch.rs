//! Watch: a chunked stream of JSON lines `{"type":…,"object":…}`, from a
//! resourceVersion (logged events replayed, then live ones), with bookmarks,
//! `timeoutSeconds`, selectors, and 410 as an ERROR event for a compacted
//! resourceVersion, as the watch cache answers.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::Response;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use super::faults::WatchEnd;
use super::object::StoredObject;
use super::resource::{partial_metadata, split_key, Filter};
use super::state::{ClientRequest, ServerState};
use super::status;
use super::store::{Event, ReadAt};
use crate::kinds::{api_version, Kind};

/// Watch parameters.
struct Params {
    kind: Kind,
    namespace: Option<String>,
    meta_only: bool,
    bookmarks: bool,
    timeout: Option<Duration>,
    /// `labelSelector` and `fieldSelector`, as a list reads them.
    filter: Filter,
    send_initial: bool,
}

impl Params {
    fn matches(&self, key: &str, obj: &StoredObject) -> bool {
        let (ns, _) = split_key(key);
        if self
            .namespace
            .as_deref()
            .is_some_and(|want| Some(want) != ns)
        {
            return false;
        }
        self.filter.matches(key, obj)
    }

    fn line(&self, typ: &str, obj: &StoredObject) -> Bytes {
        let body = if self.meta_only {
            serde_json::to_vec(&partial_metadata(obj)).unwrap_or_default()
        } else {
            obj.bytes.to_vec()
        };
        let mut out = Vec::with_capacity(body.len() + 32);
        out.extend_from_slice(format!(r#"{{"type":"{typ}","object":"#).as_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(b"}\n");
        Bytes::from(out)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let (api, kind) = if self.meta_only {
            (
                "meta.k8s.io/v1".to_owned(),
                "PartialObjectMetadata".to_owned(),
            )
        } else {
            (api_version(self.kind), self.kind.kind().to_owned())
        };
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let ev =
            json!({"type":"BOOKMARK","object":{"kind": kind,"apiVersion": api,"metadata": meta}});
        Bytes::from(format!("{ev}\n"))
    }
}

fn error_line(status: Value) -> Bytes {
    Bytes::from(format!("{}\n", json!({"type":"ERROR","object": status})))
}

/// Start a watch; the response streams until timeout, client disconnect,
/// shutdown, or expiry.
pub(crate) fn watch(
    app: Arc<ServerState>,
    kind: Kind,
    namespace: Option<String>,
    r: &ClientRequest,
) -> Response<Body> {
    // The same selectors, parsed and refused the same way, as a list of
    // the kind: kube-apiserver reads both from one ListOptions.
    let filter = match Filter::parse(kind, r) {
        Ok(f) => f,
        Err(resp) => return *resp,
    };
    let p = Params {
        kind,
        namespace,
        meta_only: r.metadata_only(),
        bookmarks: matches!(
            r.query.get("allowWatchBookmarks").map(String::as_str),
            Some("true" | "1")
        ),
        timeout: r
            .query
            .get("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .filter(|t| *t > 0)
            .map(Duration::from_secs),
        filter,
        send_initial: r
            .query
            .get("sendInitialEvents")
            .is_some_and(|v| v == "true"),
    };
    let rv = r.query.get("resourceVersion").cloned().unwrap_or_default();
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    let kill = app.expire_watches.subscribe();
    let fate = app.faults.watch_end();
    tokio::spawn(async move { run(app, p, rv, tx, kill, fate).await });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    resp
}

type Tx = mpsc::Sender<Result<Bytes, std::io::Error>>;
/// An object with its store key.
type Keyed = (String, Arc<StoredObject>);

async fn run(
    app: Arc<ServerState>,
    p: Params,
    rv: String,
    tx: Tx,
    mut kill: broadcast::Receiver<()>,
    fate: Option<(Duration, WatchEnd)>,
) {
    let Some((start, initial)) = starting_point(&app, &p, &rv) else {
        return;
    };
    let (past, mut live) = match app.store.watch_from(start) {
        Ok(x) => x,
        Err(oldest) => {
            let _ = tx
                .send(Ok(error_line(status::too_old_watch_status(start, oldest))))
                .await;
            return;
        }
    };
    for (_, o) in &initial {
        if tx.send(Ok(p.line("ADDED", o))).await.is_err() {
            return;
        }
    }
    if p.send_initial && tx.send(Ok(p.bookmark(start, true))).await.is_err() {
        return;
    }
    let mut last = start;
    for ev in past {
        if !send_event(&p, &tx, &ev, &mut last).await {
            return;
        }
    }
    let deadline = tokio::time::sleep(p.timeout.unwrap_or(Duration::from_secs(3600)));
    tokio::pin!(deadline);
    // An injected early end (faults): normal, dropped, or 410 ERROR.
    let (end_at, end_how) = fate.unwrap_or((Duration::from_secs(86_400), WatchEnd::Normal));
    let early_end = tokio::time::sleep(end_at);
    tokio::pin!(early_end);
    let mut tick = tokio::time::interval(app.bookmark_interval.max(Duration::from_millis(10)));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            _ = &mut early_end => return end_early(&app, &tx, end_how, last).await,
            _ = tx.closed() => return,
            _ = kill.recv() => {
                let _ = tx.send(Ok(error_line(status::too_old_watch_status(last, app.store.compacted_rv())))).await;
                return;
            }
            _ = tick.tick(), if p.bookmarks => {
                if tx.send(Ok(p.bookmark(last, false))).await.is_err() { return; }
            }
            ev = live.recv() => match ev {
                Ok(ev) => if !send_event(&p, &tx, &ev, &mut last).await { return },
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let _ = tx.send(Ok(error_line(status::too_old_watch_status(last, app.store.compacted_rv())))).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
        }
    }
}

/// Where a watch starts: from `rv` with nothing sent first, or (no usable
/// `rv`, or `sendInitialEvents`) from a fresh list whose items are sent as
/// ADDED. `None` when that list cannot be read.
fn starting_point(app: &ServerState, p: &Params, rv: &str) -> Option<(u64, Vec<Keyed>)> {
    match rv.parse::<u64>() {
        Ok(rv) if rv > 0 && !p.send_initial => Some((rv, Vec::new())),
        _ => {
            let prefix = p
                .namespace
                .as_ref()
                .map(|ns| format!("{ns}/"))
                .unwrap_or_default();
            let page = app
                .store
                .list(p.kind, ReadAt::Latest, &prefix, None, None, |k, o| {
                    p.matches(k, o)
                })
                .ok()?;
            Some((page.rv, page.items))
        }
    }
}

/// An injected early end (faults): a normal end, a dropped connection, or
/// a 410 ERROR event.
async fn end_early(app: &ServerState, tx: &Tx, how: WatchEnd, last: u64) {
    match how {
        WatchEnd::Normal => {}
        WatchEnd::Drop => {
            let cut =
                std::io::Error::new(std::io::ErrorKind::ConnectionReset, "injected watch drop");
            let _ = tx.send(Err(cut)).await;
        }
        WatchEnd::Expire => {
            let status = status::too_old_watch_status(last, app.store.compacted_rv());
            let _ = tx.send(Ok(error_line(status))).await;
        }
    }
}

/// Send one event if it is for this watch; false when the client is gone.
async fn send_event(p: &Params, tx: &Tx, ev: &Event, last: &mut u64) -> bool {
    if ev.rv <= *last {
        return true;
    }
    *last = ev.rv;
    if ev.kind != p.kind || !p.matches(&ev.key, &ev.obj) {
        return true;
    }
    tx.send(Ok(p.line(ev.typ.as_str(), &ev.obj))).await.is_ok()
}
