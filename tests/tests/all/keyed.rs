//! Whether a topic is keyed by a field (issue 35: co-partitioned input), asked of records a
//! real producer placed on tansu: librdkafka's default partitioner (crc32), its Java-
//! compatible one (murmur2), and a topic keyed by another field; and the analytics example
//! declared keyed by `user_id` (`[source] keyed-by`), run on a topic so keyed and on one
//! keyed by event.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{Value, json};
use sluice::batch::Caps;
use sluice::event_time::keyed::{KeyCheck, Keyed};
use sluice::kafka::Connection;
use sluice::kafka::partitioner::Partitioner;
use sluice::source::Source;
use sluice::source::kafka::{KafkaSource, KafkaSourceConfig};
use sluice_tests::broker::Broker;
use sluice_tests::fixture::text;

use crate::event_time::analytics;

const PARTITIONS: i32 = 4;

/// Sends 200 events of 40 users in 25 sessions, each keyed by `key_field`, through a
/// producer with `properties`.
fn produce(bootstrap: &str, topic: &str, key_field: &str, properties: &[(&str, &str)]) {
    let connection = Connection::plain(bootstrap);
    sluice::kafka::ensure_topic(
        &connection.client_config(&[]),
        topic,
        PARTITIONS,
        Duration::from_secs(30),
    )
    .unwrap();
    let producer: BaseProducer = connection.client_config(properties).create().unwrap();
    for i in 0..200 {
        let event = json!({"user_id": format!("user_{}", i % 40), "session_id": format!("s{}", i % 25), "n": i});
        let key = event[key_field].as_str().unwrap().to_string();
        let value = event.to_string();
        producer
            .send(BaseRecord::to(topic).key(&key).payload(&value))
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// Reads the whole topic back and asks whether it is keyed by `user_id`.
fn keyed_by_user(bootstrap: &str, topic: &str) -> Keyed {
    let config: KafkaSourceConfig = serde_json::from_value(json!({
        "bootstrap-servers": bootstrap,
        "topics": [topic],
    }))
    .unwrap();
    let caps = Caps {
        records: 1000,
        bytes: u64::MAX,
    };
    let mut source = KafkaSource::new(config, "keyed", caps).unwrap();
    let mut at = source.start(None).unwrap();
    let ends = source.end_offsets().unwrap();
    assert_eq!(ends.0.values().sum::<i64>(), 200);
    let stop = AtomicBool::new(false);
    let mut check = KeyCheck::default();
    let mut partitions_used = std::collections::BTreeSet::new();
    while at != ends {
        let (records, next) = source.read(&ends, caps, &stop).unwrap();
        for r in &records {
            let event: Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
            let user = event["user_id"].as_str().unwrap();
            check.observe(user.as_bytes(), r.partition, PARTITIONS);
            partitions_used.insert(r.partition);
        }
        at = next;
    }
    assert!(partitions_used.len() > 1, "one partition proves nothing");
    check.verdict()
}

#[test]
fn a_topic_is_keyed_by_the_field_its_producer_keyed_it_by() {
    let broker = Broker::start();
    let b = &broker.bootstrap;
    produce(b, "keyed-default", "user_id", &[]);
    produce(
        b,
        "keyed-java",
        "user_id",
        &[("partitioner", "murmur2_random")],
    );
    produce(b, "keyed-by-session", "session_id", &[]);
    assert_eq!(
        keyed_by_user(b, "keyed-default"),
        Keyed::By(Partitioner::Crc32),
        "librdkafka's default"
    );
    assert_eq!(
        keyed_by_user(b, "keyed-java"),
        Keyed::By(Partitioner::Murmur2),
        "the Java client's"
    );
    let not = keyed_by_user(b, "keyed-by-session");
    let Keyed::Not {
        misplaced, checked, ..
    } = &not
    else {
        panic!("keyed by session, not user: {not:?}")
    };
    assert_eq!(*checked, 200);
    assert!(*misplaced > 0, "{not}");
    assert!(not.to_string().starts_with("not keyed by it: "), "{not}");
}

#[test]
fn the_analytics_example_declared_keyed_by_user_runs_only_on_a_topic_so_keyed() {
    let keyed_by_user = |name: &str| {
        let mut s = analytics(name);
        s.edit_config(|t| {
            t.replace(
                "starting-offsets = \"earliest\"",
                "starting-offsets = \"earliest\"\nkeyed-by = \"user_id\"",
            )
        });
        s
    };
    let s = keyed_by_user("keyed-user");
    let produce = |s: &sluice_tests::fixture::Setup, key: &[&str]| {
        let mut args = vec![
            "--shape",
            "analytics",
            "--count",
            "300",
            "--partitions",
            "4",
        ];
        args.extend_from_slice(key);
        s.produce(&args)
    };
    let env = [
        ("SLUICE_MAX_RECORDS", "100"),
        ("SLUICE_TRIGGER", "available-now"),
    ];
    produce(&s, &["--key-by", "user_id"]);
    let out = s.run(&env);
    assert!(out.status.success(), "{}", text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("source topic keyed by the declared field") && log.contains("crc32"),
        "{log}"
    );
    assert!(!s.show()["rows"].as_array().unwrap().is_empty());

    let s = keyed_by_user("keyed-event");
    produce(&s, &["--key-by", "event_id"]);
    let out = s.run(&env);
    assert!(!out.status.success(), "{}", text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains(&format!(
            "source topic `{}` is not keyed by `user_id` (source.keyed-by): not keyed by it: ",
            s.topic
        )) && log.contains("nothing of this batch was committed"),
        "{log}"
    );
    assert_eq!(s.show()["snapshot_summary"], json!({}), "nothing committed");
}
