//! Response bodies: the cap on what a request may send, and the injected
//! connection resets that cut a response short.

use axum::body::{to_bytes, Body, Bytes};
use axum::http::{header, Response};
use futures::StreamExt;

use super::faults::ResetMode;

/// Largest request body read, and largest response body re-read to cut it.
pub(crate) const MAX_BODY: usize = 64 << 20;

/// Replace the body with one that fails: at once, or after half of it.
pub(crate) async fn cut(resp: Response<Body>, mode: ResetMode) -> Response<Body> {
    let (parts, body) = resp.into_parts();
    let err = || {
        Err::<Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "injected reset",
        ))
    };
    let body = match mode {
        ResetMode::AfterHeaders => Body::from_stream(futures::stream::once(async move { err() })),
        ResetMode::MidBody => {
            let bytes = to_bytes(body, MAX_BODY).await.unwrap_or_default();
            let half = bytes.slice(..bytes.len() / 2);
            Body::from_stream(futures::stream::iter([Ok(half), err()]).boxed())
        }
    };
    let mut resp = Response::from_parts(parts, body);
    resp.headers_mut().remove(header::CONTENT_LENGTH);
    resp
}
