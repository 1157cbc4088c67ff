//! The admin HTTP API of a running pipeline: health, recent progress, Prometheus metrics,
//! and the plugin stages (list, upload a new version, activate it, roll back).
//!
//! | method and path | what |
//! |---|---|
//! | `GET /healthz` | `ok` while the pipeline runs |
//! | `GET /status` | the last batches' progress, as JSON |
//! | `GET /metrics` | counters and gauges in Prometheus text format |
//! | `GET /stages` | each stage, its active version, and checked uploads waiting |
//! | `POST /stages/{name}/modules` | upload a module (the body); it is checked at once |
//! | `POST /stages/{name}/activate` | `{"digest": ".."}`: activate an upload at the next batch |
//! | `POST /stages/{name}/rollback` | go back to the previous version at the next batch |
//! | `POST /stages/{name}/shadow` | `{"digest": ".."}`: run an upload in shadow mode beside the stage (`null`: stop) |
//!
//! The API listens on loopback unless told otherwise. `POST` calls need
//! `Authorization: Bearer <token>` with the configured token; without a configured token
//! they are refused. Uploads are limited in size. Every call that changes something, or
//! that is refused for want of the token, is logged under the `sluice::audit` target with
//! the caller's address, what and when.

mod config;
mod metrics;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

pub use self::config::AdminConfig;
use self::metrics::{Format, Metrics};
use crate::pipeline::progress::Progress;
use crate::udf::Runtime;
use crate::udf::config::StageConfig;
use crate::udf::swap::{self, Candidate, Found, Samples};

/// The admin API could not start.
#[derive(Debug, thiserror::Error)]
#[error("admin API: cannot listen on {listen}: {error}")]
pub struct AdminError {
    /// The address.
    pub listen: String,
    /// Why.
    pub error: std::io::Error,
}

struct Shared {
    pipeline: String,
    token: Option<String>,
    max_upload: u64,
    recent_batches: usize,
    runtime: Runtime,
    stages: Vec<(StageConfig, Samples)>,
    sender: Mutex<Sender<Found>>,
    uploads: Mutex<HashMap<String, Candidate>>,
    recent: Mutex<VecDeque<Progress>>,
    metrics: Metrics,
}

/// A running admin API. Feed it each batch's progress with [`Admin::record`].
pub struct Admin {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
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
        let error = |error| AdminError {
            listen: config.listen.clone(),
            error,
        };
        let listener = TcpListener::bind(&config.listen).map_err(error)?;
        let addr = listener.local_addr().map_err(error)?;
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
        let shared = Arc::new(Shared {
            pipeline: pipeline.to_string(),
            token,
            max_upload: config.max_upload.0,
            recent_batches: config.recent_batches.max(1),
            runtime,
            stages,
            sender: Mutex::new(sender),
            uploads: Mutex::new(HashMap::new()),
            recent: Mutex::new(VecDeque::new()),
            metrics,
        });
        let serving = shared.clone();
        std::thread::Builder::new()
            .name("sluice-admin".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                    if let Err(error) = serve(&serving, stream) {
                        tracing::debug!(%error, "admin API: connection failed");
                    }
                }
            })
            .map_err(error)?;
        tracing::info!(%addr, "admin API listening");
        Ok(Admin { shared, addr })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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

/// A parsed request.
struct Request {
    method: String,
    path: String,
    authorization: Option<String>,
    accept: Option<String>,
    body: Vec<u8>,
}

/// A response: status, content type, body.
type Response = (u16, &'static str, Vec<u8>);

fn json_response(status: u16, value: Value) -> Response {
    (status, "application/json", value.to_string().into_bytes())
}

fn error(status: u16, message: impl Into<String>) -> Response {
    json_response(status, json!({ "error": message.into() }))
}

fn serve(shared: &Shared, stream: TcpStream) -> std::io::Result<()> {
    let peer = stream.peer_addr()?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let response = match read_request(&mut reader, shared.max_upload) {
        Ok(request) => route(shared, &request, peer),
        Err(response) => response,
    };
    write_response(stream, response)
}

fn read_request(reader: &mut impl BufRead, max_upload: u64) -> Result<Request, Response> {
    let mut line = String::new();
    let mut head = 0usize;
    let mut read_line = |line: &mut String| -> Result<(), Response> {
        line.clear();
        let n = reader
            .read_line(line)
            .map_err(|e| error(400, format!("cannot read the request: {e}")))?;
        head += n;
        if n == 0 || head > 64 * 1024 {
            return Err(error(400, "request head missing or too long"));
        }
        Ok(())
    };
    read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(error(400, "bad request line"));
    };
    let (method, path) = (method.to_string(), path.to_string());
    let (mut length, mut authorization, mut accept) = (0u64, None, None);
    loop {
        read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => {
                    length = value
                        .parse()
                        .map_err(|_| error(400, "bad Content-Length"))?;
                }
                "authorization" => authorization = Some(value.to_string()),
                "accept" => accept = Some(value.to_string()),
                _ => {}
            }
        }
    }
    if length > max_upload {
        return Err(error(
            413,
            format!("the body is {length} bytes; the limit is {max_upload} ([admin] max-upload)"),
        ));
    }
    let mut body = vec![0; length as usize];
    reader
        .read_exact(&mut body)
        .map_err(|e| error(400, format!("cannot read the body: {e}")))?;
    Ok(Request {
        method,
        path,
        authorization,
        accept,
        body,
    })
}

fn write_response(mut stream: TcpStream, (status, kind, body): Response) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        503 => "Service Unavailable",
        _ => "Error",
    };
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(&body)?;
    stream.flush()
}

/// Constant-time comparison of the presented token with the configured one.
fn authorized(shared: &Shared, request: &Request) -> Result<(), Response> {
    let Some(token) = &shared.token else {
        return Err(error(
            403,
            "changes are disabled: configure [admin] token or SLUICE_ADMIN_TOKEN",
        ));
    };
    let presented = request
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or_default();
    let same = presented.len() == token.len()
        && presented
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same {
        Ok(())
    } else {
        Err(error(401, "a valid bearer token is required"))
    }
}

fn route(shared: &Shared, request: &Request, peer: SocketAddr) -> Response {
    let path = request.path.split('?').next().unwrap_or_default();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (request.method.as_str(), segments.as_slice()) {
        ("GET", ["healthz"]) => (200, "text/plain", b"ok\n".to_vec()),
        ("GET", ["status"]) => json_response(
            200,
            json!({ "pipeline": shared.pipeline, "recent": *lock(&shared.recent) }),
        ),
        ("GET", ["metrics"]) => {
            let format = Format::accepted(request.accept.as_deref());
            match shared.metrics.render(format) {
                Ok(text) => (200, format.content_type(), text.into_bytes()),
                Err(e) => error(500, format!("cannot render the metrics: {e}")),
            }
        }
        ("GET", ["stages"]) => json_response(200, stages(shared)),
        ("POST", ["stages", name, action]) => {
            let what = format!("{} {}", request.method, request.path);
            if let Err(refused) = authorized(shared, request) {
                tracing::warn!(target: "sluice::audit", %peer, %what, status = refused.0, "refused: no valid token");
                return refused;
            }
            let Some(stage) = shared.stages.iter().position(|(s, _)| s.name == *name) else {
                return error(404, format!("no stage named `{name}`"));
            };
            let response = match *action {
                "modules" => upload(shared, stage, &request.body),
                "activate" => activate(shared, stage, &request.body),
                "shadow" => shadow(shared, stage, &request.body),
                "rollback" => {
                    let sent = lock(&shared.sender).send(Found::Rollback {
                        stage,
                        reason: format!("requested by {peer} over the admin API"),
                    });
                    match sent {
                        Ok(()) => json_response(202, json!({ "rollback": "at the next batch" })),
                        Err(_) => error(503, "the pipeline is stopping"),
                    }
                }
                _ => error(404, format!("unknown action `{action}`")),
            };
            let body = String::from_utf8_lossy(&response.2);
            tracing::info!(target: "sluice::audit", %peer, %what, status = response.0, result = %body, "admin change");
            response
        }
        (_, ["healthz" | "status" | "metrics" | "stages"]) => error(405, "method not allowed"),
        _ => error(404, "not found"),
    }
}

fn stages(shared: &Shared) -> Value {
    let recent = lock(&shared.recent);
    let latest = recent.back();
    let uploads = lock(&shared.uploads);
    let list: Vec<Value> = shared
        .stages
        .iter()
        .enumerate()
        .map(|(i, (s, _))| {
            let waiting: Vec<Value> = uploads
                .iter()
                .filter(|(_, c)| c.stage == i)
                .map(|(digest, c)| {
                    let (plugin, version) = c.plugin.declared();
                    json!({ "digest": digest, "plugin": plugin, "version": version })
                })
                .collect();
            json!({
                "name": s.name,
                "file": s.plugin.display().to_string(),
                "watch": s.watch,
                "active": latest.and_then(|p| p.stages.get(&s.name)),
                "uploads": waiting,
            })
        })
        .collect();
    json!({ "stages": list })
}

fn upload(shared: &Shared, stage: usize, body: &[u8]) -> Response {
    let (config, samples) = &shared.stages[stage];
    let started = Instant::now();
    match swap::prepare(&shared.runtime, config, body, samples) {
        Ok(plugin) => {
            let digest = plugin.digest().to_string();
            let (name, version) = plugin.declared();
            lock(&shared.uploads).insert(
                digest.clone(),
                Candidate {
                    stage,
                    plugin,
                    detected: started,
                    prepared_in: started.elapsed(),
                },
            );
            json_response(
                201,
                json!({ "digest": digest, "plugin": name, "version": version, "checked": true }),
            )
        }
        Err(reason) => error(422, format!("refused: {reason}")),
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
            400,
            "the body must be {\"digest\": \"<sha256 of an upload>\"} or {\"digest\": null}",
        );
    };
    let plugin = match &digest {
        Some(d) => match lock(&shared.uploads).get(d) {
            Some(c) if c.stage == stage => Some(c.plugin.clone()),
            _ => return error(404, format!("no checked upload {d} for this stage")),
        },
        None => None,
    };
    match lock(&shared.sender).send(Found::Shadow { stage, plugin }) {
        Ok(()) => json_response(
            202,
            json!({ "shadow": digest, "when": "at the next batch" }),
        ),
        Err(_) => error(503, "the pipeline is stopping"),
    }
}

fn activate(shared: &Shared, stage: usize, body: &[u8]) -> Response {
    let Ok(Activate { digest }) = serde_json::from_slice(body) else {
        return error(
            400,
            "the body must be {\"digest\": \"<sha256 of an upload>\"}",
        );
    };
    let mut uploads = lock(&shared.uploads);
    match uploads.get(&digest) {
        Some(c) if c.stage == stage => {}
        _ => return error(404, format!("no checked upload {digest} for this stage")),
    }
    let mut candidate = uploads.remove(&digest).expect("checked above");
    candidate.detected = Instant::now();
    match lock(&shared.sender).send(Found::Ready(candidate)) {
        Ok(()) => json_response(
            202,
            json!({ "activate": digest, "when": "at the next batch" }),
        ),
        Err(_) => error(503, "the pipeline is stopping"),
    }
}

#[cfg(test)]
mod http_tests {
    use super::*;

    #[test]
    fn requests_are_parsed_and_bounded() {
        let raw = b"POST /stages/rules/modules HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nAuthorization: Bearer t\r\n\r\nabc";
        let r = read_request(&mut &raw[..], 10).unwrap_or_else(|_| panic!("parses"));
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/stages/rules/modules")
        );
        assert_eq!(r.authorization.as_deref(), Some("Bearer t"));
        assert_eq!(r.body, b"abc");
        let too_big = read_request(&mut &raw[..], 2).err().unwrap();
        assert_eq!(too_big.0, 413);
        assert_eq!(read_request(&mut &b""[..], 2).err().unwrap().0, 400);
    }
}
