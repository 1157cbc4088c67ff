//! A Kafka broker for benchmarks: librdkafka's mock cluster (the real Kafka protocol on
//! loopback), in a process of its own so that its CPU is neither sluice's nor the
//! benchmark's. See [`sluice_tests::mock::MockKafka`], which starts it.
//!
//! `mock-kafka [--avro REGISTRY_URL] BROKERS TOPIC PARTITIONS EVENTS [OTHER_TOPIC...]`:
//! creates TOPIC and the other topics (one partition each: the mock cluster does not answer
//! CreateTopics), produces EVENTS generated retail events (5% invalid) to TOPIC (as JSON, or
//! with `--avro` as `sluice produce --format avro` writes them, the schema registered in the
//! registry at REGISTRY_URL), prints `ready BOOTSTRAP`,
//! and serves until its standard input closes. An other topic written `NAME=SHAPE:COUNT` is
//! loaded with COUNT records of `sluice produce --shape SHAPE` (the lookup tables'
//! `customers` and `products`).

use std::io::Read;

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (format, args): (Vec<&str>, &[String]) = match &args[..] {
        [flag, url, rest @ ..] if flag == "--avro" => {
            (vec!["--format", "avro", "--schema-registry", url], rest)
        }
        rest => (Vec::new(), rest),
    };
    let [brokers, topic, partitions, events, others @ ..] = args else {
        eprintln!(
            "usage: mock-kafka [--avro REGISTRY_URL] BROKERS TOPIC PARTITIONS EVENTS [OTHER_TOPIC...]"
        );
        std::process::exit(2);
    };
    let number = |s: &str| -> i32 { s.parse().expect("a number") };
    let mock = MockCluster::<DefaultProducerContext>::new(number(brokers)).unwrap();
    mock.create_topic(topic, number(partitions), 1).unwrap();
    let mut tables = Vec::new();
    for other in others {
        let name = match other.split_once('=') {
            Some((name, table)) => {
                tables.push((name, table.split_once(':').expect("NAME=SHAPE:COUNT")));
                name
            }
            None => other.as_str(),
        };
        mock.create_topic(name, 1, 1).unwrap();
    }
    let bootstrap = mock.bootstrap_servers();
    for (name, (shape, count)) in tables {
        let args = ["--shape", shape, "--count", count, "--invalid-share", "0"];
        let produced = sluice_tests::produce(&bootstrap, name, &args);
        assert_eq!(produced.delivered.to_string(), count);
    }
    if events != "0" {
        let mut args = format.clone();
        args.extend([
            "--count",
            events,
            "--invalid-share",
            "0.05",
            // Full message sets of 64 KiB (~200 events, a Java producer's default is
            // 16 KiB): the mock cluster finds a fetch's offset by walking a
            // partition's message sets from the first (a real broker uses an index),
            // so the tiny ones a short linger makes over a thousand partitions slowed
            // every fetch more than the one before.
            "--property",
            "linger.ms=1000",
            "--property",
            "batch.size=65536",
            "--property",
            "queue.buffering.max.messages=2000000",
        ]);
        let produced = sluice_tests::produce(&bootstrap, topic, &args);
        assert_eq!(produced.delivered.to_string(), *events);
    }
    println!("ready {bootstrap}");
    // Serves until the benchmark goes away.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
