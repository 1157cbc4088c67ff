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

#[test]
fn the_admin_api_swaps_rolls_back_reports_and_wants_its_token() {
    let mut s = Setup::new("admin");
    let port = sluice_tests::free_port();
    let addr = format!("127.0.0.1:{port}");
    s.write_config(
        "admin.toml",
        &format!(
            "{CONFIG}\n[admin]\nlisten = \"{addr}\"\ntoken = \"${{SLUICE_ADMIN_TOKEN}}\"\nmax-upload = \"4MiB\"\n"
        ),
    );
    s.extra_env
        .push(("SLUICE_ADMIN_TOKEN".into(), "s3cret".into()));
    install(plugins::KEEP_ALL, &s.warehouse.join("rules.wasm"));
    let keep_all = load(plugins::KEEP_ALL, &[]).unwrap().digest().to_string();
    let enricher = std::fs::read(plugins::CLICKSTREAM_ENRICHER).unwrap();

    let producer = load_continuously(&s, 10000);
    let running = s.start(&["run"], &[]);
    let mut progress = Vec::new();
    running.follow(&mut progress, "sluice::progress", Duration::from_secs(60));

    assert_eq!(
        http(&addr, "GET", "/healthz", None, b"", None),
        (200, "ok\n".into())
    );
    // Changes need the token.
    let upload = "/stages/rules/modules";
    assert_eq!(http(&addr, "POST", upload, None, &enricher, None).0, 401);
    assert_eq!(
        http(&addr, "POST", upload, Some("guess"), &enricher, None).0,
        401
    );
    assert_eq!(
        http(&addr, "POST", "/stages/rules/rollback", None, b"", None).0,
        401
    );
    // Uploads are size-limited, checked at once, and refused with the reason.
    let (status, body) = http(&addr, "POST", upload, Some("s3cret"), b"", Some(5 << 20));
    assert_eq!(status, 413, "{body}");
    let fail_init = std::fs::read(plugins::FAIL_INIT).unwrap();
    let (status, body) = http(&addr, "POST", upload, Some("s3cret"), &fail_init, None);
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("deliberately refusing to start"), "{body}");
    assert_eq!(
        http(
            &addr,
            "POST",
            "/stages/nope/modules",
            Some("s3cret"),
            &enricher,
            None
        )
        .0,
        404
    );
    let (status, body) = http(&addr, "POST", upload, Some("s3cret"), &enricher, None);
    assert_eq!(status, 201, "{body}");
    let uploaded: Value = serde_json::from_str(&body).unwrap();
    let digest = uploaded["digest"].as_str().unwrap().to_string();
    let (_, listed) = http(&addr, "GET", "/stages", None, b"", None);
    assert!(listed.contains(&digest), "the upload waits: {listed}");

    // Activate it: the next batch runs on it.
    let activate = format!("{{\"digest\": \"{digest}\"}}");
    let (status, body) = http(
        &addr,
        "POST",
        "/stages/rules/activate",
        Some("s3cret"),
        activate.as_bytes(),
        None,
    );
    assert_eq!(status, 202, "{body}");
    let first_on_new = batch_after(&running, &mut progress, "activated a new plugin version");
    assert_eq!(digest_of(&first_on_new), digest);

    // Roll back: the next batch runs on keep-all again.
    let (status, body) = http(
        &addr,
        "POST",
        "/stages/rules/rollback",
        Some("s3cret"),
        b"",
        None,
    );
    assert_eq!(status, 202, "{body}");
    let last = &batch_after(
        &running,
        &mut progress,
        "rolled back to the previous plugin version",
    );
    assert_eq!(digest_of(last), keep_all);
    assert!(
        last["stages"]["rules"]["rolled_back"]
            .as_str()
            .unwrap()
            .contains("admin API")
    );

    // Shadow mode through the API: an upload runs beside the stage without judging.
    let validator = std::fs::read(plugins::CLICKSTREAM_VALIDATOR).unwrap();
    let (status, body) = http(&addr, "POST", upload, Some("s3cret"), &validator, None);
    assert_eq!(status, 201, "{body}");
    let uploaded: Value = serde_json::from_str(&body).unwrap();
    let shadow = uploaded["digest"].as_str().unwrap().to_string();
    let request = format!("{{\"digest\": \"{shadow}\"}}");
    let (status, body) = http(
        &addr,
        "POST",
        "/stages/rules/shadow",
        Some("s3cret"),
        request.as_bytes(),
        None,
    );
    assert_eq!(status, 202, "{body}");
    let last = &batch_after(&running, &mut progress, "running a shadow version");
    assert_eq!(last["stages"]["rules"]["shadow"]["digest"], shadow.as_str());
    assert_eq!(digest_of(last), keep_all, "the shadow does not judge");

    // What the pipeline did, for people and for Prometheus.
    let (status, listed) = http(&addr, "GET", "/stages", None, b"", None);
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["stages"][0]["active"]["digest"], keep_all.as_str());
    let (status, metrics) = http(&addr, "GET", "/metrics", None, b"", None);
    assert_eq!(status, 200);
    assert!(
        metrics.contains("# TYPE sluice_batches_total counter"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "sluice_plugin_events_total{{stage=\"rules\",digest=\"{digest}\"}}"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_plugin_rollbacks_total{stage=\"rules\"} 1"),
        "{metrics}"
    );
    let committed = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sluice_last_commit_timestamp_seconds "))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_default();
    assert!(committed > 1.7e9, "the last commit's time: {metrics}");
    // A series per partition read, for the lag.
    let lag_of = format!("sluice_partition_lag_records{{partition=\"{}/", s.topic);
    let partitions = metrics.lines().filter(|l| l.starts_with(&lag_of)).count();
    assert_eq!(partitions, 2, "{metrics}");
    for family in [
        "sluice_plugin_calls_total",
        "sluice_plugin_stage_seconds_total",
    ] {
        assert!(
            metrics.contains(&format!("{family}{{stage=\"rules\"")),
            "{metrics}"
        );
    }
    let (status, recent) = http(&addr, "GET", "/status", None, b"", None);
    assert_eq!(status, 200);
    let recent: Value = serde_json::from_str(&recent).unwrap();
    assert!(!recent["recent"].as_array().unwrap().is_empty());

    let produced = producer.join().unwrap().delivered + 1;
    wait_until_committed(&running, &mut progress, produced);
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");
    // Through a swap, a rollback and a shadow, every record was committed exactly once.
    let shown = s.show();
    let ids: std::collections::BTreeSet<&str> = shown["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(shown["rows"].as_array().unwrap().len() as u64, produced);
    assert_eq!(ids.len() as u64, produced);
    assert!(shown["dead_letters"].as_array().unwrap().is_empty());
    // Every change and every refusal is in the audit log.
    let audit: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sluice::audit"))
        .collect();
    assert!(
        audit
            .iter()
            .filter(|l| l.contains("no valid token"))
            .count()
            >= 3,
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .any(|l| l.contains("/stages/rules/activate") && l.contains("202")),
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .any(|l| l.contains("/stages/rules/rollback") && l.contains("202")),
        "{audit:?}"
    );
}

#[test]
fn a_shadow_version_reports_where_it_disagrees_without_changing_the_output() {
    // keep-all is active; the validator runs beside it in shadow mode. On 2 000 generated
    // events, 20% invalid, the shadow must disagree exactly where the validator's rules
    // (run natively here, on the same events) reject, and the output must be keep-all's.
    let mut s = Setup::new("shadow");
    s.write_config(
        "shadow.toml",
        &CONFIG
            .replace("mode = \"interval\"", "mode = \"available-now\"")
            .replace("rollback = {", "shadow = \"candidate.wasm\"\nrollback = {"),
    );
    install(plugins::KEEP_ALL, &s.warehouse.join("rules.wasm"));
    install(
        plugins::CLICKSTREAM_VALIDATOR,
        &s.warehouse.join("candidate.wasm"),
    );
    let validator = load(plugins::CLICKSTREAM_VALIDATOR, &[]).unwrap();
    produce(
        &s.broker.bootstrap,
        &s.topic,
        &[
            "--count",
            "2000",
            "--invalid-share",
            "0.2",
            "--seed",
            "7",
            "--partitions",
            "2",
        ],
    );
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let rules = clickstream_validator::Rules::default();
    let mut expected = std::collections::BTreeMap::<String, u64>::new();
    for event in sluice::generate::Generator::new(sluice::generate::GeneratorConfig {
        seed: 7,
        invalid_share: 0.2,
        ..Default::default()
    })
    .take(2000)
    {
        if let Err(r) = rules.check(&sluice_guest::Event::new(event.value.as_bytes())) {
            *expected
                .entry(format!("kept -> rejected:{}", r.code()))
                .or_default() += 1;
        }
    }
    assert!(expected.len() >= 4, "several codes: {expected:?}");

    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    let mut got = std::collections::BTreeMap::<String, u64>::new();
    let (mut events, mut agreed) = (0, 0);
    for p in &progress {
        let shadow = &p["stages"]["rules"]["shadow"];
        assert_eq!(shadow["digest"], validator.digest());
        events += shadow["events"].as_u64().unwrap();
        agreed += shadow["agreed"].as_u64().unwrap();
        for (key, d) in shadow["disagreements"].as_object().unwrap() {
            *got.entry(key.clone()).or_default() += d["count"].as_u64().unwrap();
            let samples = d["samples"].as_array().unwrap();
            assert!(!samples.is_empty() && samples.len() <= 5, "{d}");
            assert!(samples[0].as_str().unwrap().starts_with(&s.topic), "{d}");
        }
    }
    assert_eq!(got, expected);
    assert_eq!(events, 2000);
    assert_eq!(agreed + expected.values().sum::<u64>(), 2000);

    // The shadow changed nothing: every event keep-all kept went on; only the table's
    // schema refused some (stage `encode`), none was refused by the stage.
    let shown = s.show();
    let dead = shown["dead_letters"].as_array().unwrap();
    assert!(
        dead.iter()
            .all(|d| d["headers"]["sluice.error.stage"] == "encode")
    );
    assert_eq!(shown["rows"].as_array().unwrap().len() + dead.len(), 2000);
}

#[test]
fn rejection_bounds_roll_a_new_version_back() {
    // The relative bound (here: at most twice the previous version's share) and the
    // absolute one. The counts are given by hand, as a batch would report them.
    use sluice::pipeline::stages::{StageCounts, Stages};
    use sluice::plugin::swap::{Candidate, Found};
    let stage: sluice::plugin::config::StageConfig = toml::from_str(&format!(
        "name = \"rules\"\nplugin = \"{}\"\nwatch = false\nrollback = {{ first-events = 1000, max-failure-rate = 0.5, max-rejection-ratio = 2.0 }}",
        plugins::KEEP_ALL
    ))
    .unwrap();
    let runtime = sluice_tests::runtime();
    let mut stages = Stages::load(runtime, std::slice::from_ref(&stage)).unwrap();
    let old = stages.active()[0].digest().to_string();
    let counts = |events, rejected| StageCounts {
        events,
        kept: events - rejected,
        rejected,
        ..StageCounts::default()
    };
    // The active version rejected 10% of its events.
    stages.committed(&[counts(1000, 100)]);
    let new = swap::prepare(
        runtime,
        &stage,
        &std::fs::read(plugins::CLICKSTREAM_VALIDATOR).unwrap(),
        &[],
    )
    .unwrap();
    let new_digest = new.digest().to_string();
    let sender = stages.sender();
    let offer = |plugin| {
        sender
            .send(Found::Ready(Candidate {
                stage: 0,
                plugin,
                detected: Instant::now(),
                prepared_in: Duration::ZERO,
            }))
            .unwrap()
    };
    offer(new.clone());
    stages.activate_new_versions();
    assert_eq!(stages.active()[0].digest(), new_digest);
    // 15% is within twice 10%: it stays on probation.
    assert!(!stages.judge(&[counts(200, 30)]));
    stages.committed(&[counts(200, 30)]);
    // 25% over its first 400 events is over twice 10%: rolled back to the previous one.
    assert!(stages.judge(&[counts(200, 70)]));
    assert_eq!(stages.active()[0].digest(), old);
    let progress = stages.progress(&[counts(200, 0)], Vec::new(), Vec::new());
    let rules = &progress["rules"];
    assert_eq!((rules.swaps, rules.rollbacks), (1, 1));
    assert!(
        rules
            .rolled_back
            .as_deref()
            .unwrap()
            .contains("over 2× the previous version's 10.0%"),
        "{:?}",
        rules.rolled_back
    );

    // A version that passes its probation is kept: 1 000 events within the bounds.
    offer(new);
    stages.activate_new_versions();
    assert!(!stages.judge(&[counts(1000, 150)]));
    stages.committed(&[counts(1000, 150)]);
    assert!(!stages.judge(&[counts(10, 10)]), "probation is over");
    assert_eq!(stages.active()[0].digest(), new_digest);

    // The absolute bound: at most 20% rejected, whatever the previous version did.
    let absolute: sluice::plugin::config::StageConfig = toml::from_str(&format!(
        "name = \"rules\"\nplugin = \"{}\"\nwatch = false\nrollback = {{ max-rejection-rate = 0.2 }}",
        plugins::KEEP_ALL
    ))
    .unwrap();
    let mut stages = Stages::load(runtime, std::slice::from_ref(&absolute)).unwrap();
    stages
        .sender()
        .send(Found::Ready(Candidate {
            stage: 0,
            plugin: swap::prepare(
                runtime,
                &absolute,
                &std::fs::read(plugins::CLICKSTREAM_VALIDATOR).unwrap(),
                &[],
            )
            .unwrap(),
            detected: Instant::now(),
            prepared_in: Duration::ZERO,
        }))
        .unwrap();
    stages.activate_new_versions();
    assert!(!stages.judge(&[counts(100, 20)]));
    stages.committed(&[counts(100, 20)]);
    assert!(
        stages.judge(&[counts(100, 30)]),
        "25% of its first 200 events"
    );
    assert_eq!(stages.active()[0].digest(), old);
}
