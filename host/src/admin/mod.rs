//! The admin HTTP API of a running pipeline: health, recent progress, Prometheus metrics,
//! and the plugin stages (list, upload a new version, activate it, roll back).
//!
//! | method and path | what |
//! |---|---|
//! | `GET /healthz` | `ok` while the pipeline runs |
//! | `GET /status` | the process's role (single, member, active, standby) and the last batches' progress, as JSON |
//! | `GET /metrics` | counters, gauges and a histogram in the OpenMetrics text format |
//! | `GET /stages` | each stage, its active version, and checked uploads waiting |
//! | `POST /stages/{name}/modules` | upload a module (the body); it is checked at once |
//! | `POST /stages/{name}/activate` | `{"digest": ".."}`: activate an upload at the next batch |
//! | `POST /stages/{name}/rollback` | go back to the previous version at the next batch |
//! | `POST /stages/{name}/shadow` | `{"digest": ".."}`: run an upload in shadow mode beside the stage (`null`: stop) |
//!
//! The API listens on loopback unless told otherwise. `POST` calls need
//! `Authorization: Bearer <token>` with the configured token; without a configured token
//! they are refused. The token is checked before the body is read, and a body larger than
//! `max-upload` is refused with 413 before it is read when its length is announced, or as
//! soon as it passes the limit otherwise. Every `POST`, whether it changes something or is
//! refused, is logged under the `sluice::audit` target with the caller's address, the call
//! and its result.
//!
//! The files: [`config`] (the `[admin]` section), `server` (a tokio runtime of its own, one
//! task per connection, so an idle client holds up no one), `routes` (the calls, the token
//! check, the body limit and the audit log), `metrics` (the Prometheus families, fed from
//! each batch's [`Progress`]).

mod config;
mod metrics;
mod routes;
mod server;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};

pub use self::config::AdminConfig;
use self::metrics::Metrics;
use crate::pipeline::progress::{Progress, Role};
use crate::udf::Runtime;
use crate::udf::config::StageConfig;
use crate::udf::swap::{Candidate, Found, Samples};

/// The admin API could not start.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The address could not be listened on.
    #[error("admin API: cannot listen on {listen}: {error}")]
    Listen {
        /// The address.
        listen: String,
        /// Why.
        error: std::io::Error,
    },
    /// The API's threads could not start.
    #[error("admin API: cannot start its threads: {error}")]
    Threads {
        /// Why.
        error: std::io::Error,
    },
}

/// What the routes share: the configuration, the stages, the uploads waiting, the recent
/// progress and the metrics.
struct Shared {
    pipeline: String,
    token: Option<String>,
    max_upload: usize,
    recent_batches: usize,
    runtime: Runtime,
    stages: Vec<(StageConfig, Samples)>,
    sender: Sender<Found>,
    uploads: Mutex<HashMap<String, Candidate>>,
    recent: Mutex<VecDeque<Progress>>,
    role: Mutex<Role>,
    metrics: Metrics,
}

/// A running admin API. Feed it each batch's progress with [`Admin::record`]. Dropping it
/// stops the server.
pub struct Admin {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _server: server::Server,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Admin {
    /// Starts listening. `stages` are the stages' configurations and samples, for checking
    /// uploads; new versions and rollbacks go to `sender` (see
    /// [`crate::pipeline::stages::Stages::sender`]).
    pub fn start(
        config: &AdminConfig,
        pipeline: &str,
        runtime: Runtime,
        stages: Vec<(StageConfig, Samples)>,
        sender: Sender<Found>,
    ) -> Result<Admin, AdminError> {
        let listen = |error| AdminError::Listen {
            listen: config.listen.clone(),
            error,
        };
        let listener = TcpListener::bind(&config.listen).map_err(listen)?;
        let addr = listener.local_addr().map_err(listen)?;
        let token = config
            .token
            .clone()
            .or_else(|| std::env::var("SLUICE_ADMIN_TOKEN").ok())
            .filter(|t| !t.is_empty());
        if token.is_none() {
            tracing::warn!(
                "admin API: no token configured ([admin] token or SLUICE_ADMIN_TOKEN): POST calls are refused"
            );
        }
        let metrics = Metrics::new(stages.iter().map(|(s, _)| s.name.as_str()));
        metrics.set_active(true);
        let shared = Arc::new(Shared {
            pipeline: pipeline.to_string(),
            token,
            max_upload: usize::try_from(config.max_upload.0).unwrap_or(usize::MAX),
            recent_batches: config.recent_batches.max(1),
            runtime,
            stages,
            sender,
            uploads: Mutex::new(HashMap::new()),
            recent: Mutex::new(VecDeque::new()),
            role: Mutex::new(Role::Single),
            metrics,
        });
        let server = server::Server::start(listener, routes::router(shared.clone()))
            .map_err(|error| AdminError::Threads { error })?;
        tracing::info!(%addr, "admin API listening");
        Ok(Admin {
            shared,
            addr,
            _server: server,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Shows what this process is to the pipeline now (`/status`'s `role`,
    /// `sluice_active`).
    pub fn set_role(&self, role: Role) {
        *lock(&self.shared.role) = role;
        self.shared.metrics.set_active(role != Role::Standby);
    }

    /// Counts a batch fenced off the table.
    pub fn fenced(&self) {
        self.shared.metrics.fenced();
    }

    /// Records a committed batch's progress: the metrics count it, `GET /status` shows it.
    pub fn record(&self, progress: &Progress) {
        self.shared.metrics.record(progress);
        let mut recent = lock(&self.shared.recent);
        recent.push_back(progress.clone());
        while recent.len() > self.shared.recent_batches {
            recent.pop_front();
        }
    }
}
