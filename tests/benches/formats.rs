//! JSON against Avro: the same generated retail events (5% invalid), once as JSON and once
//! in Avro as `sluice produce --format avro` writes them (the Confluent wire format, the
//! schema registered in the stand-in Schema Registry, `tests/py/schema_registry.py`),
//! through the same plain pipeline: `sluice run --available-now` with no plugin stages, so
//! that Avro datums are read straight into the table's columns (`encode/avro.rs`) and JSON
//! objects parsed into them. The JSON table has the retail columns; the Avro table is made
//! from the registered schema (the same columns).
//!
//! Each topic is loaded on librdkafka's mock cluster (a helper process, before the clock
//! starts: see `sluice_tests::mock`). The runs alternate, JSON then Avro, `--rounds=N`
//! times (default 3), and the best round of each counts. Prints, per run, **events per
//! CPU-second of the sluice process** (all of its CPU, start-up included, from
//! `getrusage` once it has ended), CPU µs per event in all and in the progress lines'
//! `read` and `encode` phases, the ratio, and whether the target "Avro costs less CPU per
//! event than JSON" is met.
//!
//! Run with `cargo bench -p sluice-tests --bench formats` (optionally `-- EVENTS`, default
//! 1 000 000).

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Instant;

use sluice_tests::RETAIL_COLUMNS;
use sluice_tests::measure::ended_children_cpu;
use sluice_tests::mock::MockKafka;
use sluice_tests::registry::SchemaRegistry;

const BIN: &str = env!("CARGO_BIN_EXE_sluice-under-test");
const MOCK: &str = env!("CARGO_BIN_EXE_mock-kafka");
/// Bytes a generated JSON event takes in the broker, to size the partitions (an Avro one
/// takes less; both topics get the same partitions).
const EVENT_BYTES: u64 = 420;
const MAX_RECORDS: u64 = 100_000;

/// One format's topic and the parts of its pipeline file.
struct Input {
    name: &'static str,
    mock: MockKafka,
    topic: &'static str,
    /// More of `[source]`.
    source: String,
    /// More of `[sink]`.
    sink: &'static str,
}

fn main() {
    let events: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = std::env::args()
        .find_map(|a| a.strip_prefix("--rounds=").and_then(|n| n.parse().ok()))
        .unwrap_or(3);
    let partitions = MockKafka::partitions_for(events, EVENT_BYTES);
    let registry = SchemaRegistry::start(&[]);
    let t = Instant::now();
    let json = MockKafka::start(MOCK, 1, "bench-json", partitions, events, &[]);
    let avro = MockKafka::start_avro(MOCK, &registry.url, 1, "bench-avro", partitions, events);
    println!(
        "loaded {events} retail events as JSON and as Avro ({partitions} partitions each) in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let inputs = [
        Input {
            name: "JSON",
            mock: json,
            topic: "bench-json",
            source: String::new(),
            sink: RETAIL_COLUMNS,
        },
        Input {
            name: "Avro",
            mock: avro,
            topic: "bench-avro",
            source: format!(
                "format = \"avro\"\n[source.schema-registry]\nurl = \"{}\"",
                registry.url
            ),
            sink: "",
        },
    ];
    let mut best = [f64::MAX; 2];
    for round in 0..rounds {
        for (i, input) in inputs.iter().enumerate() {
            let r = sluice_run(input, events, round);
            let us = r.cpu_seconds * 1e6 / events as f64;
            let per =
                |phase: &str| r.phase_us.get(phase).copied().unwrap_or(0) as f64 / events as f64;
            println!(
                "round {round} {:<4}: {:>9.0} events per CPU-second, {us:.2} CPU µs per event (read {:.2}, encode {:.2}); {} rows, {} dead letters",
                input.name,
                events as f64 / r.cpu_seconds,
                per("read"),
                per("encode"),
                r.rows,
                r.dead,
            );
            best[i] = best[i].min(us);
        }
    }
    verdict(best);
}

/// The best CPU µs per event of JSON and of Avro, side by side, and the target.
fn verdict(best: [f64; 2]) {
    let [json_us, avro_us] = best;
    println!(
        "best: JSON {:.0} events per CPU-second ({json_us:.2} µs per event), Avro {:.0} ({avro_us:.2} µs per event); Avro costs {:.2}× JSON's CPU per event",
        1e6 / json_us,
        1e6 / avro_us,
        avro_us / json_us
    );
    println!("targets:");
    println!(
        "  Avro costs less CPU per event than JSON: {avro_us:.2} vs {json_us:.2} µs ({})",
        if avro_us < json_us { "met" } else { "NOT met" }
    );
}

/// What one run cost and said.
struct RunResult {
    cpu_seconds: f64,
    rows: u64,
    dead: u64,
    /// CPU µs per phase, summed over the batches.
    phase_us: std::collections::BTreeMap<String, u64>,
}

/// The sums of a run's progress lines, and its last 20 log lines.
fn read_log(stderr: impl std::io::Read) -> (RunResult, Vec<String>) {
    let mut result = RunResult {
        cpu_seconds: 0.0,
        rows: 0,
        dead: 0,
        phase_us: Default::default(),
    };
    let mut tail = Vec::new();
    for line in std::io::BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if let Some((_, json)) = line.split_once("sluice::progress: ") {
            let p: serde_json::Value = serde_json::from_str(json).unwrap();
            result.rows += p["input_rows"].as_u64().unwrap_or(0);
            result.dead += p["rows_dead_lettered"].as_u64().unwrap_or(0);
            for (phase, us) in p["cpu_us"].as_object().into_iter().flatten() {
                *result.phase_us.entry(phase.clone()).or_default() += us.as_u64().unwrap_or(0);
            }
        }
        tail.push(line);
        if tail.len() > 20 {
            tail.remove(0);
        }
    }
    (result, tail)
}

/// Runs the plain pipeline of `input` over its topic into a fresh warehouse, to its end.
fn sluice_run(input: &Input, events: u64, round: usize) -> RunResult {
    let warehouse = std::env::temp_dir().join(format!(
        "sluice-bench-formats-{}-{}-{round}",
        std::process::id(),
        input.name
    ));
    let _ = std::fs::remove_dir_all(&warehouse);
    std::fs::create_dir_all(&warehouse).unwrap();
    let config = warehouse.join("pipeline.toml");
    let text = format!(
        r#"
[pipeline]
name = "formats"
[source]
bootstrap-servers = "{bootstrap}"
topics = ["{topic}"]
{source}
[trigger]
max-records = {MAX_RECORDS}
[sink]
warehouse = "{warehouse}"
namespace = "bench"
table = "events"
{sink}
[dead-letter]
topic = "{topic}-dead-letter-{round}"
"#,
        bootstrap = input.mock.bootstrap,
        topic = input.topic,
        source = input.source,
        warehouse = warehouse.join("warehouse").display(),
        sink = input.sink,
    );
    std::fs::write(&config, text).unwrap();
    let cpu_before = ended_children_cpu();
    let mut child = Command::new(BIN)
        .args(["run", "--available-now", "--config"])
        .arg(&config)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut result, tail) = read_log(child.stderr.take().unwrap());
    let status = child.wait().unwrap();
    result.cpu_seconds = ended_children_cpu()
        .saturating_sub(cpu_before)
        .as_secs_f64();
    assert!(
        status.success() && result.rows == events,
        "{}: sluice read {} of {events} events ({status:?}):\n{}",
        input.name,
        result.rows,
        tail.join("\n")
    );
    let _ = std::fs::remove_dir_all(&warehouse);
    result
}
