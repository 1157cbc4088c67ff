//! The admin HTTP API of a running pipeline: health, recent progress, Prometheus metrics,
//! and the plugin stages (list, upload a new version, activate it, roll back).
//!
//! | method and path | what |
//! |---|---|
//! | `GET /healthz` | liveness: 200 while the pipeline's loop makes progress, 503 once it is stuck ([`health`]) |
//! | `GET /readyz` | readiness: 200 while it runs with its brokers answering (or stands by), 503 with the reason while it starts, retries a fault or reloads after a fence |
//! | `GET /` or `/console` | the web console: the pipeline's graph, charts of the last batches, partitions, plugin and commit history, dead letters, and the token-guarded actions (one HTML page embedded in the binary, no library, no network) |
//! | `GET /dead-letters` | the last dead letters with their values ([`dead`]), with the token only |
//! | `GET /topology` | the pipeline's graph as JSON ([`topology`]) |
//! | `GET /status` | the process's role (single, member, active, standby), its readiness and last changes of it, and the last batches' progress, as JSON |
//! | `GET /metrics` | counters, gauges and a histogram in the OpenMetrics text format |
//! | `GET /stages` | each stage, its active version, and checked uploads waiting |
//! | `POST /stages/{name}/modules` | upload a module (the body); it is checked at once |
//! | `POST /stages/{name}/activate` | `{"digest": ".."}`: activate an upload at the next batch |
//! | `POST /stages/{name}/rollback` | go back to the previous version at the next batch (409: there is none) |
//! | `POST /stages/{name}/shadow` | `{"digest": ".."}`: run an upload in shadow mode beside the stage (`null`: stop) |
//!
//! The API listens on loopback unless told otherwise. `POST` calls need
//! `Authorization: Bearer <token>` with the configured token; without a configured token
//! they are refused. The token is checked before the body is read, and a body larger than
//! `max-upload` is refused with 413 before it is read when its length is announced, or as
//! soon as it passes the limit otherwise. Every `POST`, whether it changes something or is
//! refused, is logged under the [`AUDIT_TARGET`] (`sluice::audit`) with the caller's
//! address, the call and its result; the command line's log filter always lets that target
//! through ([`with_audit`]), so `--log warn` does not hide who changed what.
//!
//! A rollback with no previous version to go back to is refused with 409. With `[admin]
//! state-dir`, a version activated through the API is recorded there and runs again after
//! a restart ([`persist`]).
//!
//! The files: [`config`] (the `[admin]` section), `server` (a tokio runtime of its own, one
//! task per connection, so an idle client holds up no one; at most `max-connections` open,
//! idle ones closed after `idle-timeout` or to make room), `routes` (the calls, the token
//! check, the body limit and the audit log), `metrics` (the Prometheus families, fed from
//! each batch's [`Progress`]), [`persist`] (activations kept across restarts).

mod config;
pub mod dead;
pub mod health;
mod metrics;
pub mod persist;
mod routes;
mod server;
#[cfg(test)]
pub(crate) mod tests;
pub mod topology;

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

pub use self::config::AdminConfig;
use self::dead::{DeadLetter, DeadLetters};
use self::health::Health;
use self::metrics::Metrics;
use self::persist::{Activation, Activations, PersistError};
use self::topology::Topology;
use crate::plugin::config::StageConfig;
use crate::plugin::swap::{self, Candidate, Found, Samples};
use crate::plugin::{Runtime, digest_of};
use crate::progress::{Progress, Role};
use crate::record::{Reason, Record};

/// The log target of the admin API's audit: every change asked for, and what came of it.
pub const AUDIT_TARGET: &str = "sluice::audit";

/// The log filter `spec` (as `--log` or `RUST_LOG` give it) with [`AUDIT_TARGET`] let
/// through at `info` whatever the level, as Kafka's authorizer log is kept apart from the
/// root level: an operator who turns the logs down to warnings still sees who changed
/// what. A filter that names the target itself (`sluice::audit=off`) decides for it.
pub fn with_audit(spec: &str) -> String {
    let named = spec
        .split(',')
        .any(|directive| directive.trim().starts_with(AUDIT_TARGET));
    match (named, spec.trim().is_empty()) {
        (true, _) => spec.to_string(),
        (false, true) => format!("{AUDIT_TARGET}=info"),
        (false, false) => format!("{spec},{AUDIT_TARGET}=info"),
    }
}

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
    /// The record of activations (`[admin] state-dir`) cannot be read or written.
    #[error("admin API: the record of activations: {0}")]
    Persist(#[from] PersistError),
    /// A version activated through the API cannot run again: sluice does not start rather
    /// than silently run another version.
    #[error(
        "stage `{stage}`: the version {activation} cannot run again: {reason}. Put the module back, or remove the stage from {record} to run the file's version"
    )]
    Restore {
        /// The stage.
        stage: String,
        /// The activation, described.
        activation: String,
        /// Why.
        reason: String,
        /// The record's file.
        record: String,
    },
}

/// A checked upload waiting for activation, with its bytes (kept when it is activated).
struct Upload {
    candidate: Candidate,
    bytes: axum::body::Bytes,
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
    uploads: Mutex<HashMap<String, Upload>>,
    recent: Mutex<VecDeque<Progress>>,
    role: Mutex<Role>,
    metrics: Metrics,
    /// Per stage: whether it has a previous version to roll back to (as far as the API
    /// knows: its own activations, and each committed batch's swaps and rollbacks).
    previous: Mutex<Vec<bool>>,
    /// The record of activations, with `[admin] state-dir`.
    activations: Option<Activations>,
    /// Liveness and readiness, as the pipeline reports them.
    health: Arc<Health>,
    /// Those of the pipeline's later stages, which this API answers for too.
    later_stages: Mutex<self::health::Stages>,
    /// The pipeline's graph, for the console.
    topology: Mutex<Topology>,
    /// The last dead letters, for a caller with the token.
    dead_letters: Mutex<DeadLetters>,
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
        let activations = match &config.state_dir {
            Some(dir) => Some(Activations::open(dir, pipeline)?),
            None => {
                if token.is_some() {
                    tracing::warn!(
                        "admin API: no [admin] state-dir: versions activated through the API run until the process stops, a restart runs the files' versions"
                    );
                }
                None
            }
        };
        let previous = Mutex::new(vec![false; stages.len()]);
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
            previous,
            activations,
            health: Arc::new(Health::new(config.stuck_after)),
            later_stages: Mutex::new(Vec::new()),
            topology: Mutex::new(Topology::default()),
            dead_letters: Mutex::new(DeadLetters::default()),
        });
        restore(&shared)?;
        let limits = server::Limits {
            max_connections: config.max_connections,
            idle_timeout: config.idle_timeout,
        };
        let server = server::Server::start(listener, routes::router(shared.clone()), limits)
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

    /// Keeps a committed batch's dead letters for `GET /dead-letters` (the last
    /// [`dead::KEPT`]).
    pub fn record_dead_letters(&self, batch_id: u64, dead: &[(Record, Reason)]) {
        let start = dead.len().saturating_sub(dead::KEPT);
        let letters = dead[start..]
            .iter()
            .map(|(r, why)| DeadLetter::of(batch_id, r, why));
        lock(&self.shared.dead_letters).add(letters);
    }

    /// Describes the pipeline's graph for the console (`GET /topology`).
    pub fn set_topology(&self, topology: Topology) {
        *lock(&self.shared.topology) = topology;
    }

    /// Where the pipeline reports its liveness and readiness (`/healthz`, `/readyz`).
    pub fn health(&self) -> &Arc<Health> {
        &self.shared.health
    }

    /// Where a later stage of the pipeline, `name`, reports its liveness and readiness:
    /// `/healthz` and `/readyz` answer for it too, `/status` shows it.
    pub fn watch_stage(&self, name: &str) -> Arc<Health> {
        let health = Arc::new(Health::new(self.shared.health.stuck_after()));
        let mut stages = self
            .shared
            .later_stages
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        stages.push((name.to_string(), health.clone()));
        health
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

    /// Records a committed batch's progress: the metrics count it, `GET /status` shows it,
    /// and the record of activations follows the versions that ran.
    pub fn record(&self, progress: &Progress) {
        self.shared.metrics.record(progress);
        follow(&self.shared, progress);
        let mut recent = lock(&self.shared.recent);
        recent.push_back(progress.clone());
        while recent.len() > self.shared.recent_batches {
            recent.pop_front();
        }
    }
}

/// Whether a rollback note in a batch's progress (`<digest> <reason>`) is one asked for
/// through the API (after which the version rolled back is the previous one), not one of
/// probation (after which there is none).
fn asked_for(rolled_back: &str) -> bool {
    rolled_back.ends_with(routes::ROLLBACK_REASON)
}

/// Follows a committed batch: which stages have a previous version, and the record of
/// activations.
fn follow(shared: &Shared, progress: &Progress) {
    for (i, (config, _)) in shared.stages.iter().enumerate() {
        let Some(stage) = progress.stages.get(&config.name) else {
            continue;
        };
        match &stage.rolled_back {
            Some(note) => lock(&shared.previous)[i] = asked_for(note),
            None if stage.swapped_in => lock(&shared.previous)[i] = true,
            None => {}
        }
        let Some(activations) = &shared.activations else {
            continue;
        };
        match activations.follow(&config.name, &stage.digest, stage.rolled_back.as_deref()) {
            Ok(Some(change)) => {
                tracing::info!(target: AUDIT_TARGET, stage = %config.name, digest = %stage.digest, %change, "record of activations updated")
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, stage = %config.name, "cannot update the record of activations")
            }
        }
    }
}

/// At start: each stage's activation recorded in `[admin] state-dir` is checked and queued
/// to run from the first batch, and the log says which version each stage runs and why.
/// An activation whose stage's file changed since is dropped (a new file is a newer
/// decision, as it is while running). One that cannot run again (its module gone or
/// altered, refused by the stage's checks) stops the start with [`AdminError::Restore`].
fn restore(shared: &Shared) -> Result<(), AdminError> {
    for (i, (config, samples)) in shared.stages.iter().enumerate() {
        let file = std::fs::read(&config.plugin).ok().map(|b| digest_of(&b));
        let file_shown = file.as_deref().unwrap_or("unreadable");
        let recorded = shared
            .activations
            .as_ref()
            .and_then(|a| Some((a, a.get(&config.name)?)));
        let Some((activations, activation)) = recorded else {
            tracing::info!(stage = %config.name, digest = %file_shown, "the stage runs its file's version");
            continue;
        };
        if activation.file_digest != file {
            activations.forget(&config.name)?;
            tracing::info!(target: AUDIT_TARGET, stage = %config.name, digest = %file_shown, activation = %activation.describe(), "the stage's file changed since the activation recorded: the stage runs its file's version");
            continue;
        }
        let candidate = restored(shared, activations, &activation, i, samples)?;
        shared.sender.send(Found::Ready(candidate)).ok();
        activations.restored(&config.name);
        lock(&shared.previous)[i] = true;
        tracing::info!(target: AUDIT_TARGET, stage = %config.name, digest = %activation.digest, activation = %activation.describe(), file = %file_shown, "the stage runs the version activated through the admin API (recorded in [admin] state-dir), from the first batch");
    }
    Ok(())
}

/// Loads and checks a recorded activation's module.
fn restored(
    shared: &Shared,
    activations: &Activations,
    activation: &Activation,
    stage: usize,
    samples: &Samples,
) -> Result<Candidate, AdminError> {
    let config = &shared.stages[stage].0;
    let refuse = |reason: String| AdminError::Restore {
        stage: config.name.clone(),
        activation: activation.describe(),
        reason,
        record: activations.file().display().to_string(),
    };
    let path = activations.module(&activation.digest);
    let bytes = std::fs::read(&path)
        .map_err(|e| refuse(format!("cannot read its module {}: {e}", path.display())))?;
    if digest_of(&bytes) != activation.digest {
        return Err(refuse(format!(
            "its module {} has another sha256",
            path.display()
        )));
    }
    let started = Instant::now();
    let plugin = swap::prepare(&shared.runtime, config, &bytes, samples)
        .map_err(|reason| refuse(format!("it is refused: {reason}")))?;
    Ok(Candidate {
        stage,
        plugin,
        detected: started,
        prepared_in: started.elapsed(),
    })
}
