//! What production does to a pipeline, against real parts: maintenance by sluice and by
//! pyiceberg, a replaced broker, a retention gap, `latest` across restarts, poison records (a header name
//! that is not UTF-8, a dead letter larger than the broker takes), and a broker that goes
//! away and comes back.

use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::message::{BorrowedHeaders, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use serde_json::Value;
use sluice_tests::broker::Broker;
use sluice_tests::fixture::{Setup, text};
use sluice_tests::pyiceberg;

use crate::pipeline::{dead_letters, rows};

const TABLE: &str = "tutorial.retail_clickstream_events";

/// Produces `count` valid events (seeded) to the setup's topic (one partition), their ids
/// numbered from `seed * 1000` so that each call makes distinct ones.
pub(crate) fn produce_valid(s: &Setup, count: u64, seed: u64) {
    let first = (seed * 1000).to_string();
    let count = count.to_string();
    let seed = seed.to_string();
    let produced = s.produce(&[
        "--first-id",
        &first,
        "--partitions",
        "1",
        "--count",
        &count,
        "--seed",
        &seed,
        "--invalid-share",
        "0",
        "--late-share",
        "0",
        "--duplicate-share",
        "0",
    ]);
    assert_eq!(produced.delivered.to_string(), count);
}

fn event_ids(shown: &Value) -> Vec<String> {
    rows(shown)
        .iter()
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect()
}

/// Every row's event id, checking there are `expected` and no duplicates.
pub(crate) fn assert_rows_once(s: &Setup, expected: usize) -> BTreeSet<String> {
    let ids = event_ids(&s.show());
    let unique: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(unique.len(), ids.len(), "duplicated rows");
    assert_eq!(ids.len(), expected);
    unique
}

pub(crate) fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(out));
    text(out)
}

#[test]
fn the_checkpoint_survives_compaction_and_snapshot_expiry_by_pyiceberg() {
    let s = Setup::new("pyiceberg-maintenance");
    produce_valid(&s, 30, 1);
    ok(&s.run(&[("SLUICE_MAX_RECORDS", "10")]));
    assert_rows_once(&s, 30);

    // A compaction (one overwrite snapshot on top) and expiry of every older snapshot: the
    // snapshot that carried sluice's last mark is gone.
    let report = pyiceberg::maintain(&s.warehouse, TABLE, &["--compact", "--expire"]);
    assert_eq!(report["snapshots_after"], 1, "{report}");
    assert_eq!(report["rows"], 30);
    assert!(
        s.show()["snapshot_summary"]
            .get("sluice.batch-id")
            .is_none()
    );

    produce_valid(&s, 12, 2);
    let log = ok(&s.run(&[]));
    assert!(
        log.contains("resuming from the table's last commit"),
        "{log}"
    );
    assert!(log.contains("12 records read"), "{log}");
    assert_rows_once(&s, 42);
}

#[test]
fn a_pipeline_without_a_mark_on_a_table_with_cut_history_is_refused_unless_new() {
    let mut s = Setup::new("cut-history");
    produce_valid(&s, 10, 3);
    ok(&s.run(&[("SLUICE_MAX_RECORDS", "5")]));
    pyiceberg::maintain(&s.warehouse, TABLE, &["--compact", "--expire"]);
    // Remove the mark property as a table written by an older sluice would lack it:
    // instead, a second pipeline (another name) that never committed here.
    s.edit_example_config(|c| c.replace("name = \"retail-clickstream\"", "name = \"another\""));
    let out = s.run(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    let log = text(&out);
    assert!(
        log.contains("has no commit mark of pipeline `another`"),
        "{log}"
    );
    assert!(log.contains("--new-pipeline"), "{log}");

    let out = s
        .command(&["run", "--available-now", "--new-pipeline"])
        .output()
        .unwrap();
    ok(&out);
    // Now it has a mark, and starts without the flag.
    ok(&s.run(&[]));
}

#[test]
fn sluice_maintain_expires_snapshots_keeps_marks_and_deletes_orphans() {
    let s = Setup::new("maintain");
    produce_valid(&s, 40, 4);
    ok(&s.run(&[("SLUICE_MAX_RECORDS", "5")]));
    let data = s.warehouse.join("tutorial/retail_clickstream_events/data");
    let orphan = data.join("orphan-from-a-crash.parquet");
    std::fs::write(&orphan, b"PAR1").unwrap();
    let fresh_orphan = data.join("being-written.parquet");
    std::fs::write(&fresh_orphan, b"PAR1").unwrap();
    let old = std::process::Command::new("touch")
        .args(["-d", "2 days ago"])
        .arg(&orphan)
        .status()
        .unwrap();
    assert!(old.success());

    let said = ok(&s.maintain("1d"));
    assert!(said.contains("expired 7 snapshots, 1 kept"), "{said}");
    assert!(
        said.contains("pipeline `retail-clickstream`'s last commit"),
        "{said}"
    );
    assert!(!orphan.exists(), "{said}");
    assert!(fresh_orphan.exists(), "younger than the grace period: kept");
    // The data files of expired snapshots are still those of the current one (appends),
    // so every row is still there, for sluice and for pyiceberg.
    assert_rows_once(&s, 40);
    assert_eq!(pyiceberg::read_table(&s.warehouse, TABLE).len(), 40);

    produce_valid(&s, 3, 5);
    let log = ok(&s.run(&[]));
    assert!(log.contains("3 records read"), "{log}");
    assert_rows_once(&s, 43);
}

#[test]
fn latest_is_anchored_at_the_first_start() {
    let mut s = Setup::new("latest-anchor");
    s.edit_example_config(|c| {
        c.replace(
            "starting-offsets = \"earliest\"",
            "starting-offsets = \"latest\"",
        )
    });
    produce_valid(&s, 5, 6);
    let log = ok(&s.run(&[]));
    assert!(log.contains("anchored the starting offsets"), "{log}");
    assert!(log.contains("0 records read"), "{log}");
    // Produced while the never-committed pipeline is down: read, not skipped.
    produce_valid(&s, 7, 7);
    let log = ok(&s.run(&[]));
    assert!(log.contains("7 records read"), "{log}");
    assert_rows_once(&s, 7);
}

#[test]
fn a_replaced_broker_stops_the_pipeline_unless_told_to_continue() {
    let mut s = Setup::new("replaced-broker");
    produce_valid(&s, 10, 8);
    ok(&s.run(&[]));
    assert_rows_once(&s, 10);

    // The same topic on a new, empty broker, with more records than the old one had.
    s.broker = Broker::start();
    produce_valid(&s, 15, 9);
    let out = s.run(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    let log = text(&out);
    assert!(
        log.contains("is not the partition the pipeline read before"),
        "{log}"
    );
    assert_rows_once(&s, 10);

    s.edit_example_config(|c| c.replace("[source]\n", "[source]\non-data-loss = \"continue\"\n"));
    let log = ok(&s.run(&[]));
    assert!(log.contains("15 records read"), "{log}");
    assert_rows_once(&s, 25);
    let summary = &s.show()["snapshot_summary"];
    let loss = summary["sluice.data-loss"].as_str().unwrap();
    assert!(
        loss.contains("is not the partition the pipeline read before"),
        "{summary}"
    );
}

#[test]
fn a_retention_gap_stops_the_pipeline_unless_told_to_continue() {
    // tansu deletes the records of a `cleanup.policy = "delete"` topic whose timestamp is
    // older than `retention.ms`, here 10 s, checked twice a second.
    let mut s = Setup::new("retention-gap");
    s.broker = Broker::start_with_maintenance(Some(Duration::from_millis(500)));
    create_topic_with_retention(&s, "10000");
    // Ten records stamped 20 s ahead: the pipeline reads them (dead letters: they are not
    // events), then retention deletes them 30 s from now.
    let start = now_millis();
    send_stamped(&s, "read", 10, start + 20_000);
    ok(&s.run(&[]));
    assert_eq!(dead_letters(&s.show()).len(), 10);
    // While it is down: ten records it never reads (stamped an hour ago, deleted at once),
    // and five that stay (stamped an hour ahead).
    send_stamped(&s, "expired", 10, start - 3_600_000);
    send_stamped(&s, "new", 5, start + 3_600_000);
    wait_for_earliest(&s, 20, Duration::from_secs(60));

    let out = s.run(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    let log = text(&out);
    assert!(
        log.contains("records 10..20 of") && log.contains("10 records lost"),
        "{log}"
    );
    assert_eq!(dead_letters(&s.show()).len(), 10, "nothing committed");

    s.edit_example_config(|c| c.replace("[source]\n", "[source]\non-data-loss = \"continue\"\n"));
    let log = ok(&s.run(&[]));
    assert!(log.contains("5 records read"), "{log}");
    let shown = s.show();
    assert_eq!(dead_letters(&shown).len(), 15);
    let summary = &shown["snapshot_summary"];
    assert_eq!(summary["sluice.records-lost"], "10", "{summary}");
}

/// Sends `count` records `{"event_id": "PREFIX-i"}` (not valid events) with the record
/// timestamp `timestamp_ms`.
fn send_stamped(s: &Setup, prefix: &str, count: usize, timestamp_ms: i64) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &s.broker.bootstrap)
        .create()
        .unwrap();
    for i in 0..count {
        let value = format!(r#"{{"event_id":"{prefix}-{i}"}}"#);
        let record = BaseRecord::<(), str>::to(&s.topic)
            .payload(&value)
            .timestamp(timestamp_ms);
        producer.send(record).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// Creates the setup's topic (one partition) with `cleanup.policy = "delete"` and
/// `retention_ms`.
fn create_topic_with_retention(s: &Setup, retention_ms: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &s.broker.bootstrap)
        .create()
        .unwrap();
    let topic = NewTopic::new(&s.topic, 1, TopicReplication::Fixed(1))
        .set("cleanup.policy", "delete")
        .set("retention.ms", retention_ms);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let created = runtime.block_on(admin.create_topics([&topic], &AdminOptions::new()));
    for result in created.unwrap() {
        result.unwrap();
    }
}

/// Waits (up to `timeout`) until the topic's first partition starts at `offset`.
fn wait_for_earliest(s: &Setup, offset: i64, timeout: Duration) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &s.broker.bootstrap)
        .create()
        .unwrap();
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let (low, _) = consumer
            .fetch_watermarks(&s.topic, 0, Duration::from_secs(10))
            .unwrap();
        if low == offset {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the broker's retention did not delete up to {offset}: earliest {low}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sends one record with raw headers (names as bytes, which rdkafka's API cannot make).
fn send_raw(s: &Setup, value: &[u8], headers: &[(&[u8], &[u8])]) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &s.broker.bootstrap)
        .set("message.max.bytes", "5000000")
        .create()
        .unwrap();
    let mut owned = OwnedHeaders::new();
    for (name, value) in headers {
        owned = add_raw_header(owned, name, value);
    }
    let record = BaseRecord::<(), [u8]>::to(&s.topic)
        .payload(value)
        .headers(owned);
    producer.send(record).map_err(|(e, _)| e).unwrap();
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// Adds a header whose name is any bytes, through librdkafka's C API.
#[allow(unsafe_code)]
fn add_raw_header(headers: OwnedHeaders, name: &[u8], value: &[u8]) -> OwnedHeaders {
    let native = headers.as_borrowed() as *const BorrowedHeaders
        as *mut rdkafka::bindings::rd_kafka_headers_t;
    // SAFETY: `as_borrowed` is a view of the native header list (rdkafka casts the pointer
    // the same way); librdkafka copies the name and value.
    let error = unsafe {
        rdkafka::bindings::rd_kafka_header_add(
            native,
            name.as_ptr().cast(),
            name.len() as isize,
            value.as_ptr().cast(),
            value.len() as isize,
        )
    };
    assert_eq!(
        error,
        rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR
    );
    headers
}

#[test]
fn poison_records_are_dead_lettered_not_fatal() {
    let s = Setup::new("poison");
    produce_valid(&s, 2, 10);
    let valid = sluice_tests::seed_events()[0].clone();
    // A valid event whose header name is not UTF-8.
    send_raw(&s, valid.as_bytes(), &[(b"tr\xffce", b"1")]);
    // An invalid event (not JSON) of 2 MB, with such a header too.
    let huge = vec![b'x'; 2_000_000];
    send_raw(&s, &huge, &[(b"\xfe", b"2")]);
    produce_valid(&s, 2, 11);

    let log = ok(&s.run(&[]));
    assert!(
        log.contains("6 records read, 5 rows written, 1 dead-lettered"),
        "{log}"
    );
    let shown = s.show();
    let dead = dead_letters(&shown);
    assert_eq!(dead.len(), 1, "{shown}");
    let letter = &dead[0];
    let headers = &letter["headers"];
    assert_eq!(headers["sluice.source.offset"], "3", "{headers}");
    let truncated = headers["sluice.truncated"].as_str().unwrap();
    assert!(truncated.starts_with("value 2000000 -> "), "{truncated}");
    let kept = letter["value"].as_str().unwrap().len();
    assert!(kept < 1_000_000 && kept > 900_000, "{kept}");
    assert_eq!(
        headers["\u{fffd}"], "2",
        "the header, its name made text: {headers}"
    );
}
