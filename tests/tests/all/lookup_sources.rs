//! The compacted-topic loader of lookup tables against a real broker (tansu): a refresh
//! reads only what is new, a null value deletes, a record without a key is skipped, and a
//! table rebuilt at a recorded version holds what it held then.

use std::collections::BTreeMap;
use std::sync::Arc;
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
    let mut table = Arc::new(loader.empty());
    assert!(loader.refresh(&mut table).unwrap());
    assert_eq!(*table.version(), at(&[(0, 3), (1, 1)]));
    assert_eq!(value(&table, "u1").as_deref(), Some(r#"{"tier":"gold"}"#));
    assert_eq!(value(&table, "u2"), None, "not a JSON object: skipped");
    assert_eq!(table.len(), 2);
    let held = Arc::clone(&table);
    assert!(!loader.refresh(&mut table).unwrap(), "nothing new");
    assert!(
        Arc::ptr_eq(&held, &table),
        "nothing new: the held table is not copied"
    );

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
    let mut table = Arc::new(small.empty());
    let error = small.refresh(&mut table).unwrap_err().to_string();
    assert!(
        error.contains("lookup `profiles`") && error.contains("max-bytes"),
        "{error}"
    );
}

/// A product catalog table written by a sluice pipeline (the products topic → Iceberg).
const PRODUCTS: &str = r#"
[pipeline]
name = "products"
on-invalid = "fail"
[source]
bootstrap-servers = "${KAFKA_BOOTSTRAP}"
topics = ["${KAFKA_TOPIC}"]
[trigger]
mode = "available-now"
[sink]
warehouse = "${SLUICE_WAREHOUSE}"
namespace = "reference"
table = "products"
columns = [
  { name = "product_id", type = "string" },
  { name = "product_name", type = "string" },
  { name = "category", type = "string" },
  { name = "list_price", type = "decimal(10,2)" },
]
"#;

/// The Iceberg loader against a real table (SQL catalog on SQLite) that a pipeline keeps
/// writing: the first load holds every row by its key column; a refresh after a new
/// snapshot holds the new key, a refresh without one reads nothing; a table rebuilt at the
/// first snapshot holds what it held then.
#[test]
fn an_iceberg_table_is_read_then_refreshed_and_rebuilt_at_a_snapshot() {
    use sluice::lookup::iceberg::IcebergLoader;
    use sluice::sink::iceberg::IcebergCatalog;

    let mut s = sluice_tests::fixture::Setup::new("iceberg-lookup");
    s.write_config("products.toml", PRODUCTS);
    s.produce(&[
        "--shape",
        "products",
        "--count",
        "4",
        "--invalid-share",
        "0",
    ]);
    let out = s.run(&[]);
    assert!(
        out.status.success(),
        "{}",
        sluice_tests::fixture::text(&out)
    );
    let text = PRODUCTS
        .replace("${SLUICE_WAREHOUSE}", s.warehouse.to_str().unwrap())
        .replace("${KAFKA_BOOTSTRAP}", &s.broker.bootstrap)
        .replace("${KAFKA_TOPIC}", &s.topic);
    let config =
        sluice::pipeline::config::PipelineConfig::parse(&text, &s.warehouse.join("p.toml"))
            .unwrap();
    let catalog = IcebergCatalog::open(&config.sink, &s.warehouse).unwrap();
    let mut loader = IcebergLoader::new(
        "products",
        "reference.products",
        "product_id",
        &catalog,
        1 << 20,
    )
    .unwrap();

    let mut table = Arc::new(loader.empty());
    assert!(loader.refresh(&mut table).unwrap());
    let first = table.version().clone();
    assert!(
        matches!(first, Version::Snapshot { id: Some(_) }),
        "{first:?}"
    );
    assert_eq!(table.len(), 4);
    let mug: serde_json::Value = serde_json::from_slice(table.get(b"P100").unwrap()).unwrap();
    assert_eq!(mug["category"], "drinkware", "{mug}");
    assert!(!mug["list_price"].is_null(), "{mug}");
    assert!(
        !loader.refresh(&mut table).unwrap(),
        "no new snapshot, nothing read"
    );

    // A new product, in a new snapshot.
    let file = s.warehouse.join("new-product.jsonl");
    std::fs::write(
        &file,
        "{\"product_id\":\"P900\",\"product_name\":\"Trail Lamp\",\"category\":\"lighting\",\"list_price\":42.50}\n",
    )
    .unwrap();
    s.produce(&["--input", file.to_str().unwrap()]);
    let out = s.run(&[]);
    assert!(
        out.status.success(),
        "{}",
        sluice_tests::fixture::text(&out)
    );
    assert!(loader.refresh(&mut table).unwrap());
    assert_ne!(*table.version(), first);
    assert_eq!(table.len(), 5);
    assert!(value(&table, "P900").unwrap().contains("lighting"));

    // A replay of a batch that read the first snapshot sees the catalog as it was then.
    let old = loader.at(&first).unwrap();
    assert_eq!((old.len(), old.get(b"P900")), (4, None));
    assert_eq!(*old.version(), first);
}
