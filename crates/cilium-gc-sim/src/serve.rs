//! The connection layer: accept TCP connections, complete the TLS
//! handshake, and serve the router over HTTP/1.1 or HTTP/2 (as ALPN chose),
//! one task per connection. Kept apart from `simulator` so the handle's
//! lifecycle (start, restart, shutdown) reads without hyper's plumbing.

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

/// Serve `router` on every connection `listener` accepts, until the task is
/// aborted (which drops, and so cuts, every open connection with it). A
/// failed accept or handshake drops that connection only.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: axum::Router,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let svc = TowerToHyperService::new(router.clone());
                conns.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    // The routes set `Date` from the simulated clock (or
                    // leave it out when a fault says so); hyper's own would
                    // hide both.
                    let mut builder = auto::Builder::new(TokioExecutor::new());
                    builder.http1().auto_date_header(false);
                    builder.http2().auto_date_header(false);
                    let _ = builder.serve_connection(TokioIo::new(tls), svc).await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}
