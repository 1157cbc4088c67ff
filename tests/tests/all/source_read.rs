//! The Kafka source read directly against tansu: records fetched ahead of a batch (read in
//! arrays of up to 1 024, see `host/src/source/kafka/fetch.rs`), past its targets or past
//! its caps, reach the next batches in offset order, none lost and none twice.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use serde_json::json;
use sluice::batch::Caps;
use sluice::kafka::Connection;
use sluice::source::kafka::{KafkaSource, KafkaSourceConfig};
use sluice::source::{Offsets, Source};
use sluice_tests::broker::Broker;

/// Sends 60 records to each of 3 partitions, one record per produce request (so that a
/// fetch can stop between any two).
fn produce_one_by_one(bootstrap: &str, topic: &str) {
    let connection = Connection::plain(bootstrap);
    sluice::kafka::ensure_topic(
        &connection.client_config(&[]),
        topic,
        3,
        Duration::from_secs(30),
    )
    .unwrap();
    let producer: BaseProducer = connection
        .client_config(&[("linger.ms", "0")])
        .create()
        .unwrap();
    for i in 0..60 {
        for p in 0..3 {
            let value = format!(
                r#"{{"partition": {p}, "n": {i}, "padding": "{}"}}"#,
                "x".repeat(200)
            );
            let record = BaseRecord::<str, str>::to(topic)
                .partition(p)
                .payload(&value);
            producer.send(record).map_err(|(e, _)| e).unwrap();
            producer.flush(Duration::from_secs(30)).unwrap();
        }
    }
}

/// Fetches of at most ~1 KiB per partition: partitions come interleaved in the arrays read,
/// so a batch whose last partition reaches its target leaves later records of a partition
/// it already finished both looked at (kept for later) and not looked at yet.
#[test]
fn records_read_ahead_of_a_batch_reach_the_next_ones_in_order() {
    let broker = Broker::start();
    let topic = "read-ahead";
    produce_one_by_one(&broker.bootstrap, topic);
    let config: KafkaSourceConfig = serde_json::from_value(json!({
        "bootstrap-servers": broker.bootstrap,
        "topics": [topic],
        "properties": {
            "max.partition.fetch.bytes": "1024",
            "fetch.max.bytes": "4096",
            "message.max.bytes": "1000",
        },
    }))
    .unwrap();
    // Targets 5 records past each partition's position and a cap far above them.
    let caps = Caps {
        records: 1000,
        bytes: u64::MAX,
    };
    let mut source = KafkaSource::new(config, "read-ahead", caps).unwrap();
    let mut at = source.start(None).unwrap();
    let ends = source.end_offsets().unwrap();
    assert_eq!(ends.0.values().sum::<i64>(), 180);
    // Let librdkafka fetch everything first: the arrays read then hold many fetches.
    std::thread::sleep(Duration::from_secs(3));
    let stop = AtomicBool::new(false);
    let mut seen: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for _ in 0..1000 {
        if at == ends {
            break;
        }
        let until = Offsets(
            ends.0
                .iter()
                .map(|(tp, &end)| (tp.clone(), (at.get(tp).unwrap() + 5).min(end)))
                .collect(),
        );
        let (records, next) = source.read(&until, caps, &stop).unwrap();
        for r in &records {
            assert!(r.offset < until.get(&tp_of(r)).unwrap(), "past the target");
            seen.entry(r.partition).or_default().push(r.offset);
        }
        at = next;
    }
    assert_eq!(at, ends, "read to the end");
    for (tp, &end) in &ends.0 {
        let offsets = seen.remove(&tp.partition).unwrap_or_default();
        assert_eq!(offsets, (0..end).collect::<Vec<_>>(), "partition {tp}");
    }
    assert!(seen.is_empty());
}

fn tp_of(r: &sluice::record::Record) -> sluice::source::TopicPartition {
    sluice::source::TopicPartition {
        topic: r.topic.clone(),
        partition: r.partition,
    }
}
