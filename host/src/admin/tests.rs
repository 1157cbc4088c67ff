//! The admin API over real connections: an idle client holds up no one, the token is
//! checked before the body is read, the body limit answers 413, and the calls answer as
//! they always did.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Admin, AdminConfig, AdminError, with_audit};
use crate::event_time::StateSize;
use crate::plugin::Runtime;
use crate::plugin::config::StageConfig;
use crate::plugin::swap::Found;
use crate::progress::{CpuTimes, Durations, EventTimeProgress, Progress, Role};
use crate::progress::{StageCounts, StageProgress};

/// A batch's progress as the pipeline makes it, with a stage, dead letters and event time.
/// `batch_id` moves the wall clock and the watermark on by a minute per batch.
pub(super) fn progress(batch_id: u64) -> Progress {
    let minute = i64::try_from(batch_id).unwrap() * 60;
    Progress {
        pipeline: "clicks".into(),
        batch_id,
        commit_id: format!("clicks-{batch_id}"),
        table: "db.clicks".into(),
        role: crate::progress::Role::Member,
        partitions: vec!["clicks/0".into(), "clicks/2".into()],
        rebalances: batch_id,
        committed_at: chrono::DateTime::from_timestamp(1_785_320_000 + minute, 250_000_000)
            .unwrap(),
        input_rows: 10,
        rows_written: 8,
        rows_dead_lettered: 2,
        dead_lettered_by_code: BTreeMap::from([("bad \"x\"\\ and\nmore".to_string(), 2)]),
        dead_lettered_by_stage: BTreeMap::new(),
        dropped_fields: BTreeMap::from([("utm_source".to_string(), 3)]),
        input_rows_per_second: 1.0,
        processed_rows_per_second: 10.0,
        files_written: 1,
        bytes_written: 1000,
        commit_retries: 1,
        snapshots_expired: 3,
        snapshot_expiry_failures: 0,
        compaction: crate::iceberg::compact::Compaction {
            runs: 1,
            files_rewritten: 40,
            bytes_rewritten: 400_000,
            files_written: 1,
            bytes_written: 350_000,
            conflicts: 2,
            abandoned: 0,
            failures: 0,
        },
        lookups: BTreeMap::from([(
            "profiles".to_string(),
            crate::progress::LookupProgress {
                keys: 3,
                bytes: 120,
                skipped: batch_id,
                version: None,
            },
        )]),
        lookup_refresh_failures: batch_id,
        durations_ms: Durations {
            poll: 100,
            plugins: 500,
            encode: 50,
            dead_letter: 20,
            write: 200,
            state: 10,
            commit: 120,
            total: 1000,
        },
        cpu_us: CpuTimes::default(),
        start_offsets: "{}".into(),
        end_offsets: "{}".into(),
        lag: 42 - i64::try_from(batch_id).unwrap(),
        lag_by_partition: BTreeMap::from([(
            "clicks/2".to_string(),
            42 - i64::try_from(batch_id).unwrap(),
        )]),
        stages: BTreeMap::from([("rules".to_string(), stage())]),
        event_time: Some(event_time(batch_id)),
        repartition: None,
    }
}

fn stage() -> StageProgress {
    StageProgress {
        digest: "ab12".into(),
        plugin: "validator".into(),
        version: "1.0.0".into(),
        counts: StageCounts {
            events: 10,
            kept: 8,
            rejected: 2,
            failed: 0,
            rewritten: 1,
            calls: 1,
            micros: 250_000,
        },
        verdicts: BTreeMap::from([("rejected:invalid_price".to_string(), 2)]),
        micros_per_event: 25_000.0,
        swapped_in: false,
        swap_ms: None,
        shadow: None,
        rolled_back: None,
        swaps: 1,
        rollbacks: 0,
        refused: 0,
    }
}

fn event_time(batch_id: u64) -> EventTimeProgress {
    let minute = i64::try_from(batch_id).unwrap() * 60;
    EventTimeProgress {
        watermark: Some(crate::units::Micros((1_785_319_500 + minute) * 1_000_000)),
        rows_late: 1,
        rows_deduplicated: 2,
        windows_emitted: BTreeMap::from([("per_minute".to_string(), 3)]),
        state: BTreeMap::from([(
            "dedup".to_string(),
            StateSize {
                rows: 100 * batch_id,
                bytes: 6400,
            },
        )]),
        state_file_bytes: 4096,
        join_rows_evicted: BTreeMap::from([("with_profiles".to_string(), (3, batch_id))]),
        partition_watermarks: BTreeMap::new(),
    }
}

/// An admin API on a free loopback port, with one stage, `rules`.
fn start(token: &str, max_upload: &str, recent_batches: usize) -> (Admin, Receiver<Found>) {
    let (admin, found) = start_with(&format!(
        "token = \"{token}\"\nmax-upload = \"{max_upload}\"\nrecent-batches = {recent_batches}"
    ));
    (admin.unwrap(), found)
}

/// [`start`] with the `[admin]` keys `keys`.
pub(super) fn start_with(keys: &str) -> (Result<Admin, AdminError>, Receiver<Found>) {
    let config: AdminConfig = toml::from_str(&format!("listen = \"127.0.0.1:0\"\n{keys}")).unwrap();
    let stage: StageConfig = toml::from_str("name = \"rules\"\nplugin = \"rules.wasm\"").unwrap();
    let runtime = Runtime::new(toml::from_str("").unwrap()).unwrap();
    let (sender, found) = channel();
    let admin = Admin::start(
        &config,
        "clicks",
        runtime,
        vec![(stage, Vec::new())],
        sender,
    );
    (admin, found)
}

/// An answer: status, head, body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    head: String,
    pub(super) body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends `request` as it is and reads the answer to the end, waiting at most `within`.
pub(super) fn send(addr: SocketAddr, request: &[u8], within: Duration) -> Answer {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(within)).unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(
        started.elapsed() < within && !answer.is_empty(),
        "no answer within {within:?} ({read:?}): {answer:?}"
    );
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok());
    Answer {
        status: status.unwrap_or_else(|| panic!("no status in {answer:?}")),
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// A request with `token` (if not empty) and `body`.
pub(crate) fn call(admin: &Admin, method: &str, path: &str, token: &str, body: &str) -> Answer {
    let auth = if token.is_empty() {
        String::new()
    } else {
        format!("Authorization: Bearer {token}\r\n")
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: sluice\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    send(admin.addr(), request.as_bytes(), Duration::from_secs(5))
}

#[test]
fn an_idle_connection_does_not_hold_up_healthz() {
    let (admin, _found) = start("s3cret", "1KiB", 20);
    let _silent = TcpStream::connect(admin.addr()).unwrap();
    let mut halfway = TcpStream::connect(admin.addr()).unwrap();
    halfway.write_all(b"GET /hea").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let request = b"GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n";
    let answer = send(admin.addr(), request, Duration::from_secs(1));
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok\n"));
}

#[test]
fn the_token_is_checked_before_the_body_is_read() {
    // The bodies are announced and never sent: an answer means they were not waited for.
    let (admin, _found) = start("s3cret", "64MiB", 20);
    for auth in [
        "",
        "Authorization: Bearer guess\r\n",
        "Authorization: s3cret\r\n",
    ] {
        for length in [1_000_000u64, 1 << 40] {
            let request = format!(
                "POST /stages/rules/modules HTTP/1.1\r\nHost: sluice\r\n{auth}Content-Length: {length}\r\n\r\n"
            );
            let answer = send(admin.addr(), request.as_bytes(), Duration::from_secs(1));
            assert_eq!(answer.status, 401, "{auth:?} {length}: {}", answer.body);
            assert_eq!(answer.json()["error"], "a valid bearer token is required");
        }
    }
    let (admin, _found) = start("", "64MiB", 20);
    let request = "POST /stages/rules/modules HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer \r\nContent-Length: 1000000\r\n\r\n";
    let answer = send(admin.addr(), request.as_bytes(), Duration::from_secs(1));
    assert_eq!(answer.status, 403, "{}", answer.body);
}

#[test]
fn a_body_over_the_limit_is_refused_with_413() {
    let (admin, _found) = start("s3cret", "1KiB", 20);
    let head =
        "POST /stages/rules/modules HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer s3cret\r\n";
    // Announced: refused before it is sent.
    let request = format!("{head}Content-Length: 1025\r\n\r\n");
    let answer = send(admin.addr(), request.as_bytes(), Duration::from_secs(1));
    assert_eq!(answer.status, 413, "{}", answer.body);
    assert!(answer.head.contains("application/json"), "{}", answer.head);
    let error = answer.json()["error"].as_str().unwrap().to_string();
    assert!(error.contains("1024 bytes ([admin] max-upload)"), "{error}");
    // Not announced (chunked): refused once past the limit.
    let chunk = "x".repeat(2048);
    let request = format!("{head}Transfer-Encoding: chunked\r\n\r\n800\r\n{chunk}\r\n0\r\n\r\n");
    let answer = send(admin.addr(), request.as_bytes(), Duration::from_secs(5));
    assert_eq!(answer.status, 413, "{}", answer.body);
    // At the limit it goes through, to be refused as no module.
    let body = "x".repeat(1024);
    let answer = call(&admin, "POST", "/stages/rules/modules", "s3cret", &body);
    assert_eq!(answer.status, 422, "{}", answer.body);
}

#[test]
fn the_probes_answer_what_the_pipeline_reports() {
    use super::health::Readiness;
    let (admin, _found) = start_with("stuck-after = \"300ms\"");
    let admin = admin.unwrap();
    let ready = |admin: &Admin| {
        let answer = call(admin, "GET", "/readyz", "", "");
        (answer.status, answer.body)
    };
    assert_eq!(ready(&admin), (503, "not ready: starting\n".into()));
    admin.health().set(Readiness::Running);
    assert_eq!(ready(&admin), (200, "ready\n".into()));
    let outage = "retrying after a fault: reading end offsets: broker transport failure";
    admin.health().set(Readiness::Waiting(outage.into()));
    assert_eq!(ready(&admin), (503, format!("not ready: {outage}\n")));
    let status = call(&admin, "GET", "/status", "", "").json();
    assert_eq!(
        status["readiness"],
        serde_json::json!({"state": "waiting", "reason": outage})
    );
    admin.set_role(Role::Standby);
    assert_eq!(ready(&admin), (200, "standby: ready to take over\n".into()));

    let live = call(&admin, "GET", "/healthz", "", "");
    assert_eq!((live.status, live.body.as_str()), (200, "ok\n"));
    std::thread::sleep(Duration::from_millis(500));
    let stuck = call(&admin, "GET", "/healthz", "", "");
    assert_eq!(stuck.status, 503, "{}", stuck.body);
    assert!(stuck.body.contains("no progress"), "{}", stuck.body);
    admin.health().beat();
    assert_eq!(call(&admin, "GET", "/healthz", "", "").status, 200);
}

#[test]
fn the_console_and_the_graph_are_served() {
    use super::topology::{Node, Topology};
    let (admin, _found) = start("s3cret", "1KiB", 20);
    for path in ["/", "/console"] {
        let page = call(&admin, "GET", path, "", "");
        assert_eq!(page.status, 200, "{path}");
        assert!(page.head.contains("text/html"), "{}", page.head);
        assert!(
            page.head
                .to_lowercase()
                .contains("content-security-policy: default-src 'none'")
        );
        assert!(page.body.contains("<title>sluice console</title>"));
        for external in ["src=\"http", "href=\"http", "@import", "fetch(\"http"] {
            assert!(!page.body.contains(external), "offline: {external}");
        }
    }
    assert_eq!(
        call(&admin, "GET", "/topology", "", "").json()["stages"],
        serde_json::json!([])
    );
    admin.set_topology(Topology {
        sources: vec![Node::new("clicks", "Kafka topic")],
        stages: vec![Node::new("rules", "plugin rules.wasm")],
        ..Topology::default()
    });
    let graph = call(&admin, "GET", "/topology", "", "").json();
    assert_eq!(graph["sources"][0]["name"], "clicks");
    assert_eq!(graph["stages"][0]["detail"], "plugin rules.wasm");
}

#[test]
fn the_calls_answer_as_they_did() {
    let (admin, _found) = start("s3cret", "1KiB", 20);
    let answer = call(&admin, "GET", "/healthz", "", "");
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok\n"));
    assert!(answer.head.to_lowercase().contains("connection: close"));
    let status = call(&admin, "GET", "/status", "", "");
    assert_eq!(status.status, 200);
    assert_eq!(
        status.json(),
        serde_json::json!({"pipeline": "clicks", "role": "single", "readiness": {"state": "starting"}, "readiness_changes": [], "partitions": [], "recent": []})
    );
    admin.set_role(Role::Standby);
    let status = call(&admin, "GET", "/status", "", "").json();
    assert_eq!(status["role"], "standby");
    let metrics = call(&admin, "GET", "/metrics", "", "").body;
    assert!(metrics.contains("sluice_active 0"), "{metrics}");
    admin.set_role(Role::Active);
    let metrics = call(&admin, "GET", "/metrics", "", "").body;
    assert!(metrics.contains("sluice_active 1"), "{metrics}");
    let stages = call(&admin, "GET", "/stages", "", "").json();
    assert_eq!(stages["stages"][0]["name"], "rules");
    assert_eq!(stages["stages"][0]["active"], Value::Null);
    let bodies = (r#"{"digest": "ab"}"#, "no checked upload ab");
    for (request, body, status, error) in [
        ("POST /healthz", "", 405, "method not allowed"),
        ("GET /nope", "", 404, "not found"),
        (
            "POST /stages/nope/modules",
            "x",
            404,
            "no stage named `nope`",
        ),
        ("POST /stages/rules/nope", "", 404, "unknown action `nope`"),
        ("POST /stages/rules/activate", "{}", 400, "the body must be"),
        ("POST /stages/rules/activate", bodies.0, 404, bodies.1),
        ("POST /stages/rules/shadow", bodies.0, 404, bodies.1),
    ] {
        let (method, path) = request.split_once(' ').unwrap();
        let answer = call(&admin, method, path, "s3cret", body);
        assert_eq!(answer.status, status, "{request}: {}", answer.body);
        let said = answer.json()["error"].as_str().map(String::from);
        assert!(
            said.unwrap_or_default().starts_with(error),
            "{request}: {}",
            answer.body
        );
    }
}

#[test]
fn changes_reach_the_pipeline() {
    let (admin, found) = start("s3cret", "1KiB", 20);
    let rollback = || call(&admin, "POST", "/stages/rules/rollback", "s3cret", "");
    // Nothing to roll back to yet: 409, and nothing is sent.
    let answer = rollback();
    assert_eq!(answer.status, 409, "{}", answer.body);
    assert_eq!(
        answer.json()["error"],
        "stage `rules` has no previous version to roll back to"
    );
    assert!(found.try_recv().is_err());
    // A batch ran a version swapped in: the one before it can come back.
    let mut batch = progress(1);
    batch.stages.get_mut("rules").unwrap().swapped_in = true;
    admin.record(&batch);
    let answer = rollback();
    assert_eq!(answer.status, 202, "{}", answer.body);
    match found.try_recv() {
        Ok(Found::Rollback { stage: 0, reason }) => {
            assert!(reason.contains("127.0.0.1"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // After that rollback, the version rolled back is the previous one.
    let mut batch = progress(2);
    let note = "cd34 requested by 127.0.0.1:5000 over the admin API";
    batch.stages.get_mut("rules").unwrap().rolled_back = Some(note.into());
    admin.record(&batch);
    assert_eq!(rollback().status, 202);
    assert!(matches!(
        found.try_recv(),
        Ok(Found::Rollback { stage: 0, .. })
    ));
    // A version rolled back on probation leaves none.
    let mut batch = progress(3);
    let note = "cd34 failed on 9 of its first 10 events";
    batch.stages.get_mut("rules").unwrap().rolled_back = Some(note.into());
    admin.record(&batch);
    assert_eq!(rollback().status, 409);
    let answer = call(
        &admin,
        "POST",
        "/stages/rules/shadow",
        "s3cret",
        r#"{"digest": null}"#,
    );
    assert_eq!(answer.status, 202, "{}", answer.body);
    assert!(matches!(
        found.try_recv(),
        Ok(Found::Shadow {
            stage: 0,
            plugin: None
        })
    ));
}

#[test]
fn status_stages_and_metrics_show_the_recorded_progress() {
    let (admin, _found) = start("s3cret", "1KiB", 1);
    let before = call(&admin, "GET", "/metrics", "", "");
    assert_eq!(before.status, 200);
    assert!(
        before.head.contains("text/plain; version=0.0.4"),
        "{}",
        before.head
    );
    assert!(
        before.body.contains("sluice_batches_total 0\n"),
        "{}",
        before.body
    );
    let request =
        "GET /metrics HTTP/1.1\r\nHost: sluice\r\nAccept: application/openmetrics-text\r\n\r\n";
    let open = send(admin.addr(), request.as_bytes(), Duration::from_secs(5));
    assert!(
        open.head.contains("application/openmetrics-text"),
        "{}",
        open.head
    );
    assert!(open.body.ends_with("# EOF\n"), "{}", open.body);
    admin.record(&progress(1));
    admin.record(&progress(2));
    let status = call(&admin, "GET", "/status", "", "").json();
    let logged = serde_json::to_value(progress(2)).unwrap();
    assert_eq!(status["recent"], Value::Array(vec![logged.clone()]));
    assert_eq!(
        status["recent"][0]["committed_at"],
        "2026-07-29T10:15:20.250Z"
    );
    let stages = call(&admin, "GET", "/stages", "", "").json();
    assert_eq!(stages["stages"][0]["active"], logged["stages"]["rules"]);
    let after = call(&admin, "GET", "/metrics", "", "").body;
    assert!(after.contains("sluice_batches_total 2\n"), "{after}");
}

#[test]
fn dropping_the_admin_api_stops_it() {
    let (admin, _found) = start("s3cret", "1KiB", 20);
    let addr = admin.addr();
    drop(admin);
    let started = Instant::now();
    while TcpStream::connect(addr).is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "still listening"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_audit_target_passes_every_log_filter() {
    assert_eq!(with_audit("warn"), "warn,sluice::audit=info");
    assert_eq!(with_audit(""), "sluice::audit=info");
    assert_eq!(
        with_audit("sluice::audit=off,info"),
        "sluice::audit=off,info"
    );
    // The filter the command line builds lets an audit line through at `error`, and not
    // another `info` line.
    use tracing_subscriber::layer::SubscriberExt as _;
    let filter = tracing_subscriber::EnvFilter::new(with_audit("error"));
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let writer = lines.clone();
    let subscriber = tracing_subscriber::registry().with(filter).with(
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(move || Captured(writer.clone())),
    );
    tracing::subscriber::with_default(subscriber, || {
        tracing::info!(target: super::AUDIT_TARGET, "admin change");
        tracing::info!(target: "sluice::progress", "a batch");
    });
    let text = String::from_utf8(lines.lock().unwrap().clone()).unwrap();
    assert!(text.contains("sluice::audit: admin change"), "{text}");
    assert!(!text.contains("a batch"), "{text}");
}

/// Log output kept in memory.
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A record of activations in a fresh folder, naming `rules` with `file_digest`.
fn recorded(name: &str, file_digest: Option<&str>) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-admin-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("clicks")).unwrap();
    let record = serde_json::json!({"stages": {"rules": {
        "digest": "ab12",
        "activated-at": "2026-07-29T10:00:00Z",
        "by": "127.0.0.1:5000",
        "file-digest": file_digest,
    }}});
    std::fs::write(dir.join("clicks/activations.json"), record.to_string()).unwrap();
    dir
}

#[test]
fn an_activation_that_cannot_run_again_stops_the_start() {
    // The stage's file (`rules.wasm`, absent) is as it was: the module must run again.
    let dir = recorded("missing", None);
    let (admin, found) = start_with(&format!("token = \"t\"\nstate-dir = {:?}", dir));
    let error = admin.unwrap_err().to_string();
    assert!(error.contains("stage `rules`: the version ab12 activated at 2026-07-29T10:00:00Z by 127.0.0.1:5000 cannot run again: cannot read its module"), "{error}");
    assert!(
        error.contains("activations.json to run the file's version"),
        "{error}"
    );
    assert!(found.try_recv().is_err());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_file_changed_since_the_activation_wins() {
    let dir = recorded("changed", Some("f0"));
    let (admin, found) = start_with(&format!("token = \"t\"\nstate-dir = {:?}", dir));
    let admin = admin.unwrap();
    assert!(found.try_recv().is_err(), "nothing is activated");
    let record = std::fs::read_to_string(dir.join("clicks/activations.json")).unwrap();
    assert_eq!(
        record.split_whitespace().collect::<String>(),
        r#"{"stages":{}}"#
    );
    assert_eq!(
        call(&admin, "GET", "/stages", "", "").json()["stages"][0]["activation"],
        Value::Null
    );
    std::fs::remove_dir_all(dir).unwrap();
}
