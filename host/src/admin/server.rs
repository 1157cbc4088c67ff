//! The HTTP server: a tokio runtime of its own (one worker thread, and at most two threads
//! for checking uploads), accepting connections and serving each one in a task of its own,
//! so a slow or idle client holds up no one.
//!
//! Connections are not kept alive: each answer ends with `Connection: close`, as before,
//! so a client that reads to the end of the stream works. A client that has not sent its
//! request head within [`HEAD_TIMEOUT`] is disconnected.

use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tower::ServiceExt as _;

use super::routes::Peer;

/// Longest wait for a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The running server; dropping it stops it.
pub(super) struct Server {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    /// Serves `router` on `listener` until dropped.
    pub(super) fn start(
        listener: std::net::TcpListener,
        router: Router,
    ) -> std::io::Result<Server> {
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .thread_name("sluice-admin")
            .enable_io()
            .enable_time()
            .build()?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)?
        };
        runtime.spawn(accept(listener, router));
        Ok(Server {
            runtime: Some(runtime),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Not `drop(runtime)`: that waits for the tasks, and panics when the admin API is
        // dropped inside another runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Accepts connections and serves each in its own task.
async fn accept(listener: TcpListener, router: Router) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, most likely: wait rather than spin.
                tracing::warn!(%error, "admin API: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let router = router.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
                request.extensions_mut().insert(Peer(peer));
                router.clone().oneshot(request)
            });
            let served = http1::Builder::new()
                .keep_alive(false)
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(error) = served {
                tracing::debug!(%error, %peer, "admin API: connection failed");
            }
        });
    }
}
