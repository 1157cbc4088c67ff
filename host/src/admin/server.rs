//! The HTTP server: a tokio runtime of its own (one worker thread, and at most two threads
//! for checking uploads), accepting connections and serving each one in a task of its own,
//! so a slow or idle client holds up no one.
//!
//! Connections are not kept alive: each answer ends with `Connection: close`, as before,
//! so a client that reads to the end of the stream works. A client that has not sent its
//! request head within `[admin] idle-timeout` is disconnected.
//!
//! At most `[admin] max-connections` are open at once, so a flood of connections cannot
//! take the process's file descriptors (the pipeline needs them for its own files and
//! sockets). When they are all open, a new connection closes the oldest one that has not
//! sent its request head yet (a flood's idle connections go first, and `GET /healthz`
//! still answers); when every one is answering a request, the new one is closed at once.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use futures::channel::oneshot;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt as _;

use super::routes::Peer;

/// How many connections the server keeps, and for how long an idle one.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Most connections open at once (at least 1).
    pub max_connections: usize,
    /// Longest wait for a request's head.
    pub idle_timeout: Duration,
}

/// The running server; dropping it stops it.
pub(super) struct Server {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    /// Serves `router` on `listener` until dropped.
    pub(super) fn start(
        listener: std::net::TcpListener,
        router: Router,
        limits: Limits,
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
        runtime.spawn(accept(listener, router, limits));
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

/// The open connections: how many, and those still waiting for their request head (by
/// age), each with the sender that closes it.
struct Connections {
    max: usize,
    open: AtomicUsize,
    waiting: Mutex<BTreeMap<u64, oneshot::Sender<()>>>,
}

impl Connections {
    fn waiting(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, oneshot::Sender<()>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a new connection may be served: there is room, or the oldest waiting one
    /// is told to close to make some.
    fn make_room(&self) -> bool {
        loop {
            if self.open.load(Ordering::Relaxed) < self.max {
                return true;
            }
            let Some((_, close)) = self.waiting().pop_first() else {
                return false;
            };
            if close.send(()).is_ok() {
                return true;
            }
        }
    }
}

/// One open connection, counted until dropped.
struct Open {
    connections: Arc<Connections>,
    id: u64,
}

impl Open {
    fn new(connections: &Arc<Connections>, id: u64) -> (Open, oneshot::Receiver<()>) {
        let (close, closed) = oneshot::channel();
        connections.open.fetch_add(1, Ordering::Relaxed);
        connections.waiting().insert(id, close);
        let open = Open {
            connections: connections.clone(),
            id,
        };
        (open, closed)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.connections.waiting().remove(&self.id);
        self.connections.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Accepts connections and serves each in its own task, within `limits`.
async fn accept(listener: TcpListener, router: Router, limits: Limits) {
    let connections = Arc::new(Connections {
        max: limits.max_connections.max(1),
        open: AtomicUsize::new(0),
        waiting: Mutex::new(BTreeMap::new()),
    });
    let mut refused = 0u64;
    for id in 0u64.. {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, most likely: wait rather than spin.
                tracing::warn!(%error, "admin API: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if !connections.make_room() {
            // Every connection is answering a request: this one is closed at once.
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    max = connections.max,
                    refused,
                    "admin API: too many connections; new ones are closed at once"
                );
            }
            continue;
        }
        // A connection told to close holds its descriptor until its task runs: let it,
        // so that a flood takes at most one more than `max` (measured: a burst of
        // accepts otherwise reached the open-files limit for an instant).
        for _ in 0..64 {
            if connections.open.load(Ordering::Relaxed) < connections.max {
                break;
            }
            tokio::task::yield_now().await;
        }
        let (open, closed) = Open::new(&connections, id);
        tokio::spawn(serve(stream, peer, router.clone(), open, closed, limits));
    }
}

/// Serves one connection until it ends, times out, or is closed to make room.
async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    open: Open,
    closed: oneshot::Receiver<()>,
    limits: Limits,
) {
    let connections = open.connections.clone();
    let id = open.id;
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        // Its head is in: no longer one to close for room.
        connections.waiting().remove(&id);
        request.extensions_mut().insert(Peer(peer));
        router.clone().oneshot(request)
    });
    let served = http1::Builder::new()
        .keep_alive(false)
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout)
        .serve_connection(TokioIo::new(stream), service);
    // The sender dropped (the request started): never closed for room.
    let closed = async {
        if closed.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    match futures::future::select(std::pin::pin!(served), std::pin::pin!(closed)).await {
        futures::future::Either::Left((Err(error), _)) => {
            tracing::debug!(%error, %peer, "admin API: connection failed");
        }
        futures::future::Either::Left((Ok(()), _)) => {}
        futures::future::Either::Right(((), _)) => {
            tracing::debug!(%peer, "admin API: closed an idle connection to make room");
        }
    }
    drop(open);
}

#[cfg(test)]
mod tests;
