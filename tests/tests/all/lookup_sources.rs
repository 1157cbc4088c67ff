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
    send_to(producer, TOPIC, partition, records);
}

/// Sends `(key, value)` records to partition `partition` of `topic`, and waits for them.
fn send_to(
    producer: &BaseProducer,
    topic: &str,
    partition: i32,
    records: &[(Option<&str>, Option<&str>)],
) {
    for (key, value) in records {
        let mut record = BaseRecord::<str, str>::to(topic).partition(partition);
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

/// Items 10 and 3 of issue 28 against a real broker: a value that is not a JSON object
/// deletes its key (never the old value served) and is counted; a topic deleted and
/// created again (offsets back to 0, new values) is told from the one the table was read
/// from, by its end offsets or by the last record read: the refresh fails (`on-data-loss =
/// "fail"`, the default) or the table is read again from the new topic (`continue`).
#[test]
fn a_bad_value_deletes_its_key_and_a_replaced_topic_fails_or_is_read_again() {
    use sluice::lookup::load::LookupError;
    use sluice::source::kafka::OnDataLoss;

    let mut broker = Broker::start();
    let connection = Connection::plain(&broker.bootstrap);
    let admin = connection.client_config(&[]);
    sluice::kafka::ensure_topic(&admin, TOPIC, 1, Duration::from_secs(30)).unwrap();
    let producer: BaseProducer = connection.client_config(&[]).create().unwrap();
    let old = [
        (Some("u1"), Some(r#"{"tier":"gold"}"#)),
        (Some("u2"), Some(r#"{"tier":"silver"}"#)),
    ];
    send(&producer, 0, &old);
    let mut failing = TopicLoader::new("profiles", TOPIC, &connection, 1 << 20).unwrap();
    let mut rebuilding = TopicLoader::new("profiles", TOPIC, &connection, 1 << 20)
        .unwrap()
        .on_data_loss(OnDataLoss::Continue);
    let mut table = Arc::new(failing.empty());
    assert!(failing.refresh(&mut table).unwrap());
    send(&producer, 0, &[(Some("u1"), Some("not an object"))]);
    assert!(failing.refresh(&mut table).unwrap());
    assert_eq!(value(&table, "u1"), None, "deleted, not the old value");
    assert_eq!(value(&table, "u2").as_deref(), Some(r#"{"tier":"silver"}"#));
    assert_eq!(failing.skipped(), 1);
    let mut other = Arc::new(rebuilding.empty());
    assert!(rebuilding.refresh(&mut other).unwrap());
    assert_eq!(*other.version(), at(&[(0, 3)]));

    // The same number of records, other values: only the last record read tells.
    replace_topic(&mut broker, TOPIC, 1);
    let new = [
        (Some("u1"), Some(r#"{"tier":"bronze"}"#)),
        (Some("u2"), Some(r#"{"tier":"bronze"}"#)),
        (Some("u3"), Some(r#"{"tier":"bronze"}"#)),
    ];
    send(&producer, 0, &new);
    let error = failing.refresh(&mut table).unwrap_err();
    assert!(matches!(error, LookupError::Replaced { .. }), "{error}");
    assert!(!error.is_transient());
    let said = error.to_string();
    assert!(
        said.contains("lookup `profiles`: topic `user-profiles`")
            && said.contains("partition 0 holds another record at offset 2")
            && said.contains("on-data-loss = \"continue\""),
        "{said}"
    );
    let held = Arc::clone(&other);
    assert!(rebuilding.refresh(&mut other).unwrap());
    assert_eq!(value(&other, "u1").as_deref(), Some(r#"{"tier":"bronze"}"#));
    assert_eq!(value(&other, "u3").as_deref(), Some(r#"{"tier":"bronze"}"#));
    assert_eq!(
        value(&held, "u2").as_deref(),
        Some(r#"{"tier":"silver"}"#),
        "a batch keeps its table"
    );
    assert!(
        !rebuilding.refresh(&mut other).unwrap(),
        "the same topic since"
    );

    // Fewer records than were read: the end offsets tell.
    replace_topic(&mut broker, TOPIC, 1);
    send(&producer, 0, &[(Some("u9"), Some(r#"{"tier":"new"}"#))]);
    let said = failing.refresh(&mut table).unwrap_err().to_string();
    assert!(
        said.contains("partition 0 ends at offset 1, but the table was read to offset 3"),
        "{said}"
    );
    assert!(rebuilding.refresh(&mut other).unwrap());
    assert_eq!((other.len(), value(&other, "u9").is_some()), (1, true));
    assert_eq!(*other.version(), at(&[(0, 1)]));
}

/// The broker replaced by an empty one on the same port (deleting a topic on tansu makes
/// librdkafka 2.x crash in its metadata cache, in whichever client knew the topic), then
/// `topic` created again, empty, with `partitions`.
fn replace_topic(broker: &mut Broker, topic: &str, partitions: i32) {
    broker.replace_with_empty();
    let config = Connection::plain(&broker.bootstrap).client_config(&[]);
    sluice::kafka::ensure_topic(&config, topic, partitions, Duration::from_secs(30)).unwrap();
}

/// Item 1 of issue 28: a broker that goes away while a lookup table is loaded, and comes
/// back on the same storage. Refreshes fail while it is away (a transient fault), and the
/// first refresh after its return reads what is new, though the consumer met connection
/// errors meanwhile.
#[test]
fn a_lookup_topic_is_read_again_after_the_broker_comes_back() {
    let mut broker = Broker::start();
    let connection = Connection::plain(&broker.bootstrap);
    let admin = connection.client_config(&[]);
    sluice::kafka::ensure_topic(&admin, TOPIC, 1, Duration::from_secs(30)).unwrap();
    let producer: BaseProducer = connection.client_config(&[]).create().unwrap();
    send(&producer, 0, &[(Some("u1"), Some(r#"{"tier":"gold"}"#))]);
    let mut loader = TopicLoader::new("profiles", TOPIC, &connection, 1 << 20).unwrap();
    let mut table = Arc::new(loader.empty());
    assert!(loader.refresh(&mut table).unwrap());

    broker.stop();
    std::thread::sleep(Duration::from_secs(8));
    let error = loader.refresh(&mut table).unwrap_err();
    assert!(error.is_transient(), "{error}");
    broker.restart();
    let back = std::time::Instant::now();
    send(&producer, 0, &[(Some("u2"), Some(r#"{"tier":"silver"}"#))]);
    assert!(loader.refresh(&mut table).unwrap(), "read after the return");
    assert_eq!(value(&table, "u2").as_deref(), Some(r#"{"tier":"silver"}"#));
    assert_eq!(*table.version(), at(&[(0, 2)]));
    let took = back.elapsed();
    assert!(took < Duration::from_secs(20), "{took:?}");
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

/// The loader of the lookup table `products` from `reference.products`, in the catalog of
/// pipeline file `config` (its variables those of `s`).
fn products_loader(
    s: &sluice_tests::fixture::Setup,
    config: &str,
) -> sluice::lookup::iceberg::IcebergLoader {
    let text = config
        .replace("${SLUICE_WAREHOUSE}", s.warehouse.to_str().unwrap())
        .replace("${KAFKA_BOOTSTRAP}", &s.broker.bootstrap)
        .replace("${KAFKA_TOPIC}", &s.topic);
    let parsed =
        sluice::pipeline::config::PipelineConfig::parse(&text, &s.warehouse.join("p.toml"))
            .unwrap();
    let catalog = sluice::iceberg::IcebergCatalog::open(&parsed.sink, &s.warehouse).unwrap();
    sluice::lookup::iceberg::IcebergLoader::new(
        "products",
        "reference.products",
        "product_id",
        &catalog,
        1 << 20,
    )
    .unwrap()
}

/// The Iceberg loader against a real table (SQL catalog on SQLite) that a pipeline keeps
/// writing: the first load holds every row by its key column; a refresh after a new
/// snapshot holds the new key, a refresh without one reads nothing; a table rebuilt at the
/// first snapshot holds what it held then.
#[test]
fn an_iceberg_table_is_read_then_refreshed_and_rebuilt_at_a_snapshot() {
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
    let mut loader = products_loader(&s, PRODUCTS);

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

/// A lookup table whose table gained a list and a struct column after its first files
/// (`unknown-fields = "add"`): the older files read the new columns as nulls
/// (iceberg-rust cannot, apache/iceberg-rust#2618), the newer rows hold them.
#[test]
fn an_iceberg_lookup_table_that_gained_a_list_column_is_read_whole() {
    let mut s = sluice_tests::fixture::Setup::new("iceberg-lookup-evolved");
    let config = PRODUCTS.replace(
        "table = \"products\"\n",
        "table = \"products\"\nunknown-fields = \"add\"\n",
    );
    s.write_config("products.toml", &config);
    let products = [
        "--shape",
        "products",
        "--count",
        "4",
        "--invalid-share",
        "0",
    ];
    s.produce(&products);
    let run = |s: &sluice_tests::fixture::Setup| {
        let out = s.run(&[]);
        assert!(
            out.status.success(),
            "{}",
            sluice_tests::fixture::text(&out)
        );
    };
    run(&s);
    let file = s.warehouse.join("new-product.jsonl");
    std::fs::write(
        &file,
        "{\"product_id\":\"P900\",\"tags\":[\"lamp\",\"new\"],\"dims\":{\"w\":3}}\n",
    )
    .unwrap();
    s.produce(&["--input", file.to_str().unwrap()]);
    run(&s);

    let mut loader = products_loader(&s, &config);
    let mut table = Arc::new(loader.empty());
    assert!(loader.refresh(&mut table).unwrap());
    assert_eq!(table.len(), 5);
    let lamp: serde_json::Value = serde_json::from_slice(table.get(b"P900").unwrap()).unwrap();
    assert!(lamp["tags"].to_string().contains("lamp"), "{lamp}");
    assert!(!lamp["dims"].is_null(), "{lamp}");
    let mug: serde_json::Value = serde_json::from_slice(table.get(b"P100").unwrap()).unwrap();
    assert!(mug["tags"].is_null() && mug["dims"].is_null(), "{mug}");
}
