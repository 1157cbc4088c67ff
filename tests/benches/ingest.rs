//! Ingestion throughput and memory: `sluice run --available-now` over a topic of generated
//! events, beside the raw consume rate of the same topic with the same client library
//! (librdkafka through rdkafka), which is the ceiling this broker allows. One run, one
//! machine, one broker (tansu with its SQLite engine, started here).
//!
//! Run with `cargo bench -p sluice-tests --bench ingest` (optionally `-- EVENTS`, default
//! 50 000). Prints events/s for both, the ratio, and sluice's peak resident memory with two
//! batch caps, to show that memory follows the cap and not the topic's size.
//! Target: sluice ≥ 50% of the raw consume rate.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use sluice_tests::broker::Broker;
use sluice_tests::{plugins, produce, repo_root};

const BIN: &str = env!("CARGO_BIN_EXE_sluice-under-test");
const TOPIC: &str = "bench-events";

fn main() {
    let events: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    // A fresh broker for each measurement: tansu can stall for a while after a consumer
    // with fetches in flight goes away, which would bill its recovery to the next one.
    let raw = {
        let broker = loaded_broker(events);
        raw_consume(&broker.bootstrap, events)
    };
    println!("raw consume (rdkafka BaseConsumer, no processing): {raw:>9.0} events/s");

    let mut results = Vec::new();
    for (cap, label) in [
        (100_000, "max-records 100000"),
        (10_000, "max-records 10000"),
    ] {
        let broker = loaded_broker(events);
        let r = sluice_run(&broker.bootstrap, events, cap);
        println!(
            "sluice run --available-now ({label}): {:>9.0} events/s over {:.2}s of ingestion ({:.2}s with start-up), {} batches, peak RSS {} MiB",
            r.rate,
            r.ingest_seconds,
            r.wall_seconds,
            r.batches,
            r.peak_rss_kib / 1024
        );
        println!(
            "    of which waiting for the broker (reads, dead-letter acks): {:.2}s; sluice's own work alone: {:.0} events/s",
            r.broker_seconds, r.own_rate
        );
        results.push(r);
    }
    let ratio = results[0].rate / raw;
    println!(
        "sluice / raw consume: {:.0}% (target ≥ 50%: {})",
        ratio * 100.0,
        if ratio >= 0.5 { "met" } else { "NOT met" }
    );
    println!(
        "peak memory follows the batch cap: {} MiB at 100000 records per batch, {} MiB at 10000",
        results[0].peak_rss_kib / 1024,
        results[1].peak_rss_kib / 1024
    );
}

/// A new broker holding `events` generated events (5% invalid) in three partitions.
fn loaded_broker(events: u64) -> Broker {
    let broker = Broker::start();
    let t = Instant::now();
    let count = events.to_string();
    let produced = produce(
        &broker.bootstrap,
        TOPIC,
        &[
            "--partitions",
            "3",
            "--count",
            &count,
            "--invalid-share",
            "0.05",
            "--property",
            "linger.ms=20",
        ],
    );
    assert_eq!(produced.delivered, events);
    println!(
        "loaded {events} events into {TOPIC} (3 partitions) in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    broker
}

/// Reads the whole topic once; returns events per second.
fn raw_consume(bootstrap: &str, events: u64) -> f64 {
    let consumer: BaseConsumer = sluice::kafka::Connection::plain(bootstrap)
        .client_config(&[
            ("group.id", "bench-raw"),
            ("enable.auto.commit", "false"),
            ("enable.partition.eof", "false"),
        ])
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let start = Instant::now();
    let (mut n, mut bytes) = (0u64, 0usize);
    while n < events {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            bytes += m.payload().map_or(0, <[u8]>::len);
            n += 1;
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "raw consume stalled at {n}"
        );
    }
    std::hint::black_box(bytes);
    n as f64 / start.elapsed().as_secs_f64()
}

struct RunResult {
    rate: f64,
    ingest_seconds: f64,
    wall_seconds: f64,
    batches: u64,
    peak_rss_kib: u64,
    /// Events per second of sluice's own work (plugins, encoding, Parquet, commit), i.e.
    /// without waiting for the broker.
    own_rate: f64,
    /// Seconds spent reading and waiting for dead-letter acknowledgements.
    broker_seconds: f64,
}

/// Runs the example pipeline over the topic into a fresh warehouse.
fn sluice_run(bootstrap: &str, events: u64, max_records: u64) -> RunResult {
    let warehouse =
        std::env::temp_dir().join(format!("sluice-bench-{}-{max_records}", std::process::id()));
    let _ = std::fs::remove_dir_all(&warehouse);
    let plugins_dir = Path::new(plugins::CLICKSTREAM_VALIDATOR).parent().unwrap();
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .args(["run", "--available-now", "--config"])
        .arg(repo_root().join("examples/retail-clickstream/pipeline.toml"))
        .env("KAFKA_BOOTSTRAP", bootstrap)
        .env("KAFKA_TOPIC", TOPIC)
        .env("SLUICE_WAREHOUSE", &warehouse)
        .env("SLUICE_PLUGINS", plugins_dir)
        .env(
            "SLUICE_DEAD_LETTER_TOPIC",
            format!("bench-dead-letter-{max_records}"),
        )
        .env("SLUICE_MAX_RECORDS", max_records.to_string())
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut reading_from = None;
        let (mut batches, mut rows, mut own_ms, mut broker_ms) = (0u64, 0u64, 0u64, 0u64);
        let mut tail = std::collections::VecDeque::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let line = line.unwrap();
            tail.push_back(line.clone());
            if tail.len() > 20 {
                tail.pop_front();
            }
            // Logged right after the source assigned its partitions, when fetching starts
            // (the raw consumer's clock starts at its assignment too).
            if line.contains("new pipeline: starting at") {
                reading_from = Some(Instant::now());
            }
            if let Some((_, json)) = line.split_once("sluice::progress: ") {
                let p: serde_json::Value = serde_json::from_str(json).unwrap();
                batches += 1;
                rows += p["input_rows"].as_u64().unwrap();
                let d = &p["durations_ms"];
                let ms = |k: &str| d[k].as_u64().unwrap();
                own_ms += ms("plugins") + ms("encode") + ms("write") + ms("commit");
                broker_ms += ms("poll") + ms("dead_letter");
            }
        }
        (reading_from, batches, rows, tail, own_ms, broker_ms)
    });
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            for line in status.lines() {
                if let Some(kib) = line.strip_prefix("VmHWM:") {
                    let kib: u64 = kib
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse()
                        .unwrap_or(0);
                    peak = peak.max(kib);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let end = Instant::now();
    let status = child.wait().unwrap();
    let (reading_from, batches, rows, tail, own_ms, broker_ms) = reader.join().unwrap();
    let tail: Vec<String> = tail.into_iter().collect();
    assert!(
        status.success() && rows == events,
        "sluice read {rows} of {events} events ({status:?}):\n{}",
        tail.join("\n")
    );
    let ingest = end - reading_from.expect("sluice started reading");
    let _ = std::fs::remove_dir_all(&warehouse);
    RunResult {
        rate: events as f64 / ingest.as_secs_f64(),
        ingest_seconds: ingest.as_secs_f64(),
        wall_seconds: (end - start).as_secs_f64(),
        batches,
        peak_rss_kib: peak,
        own_rate: events as f64 / (own_ms.max(1) as f64 / 1000.0),
        broker_seconds: broker_ms as f64 / 1000.0,
    }
}
