//! Scale-out: 1, 2 and 3 `sluice run` processes sharing one pipeline (`[source] mode =
//! "group"`) on one 24-partition topic, each pinned to a core of its own while there are
//! cores enough (`taskset`). The broker is librdkafka's mock cluster (the real Kafka
//! protocol on loopback, in this process: tansu is too slow to show anything but itself);
//! the table is the SQL catalog on SQLite, shared by the processes, so their commits meet.
//!
//! For each N: the processes start, join the group and settle (every partition owned);
//! they are held (SIGSTOP) while the events are produced, then let go, and the clock runs
//! until the processes together committed all of them. Prints total events/s, events per
//! CPU-second of the sluice processes (their user + system time over the same span), the
//! commit retries per minute and the fenced batches.
//!
//! With `--windows` the pipeline has event-time state split by partition (`scale-out =
//! "partitions"`, the events keyed by `user_id`): the window benchmark's operators, dedup
//! (5% of the events repeat a recent one) and 1-minute counts per user, each member owning
//! its partitions' state; it also prints the duplicates dropped and the window rows emitted,
//! which must not depend on the number of processes.
//!
//! With `--repartition`, the `--windows` workload plus 1-minute counts per session: a
//! window grouped by a field the source is not keyed by, which crosses a repartition topic
//! (stage one sends each event on, stage two counts; both run in every process). It first
//! runs one process without that window, and prints the repartition hop's CPU cost per
//! event: the difference in CPU per event between the two.
//!
//! Run with `cargo bench -p sluice-tests --bench scale` (optionally `-- EVENTS`, default
//! 200 000: the mock broker keeps 5 MiB per partition; `-- --windows` for the event-time
//! workload, `-- --repartition` for the repartition topic's). The target: events per CPU-second with 2 and 3 processes at least 80% of one
//! process's (sharing costs little per event); total events/s is bounded by the cores.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use sluice_tests::measure::cpu_of;
use sluice_tests::{plugins, produce, repo_root};

const BIN: &str = env!("CARGO_BIN_EXE_sluice-under-test");
const TOPIC: &str = "scale-events";
/// 24 partitions: shared evenly by 1, 2 or 3 processes, and small enough each to stay
/// under the mock broker's retention (5 MiB per partition, older records deleted).
const PARTITIONS: i32 = 24;
const DEAD_LETTER: &str = "scale-dead-letter";
/// The topics of the retail example's lookup tables (`SLUICE_CUSTOMERS_TOPIC`,
/// `SLUICE_PRODUCTS_TOPIC`).
const LOOKUPS: [&str; 2] = ["scale-customers", "scale-products"];

/// The event-time part of the `--windows` workload, appended to the retail example.
const WINDOWS: &str = r#"
[event-time]
field = "event_time"
max-delay = "2m"
late = "dead-letter"
scale-out = "partitions"

[dedup]
keys = ["user_id", "event_id"]

[[windows]]
name = "user-minutes"
size = "1m"
group-by = ["user_id"]
aggregates = [{ name = "events", fn = "count" }, { name = "types", fn = "distinct-count", field = "event_type" }]
iceberg = { table = "user_minutes" }
"#;

/// The `--repartition` workload's window, grouped by a field the source is not keyed by
/// (sessions, many: the repartition topic's partitions take even shares, each within the
/// mock broker's retention).
const BY_SESSION: &str = r#"
[[windows]]
name = "session-minutes"
group-by = ["session_id"]
size = "1m"
iceberg = { table = "session_minutes" }
aggregates = [{ name = "events", fn = "count" }]
"#;

/// The pipeline of stage two of [`BY_SESSION`] (the example's name, then the window's).
const STAGE_TWO: &str = "retail-clickstream-session-minutes";

/// What runs: the stateless pipeline, the event-time one, or that with a repartition topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    Stateless,
    Windows,
    Repartition,
}

fn main() {
    let events: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let flag = |f: &str| std::env::args().any(|a| a == f);
    let workload = match (flag("--repartition"), flag("--windows")) {
        (true, _) => Workload::Repartition,
        (false, true) => Workload::Windows,
        (false, false) => Workload::Stateless,
    };
    let windows = workload != Workload::Stateless;
    assert!(
        events * 450 / PARTITIONS as u64 <= 4 << 20,
        "more than the mock broker keeps (5 MiB per partition)"
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{events} events, {PARTITIONS} partitions, {cores} cores, {}",
        match workload {
            Workload::Repartition =>
                "dedup and 1-minute windows per user, state by partition, and 1-minute counts per session across a repartition topic",
            Workload::Windows => "dedup and 1-minute windows per user, state by partition",
            Workload::Stateless => "stateless",
        }
    );
    let without = (workload == Workload::Repartition).then(|| {
        let r = measure(1, events, cores, Workload::Windows);
        println!(
            "1 process without the repartitioned window: {:>8.0} events/s, {:>8.0} events per CPU-second",
            r.rate, r.per_cpu_second
        );
        r
    });
    let mut results = Vec::new();
    for n in 1..=3 {
        let r = measure(n, events, cores, workload);
        println!(
            "{n} process(es){}: {:>8.0} events/s total, {:>8.0} events per CPU-second, {:.1} CPU-seconds, {} batches, {:.1} commit retries/min, {} fenced",
            if n <= cores {
                ", pinned"
            } else {
                ", not pinned (fewer cores than processes)"
            },
            r.rate,
            r.per_cpu_second,
            r.cpu_seconds,
            r.batches,
            r.retries as f64 / (r.seconds / 60.0),
            r.fenced,
        );
        if windows {
            println!(
                "  {} duplicates dropped, {} window rows emitted",
                r.deduplicated, r.emitted
            );
        }
        if workload == Workload::Repartition {
            println!(
                "  stage two: {} records read (events and markers), {} window rows emitted",
                r.stage_two_read, r.stage_two_emitted
            );
        }
        results.push(r);
    }
    if let (Some(without), Some(with)) = (&without, results.first()) {
        let micros = |r: &Measured| 1e6 / r.per_cpu_second;
        println!(
            "repartition hop: {:.1} µs of CPU per event ({:.1} with it, {:.1} without, one process)",
            micros(with) - micros(without),
            micros(with),
            micros(without)
        );
    }
    // Members split where the state is kept, never what it gives.
    for r in &results[1..] {
        assert_eq!(
            (r.deduplicated, r.emitted, r.stage_two_emitted),
            (
                results[0].deduplicated,
                results[0].emitted,
                results[0].stage_two_emitted
            ),
            "more processes gave other results than one"
        );
    }
    let one = results[0].per_cpu_second;
    for (i, r) in results.iter().enumerate().skip(1) {
        let share = r.per_cpu_second / one;
        println!(
            "{} processes: events per CPU-second at {:.0}% of one process's (target ≥ 80%: {})",
            i + 1,
            share * 100.0,
            if share >= 0.8 { "met" } else { "NOT met" }
        );
    }
}

struct Measured {
    rate: f64,
    per_cpu_second: f64,
    cpu_seconds: f64,
    seconds: f64,
    batches: u64,
    retries: u64,
    fenced: u64,
    deduplicated: u64,
    emitted: u64,
    stage_two_read: u64,
    stage_two_emitted: u64,
}

/// What the processes' logs said so far.
#[derive(Default)]
struct Seen {
    rows: u64,
    batches: u64,
    retries: u64,
    fenced: u64,
    deduplicated: u64,
    emitted: u64,
    /// Records stage two of a repartition topic read, and when it last read any.
    stage_two_read: u64,
    stage_two_last: Option<Instant>,
    stage_two_emitted: u64,
    /// A process's last words, if one failed.
    failed: Option<String>,
    last_commit: Option<Instant>,
    /// Each process's partitions, from its last "reading these partitions" line.
    owned: Vec<usize>,
    tails: Vec<Vec<String>>,
}

fn measure(n: usize, events: u64, cores: usize, workload: Workload) -> Measured {
    let windows = workload != Workload::Stateless;
    let mock = MockCluster::<DefaultProducerContext>::new(1).unwrap();
    mock.create_topic(TOPIC, PARTITIONS, 1).unwrap();
    // The mock cluster does not answer CreateTopics; sluice finds these in the metadata.
    mock.create_topic(DEAD_LETTER, 1, 1).unwrap();
    // The enrich stage's lookup tables, empty (their topics must exist).
    for lookup in LOOKUPS {
        mock.create_topic(lookup, 1, 1).unwrap();
    }
    if workload == Workload::Repartition {
        let topic = format!("{STAGE_TWO}-repartition");
        mock.create_topic(&topic, PARTITIONS, 1).unwrap();
    }
    let bootstrap = mock.bootstrap_servers();
    let warehouse = std::env::temp_dir().join(format!("sluice-scale-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&warehouse);
    let config = group_config(&warehouse, workload);
    let seen = Arc::new(Mutex::new(Seen {
        owned: vec![0; n],
        tails: vec![Vec::new(); n],
        ..Seen::default()
    }));
    let mut children: Vec<Child> = (0..n)
        .map(|i| start(i, n <= cores, &bootstrap, &config, &warehouse, &seen))
        .collect();
    wait_until(
        &seen,
        Duration::from_secs(120),
        "the group to settle",
        |s| s.owned.iter().all(|&o| o > 0) && s.owned.iter().sum::<usize>() == PARTITIONS as usize,
    );
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    // Held while the events are produced, so the clock measures the processes alone (the
    // producer shares the cores); a few seconds, far from the session timeout.
    signal(&pids, "STOP");
    let count = events.to_string();
    let mut args = vec![
        "--count",
        &count,
        "--invalid-share",
        "0.05",
        "--property",
        "linger.ms=20",
    ];
    if windows {
        args.extend(["--key-by", "user_id", "--duplicate-share", "0.05"]);
    }
    let produced = produce(&bootstrap, TOPIC, &args);
    assert_eq!(produced.delivered, events);
    let cpu_before: f64 = pids.iter().map(|&p| cpu_of(p).as_secs_f64()).sum();
    let start = Instant::now();
    signal(&pids, "CONT");
    wait_until(
        &seen,
        Duration::from_secs(600),
        "every event committed",
        |s| s.rows >= events,
    );
    if workload == Workload::Repartition {
        // Stage two is done when it has read nothing for 2 seconds (it reads every 200 ms).
        let quiet = Duration::from_secs(2);
        wait_until(&seen, Duration::from_secs(600), "stage two done", |s| {
            s.stage_two_last.is_some_and(|t| t.elapsed() >= quiet)
        });
    }
    let cpu_after: f64 = pids.iter().map(|&p| cpu_of(p).as_secs_f64()).sum();
    signal(&pids, "TERM");
    for child in &mut children {
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(&warehouse);
    let s = seen.lock().unwrap();
    assert_eq!(s.rows, events, "exactly once");
    let last = s
        .last_commit
        .unwrap()
        .max(s.stage_two_last.unwrap_or(start));
    let seconds = (last - start).as_secs_f64();
    let cpu = cpu_after - cpu_before;
    Measured {
        rate: events as f64 / seconds,
        per_cpu_second: events as f64 / cpu,
        cpu_seconds: cpu,
        seconds,
        batches: s.batches,
        retries: s.retries,
        fenced: s.fenced,
        deduplicated: s.deduplicated,
        emitted: s.emitted,
        stage_two_read: s.stage_two_read,
        stage_two_emitted: s.stage_two_emitted,
    }
}

/// The retail example as a consumer-group pipeline (with `windows`, keyed by user and
/// with event-time state by partition), written beside the warehouse.
fn group_config(warehouse: &Path, workload: Workload) -> PathBuf {
    let windows = workload != Workload::Stateless;
    let example =
        std::fs::read_to_string(repo_root().join("examples/retail-clickstream/pipeline.toml"))
            .unwrap();
    let group = if windows {
        "starting-offsets = \"earliest\"\nmode = \"group\"\nkeyed-by = \"user_id\""
    } else {
        "starting-offsets = \"earliest\"\nmode = \"group\""
    };
    let mut text = example.replace("starting-offsets = \"earliest\"", group);
    assert_ne!(text, example);
    if windows {
        text.push_str(WINDOWS);
    }
    if workload == Workload::Repartition {
        text.push_str(BY_SESSION);
    }
    std::fs::create_dir_all(warehouse).unwrap();
    let path = warehouse.join("pipeline.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts process `i` (pinned to core `i` when `pin`), and a thread that reads its log
/// into `seen`.
fn start(
    i: usize,
    pin: bool,
    bootstrap: &str,
    config: &Path,
    warehouse: &Path,
    seen: &Arc<Mutex<Seen>>,
) -> Child {
    let plugins_dir = Path::new(plugins::CLICKSTREAM_VALIDATOR).parent().unwrap();
    let mut command = if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", &i.to_string(), BIN]);
        c
    } else {
        Command::new(BIN)
    };
    let mut child = command
        .args(["run", "--config"])
        .arg(config)
        .env("KAFKA_BOOTSTRAP", bootstrap)
        .env("KAFKA_TOPIC", TOPIC)
        .env("SLUICE_WAREHOUSE", warehouse)
        .env("SLUICE_PLUGINS", plugins_dir)
        .env("SLUICE_DEAD_LETTER_TOPIC", DEAD_LETTER)
        .env("SLUICE_CUSTOMERS_TOPIC", LOOKUPS[0])
        .env("SLUICE_PRODUCTS_TOPIC", LOOKUPS[1])
        .env("SLUICE_TRIGGER", "interval")
        .env("SLUICE_MAX_RECORDS", "20000")
        .env("SLUICE_INTERVAL", "200ms")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let seen = seen.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            follow(&mut seen.lock().unwrap(), i, line);
        }
    });
    child
}

/// Reads one log line of process `i`.
fn follow(s: &mut Seen, i: usize, line: String) {
    if let Some((_, json)) = line.split_once("sluice::progress: ") {
        let p: serde_json::Value = serde_json::from_str(json).unwrap();
        let read = p["input_rows"].as_u64().unwrap();
        if p["pipeline"] == STAGE_TWO {
            s.stage_two_read += read;
            if read > 0 {
                s.stage_two_last = Some(Instant::now());
            }
            let emitted = &p["event_time"]["windows_emitted"]["session-minutes"];
            s.stage_two_emitted += emitted.as_u64().unwrap_or(0);
            return;
        }
        s.rows += read;
        s.retries += p["commit_retries"].as_u64().unwrap_or(0);
        s.batches += 1;
        if let Some(e) = p.get("event_time") {
            s.deduplicated += e["rows_deduplicated"].as_u64().unwrap_or(0);
            s.emitted += e["windows_emitted"]["user-minutes"].as_u64().unwrap_or(0);
        }
        s.last_commit = Some(Instant::now());
    } else if line.starts_with("error: ") {
        s.failed = Some(line.clone());
    } else if line.contains("batch fenced") {
        s.fenced += 1;
    } else if line.contains("reading these partitions")
        && let Some((_, owned)) = line.split_once("partitions=")
    {
        // `{"topic":{"0":12,"3":0}}`: the partitions are the inner keys.
        s.owned[i] = serde_json::from_str::<serde_json::Value>(owned.trim())
            .ok()
            .and_then(|v| v.get(TOPIC).and_then(|t| t.as_object()).map(|t| t.len()))
            .unwrap_or(0);
    }
    let tail = &mut s.tails[i];
    tail.push(line);
    if tail.len() > 30 {
        tail.remove(0);
    }
}

/// Waits until `done` holds of what the logs said; panics with the logs' tails after
/// `timeout`.
fn wait_until(seen: &Mutex<Seen>, timeout: Duration, what: &str, done: impl Fn(&Seen) -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        {
            let s = seen.lock().unwrap();
            if done(&s) {
                return;
            }
            if Instant::now() > deadline || s.failed.is_some() {
                panic!(
                    "no {what} within {timeout:?} ({} rows); the logs end:\n{}",
                    s.rows,
                    s.tails
                        .iter()
                        .map(|t| t.join("\n"))
                        .collect::<Vec<_>>()
                        .join("\n----\n")
                );
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `signal` to every process of `pids`.
fn signal(pids: &[u32], signal: &str) {
    for pid in pids {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }
}
