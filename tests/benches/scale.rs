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
//! Run with `cargo bench -p sluice-tests --bench scale` (optionally `-- EVENTS`, default
//! 200 000: the mock broker keeps 5 MiB per partition; `-- --windows` for the event-time
//! workload). The target: events per CPU-second with 2 and 3 processes at least 80% of one
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

fn main() {
    let events: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let windows = std::env::args().any(|a| a == "--windows");
    assert!(
        events * 450 / PARTITIONS as u64 <= 4 << 20,
        "more than the mock broker keeps (5 MiB per partition)"
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{events} events, {PARTITIONS} partitions, {cores} cores, {}",
        if windows {
            "dedup and 1-minute windows per user, state by partition"
        } else {
            "stateless"
        }
    );
    let mut results = Vec::new();
    for n in 1..=3 {
        let r = measure(n, events, cores, windows);
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
        results.push(r);
    }
    // Members split where the state is kept, never what it gives.
    for r in &results[1..] {
        assert_eq!(
            (r.deduplicated, r.emitted),
            (results[0].deduplicated, results[0].emitted),
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
    /// A process's last words, if one failed.
    failed: Option<String>,
    last_commit: Option<Instant>,
    /// Each process's partitions, from its last "reading these partitions" line.
    owned: Vec<usize>,
    tails: Vec<Vec<String>>,
}

fn measure(n: usize, events: u64, cores: usize, windows: bool) -> Measured {
    let mock = MockCluster::<DefaultProducerContext>::new(1).unwrap();
    mock.create_topic(TOPIC, PARTITIONS, 1).unwrap();
    // The mock cluster does not answer CreateTopics; sluice finds these in the metadata.
    mock.create_topic(DEAD_LETTER, 1, 1).unwrap();
    // The enrich stage's lookup tables, empty (their topics must exist).
    for lookup in LOOKUPS {
        mock.create_topic(lookup, 1, 1).unwrap();
    }
    let bootstrap = mock.bootstrap_servers();
    let warehouse = std::env::temp_dir().join(format!("sluice-scale-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&warehouse);
    let config = group_config(&warehouse, windows);
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
    let cpu_after: f64 = pids.iter().map(|&p| cpu_of(p).as_secs_f64()).sum();
    signal(&pids, "TERM");
    for child in &mut children {
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(&warehouse);
    let s = seen.lock().unwrap();
    assert_eq!(s.rows, events, "exactly once");
    let seconds = (s.last_commit.unwrap() - start).as_secs_f64();
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
    }
}

/// The retail example as a consumer-group pipeline (with `windows`, keyed by user and
/// with event-time state by partition), written beside the warehouse.
fn group_config(warehouse: &Path, windows: bool) -> PathBuf {
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
        s.rows += p["input_rows"].as_u64().unwrap();
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
