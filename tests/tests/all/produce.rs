//! `sluice produce` against a real broker: every generated event arrives, keyed by session,
//! spread over the topic's partitions, exactly as the generator made it.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use sluice::generate::{Generator, GeneratorConfig};
use sluice_tests::broker::Broker;
use sluice_tests::produce;

#[test]
fn produced_events_arrive_keyed_by_session() {
    let broker = Broker::start();
    let summary = produce(
        &broker.bootstrap,
        "clicks",
        &[
            "--partitions",
            "3",
            "--count",
            "600",
            "--seed",
            "7",
            "--invalid-share",
            "0.1",
            "--late-share",
            "0.1",
            "--duplicate-share",
            "0.05",
        ],
    );
    assert_eq!(summary.delivered, 600);
    assert_eq!(
        summary.valid + summary.late + summary.invalid + summary.duplicates,
        600
    );
    assert!(
        summary.duplicates > 10 && summary.late > 30 && summary.invalid > 30,
        "{summary:?}"
    );

    let consumer: BaseConsumer = sluice::kafka::Connection::plain(&broker.bootstrap)
        .client_config(&[
            ("group.id", "produce-test"),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
        ])
        .create()
        .unwrap();
    consumer.subscribe(&["clicks"]).unwrap();
    let mut received: Vec<(i32, String, String)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.len() < 600 && Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let m = message.unwrap();
            let text = |b: Option<&[u8]>| String::from_utf8(b.unwrap().to_vec()).unwrap();
            received.push((m.partition(), text(m.key()), text(m.payload())));
        }
    }
    assert_eq!(received.len(), 600, "not every produced event arrived");

    // Each session's events sit on one partition, in the order they were generated.
    let expected = Generator::new(GeneratorConfig {
        seed: 7,
        invalid_share: 0.1,
        late_share: 0.1,
        duplicate_share: 0.05,
        ..GeneratorConfig::default()
    })
    .take(600);
    let mut expected_by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in expected {
        expected_by_key.entry(e.key).or_default().push(e.value);
    }
    let mut received_by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut partition_of: HashMap<String, i32> = HashMap::new();
    for (partition, key, value) in received {
        assert_eq!(
            *partition_of.entry(key.clone()).or_insert(partition),
            partition,
            "{key} on two partitions"
        );
        received_by_key.entry(key).or_default().push(value);
    }
    assert_eq!(received_by_key, expected_by_key);
    let partitions: std::collections::HashSet<i32> = partition_of.values().copied().collect();
    assert_eq!(
        partitions.len(),
        3,
        "events spread over the three partitions"
    );
}
