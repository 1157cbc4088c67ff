//! `sluice produce` against a real broker: every generated event arrives, keyed by session,
//! spread over the topic's partitions, exactly as the generator made it; inputs it cannot
//! use are refused at once, and a signal stops it promptly at any rate. As Avro (with the
//! stand-in Schema Registry), its events land as the JSON ones do.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use sluice::generate::avro::AvroEncoder;
use sluice::generate::{Generator, GeneratorConfig, Shape};
use sluice_tests::RETAIL_COLUMNS;
use sluice_tests::broker::Broker;
use sluice_tests::fixture::{Setup, ended_within, sluice_binary, text};
use sluice_tests::produce;
use sluice_tests::pyiceberg::read_table;
use sluice_tests::registry::SchemaRegistry;

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

/// `sluice produce --bootstrap-servers BOOTSTRAP ARGS…`, started.
fn start_produce(bootstrap: &str, args: &[&str]) -> Child {
    Command::new(sluice_binary())
        .args(["produce", "--bootstrap-servers", bootstrap])
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Inputs `sluice produce` cannot use are refused before anything is sent, with a message
/// naming the option: `--partitions 0 --create-topic` used to hang until the flush timed out.
#[test]
fn produce_refuses_what_it_cannot_use() {
    let broker = Broker::start();
    for (args, says) in [
        (
            &["--topic", "zero", "--partitions", "0", "--create-topic"][..],
            "--partitions",
        ),
        (&["--topic", "neg", "--rate=-1"][..], "--rate"),
        (&["--topic", "nan", "--rate", "NaN"][..], "--rate"),
        (&["--topic", "inf", "--rate", "inf"][..], "--rate"),
        (&["--topic", "", "--create-topic"][..], "--topic"),
        (&["--topic", "a/b", "--create-topic"][..], "--topic"),
    ] {
        let child = start_produce(&broker.bootstrap, args);
        let (out, _) = ended_within(child, Duration::from_secs(20))
            .unwrap_or_else(|out| panic!("{args:?} still running after 20 s: {}", text(&out)));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// The records `topic` (one partition) holds.
fn records_in(bootstrap: &str, topic: &str) -> i64 {
    let consumer: BaseConsumer = sluice::kafka::Connection::plain(bootstrap)
        .client_config(&[("group.id", "produce-signal-test")])
        .create()
        .unwrap();
    consumer
        .fetch_watermarks(topic, 0, Duration::from_secs(5))
        .map_or(0, |(low, high)| high - low)
}

/// At a rate so low the next event is due in 31 years (`1e-9`), or never (`1e-300`, which
/// used to panic computing when), the first event is sent, and SIGTERM or SIGINT stops the
/// producer within 2 s, its summary printed.
#[test]
fn a_signal_stops_produce_promptly_at_any_rate() {
    let broker = Broker::start();
    for (i, (rate, signal)) in [("1e-9", "TERM"), ("1e-9", "INT"), ("1e-300", "TERM")]
        .into_iter()
        .enumerate()
    {
        let topic = format!("slow-{i}");
        let args = [
            "--topic",
            topic.as_str(),
            "--create-topic",
            "--partitions",
            "1",
            "--count",
            "0",
            "--rate",
            rate,
        ];
        let mut child = start_produce(&broker.bootstrap, &args);
        let deadline = Instant::now() + Duration::from_secs(30);
        while records_in(&broker.bootstrap, &topic) < 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            records_in(&broker.bootstrap, &topic),
            1,
            "{rate}: the first event"
        );
        // The next one is not due: the producer waits.
        std::thread::sleep(Duration::from_millis(500));
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!("{rate}: ended by itself ({status}): {}", text(&out));
        }
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let (out, took) = ended_within(child, Duration::from_secs(20)).unwrap_or_else(|out| {
            panic!(
                "{rate} {signal}: still running 20 s after the signal: {}",
                text(&out)
            )
        });
        assert!(out.status.success(), "{rate} {signal}: {}", text(&out));
        assert!(
            took < Duration::from_secs(2),
            "{rate} {signal}: stopped after {took:?}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("produced 1 events to {topic}")),
            "{stdout}"
        );
        assert_eq!(records_in(&broker.bootstrap, &topic), 1);
    }
}

/// A pipeline with no stages from `topic` into `table`, dead letters to `dead_letter`;
/// `source` and `columns` are the rest of `[source]` and `[sink]`.
fn plain_pipeline(
    topic: &str,
    table: &str,
    dead_letter: &str,
    source: &str,
    columns: &str,
) -> String {
    format!(
        r#"
[pipeline]
name = "{table}"
[source]
bootstrap-servers = "${{KAFKA_BOOTSTRAP}}"
topics = ["{topic}"]
{source}
[sink]
warehouse = "${{SLUICE_WAREHOUSE}}"
namespace = "produced"
table = "{table}"
{columns}
[dead-letter]
topic = "{dead_letter}"
"#
    )
}

/// Rows by event id.
fn by_event_id(rows: Vec<serde_json::Value>) -> BTreeMap<String, serde_json::Value> {
    rows.into_iter()
        .map(|row| (row["event_id"].as_str().unwrap().to_string(), row))
        .collect()
}

/// `sluice produce --format avro` registers the retail schema as `<topic>-value` and sends
/// the same events as the JSON produce of the same seed: a pipeline with no `[sink]
/// columns` makes its table from the registered schema, and its rows equal the JSON
/// pipeline's, but for the invalid events Avro cannot express, which arrive as truncated
/// datums and are dead-lettered (`undecodable`), the pipeline carrying on.
#[test]
fn avro_produce_lands_the_rows_the_json_produce_lands() {
    let registry = SchemaRegistry::start(&[]);
    let mut setup = Setup::new("produce-avro");
    let avro_topic = setup.side_topic("avro");
    let seed = ["--partitions", "1", "--count", "400", "--seed", "11"];
    let seed = [&seed[..], &["--invalid-share", "0.2"]].concat();
    let json = setup.produce(&seed);
    let avro_args = [
        &seed[..],
        &["--format", "avro", "--schema-registry", &registry.url],
    ]
    .concat();
    let avro = produce(&setup.broker.bootstrap, &avro_topic, &avro_args);
    assert_eq!((json.delivered, avro.delivered), (400, 400));
    // The events Avro cannot express, by the library's own encoder.
    let encoder = AvroEncoder::new(Shape::Retail).unwrap();
    let generated = Generator::new(GeneratorConfig {
        seed: 11,
        invalid_share: 0.2,
        ..GeneratorConfig::default()
    })
    .take(400);
    let truncated: BTreeSet<String> = generated
        .filter(|e| encoder.encode(&e.value).truncated.is_some())
        .map(|e| e.value.split('"').nth(3).unwrap().to_string()) // {"event_id":"evt_…
        .collect();
    assert_eq!(avro.truncated, truncated.len() as u64);
    assert!(avro.truncated > 20, "{avro:?}");

    let json_config = plain_pipeline(&setup.topic, "json_events", "json-dead", "", RETAIL_COLUMNS);
    setup.write_config("json.toml", &json_config);
    let out = setup.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let avro_source = format!(
        "format = \"avro\"\n[source.schema-registry]\nurl = \"{}\"",
        registry.url
    );
    let avro_config = plain_pipeline(
        &avro_topic,
        "avro_events",
        &setup.dead_letter,
        &avro_source,
        "",
    );
    setup.write_config("avro.toml", &avro_config);
    let out = setup.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let json_rows = by_event_id(read_table(&setup.warehouse, "produced.json_events"));
    let avro_rows = by_event_id(read_table(&setup.warehouse, "produced.avro_events"));
    let expected: BTreeMap<String, serde_json::Value> = json_rows
        .into_iter()
        .filter(|(id, _)| !truncated.contains(id))
        .collect();
    assert!(expected.len() > 300, "{}", expected.len());
    assert_eq!(avro_rows, expected);
    let dead = setup.show()["dead_letters"].as_array().unwrap().clone();
    assert_eq!(dead.len(), truncated.len(), "{dead:?}");
    for letter in &dead {
        let code = &letter["headers"]["sluice.error.code"];
        assert_eq!(code, "undecodable", "{letter}");
    }
}

/// `sluice produce --format protobuf` sends the analytics events as Protobuf messages of
/// their registered schema: a pipeline with no `[sink] columns` makes its table from the
/// message, and its rows equal the JSON produce's of the same seed.
#[test]
fn protobuf_produce_lands_the_rows_the_json_produce_lands() {
    let registry = SchemaRegistry::start(&[]);
    let mut setup = Setup::new("produce-proto");
    let proto_topic = setup.side_topic("proto");
    let seed = ["--partitions", "1", "--count", "200", "--seed", "5"];
    let seed = [&seed[..], &["--invalid-share", "0", "--shape", "analytics"]].concat();
    let json = setup.produce(&seed);
    let proto_args = [
        &seed[..],
        &["--format", "protobuf", "--schema-registry", &registry.url],
    ]
    .concat();
    let proto = produce(&setup.broker.bootstrap, &proto_topic, &proto_args);
    assert_eq!(
        (json.delivered, proto.delivered, proto.truncated),
        (200, 200, 0)
    );

    let columns = r#"columns = [
  { name = "event_id", type = "string" },
  { name = "user_id", type = "string" },
  { name = "event_type", type = "string" },
  { name = "timestamp", type = "timestamptz" },
  { name = "page", type = "string" },
]"#;
    let json_config = plain_pipeline(&setup.topic, "json_events", "json-dead", "", columns);
    setup.write_config("json.toml", &json_config);
    let out = setup.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let source = format!(
        "format = \"protobuf\"\n[source.schema-registry]\nurl = \"{}\"",
        registry.url
    );
    let config = plain_pipeline(
        &proto_topic,
        "proto_events",
        &setup.dead_letter,
        &source,
        "",
    );
    setup.write_config("proto.toml", &config);
    let out = setup.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let json_rows = by_event_id(read_table(&setup.warehouse, "produced.json_events"));
    let proto_rows = by_event_id(read_table(&setup.warehouse, "produced.proto_events"));
    assert_eq!(json_rows.len(), 200);
    assert_eq!(proto_rows, json_rows);
}
