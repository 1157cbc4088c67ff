//! The calls of the admin API, and what stands before the `POST` calls: the token check
//! (before the body is read), the audit log, and the body limit.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tower_http::limit::RequestBodyLimitLayer;

use super::health::{Readiness, ReadinessChange, live_all, ready_all};
use super::metrics::Format;
use super::persist::Activation;
use super::{AUDIT_TARGET, Shared, Upload, lock};
use crate::plugin::digest_of;
use crate::plugin::swap::{self, Candidate, Found};
use crate::progress::{Progress, Role};

/// The caller's address, put in each request's extensions by the server.
#[derive(Debug, Clone, Copy)]
pub(super) struct Peer(pub(super) SocketAddr);

/// Largest answer body written to the audit log.
const AUDITED_ANSWER: usize = 64 * 1024;

/// How the reason of a rollback asked for through the API ends (the progress notes a
/// rollback as `<digest> <reason>`).
pub(super) const ROLLBACK_REASON: &str = "over the admin API";

/// The routes. On `POST`, from the outside in: the token check and the audit log, then the
/// body limit (an announced length over it is refused before the body is read).
pub(super) fn router(shared: Arc<Shared>) -> Router {
    let limit = shared.max_upload;
    let changes = Router::new()
        .route("/stages/{name}/{action}", post(change))
        .layer(DefaultBodyLimit::max(limit))
        .layer(RequestBodyLimitLayer::new(limit))
        .layer(middleware::map_response_with_state(
            shared.clone(),
            too_large,
        ))
        .route_layer(middleware::from_fn_with_state(shared.clone(), audit));
    Router::new()
        .route("/", get(console))
        .route("/console", get(console))
        .route("/topology", get(topology))
        .route("/dead-letters", get(dead_letters))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/stages", get(stages))
        .merge(changes)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(shared)
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response()
}

fn json(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => json_response(status, body),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot serialise: {e}"),
        ),
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    json(status, &json!({ "error": message.into() }))
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not found")
}

async fn method_not_allowed() -> Response {
    error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
}

fn peer_of(request: &Request) -> String {
    request
        .extensions()
        .get::<Peer>()
        .map_or_else(|| "unknown".to_string(), |p| p.0.to_string())
}

/// Refuses a call without the configured token, before its body is read, and logs every
/// call under `sluice::audit` with its result.
async fn audit(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let peer = peer_of(&request);
    let what = format!("{} {}", request.method(), request.uri());
    if let Some((status, why)) = refusal(&shared, request.headers()) {
        let code = status.as_u16();
        tracing::warn!(target: AUDIT_TARGET, %peer, %what, status = code, "refused: no valid token");
        return error(status, why);
    }
    let (parts, body) = next.run(request).await.into_parts();
    let body = axum::body::to_bytes(body, AUDITED_ANSWER)
        .await
        .unwrap_or_else(|e| Bytes::from(format!("(answer not logged: {e})")));
    let status = parts.status.as_u16();
    let result = String::from_utf8_lossy(&body);
    tracing::info!(target: AUDIT_TARGET, %peer, %what, status, %result, "admin change");
    Response::from_parts(parts, Body::from(body))
}

/// Why a call is refused for want of the token, if it is: the presented token is compared
/// with the configured one in constant time.
fn refusal(shared: &Shared, headers: &HeaderMap) -> Option<(StatusCode, &'static str)> {
    let Some(token) = &shared.token else {
        return Some((
            StatusCode::FORBIDDEN,
            "changes are disabled: configure [admin] token or SLUICE_ADMIN_TOKEN",
        ));
    };
    let presented = headers
        .get(AUTHORIZATION)
        .and_then(|a| a.to_str().ok())
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or_default();
    let same = presented.len() == token.len()
        && presented
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    (!same).then_some((StatusCode::UNAUTHORIZED, "a valid bearer token is required"))
}

/// Says in JSON why a body was refused for its size, whichever layer refused it.
async fn too_large(State(shared): State<Arc<Shared>>, response: Response) -> Response {
    if response.status() != StatusCode::PAYLOAD_TOO_LARGE {
        return response;
    }
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the body is larger than the limit of {} bytes ([admin] max-upload)",
            shared.max_upload
        ),
    )
}

/// The web console: one page, its script and style inline, that reads the other calls.
const CONSOLE: &str = include_str!("console/index.html");

async fn console() -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")),
            (
                axum::http::header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
                ),
            ),
        ],
        CONSOLE,
    )
        .into_response()
}

async fn topology(State(shared): State<Arc<Shared>>) -> Response {
    let topology = lock(&shared.topology).clone();
    json(StatusCode::OK, &topology)
}

/// The last dead letters with their values, for a caller with the token only (values can
/// hold personal data); a refusal is logged in the audit log as a refused change is.
async fn dead_letters(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let peer = peer_of(&request);
    if let Some((status, why)) = refusal(&shared, request.headers()) {
        let code = status.as_u16();
        tracing::warn!(target: AUDIT_TARGET, %peer, what = "GET /dead-letters", status = code, "refused: no valid token");
        return error(status, why);
    }
    tracing::info!(target: AUDIT_TARGET, %peer, what = "GET /dead-letters", "dead-letter samples read");
    let letters = lock(&shared.dead_letters).newest_first();
    json(StatusCode::OK, &json!({ "dead_letters": letters }))
}

/// Liveness: 200 `ok`, or 503 saying how long the loop has been quiet.
async fn healthz(State(shared): State<Arc<Shared>>) -> Response {
    match live_all(&shared.health, &lock(&shared.later_stages)) {
        Ok(()) => text(StatusCode::OK, "ok\n".to_string()),
        Err(stuck) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{stuck}\n")),
    }
}

/// Readiness: 200 and what the process does, or 503 and why it is not ready.
async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    let role = *lock(&shared.role);
    match ready_all(&shared.health, role, &lock(&shared.later_stages)) {
        Ok(what) => text(StatusCode::OK, format!("{what}\n")),
        Err(why) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
        body,
    )
        .into_response()
}

async fn status(State(shared): State<Arc<Shared>>) -> Response {
    #[derive(Serialize)]
    struct Status<'a> {
        pipeline: &'a str,
        role: Role,
        readiness: Readiness,
        readiness_changes: Vec<ReadinessChange>,
        partitions: &'a [String],
        recent: &'a VecDeque<Progress>,
        /// The later stages' readiness, by name.
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        stages: BTreeMap<String, Readiness>,
    }
    let role = *lock(&shared.role);
    let readiness = shared.health.readiness();
    let stages = lock(&shared.later_stages)
        .iter()
        .map(|(name, health)| (name.clone(), health.readiness()))
        .collect();
    let recent = lock(&shared.recent);
    let partitions = match (role, recent.back()) {
        (Role::Standby, _) | (_, None) => &[][..],
        (_, Some(last)) => &last.partitions[..],
    };
    json(
        StatusCode::OK,
        &Status {
            pipeline: &shared.pipeline,
            role,
            readiness,
            readiness_changes: shared.health.changes(),
            partitions,
            recent: &recent,
            stages,
        },
    )
}

async fn metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let accept = headers.get(ACCEPT).and_then(|a| a.to_str().ok());
    let format = Format::accepted(accept);
    match shared.metrics.render(format) {
        Ok(text) => {
            let kind = HeaderValue::from_static(format.content_type());
            ([(CONTENT_TYPE, kind)], text).into_response()
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot render the metrics: {e}"),
        ),
    }
}

async fn stages(State(shared): State<Arc<Shared>>) -> Response {
    let recent = lock(&shared.recent);
    let latest = recent.back();
    let uploads = lock(&shared.uploads);
    let list: Vec<_> = shared
        .stages
        .iter()
        .enumerate()
        .map(|(i, (s, _))| {
            let waiting: Vec<_> = uploads
                .iter()
                .filter(|(_, u)| u.candidate.stage == i)
                .map(|(digest, u)| {
                    let (plugin, version) = u.candidate.plugin.declared();
                    json!({ "digest": digest, "plugin": plugin, "version": version })
                })
                .collect();
            json!({
                "name": s.name,
                "file": s.plugin.display().to_string(),
                "watch": s.watch,
                "active": latest.and_then(|p| p.stages.get(&s.name)),
                "uploads": waiting,
                "activation": shared.activations.as_ref().and_then(|a| a.get(&s.name)),
            })
        })
        .collect();
    json(StatusCode::OK, &json!({ "stages": list }))
}

/// `POST /stages/{name}/{action}`, past the token check.
async fn change(
    State(shared): State<Arc<Shared>>,
    Path((name, action)): Path<(String, String)>,
    request: Request,
) -> Response {
    let Some(stage) = shared.stages.iter().position(|(s, _)| s.name == name) else {
        return error(StatusCode::NOT_FOUND, format!("no stage named `{name}`"));
    };
    let peer = peer_of(&request);
    if action == "rollback" {
        return rollback(&shared, stage, &peer);
    }
    if !matches!(action.as_str(), "modules" | "activate" | "shadow") {
        return error(StatusCode::NOT_FOUND, format!("unknown action `{action}`"));
    }
    let body = match Bytes::from_request(request, &()).await {
        Ok(body) => body,
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    match action.as_str() {
        "modules" => {
            let checking = shared.clone();
            tokio::task::spawn_blocking(move || upload(&checking, stage, body))
                .await
                .unwrap_or_else(|e| {
                    error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("the check failed: {e}"),
                    )
                })
        }
        "activate" => activate(&shared, stage, &body, &peer),
        _ => shadow(&shared, stage, &body),
    }
}

/// Checks an uploaded module (compiling it takes a while: this runs on a blocking thread).
fn upload(shared: &Shared, stage: usize, body: Bytes) -> Response {
    let (config, samples) = &shared.stages[stage];
    let started = Instant::now();
    match swap::prepare(&shared.runtime, config, &body, samples) {
        Ok(plugin) => {
            let digest = plugin.digest().to_string();
            let (name, version) = plugin.declared();
            let answer =
                json!({ "digest": digest, "plugin": name, "version": version, "checked": true });
            let candidate = Candidate {
                stage,
                plugin,
                detected: started,
                prepared_in: started.elapsed(),
            };
            let upload = Upload {
                candidate,
                bytes: body,
            };
            lock(&shared.uploads).insert(digest, upload);
            json(StatusCode::CREATED, &answer)
        }
        Err(reason) => error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("refused: {reason}"),
        ),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Activate {
    digest: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Shadow {
    digest: Option<String>,
}

fn shadow(shared: &Shared, stage: usize, body: &[u8]) -> Response {
    let Ok(Shadow { digest }) = serde_json::from_slice(body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "the body must be {\"digest\": \"<sha256 of an upload>\"} or {\"digest\": null}",
        );
    };
    let plugin = match &digest {
        Some(d) => match lock(&shared.uploads).get(d) {
            Some(u) if u.candidate.stage == stage => Some(u.candidate.plugin.clone()),
            _ => {
                return error(
                    StatusCode::NOT_FOUND,
                    format!("no checked upload {d} for this stage"),
                );
            }
        },
        None => None,
    };
    match shared.sender.send(Found::Shadow { stage, plugin }) {
        Ok(()) => json(
            StatusCode::ACCEPTED,
            &json!({ "shadow": digest, "when": "at the next batch" }),
        ),
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "the pipeline is stopping"),
    }
}

/// `POST /stages/{name}/rollback`: 409 when the stage has no previous version.
fn rollback(shared: &Shared, stage: usize, peer: &str) -> Response {
    if !lock(&shared.previous)[stage] {
        let name = &shared.stages[stage].0.name;
        return error(
            StatusCode::CONFLICT,
            format!("stage `{name}` has no previous version to roll back to"),
        );
    }
    let reason = format!("requested by {peer} {ROLLBACK_REASON}");
    match shared.sender.send(Found::Rollback { stage, reason }) {
        Ok(()) => json(
            StatusCode::ACCEPTED,
            &json!({ "rollback": "at the next batch" }),
        ),
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "the pipeline is stopping"),
    }
}

fn activate(shared: &Shared, stage: usize, body: &[u8], peer: &str) -> Response {
    let Ok(Activate { digest }) = serde_json::from_slice(body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "the body must be {\"digest\": \"<sha256 of an upload>\"}",
        );
    };
    let mut upload = match lock(&shared.uploads).entry(digest.clone()) {
        Entry::Occupied(upload) if upload.get().candidate.stage == stage => upload.remove(),
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                format!("no checked upload {digest} for this stage"),
            );
        }
    };
    let recorded = match record(shared, stage, &digest, &upload.bytes, peer) {
        Ok(recorded) => recorded,
        Err(message) => {
            lock(&shared.uploads).insert(digest, upload);
            return error(StatusCode::INTERNAL_SERVER_ERROR, message);
        }
    };
    upload.candidate.detected = Instant::now();
    match shared.sender.send(Found::Ready(upload.candidate)) {
        Ok(()) => {
            lock(&shared.previous)[stage] = true;
            let persisted = matches!(recorded, Recorded::Replacing(_));
            json(
                StatusCode::ACCEPTED,
                &json!({ "activate": digest, "when": "at the next batch", "persisted": persisted }),
            )
        }
        Err(_) => {
            if let (Some(activations), Recorded::Replacing(before)) =
                (&shared.activations, recorded)
            {
                let _ = activations.undo(&shared.stages[stage].0.name, before);
            }
            error(StatusCode::SERVICE_UNAVAILABLE, "the pipeline is stopping")
        }
    }
}

/// What recording an activation did.
enum Recorded {
    /// Nothing: there is no `[admin] state-dir`.
    Not,
    /// Recorded, in place of this record.
    Replacing(Option<Activation>),
}

/// Records an activation in `[admin] state-dir`, if there is one; `Err` (and nothing is
/// activated) if it cannot.
fn record(
    shared: &Shared,
    stage: usize,
    digest: &str,
    module: &[u8],
    peer: &str,
) -> Result<Recorded, String> {
    let Some(activations) = &shared.activations else {
        return Ok(Recorded::Not);
    };
    let config = &shared.stages[stage].0;
    let activation = Activation {
        digest: digest.to_string(),
        activated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        by: peer.to_string(),
        file_digest: std::fs::read(&config.plugin).ok().map(|b| digest_of(&b)),
        previous: None,
    };
    activations
        .activate(&config.name, activation, module)
        .map(Recorded::Replacing)
        .map_err(|e| format!("cannot record the activation, so nothing changed: {e}"))
}
