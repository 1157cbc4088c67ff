//! Ingestion cost: `sluice run --available-now` with the retail example over a topic of
//! generated retail events, as shipped (the Wasm validator, and the enricher with its
//! customer and product tables) and with the validator alone (the seed's job), on
//! librdkafka's mock cluster (a helper process, loaded before the clock starts: see
//! `sluice_tests::mock`), beside the raw consume rate of the same topic with the same client
//! library.
//!
//! The example runs with snapshot expiry (`EXPIRY`), as a long-running pipeline would.
//!
//! Prints, per run (pipeline, records per trigger, and the commit cadence): events/s,
//! **events per CPU-second of the sluice process** (all of its CPU, start-up included, from
//! `getrusage` once it has ended), the CPU microseconds per event of each phase (from the
//! progress lines' `cpu_us`), and peak resident memory. Then the targets (issue 33) and
//! whether each is met: at 100 000 per batch, ≥ 200 000 events per CPU-second as shipped
//! and ≥ 300 000 with the validator alone; peak RSS ≤ 160 MiB at 100 000 per batch and
//! ≤ 80 MiB at 10 000; with commits held, ≤ 3× the held input bytes + 64 MiB.
//!
//! Run with `cargo bench -p sluice-tests --bench ingest` (optionally `-- EVENTS`, default
//! 1 200 000, and `--runs=N` for the first N runs only: 2 gives both pipelines at 100 000
//! per batch).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use sluice_tests::measure::{cpu_of, ended_children_cpu, peak_rss_kib};
use sluice_tests::mock::MockKafka;
use sluice_tests::{plugins, repo_root};

const BIN: &str = env!("CARGO_BIN_EXE_sluice-under-test");
const MOCK: &str = env!("CARGO_BIN_EXE_mock-kafka");
const TOPIC: &str = "bench-events";
/// The enricher's lookup tables, as `mock-kafka` loads them: 50 000 customers (the
/// generator's users) and the product catalog, as in `scripts/demo`.
const TABLES: [(&str, &str); 2] = [
    ("SLUICE_CUSTOMERS_TOPIC", "bench-customers=customers:50000"),
    ("SLUICE_PRODUCTS_TOPIC", "bench-products=products:4"),
];
/// Bytes a generated event takes in the broker (value, key, record overhead), to size the
/// partitions.
const EVENT_BYTES: u64 = 420;
/// Which stages run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stages {
    /// The example as shipped: the validator, then the enricher with its lookup tables.
    Shipped,
    /// The validator alone (the example without its enrich stage and lookups).
    Validator,
}

impl Stages {
    fn label(self) -> &'static str {
        match self {
            Stages::Shipped => "as shipped",
            Stages::Validator => "validator only",
        }
    }

    /// Events per CPU-second to reach at 100 000 records per batch.
    fn target(self) -> f64 {
        match self {
            Stages::Shipped => 200_000.0,
            Stages::Validator => 300_000.0,
        }
    }
}

/// The runs: the stages, records per trigger, and the held records per commit (`[sink]
/// min-commit-rows`, with `commit-interval` an hour) or `None` for a commit per trigger.
const RUNS: [(Stages, u64, Option<u64>); 5] = [
    (Stages::Shipped, 100_000, None),
    (Stages::Validator, 100_000, None),
    (Stages::Shipped, 10_000, None),
    (Stages::Validator, 10_000, None),
    (Stages::Shipped, 10_000, Some(100_000)),
];
/// The phases of the progress line's `cpu_us`, in order.
const PHASES: [&str; 7] = [
    "read", "plugins", "encode", "route", "send", "write", "commit",
];
/// Snapshot expiry as a long-running pipeline would have it (`[sink.expire-snapshots]`),
/// so that the commit costs what a commit costs in a steady state, not what the
/// benchmark's own history makes it.
const EXPIRY: &str =
    r#"expire-snapshots = { older-than = "0s", retain-last = 10, every-commits = 10 }"#;

fn main() {
    let events: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_200_000);
    // `--runs=N`: only the first N of the runs (10 M events at 10 000 per batch is
    // a thousand commits).
    let runs: usize = std::env::args()
        .find_map(|a| a.strip_prefix("--runs=").and_then(|n| n.parse().ok()))
        .unwrap_or(RUNS.len());
    let partitions = MockKafka::partitions_for(events, EVENT_BYTES);
    let dead_letters: Vec<String> = (0..RUNS.len()).map(dead_letter_topic).collect();
    let others: Vec<&str> = dead_letters
        .iter()
        .map(String::as_str)
        .chain(TABLES.iter().map(|(_, topic)| *topic))
        .collect();
    let t = Instant::now();
    let mock = MockKafka::start(MOCK, 3, TOPIC, partitions, events, &others);
    println!(
        "loaded {events} events into {TOPIC} ({partitions} partitions on a 3-broker mock cluster) in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let raw = raw_consume(&mock.bootstrap, partitions, events);
    println!(
        "raw consume (rdkafka BaseConsumer, no processing): {:>9.0} events/s, {:>9.0} events per CPU-second, {:.0} bytes per event",
        raw.rate, raw.per_cpu_second, raw.bytes_per_event
    );

    let mut met = Vec::new();
    for (i, (stages, cap, held)) in RUNS.into_iter().take(runs).enumerate() {
        let r = sluice_run(&mock.bootstrap, events, i, stages, cap, held);
        let label = match held {
            None => format!("{}, {cap} records per batch", stages.label()),
            Some(rows) => format!(
                "{}, {cap} records per trigger, {rows} per commit",
                stages.label()
            ),
        };
        report(&r, events, &label);
        let per_cpu_second = events as f64 / r.cpu.as_secs_f64();
        let rss_mib = r.peak_rss_kib as f64 / 1024.0;
        if cap == 100_000 && held.is_none() {
            met.push((
                format!("events per CPU-second, {label} ≥ {:.0}", stages.target()),
                format!("{per_cpu_second:.0}"),
                per_cpu_second >= stages.target(),
            ));
        }
        let (bound_mib, bound) = match held {
            None if cap >= 100_000 => (160.0, "160 MiB".to_string()),
            None => (80.0, "80 MiB".to_string()),
            Some(rows) => {
                let bytes = rows.min(events) as f64 * raw.bytes_per_event;
                let mib = bytes / f64::from(1 << 20);
                (
                    3.0 * mib + 64.0,
                    format!("3 × {mib:.0} MiB + 64 MiB = {:.0} MiB", 3.0 * mib + 64.0),
                )
            }
        };
        met.push((
            format!("peak RSS, {label} ≤ {bound}"),
            format!("{rss_mib:.0} MiB"),
            rss_mib <= bound_mib,
        ));
    }
    println!("targets:");
    for (target, measured, ok) in met {
        println!(
            "  {target}: {measured} ({})",
            if ok { "met" } else { "NOT met" }
        );
    }
}

fn dead_letter_topic(run: usize) -> String {
    format!("bench-dead-letter-{run}")
}

struct Raw {
    rate: f64,
    per_cpu_second: f64,
    bytes_per_event: f64,
}

/// Reads the whole topic once, doing nothing with the records.
fn raw_consume(bootstrap: &str, partitions: u32, events: u64) -> Raw {
    let consumer: BaseConsumer = sluice::kafka::Connection::plain(bootstrap)
        .client_config(&[
            ("group.id", "bench-raw"),
            ("enable.auto.commit", "false"),
            ("enable.partition.eof", "false"),
        ])
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions as i32 {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let me = std::process::id();
    let (start, cpu_start) = (Instant::now(), cpu_of(me));
    let (mut n, mut bytes) = (0u64, 0usize);
    while n < events {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            bytes += m.payload().map_or(0, <[u8]>::len) + m.key().map_or(0, <[u8]>::len);
            n += 1;
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "raw consume stalled at {n}"
        );
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_of(me).saturating_sub(cpu_start).as_secs_f64();
    Raw {
        rate: n as f64 / seconds,
        per_cpu_second: n as f64 / cpu.max(1e-3),
        bytes_per_event: bytes as f64 / n as f64,
    }
}

struct RunResult {
    /// From the first fetch to the end of the process.
    ingest: Duration,
    wall: Duration,
    /// The process's CPU time, start-up included.
    cpu: Duration,
    batches: u64,
    peak_rss_kib: u64,
    /// Summed over the batches: CPU microseconds per phase, and `total`.
    cpu_us: BTreeMap<String, u64>,
}

/// Runs the example pipeline over the topic into a fresh warehouse, `max_records` per
/// trigger, and with `held` the commit cadence's `min-commit-rows`.
fn sluice_run(
    bootstrap: &str,
    events: u64,
    run: usize,
    stages: Stages,
    max_records: u64,
    held: Option<u64>,
) -> RunResult {
    let warehouse = std::env::temp_dir().join(format!("sluice-bench-{}-{run}", std::process::id()));
    let _ = std::fs::remove_dir_all(&warehouse);
    std::fs::create_dir_all(&warehouse).unwrap();
    let config = warehouse.join("pipeline.toml");
    std::fs::write(&config, example_config(stages, held)).unwrap();
    let plugins_dir = Path::new(plugins::CLICKSTREAM_VALIDATOR).parent().unwrap();
    let start = Instant::now();
    let cpu_before = ended_children_cpu();
    let mut child = Command::new(BIN)
        .args(["run", "--available-now", "--config"])
        .arg(&config)
        .env("KAFKA_BOOTSTRAP", bootstrap)
        .env("KAFKA_TOPIC", TOPIC)
        .env("SLUICE_WAREHOUSE", warehouse.join("warehouse"))
        .env("SLUICE_PLUGINS", plugins_dir)
        .env("SLUICE_DEAD_LETTER_TOPIC", dead_letter_topic(run))
        .env("SLUICE_MAX_RECORDS", max_records.to_string())
        .envs(TABLES.map(|(var, topic)| (var, topic.split_once('=').unwrap().0)))
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || read_log(stderr));
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        peak = peak.max(peak_rss_kib(pid));
        std::thread::sleep(Duration::from_millis(10));
    }
    let end = Instant::now();
    let status = child.wait().unwrap();
    let cpu = ended_children_cpu().saturating_sub(cpu_before);
    let log = reader.join().unwrap();
    assert!(
        status.success() && log.rows == events,
        "sluice read {} of {events} events ({status:?}):\n{}",
        log.rows,
        log.tail.join("\n")
    );
    let _ = std::fs::remove_dir_all(&warehouse);
    RunResult {
        ingest: end - log.reading_from.expect("sluice started reading"),
        wall: end - start,
        cpu,
        batches: log.batches,
        peak_rss_kib: peak,
        cpu_us: log.cpu_us,
    }
}

/// The retail example's pipeline file for a run: its stages, and with `held` the commit
/// cadence's `min-commit-rows`; snapshot expiry always.
fn example_config(stages: Stages, held: Option<u64>) -> String {
    let mut example =
        std::fs::read_to_string(repo_root().join("examples/retail-clickstream/pipeline.toml"))
            .unwrap();
    if stages == Stages::Validator {
        // The enrich stage and its lookup tables: from the stage to the sink.
        let from = example
            .find("[[stages]]\nname = \"enrich\"")
            .expect("the enrich stage");
        let to = example.find("[sink]").expect("the sink");
        example.replace_range(from..to, "");
    }
    let cadence = held.map_or(String::new(), |rows| {
        format!("commit-interval = \"1h\"\nmin-commit-rows = {rows}\n")
    });
    // The history a long-running pipeline keeps: without expiry each commit rewrites a
    // metadata file that grows by a snapshot per commit.
    let cadence = format!("{cadence}{EXPIRY}\n");
    example.replace(
        "target-file-size =",
        &format!("{cadence}target-file-size ="),
    )
}

/// What a run's log said.
#[derive(Default)]
struct Log {
    reading_from: Option<Instant>,
    batches: u64,
    rows: u64,
    cpu_us: BTreeMap<String, u64>,
    tail: Vec<String>,
}

fn read_log(stderr: impl std::io::Read) -> Log {
    let mut log = Log::default();
    for line in std::io::BufReader::new(stderr).lines() {
        let line = line.unwrap();
        // Logged right after the source assigned its partitions, when fetching starts
        // (the raw consumer's clock starts at its assignment too).
        if line.contains("new pipeline: starting at") {
            log.reading_from = Some(Instant::now());
        }
        if let Some((_, json)) = line.split_once("sluice::progress: ") {
            let p: serde_json::Value = serde_json::from_str(json).unwrap();
            log.batches += 1;
            log.rows += p["input_rows"].as_u64().unwrap();
            for phase in PHASES.iter().chain(&["total", "reader"]) {
                *log.cpu_us.entry(phase.to_string()).or_default() +=
                    p["cpu_us"][phase].as_u64().unwrap_or(0);
            }
        }
        log.tail.push(line);
        if log.tail.len() > 20 {
            log.tail.remove(0);
        }
    }
    log
}

fn report(r: &RunResult, events: u64, label: &str) {
    let cpu = r.cpu.as_secs_f64();
    println!(
        "sluice run --available-now ({label}): {:>9.0} events/s over {:.2}s of ingestion ({:.2}s with start-up), {} commits",
        events as f64 / r.ingest.as_secs_f64(),
        r.ingest.as_secs_f64(),
        r.wall.as_secs_f64(),
        r.batches,
    );
    println!(
        "    {:.2} CPU-seconds: {:>9.0} events per CPU-second; peak RSS {} MiB",
        cpu,
        events as f64 / cpu,
        r.peak_rss_kib / 1024
    );
    let per_event = |us: u64| us as f64 / events as f64;
    let batches_total = r.cpu_us["total"];
    let mut line = String::from("    CPU µs per event:");
    for phase in PHASES {
        line.push_str(&format!(" {phase} {:.2},", per_event(r.cpu_us[phase])));
        if phase == "read" {
            // The reading thread's own part of `read`.
            line.push_str(&format!(" (reader {:.2}),", per_event(r.cpu_us["reader"])));
        }
    }
    let outside = (cpu * 1e6) as u64;
    line.push_str(&format!(
        " batches {:.2}, start-up and between batches {:.2}, all {:.2}",
        per_event(batches_total),
        per_event(outside.saturating_sub(batches_total)),
        per_event(outside)
    ));
    println!("{line}");
}
