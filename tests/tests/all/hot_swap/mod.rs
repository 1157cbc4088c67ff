//! Hot swap under load: `sluice run` keeps running while a stage's plugin file is replaced
//! by a good version, by broken ones (truncated, another WIT version, failing init) and by
//! one that traps on every event. Plugins are built from source; the broker is tansu.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice::plugin::swap;
use sluice_tests::fixture::{Running, Setup, progress_lines, text};
use sluice_tests::{load, plugins, produce};

pub(crate) const CONFIG: &str = r#"
[pipeline]
name = "swap"
[source]
bootstrap-servers = "${KAFKA_BOOTSTRAP}"
topics = ["${KAFKA_TOPIC}"]
[trigger]
mode = "interval"
interval = "300ms"
[runtime]
watch-interval = "100ms"
[[stages]]
name = "rules"
plugin = "rules.wasm"
rollback = { first-events = 500, max-failure-rate = 0.05 }
[sink]
warehouse = "${SLUICE_WAREHOUSE}"
namespace = "swap"
table = "events"
ingestion-time-column = "ingestion_time"
columns = [
  { name = "event_id", type = "string" },
  { name = "event_time", type = "timestamptz" },
  { name = "browser", type = "string" },
  { name = "ingestion_time", type = "timestamptz" },
]
[dead-letter]
topic = "${SLUICE_DEAD_LETTER_TOPIC}"
"#;

/// Replaces `to` by `from`'s bytes the recommended way: a new file renamed over the old.
pub(crate) fn install(from: &str, to: &Path) {
    let tmp = to.with_extension("tmp");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

/// Produces one event (creating the topic with two partitions), then starts producing
/// `count` valid generated events at 400 per second in the background.
pub(crate) fn load_continuously(
    s: &Setup,
    count: u64,
) -> std::thread::JoinHandle<sluice::cli::produce::ProduceSummary> {
    let first = s.warehouse.join("first.jsonl");
    std::fs::write(&first, format!("{}\n", sluice_tests::seed_events()[0])).unwrap();
    produce(
        &s.broker.bootstrap,
        &s.topic,
        &["--partitions", "2", "--input", first.to_str().unwrap()],
    );
    let (bootstrap, topic) = (s.broker.bootstrap.clone(), s.topic.clone());
    std::thread::spawn(move || {
        let count = count.to_string();
        let args = ["--count", &count, "--rate", "400", "--invalid-share", "0"];
        produce(&bootstrap, &topic, &args)
    })
}

/// Follows the log until the batches seen have committed `records` input records.
pub(crate) fn wait_until_committed(running: &Running, progress: &mut Vec<Value>, records: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let committed = |progress: &[Value]| -> u64 {
        progress
            .iter()
            .map(|p| p["input_rows"].as_u64().unwrap())
            .sum()
    };
    while committed(progress) < records {
        assert!(Instant::now() < deadline, "not everything was committed");
        running.follow(progress, "sluice::progress", Duration::from_secs(60));
    }
}

/// Waits for a log line containing `needle`, then for the next batch's progress.
pub(crate) fn batch_after(running: &Running, progress: &mut Vec<Value>, needle: &str) -> Value {
    running.follow(progress, needle, Duration::from_secs(30));
    running.follow(progress, "sluice::progress", Duration::from_secs(30));
    progress.last().unwrap().clone()
}

/// Waits for the log line saying a new version was refused.
fn refused(running: &Running, progress: &mut Vec<Value>) -> String {
    running.follow(
        progress,
        "new plugin version refused",
        Duration::from_secs(30),
    )
}

pub(crate) fn digest_of(progress: &Value) -> &str {
    progress["stages"]["rules"]["digest"].as_str().unwrap()
}

#[test]
fn plugins_swap_while_running_and_bad_versions_are_refused_or_rolled_back() {
    let mut s = Setup::new("swap");
    s.write_config("swap.toml", CONFIG);
    let rules = s.warehouse.join("rules.wasm");
    install(plugins::KEEP_ALL, &rules);
    let keep_all = load(plugins::KEEP_ALL, &[]).unwrap().digest().to_string();
    let enricher = load(plugins::CLICKSTREAM_ENRICHER, &[]).unwrap();
    let enricher_digest = enricher.digest().to_string();
    let trap_digest = load(plugins::TRAP_ALWAYS, &[])
        .unwrap()
        .digest()
        .to_string();

    // One event first (it creates the topic, two partitions), then continuous load:
    // 8 000 valid events at 400 per second, for 20 seconds.
    const EVENTS: u64 = 8000;
    let producer = load_continuously(&s, EVENTS);
    let running = s.start(&["run"], &[]);
    let mut progress = Vec::new();
    running.follow(&mut progress, "\"input_rows\":", Duration::from_secs(60));
    running.follow(&mut progress, "\"input_rows\":", Duration::from_secs(30));
    assert_eq!(digest_of(&progress[0]), keep_all);

    // A good version: activated between two batches, without a restart.
    let changed = Instant::now();
    install(plugins::CLICKSTREAM_ENRICHER, &rules);
    let first_on_new = batch_after(&running, &mut progress, "activated a new plugin version");
    let to_first_batch = changed.elapsed();
    assert_eq!(digest_of(&first_on_new), enricher_digest, "{first_on_new}");
    assert_eq!(first_on_new["stages"]["rules"]["swapped_in"], true);
    let swap_ms = first_on_new["stages"]["rules"]["swap_ms"].as_u64().unwrap();
    eprintln!(
        "swap: {swap_ms} ms from seeing the file change to activation; {} ms from writing it to the first batch committed on it",
        to_first_batch.as_millis()
    );

    // Broken versions are refused and the active one stays: a file still being written
    // (here left truncated), a plugin built for another WIT version, one whose init fails.
    let validator = std::fs::read(plugins::CLICKSTREAM_VALIDATOR).unwrap();
    std::fs::write(&rules, &validator[..validator.len() / 2]).unwrap();
    let line = refused(&running, &mut progress);
    assert!(line.contains("not a valid WebAssembly component"), "{line}");
    install(plugins::FUTURE_VERSION, &rules);
    let line = refused(&running, &mut progress);
    assert!(
        line.contains(sluice::plugin::WIT_VERSION),
        "names the WIT version: {line}"
    );
    install(plugins::FAIL_INIT, &rules);
    let line = refused(&running, &mut progress);
    assert!(line.contains("deliberately refusing to start"), "{line}");

    // A version that traps on every event is activated, fails its probation in its first
    // batch, and is rolled back; that batch is processed again on the enricher.
    install(plugins::TRAP_ALWAYS, &rules);
    let line = running.follow(
        &mut progress,
        "rolled back a new plugin version",
        Duration::from_secs(30),
    );
    assert!(line.contains(&trap_digest), "{line}");

    let summary = producer.join().unwrap();
    assert_eq!(summary.delivered, EVENTS);
    wait_until_committed(&running, &mut progress, EVENTS + 1);
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");

    // Throughput while swapping: the first batch on the new version against the others
    // (rows per second of batch time; the input itself is paced at 400 events/s).
    let rate = |p: &Value| p["processed_rows_per_second"].as_f64().unwrap();
    let mut steady: Vec<f64> = progress
        .iter()
        .filter(|p| {
            p["stages"]["rules"]["swapped_in"] == false && p["input_rows"].as_u64() > Some(20)
        })
        .map(rate)
        .collect();
    steady.sort_by(f64::total_cmp);
    eprintln!(
        "throughput: first batch on the new version {:.0} rows/s of batch time; steady-state median {:.0} rows/s over {} batches",
        rate(&first_on_new),
        steady.get(steady.len() / 2).copied().unwrap_or_default(),
        steady.len()
    );

    // Every commit names one version of the stage; the trapping one never judged a
    // committed row; the switch happened once, at a batch boundary.
    let digests: Vec<&str> = progress.iter().map(digest_of).collect();
    assert!(!digests.contains(&trap_digest.as_str()));
    let switch = digests.iter().position(|d| *d == enricher_digest).unwrap();
    assert!(digests[..switch].iter().all(|d| *d == keep_all));
    assert!(digests[switch..].iter().all(|d| *d == enricher_digest));
    let last = &progress.last().unwrap()["stages"]["rules"];
    assert_eq!(
        (last["swaps"].as_u64(), last["rollbacks"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(last["refused"], 3);
    assert!(progress.iter().all(|p| p["stages"]["rules"]["failed"] == 0));

    // Every produced record is in the table exactly once; none was dead-lettered (the
    // trapping version's failures were undone by the rollback).
    let shown = s.show();
    let rows = shown["rows"].as_array().unwrap();
    assert_eq!(rows.len() as u64, EVENTS + 1);
    let ids: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len() as u64, EVENTS + 1);
    assert!(
        shown["dead_letters"].as_array().unwrap().is_empty(),
        "{shown}"
    );
    // Both versions judged rows: the enricher lower-cases browser names.
    let browsers: Vec<&str> = rows.iter().filter_map(|r| r["browser"].as_str()).collect();
    assert!(browsers.contains(&"Chrome") && browsers.contains(&"chrome"));
    // The table's last commit names the module and what it says it is.
    let summary = &shown["snapshot_summary"];
    assert_eq!(
        summary["sluice.stage.rules.digest"],
        enricher_digest.as_str()
    );
    assert_eq!(
        summary["sluice.stage.rules.plugin"],
        enricher.declared().0.as_str()
    );
    assert_eq!(
        summary["sluice.stage.rules.version"],
        enricher.declared().1.as_str()
    );
}

#[test]
fn samples_and_allow_lists_refuse_versions_before_they_run() {
    let dir = std::env::temp_dir().join(format!("sluice-samples-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let samples = dir.join("samples.jsonl");
    std::fs::write(
        &samples,
        concat!(
            r#"{"event": {"event_id": "e1", "event_time": "2026-01-09T10:00:00Z", "user_id": "u", "session_id": "s", "event_type": "page_view", "page_url": "https://x/", "device_type": "mobile", "browser": "Chrome", "traffic_source": "direct"}, "verdict": "kept"}"#,
            "\n",
            r#"{"event": {"event_id": "e2", "event_time": "2026-01-09T10:00:00Z", "user_id": "u", "session_id": "s", "event_type": "wishlist_add", "page_url": "https://x/", "device_type": "mobile", "browser": "Chrome", "traffic_source": "direct"}, "verdict": "rejected", "code": "invalid_event_type"}"#,
            "\n"
        ),
    )
    .unwrap();
    let samples = swap::read_samples(&samples).unwrap();
    let stage: sluice::plugin::config::StageConfig = toml::from_str(&format!(
        "name = \"rules\"\nplugin = \"{}\"",
        plugins::KEEP_ALL
    ))
    .unwrap();
    let runtime = sluice_tests::runtime();
    let bytes = |path: &str| std::fs::read(path).unwrap();

    // The validator passes; keep-all keeps the second sample, which must be rejected.
    assert!(
        swap::prepare(
            runtime,
            &stage,
            &bytes(plugins::CLICKSTREAM_VALIDATOR),
            &samples
        )
        .is_ok()
    );
    let err = swap::prepare(runtime, &stage, &bytes(plugins::KEEP_ALL), &samples).unwrap_err();
    assert!(
        err.contains("sample 2 should be rejected (invalid_event_type) but is kept"),
        "{err}"
    );

    // An allow-list refuses every other module, whatever it does.
    let validator = load(plugins::CLICKSTREAM_VALIDATOR, &[]).unwrap();
    let pinned = sluice::plugin::config::StageConfig {
        allowed_digests: vec![validator.digest().to_string()],
        ..stage
    };
    assert!(
        swap::prepare(
            runtime,
            &pinned,
            &bytes(plugins::CLICKSTREAM_VALIDATOR),
            &[]
        )
        .is_ok()
    );
    let err = swap::prepare(runtime, &pinned, &bytes(plugins::KEEP_ALL), &[]).unwrap_err();
    assert!(err.contains("not in the stage's allowed-digests"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A minimal HTTP/1.1 client: returns the status and the body. `length` overrides the
/// Content-Length sent (to claim a body larger than the one sent).
pub(crate) fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &[u8],
    length: Option<usize>,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n",
        length.unwrap_or(body.len())
    );
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    if length.is_none() {
        // The server may answer (401, 413) without reading the body, and close: the answer
        // is still there to read.
        let _ = stream.write_all(body);
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

mod admin;
mod trial;
