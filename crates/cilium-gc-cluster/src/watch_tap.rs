//! Which endpoint watch streams are open right now, seen on the wire.
//!
//! kube-runtime's watcher resumes a watch that ended normally from its last
//! resourceVersion without telling its consumer, and reports nothing while
//! it backs off after a failure. Usage freshness needs exactly that: while a
//! watch stream is open, the index is complete up to now (the server sends
//! every change, and bookmarks keep a quiet stream alive); once it ends, the
//! index is complete only up to that instant, until a new stream opens and
//! replays what came after. So a tower layer on the kube client watches the
//! watch requests go by: a 2xx answer to `?watch=true` on a CiliumEndpoint
//! or CiliumEndpointSlice path opens a stream, the end of its body (normal
//! end, reset, or drop) closes it. No request is changed.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::model::Kind;

/// Open streams and the end of the last one, per kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamState {
    /// Watch streams open now.
    pub open: u32,
    /// When the last one ended, if one did.
    pub last_end: Option<Instant>,
}

/// The registry the layer writes and usage reads. Cheap to clone.
#[derive(Debug, Default, Clone)]
pub struct WatchTap {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    streams: Mutex<HashMap<Kind, StreamState>>,
    changed: Notify,
}

impl WatchTap {
    /// The state of `kind`'s watch streams.
    pub(crate) fn state(&self, kind: Kind) -> StreamState {
        self.lock().get(&kind).copied().unwrap_or_default()
    }

    /// Resolves at the next open or close (create the future before reading
    /// the state, as with [`Notify::notified`]).
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.inner.changed.notified()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Kind, StreamState>> {
        self.inner.streams.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record a stream of `kind` opening; it closes when the guard drops.
    pub(crate) fn opened(&self, kind: Kind) -> StreamGuard {
        self.lock().entry(kind).or_default().open += 1;
        self.inner.changed.notify_waiters();
        StreamGuard {
            tap: self.clone(),
            kind,
        }
    }

    fn closed(&self, kind: Kind) {
        let mut g = self.lock();
        let s = g.entry(kind).or_default();
        s.open = s.open.saturating_sub(1);
        s.last_end = Some(Instant::now());
        drop(g);
        self.inner.changed.notify_waiters();
    }

    /// The endpoint kind a request watches, if it is such a watch.
    pub(crate) fn watched_kind(uri: &http::Uri) -> Option<Kind> {
        let watch = uri.query().is_some_and(|q| {
            q.split('&')
                .any(|kv| matches!(kv, "watch=true" | "watch=1"))
        });
        if !watch {
            return None;
        }
        let last = uri.path().trim_end_matches('/').rsplit('/').next()?;
        [Kind::Endpoint, Kind::EndpointSlice]
            .into_iter()
            .find(|k| k.plural() == last)
    }
}

/// An open stream; dropping it records the stream's end.
#[derive(Debug)]
pub(crate) struct StreamGuard {
    tap: WatchTap,
    kind: Kind,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.tap.closed(self.kind);
    }
}

/// The tower layer installing the tap on the client.
#[derive(Debug, Clone)]
pub(crate) struct WatchTapLayer(pub WatchTap);

impl<S> tower::Layer<S> for WatchTapLayer {
    type Service = WatchTapService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        WatchTapService {
            inner,
            tap: self.0.clone(),
        }
    }
}

/// The service of [`WatchTapLayer`].
#[derive(Debug, Clone)]
pub(crate) struct WatchTapService<S> {
    inner: S,
    tap: WatchTap,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqB, B> tower::Service<Request<ReqB>> for WatchTapService<S>
where
    S: tower::Service<Request<ReqB>, Response = Response<B>>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Unpin + Send + 'static,
{
    type Response = Response<TappedBody<B>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let kind = WatchTap::watched_kind(req.uri());
        let tap = self.tap.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await?;
            let guard = kind
                .filter(|_| res.status().is_success())
                .map(|k| tap.opened(k));
            Ok(res.map(|inner| TappedBody { inner, guard }))
        })
    }
}

/// A response body that records the end of a watch stream.
#[derive(Debug)]
pub(crate) struct TappedBody<B> {
    inner: B,
    guard: Option<StreamGuard>,
}

impl<B: http_body::Body<Data = Bytes> + Unpin> http_body::Body for TappedBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.guard = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_endpoint_watches_are_tapped() {
        let k = |s: &str| WatchTap::watched_kind(&s.parse().unwrap());
        assert_eq!(
            k("/apis/cilium.io/v2/ciliumendpoints?allowWatchBookmarks=true&watch=true"),
            Some(Kind::Endpoint)
        );
        assert_eq!(
            k("/apis/cilium.io/v2alpha1/ciliumendpointslices?watch=1&resourceVersion=5"),
            Some(Kind::EndpointSlice)
        );
        assert_eq!(k("/apis/cilium.io/v2/ciliumendpoints?limit=500"), None);
        assert_eq!(k("/apis/cilium.io/v2/ciliumidentities?watch=true"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn streams_open_and_close_with_their_guard() {
        let tap = WatchTap::default();
        let g = tap.opened(Kind::Endpoint);
        assert_eq!(tap.state(Kind::Endpoint).open, 1);
        tokio::time::advance(std::time::Duration::from_secs(3)).await;
        let t = Instant::now();
        drop(g);
        assert_eq!(
            tap.state(Kind::Endpoint),
            StreamState {
                open: 0,
                last_end: Some(t)
            }
        );
    }
}
