//! The compacted-topic loader of lookup tables against a real broker (tansu): a refresh
//! reads only what is new, a null value deletes, a record without a key is skipped, and a
//! table rebuilt at a recorded version holds what it held then.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use sluice::kafka::Connection;
use sluice::lookup::load::Loader;
use sluice::lookup::topic::TopicLoader;
use sluice::lookup::{Table, Version};
use sluice_tests::broker::Broker;

const TOPIC: &str = "user-profiles";

/// Sends `(key, value)` records to partition `partition`, and waits for them.
fn send(producer: &BaseProducer, partition: i32, records: &[(Option<&str>, Option<&str>)]) {
    for (key, value) in records {
        let mut record = BaseRecord::<str, str>::to(TOPIC).partition(partition);
        if let Some(key) = key {
            record = record.key(key);
        }
        if let Some(value) = value {
            record = record.payload(value);
        }
        producer.send(record).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

fn value(table: &Table, key: &str) -> Option<String> {
    let v = table.get(key.as_bytes())?;
    Some(String::from_utf8_lossy(v).into_owned())
}

fn at(offsets: &[(i32, i64)]) -> Version {
    Version::Topic {
        offsets: offsets.iter().copied().collect::<BTreeMap<_, _>>(),
    }
}

#[test]
fn a_compacted_topic_is_read_then_refreshed_and_rebuilt_at_a_version() {
    let broker = Broker::start();
    let connection = Connection::plain(&broker.bootstrap);
    let admin = connection.client_config(&[]);
    sluice::kafka::ensure_topic(&admin, TOPIC, 2, Duration::from_secs(30)).unwrap();
    let producer: BaseProducer = connection.client_config(&[]).create().unwrap();
    send(
        &producer,
        0,
        &[
            (Some("u1"), Some(r#"{"tier":"gold"}"#)),
            (None, Some(r#"{"tier":"keyless"}"#)),
            (Some("u2"), Some("not json")),
        ],
    );
    send(&producer, 1, &[(Some("u3"), Some(r#"{"tier":"silver"}"#))]);

    let mut loader = TopicLoader::new("profiles", TOPIC, &connection, 1 << 20).unwrap();
    let mut table = loader.empty();
    assert!(loader.refresh(&mut table).unwrap());
    assert_eq!(*table.version(), at(&[(0, 3), (1, 1)]));
    assert_eq!(value(&table, "u1").as_deref(), Some(r#"{"tier":"gold"}"#));
    assert_eq!(value(&table, "u2"), None, "not a JSON object: skipped");
    assert_eq!(table.len(), 2);
    assert!(!loader.refresh(&mut table).unwrap(), "nothing new");

    send(
        &producer,
        0,
        &[
            (Some("u1"), Some(r#"{"tier":"platinum"}"#)),
            (Some("u3"), None),
        ],
    );
    send(&producer, 1, &[(Some("u3"), None)]);
    assert!(loader.refresh(&mut table).unwrap());
    assert_eq!(*table.version(), at(&[(0, 5), (1, 2)]));
    assert_eq!(
        value(&table, "u1").as_deref(),
        Some(r#"{"tier":"platinum"}"#)
    );
    assert_eq!(value(&table, "u3"), None, "a null value deletes");

    // A replay of a batch that saw the first version.
    let then = loader.at(&at(&[(0, 3), (1, 1)])).unwrap();
    assert_eq!(value(&then, "u1").as_deref(), Some(r#"{"tier":"gold"}"#));
    assert_eq!(value(&then, "u3").as_deref(), Some(r#"{"tier":"silver"}"#));
    assert_eq!(*then.version(), at(&[(0, 3), (1, 1)]));

    // Over max-bytes: a clear error naming the table.
    let mut small = TopicLoader::new("profiles", TOPIC, &connection, 8).unwrap();
    let mut table = small.empty();
    let error = small.refresh(&mut table).unwrap_err().to_string();
    assert!(
        error.contains("lookup `profiles`") && error.contains("max-bytes"),
        "{error}"
    );
}
