//! Chaos: the retail pipeline killed with SIGKILL at random moments while events are being
//! produced, again and again; then drained. Every record of the source topic must end up
//! once in the table (by event id) or in the dead-letter topic (by source position, where
//! repeats are allowed: dead letters are at least once), and nothing else.
//!
//! CI runs a few cycles; `scripts/chaos` runs 20 cycles over 100 000 events
//! (`SLUICE_CHAOS_CYCLES`, `SLUICE_CHAOS_EVENTS`), and prints the figures.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::Value;
use sluice_tests::fixture::{Setup, text};

use crate::pipeline::{dead_letters, rows};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (xorshift), seeded from the clock and printed.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Prints librdkafka's log lines (the tests have no logger).
struct Printing;

impl rdkafka::ClientContext for Printing {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        eprintln!("rdkafka {level:?} {fac}: {log_message}");
    }
}

impl rdkafka::consumer::ConsumerContext for Printing {}

/// Every record of `topic` (its `partitions`): (partition, offset) → event id, if the value
/// is a JSON object with one.
fn source_records(s: &Setup, partitions: i32) -> BTreeMap<(i32, i64), Option<String>> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &s.broker.bootstrap)
        .set("group.id", "chaos-reader")
        .set("enable.auto.commit", "false");
    if std::env::var_os("SLUICE_CHAOS_DEBUG").is_some() {
        config.set("debug", "fetch,protocol,msg");
    }
    let consumer: BaseConsumer<Printing> = config.create_with_context(Printing).unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in 0..partitions {
        let (low, high) = consumer
            .fetch_watermarks(&s.topic, p, Duration::from_secs(30))
            .unwrap();
        ends.insert(p, high);
        tpl.add_partition_offset(&s.topic, p, Offset::Offset(low))
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut records = BTreeMap::new();
    let total: i64 = ends.values().sum();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut errors = Vec::new();
    while (records.len() as i64) < total && Instant::now() < deadline {
        let m = match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                errors.push(e.to_string());
                continue;
            }
            None => continue,
        };
        let id = m
            .payload()
            .and_then(|v| serde_json::from_slice::<Value>(v).ok())
            .and_then(|v| v.get("event_id").and_then(Value::as_str).map(String::from));
        records.insert((m.partition(), m.offset()), id);
    }
    assert_eq!(
        records.len() as i64,
        total,
        "read the whole source topic back; consumer errors: {:?}",
        &errors[..errors.len().min(5)]
    );
    records
}

#[test]
fn sigkill_at_random_moments_loses_and_doubles_nothing() {
    let cycles = env_or("SLUICE_CHAOS_CYCLES", 3);
    let events = env_or("SLUICE_CHAOS_EVENTS", 3_000);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut dice = Dice(seed);
    let s = Setup::new("chaos");
    // Create the topic first, so the pipeline has something to read from the start.
    s.produce(&["--count", "1", "--partitions", "3", "--seed", "1"]);
    let producer = {
        let (bootstrap, topic) = (s.broker.bootstrap.clone(), s.topic.clone());
        let rate = (events as f64 / (cycles as f64 * 2.5))
            .max(100.0)
            .to_string();
        let count = events.to_string();
        std::thread::spawn(move || {
            let args: Vec<&str> = vec![
                "--count",
                &count,
                "--rate",
                &rate,
                "--seed",
                "2",
                "--first-id",
                "10",
                "--invalid-share",
                "0.05",
                "--late-share",
                "0",
                "--duplicate-share",
                "0",
            ];
            sluice_tests::produce(&bootstrap, &topic, &args)
        })
    };
    let mut kills = 0;
    for _ in 0..cycles {
        let running = s.start(
            &["run"],
            &[("SLUICE_INTERVAL", "500ms"), ("SLUICE_MAX_RECORDS", "700")],
        );
        std::thread::sleep(Duration::from_millis(800 + dice.below(3_000)));
        let (_, _, log) = running.kill();
        assert!(!log.contains("panicked"), "{log}");
        kills += 1;
    }
    let produced = producer.join().unwrap();
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let source = source_records(&s, 3);
    let shown = s.show();
    let table: Vec<&str> = rows(&shown)
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    let in_table: BTreeSet<&str> = table.iter().copied().collect();
    assert_eq!(in_table.len(), table.len(), "no event twice in the table");
    let dead: BTreeSet<(i32, i64)> = dead_letters(&shown)
        .iter()
        .map(|d| {
            let h = |k: &str| d["headers"][k].as_str().unwrap().parse::<i64>().unwrap();
            (
                h("sluice.source.partition") as i32,
                h("sluice.source.offset"),
            )
        })
        .collect();
    let mut lost = Vec::new();
    let mut twice = Vec::new();
    for (position, id) in &source {
        let landed = id.as_deref().is_some_and(|id| in_table.contains(id));
        match (landed, dead.contains(position)) {
            (false, false) => lost.push(position),
            (true, true) => twice.push(position),
            _ => {}
        }
    }
    let source_ids: BTreeSet<&str> = source.values().flatten().map(String::as_str).collect();
    let extra = in_table.difference(&source_ids).count()
        + dead.iter().filter(|p| !source.contains_key(p)).count();
    println!(
        "chaos: seed {seed}, {kills} SIGKILLs, {} records ({} produced while killing), {} rows, {} dead letters, {} lost, {} in both, {extra} unexplained",
        source.len(),
        produced.delivered,
        table.len(),
        dead.len(),
        lost.len(),
        twice.len()
    );
    assert!(lost.is_empty(), "lost: {:?}", &lost[..lost.len().min(10)]);
    assert!(
        twice.is_empty(),
        "in the table and dead-lettered: {twice:?}"
    );
    assert_eq!(
        extra, 0,
        "rows or dead letters that no source record explains"
    );
}

/// Produces `count` valid retail events numbered from `first` (`evt_…`, seeded by `first`).
fn produce_numbered(s: &Setup, first: u64, count: u64) {
    let (first, count) = (first.to_string(), count.to_string());
    let produced = s.produce(&[
        "--first-id",
        &first,
        "--seed",
        &first,
        "--count",
        &count,
        "--partitions",
        "1",
        "--invalid-share",
        "0",
        "--late-share",
        "0",
        "--duplicate-share",
        "0",
    ]);
    assert_eq!(produced.delivered.to_string(), count);
}

/// The broker killed and restarted on the same storage while the retail pipeline, with its
/// two lookup tables (customer profiles and products, from compacted topics), runs: for
/// each outage (`SLUICE_CHAOS_OUTAGES` seconds, `8` by default; `scripts/chaos` runs 8 and
/// 60), events before it, then profiles of 25 000 more customers and events after it. The
/// lookup tables must be read again after the broker's return (the refresh reads the new
/// profiles), the pipeline must commit again within `SLUICE_CHAOS_RECOVERY` seconds (60)
/// of the return, every event lands once, and the events after each outage are enriched
/// from the profiles produced after it.
#[test]
fn a_broker_restart_with_lookup_tables_recovers_exactly_once() {
    use crate::hot_swap::wait_until_committed;

    let outages: Vec<u64> = std::env::var("SLUICE_CHAOS_OUTAGES")
        .unwrap_or_else(|_| "8".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let recovery_limit = Duration::from_secs(env_or("SLUICE_CHAOS_RECOVERY", 60));
    let mut s = Setup::new("chaos-lookups");
    s.edit_example_config(|c| c.replace("[source]\n", "[source]\nfetch-timeout = \"5s\"\n"));
    s.ensure_side_topics();
    let customers = s.side_topic("customers");
    let produce_to = |s: &Setup, topic: &str, shape: &str, count: u64| {
        let count = count.to_string();
        let args = ["--shape", shape, "--count", &count, "--invalid-share", "0"];
        sluice_tests::produce(&s.broker.bootstrap, topic, &args);
    };
    produce_to(&s, &customers, "customers", 1_000);
    produce_to(&s, &s.side_topic("products"), "products", 4);
    produce_numbered(&s, 1, 100); // the source topic exists before the pipeline starts
    let running = s.start(&["run"], &[("SLUICE_INTERVAL", "1s")]);
    let (mut progress, mut events, mut after) = (Vec::new(), 100, Vec::new());
    for (i, &outage) in outages.iter().enumerate() {
        let first = 1_000_000 * (i as u64 + 1);
        produce_numbered(&s, first, 300);
        events += 300;
        wait_until_committed(&running, &mut progress, events);
        s.broker.stop();
        std::thread::sleep(Duration::from_secs(outage));
        s.broker.restart();
        let back = Instant::now();
        // Profiles of customers the table lacks, then events that need them.
        let known = 1_000 + 25_000 * (i as u64 + 1);
        produce_to(&s, &customers, "customers", known);
        produce_numbered(&s, first + 500_000, 300);
        events += 300;
        let deadline = back + recovery_limit;
        while progress
            .iter()
            .map(|p| p["input_rows"].as_u64().unwrap())
            .sum::<u64>()
            < events
        {
            let left = deadline.saturating_duration_since(Instant::now());
            let next = running.progress(left).unwrap_or_else(|| {
                panic!("not every event committed within {recovery_limit:?} of the broker's return after a {outage} s outage")
            });
            progress.push(next);
        }
        println!(
            "chaos: lookups: {outage} s outage, every event committed {:.1} s after the broker's return",
            back.elapsed().as_secs_f64()
        );
        after.push((first + 500_000, known));
    }
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");
    assert!(!log.contains("panicked"), "{log}");

    let shown = s.show();
    let rows = rows(&shown);
    let ids: BTreeSet<&str> = rows
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), rows.len(), "no event twice in the table");
    assert_eq!(rows.len() as u64, events, "every event in the table");
    let mut enriched = 0;
    for row in rows {
        let id: u64 = row["event_id"].as_str().unwrap()[4..].parse().unwrap();
        let user: u64 = row["user_id"].as_str().unwrap()[5..].parse().unwrap();
        let Some(&(_, known)) = after
            .iter()
            .find(|(from, _)| (*from..*from + 300).contains(&id))
        else {
            continue;
        };
        if user < known {
            assert!(row["tier"].is_string(), "read after the outage: {row}");
            enriched += 1;
        }
    }
    assert!(
        enriched > 0,
        "no event after an outage had a known customer"
    );
}
