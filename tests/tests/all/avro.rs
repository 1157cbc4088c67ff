//! Avro topics end to end: records written by confluent-kafka-python's `AvroSerializer`
//! through a Schema Registry (the stand-in of `sluice_tests::registry`), read by sluice
//! from tansu into a table made from the subject's schema, and read back with pyiceberg
//! and DuckDB. Bad frames, unknown schema ids and broken datums are dead letters with
//! their bytes; a newer schema version adds its fields as columns; a registry outage is
//! retried, a refusal is not, and the registry's password never shows.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use serde_json::{Value, json};
use sluice_tests::fixture::{Setup, text};
use sluice_tests::registry::{SchemaRegistry, produce_avro};
use sluice_tests::tls::TestCa;
use sluice_tests::{plugins, pyiceberg};

use crate::evolution::{field, fields_of};
use crate::pipeline::dead_letters;

/// An order: every logical type the issue names, a nullable field, a list, a map, a
/// nested record and an enum.
const ORDER_V1: &str = r#"{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "order_id", "type": "string"},
    {"name": "quantity", "type": "int"},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "channel", "type": {"type": "enum", "name": "Channel", "symbols": ["WEB", "STORE"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "ship", "type": {"type": "record", "name": "Ship", "fields": [
      {"name": "city", "type": "string"}]}}
  ]
}"#;

/// Version 2: adds an optional field and a field inside `ship` (compatible changes).
fn order_v2() -> String {
    ORDER_V1
        .replace(
            r#"{"name": "city", "type": "string"}]}}"#,
            r#"{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": null}]}},
    {"name": "coupon", "type": ["null", "string"], "default": null}"#,
        )
}

fn order(i: u32) -> Value {
    json!({
        "order_id": format!("o-{i}"), "quantity": i, "placed_at": format!("2026-01-02T03:04:0{i}.250Z"),
        "price": format!("{i}.25"), "day": "2026-01-02", "ref": format!("00000000-0000-0000-0000-00000000000{i}"),
        "note": if i == 2 { Value::Null } else { json!(format!("note {i}")) },
        "channel": if i.is_multiple_of(2) { "WEB" } else { "STORE" },
        "tags": (0..i).map(|t| format!("t{t}")).collect::<Vec<_>>(),
        "counts": {"n": i}, "ship": {"city": "Oslo"},
    })
}

/// A pipeline of the Avro topic into `shop.orders` with no columns: the table comes from
/// the subject's schema. `registry` is the `[source.schema-registry]` section's body;
/// `sink` goes in `[sink]`.
fn config(registry: &str, sink: &str) -> String {
    format!(
        r#"
[pipeline]
name = "avro"
fault-budget = "1m"
[source]
bootstrap-servers = "${{KAFKA_BOOTSTRAP}}"
topics = ["${{KAFKA_TOPIC}}"]
format = "avro"
[source.schema-registry]
{registry}
[sink]
warehouse = "${{SLUICE_WAREHOUSE}}"
namespace = "shop"
table = "orders"
{sink}
[sink.catalog]
type = "sql"
name = "sluice"
[dead-letter]
topic = "${{SLUICE_DEAD_LETTER_TOPIC}}"
"#
    )
}

/// Sends `values` as they are (no serializer) to the setup's topic.
fn send_raw(s: &Setup, values: &[Vec<u8>]) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &s.broker.bootstrap)
        .create()
        .unwrap();
    for value in values {
        let record = BaseRecord::<(), [u8]>::to(&s.topic).payload(value);
        producer.send(record).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// The top-level fields of `shop.orders`: (id, name, type).
fn fields(s: &Setup) -> Vec<(u64, String, String)> {
    fields_of(&pyiceberg::schema(&s.warehouse, "shop.orders", &[]))
}

/// The rows of `shop.orders`, by `order_id`, as pyiceberg reads them.
fn rows(s: &Setup) -> Vec<Value> {
    let mut rows = pyiceberg::read_table(&s.warehouse, "shop.orders");
    rows.sort_by_key(|r| r["order_id"].as_str().unwrap_or("").to_string());
    rows
}

#[test]
fn an_avro_topic_lands_in_a_table_made_from_its_schema() {
    let registry = SchemaRegistry::start(&[]);
    let mut s = Setup::new("avro-table");
    s.write_config(
        "pipeline.toml",
        &config(&format!("url = \"{}\"", registry.url), ""),
    );
    let orders: Vec<Value> = (1..=3).map(order).collect();
    produce_avro(
        &s.broker.bootstrap,
        &registry.url,
        &s.topic,
        ORDER_V1,
        &orders,
        &[],
    );
    let datum = {
        // A framed record whose datum is cut short, and one naming an id never registered.
        let mut framed = vec![0, 0, 0, 0, 1];
        framed.extend_from_slice(b"\x06o-9");
        framed
    };
    send_raw(
        &s,
        &[
            b"{\"order_id\": \"json\"}".to_vec(),
            datum,
            vec![0, 0, 0, 0, 99, 2],
        ],
    );
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let types: Vec<_> = fields(&s)
        .into_iter()
        .map(|(_, name, ty)| (name, ty))
        .collect();
    let want = [
        ("order_id", "string"),
        ("quantity", "int"),
        ("placed_at", "timestamptz"),
        ("price", "decimal(8, 2)"),
        ("day", "date"),
        ("ref", "string"),
        ("note", "string"),
        ("channel", "string"),
        ("tags", "list<string>"),
        ("counts", "map<string, long>"),
    ];
    for (name, ty) in want {
        assert!(
            types.contains(&(name.to_string(), ty.to_string())),
            "{name} {ty}: {types:?}"
        );
    }
    let rows = rows(&s);
    assert_eq!(rows.len(), 3, "{rows:?}");
    let first = &rows[0];
    assert_eq!(first["order_id"], "o-1");
    assert_eq!(first["quantity"], 1);
    assert_eq!(first["placed_at"], "2026-01-02T03:04:01.250000+00:00");
    assert_eq!(first["price"], "1.25");
    assert_eq!(first["day"], "2026-01-02");
    assert_eq!(first["ref"], "00000000-0000-0000-0000-000000000001");
    assert_eq!(first["channel"], "STORE");
    assert_eq!(first["ship"]["city"], "Oslo");
    assert_eq!(rows[1]["note"], Value::Null);
    assert_eq!(rows[2]["tags"], json!(["t0", "t1", "t2"]));
    let duckdb = pyiceberg::read_duckdb(&s.warehouse, "shop.orders");
    assert_eq!(duckdb.len(), 3, "{duckdb:?}");

    let shown = s.show();
    let mut codes: Vec<(String, String)> = dead_letters(&shown)
        .iter()
        .map(|d| {
            let code = d["headers"]["sluice.error.code"]
                .as_str()
                .unwrap()
                .to_string();
            (code, d["value"].as_str().unwrap().to_string())
        })
        .collect();
    codes.sort();
    assert_eq!(codes.len(), 3, "{codes:?}");
    assert_eq!(
        codes[0],
        ("not_framed".into(), "{\"order_id\": \"json\"}".into())
    );
    assert_eq!(codes[1].0, "undecodable");
    assert!(
        codes[1].1.ends_with("o-9"),
        "the bytes are kept: {:?}",
        codes[1].1
    );
    assert_eq!(codes[2].0, "unknown_schema");
    assert_the_json_path_reads_the_same(&mut s, &registry, &rows);
}

/// The same topic through a plugin stage (the records read to JSON first) into another
/// table: the same rows.
fn assert_the_json_path_reads_the_same(s: &mut Setup, registry: &SchemaRegistry, direct: &[Value]) {
    std::fs::copy(plugins::KEEP_ALL, s.warehouse.join("keep.wasm")).unwrap();
    let sink = "[[stages]]\nname = \"keep\"\nplugin = \"keep.wasm\"\n[sink]";
    let text = config(&format!("url = \"{}\"", registry.url), "")
        .replace("[sink]", sink)
        .replace("table = \"orders\"", "table = \"kept\"");
    s.write_config("plugin.toml", &text);
    let out = s.run(&[]);
    assert!(
        out.status.success(),
        "{}",
        sluice_tests::fixture::text(&out)
    );
    let mut kept = pyiceberg::read_table(&s.warehouse, "shop.kept");
    kept.sort_by_key(|r| r["order_id"].as_str().unwrap_or("").to_string());
    assert_eq!(kept, direct);
}

#[test]
fn a_newer_schema_version_adds_its_fields_as_columns() {
    let registry = SchemaRegistry::start(&[]);
    let mut s = Setup::new("avro-evolve");
    let sink = "unknown-fields = \"add\"";
    s.write_config(
        "pipeline.toml",
        &config(&format!("url = \"{}\"", registry.url), sink),
    );
    let (bootstrap, url) = (s.broker.bootstrap.clone(), registry.url.clone());
    produce_avro(&bootstrap, &url, &s.topic, ORDER_V1, &[order(1)], &[]);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let mut newer = order(2);
    newer["coupon"] = json!("SPRING");
    newer["ship"]["zip"] = json!("0150");
    produce_avro(&bootstrap, &url, &s.topic, &order_v2(), &[newer], &[]);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    // (`sluice show` cannot read a struct that gained a field since an older file was
    // written: iceberg-rust 0.10's reader fails on it; pyiceberg reads it.)
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("1 rows written, 0 dead-lettered"), "{said}");

    let columns = fields(&s);
    let coupon = columns
        .iter()
        .find(|(_, name, _)| name == "coupon")
        .cloned();
    assert_eq!(
        coupon,
        Some(field(
            coupon.as_ref().map_or(0, |c| c.0),
            "coupon",
            "string"
        ))
    );
    let rows = rows(&s);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["coupon"], Value::Null);
    assert_eq!(rows[1]["coupon"], "SPRING");
    assert_eq!(rows[1]["ship"]["zip"], "0150");
    assert_eq!(rows[0]["ship"]["zip"], Value::Null);
    // Java Iceberg reads the evolved table as pyiceberg does.
    let mut spark = sluice_tests::spark::read_table(&s.warehouse, "shop.orders");
    spark.sort_by_key(|r| r["order_id"].as_str().unwrap_or("").to_string());
    assert_eq!(spark, rows);
}

#[test]
fn a_registry_outage_is_retried_a_refusal_is_not_and_the_password_never_shows() {
    let ca = TestCa::new("avro-registry");
    let (cert, key) = (
        ca.server_cert.to_str().unwrap(),
        ca.server_key.to_str().unwrap(),
    );
    let password = "s3cret-registry-pw";
    let user = format!("ann:{password}");
    let args = [
        "--user",
        &user,
        "--cert",
        cert,
        "--key",
        key,
        "--fail-id-lookups",
        "2",
    ];
    let registry = SchemaRegistry::start(&args);
    // Another registry for the refusal, so that it does not spend the first's outage.
    let refusing = SchemaRegistry::start(&args[..6]);
    let mut s = Setup::new("avro-outage");
    let section = |url: &str, password: &str| {
        format!(
            "url = \"{url}\"\nusername = \"ann\"\npassword = \"{password}\"\nca-cert = \"{}\"",
            ca.ca_cert.display()
        )
    };
    let columns = "columns = [{ name = \"order_id\", type = \"string\" }]";
    let extra = ["--auth", &user, "--ca", ca.ca_cert.to_str().unwrap()];
    produce_avro(
        &s.broker.bootstrap,
        &registry.url,
        &s.topic,
        ORDER_V1,
        &[order(1)],
        &extra,
    );

    let secret = "${REGISTRY_PASSWORD}";
    s.write_config(
        "pipeline.toml",
        &config(&section(&refusing.url, secret), columns),
    );
    let out = s.run(&[("REGISTRY_PASSWORD", "wrong-pw")]);
    let said = text(&out);
    assert!(
        !out.status.success(),
        "a refused request is not retried: {said}"
    );
    assert!(said.contains("401"), "{said}");
    assert!(!said.contains("wrong-pw"), "{said}");

    s.write_config(
        "pipeline.toml",
        &config(&section(&registry.url, secret), columns),
    );
    s.extra_env
        .push(("REGISTRY_PASSWORD".into(), password.into()));
    let out = s.run(&[]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("unavailable"),
        "the outage was seen and retried: {said}"
    );
    assert!(!said.contains(password), "{said}");
    assert_eq!(rows(&s).len(), 1);
    assert_eq!(
        dead_letters(&s.show()).len(),
        0,
        "an outage makes no dead letters"
    );
}

/// A lookup table from a compacted topic of Avro values (written by `AvroSerializer`,
/// keyed by `--key-field`): plugins read each value as JSON; a value that is not Avro is
/// skipped and deletes its key, as a value that is not JSON does on a JSON topic.
#[test]
fn an_avro_lookup_topic_reads_as_json() {
    use sluice::format::{Decoder, Format, RegistryConfig};
    use sluice::kafka::Connection;
    use sluice::lookup::load::Loader;
    use sluice::lookup::topic::TopicLoader;

    let registry = SchemaRegistry::start(&[]);
    let s = Setup::new("avro-lookup");
    let profile = r#"{"type": "record", "name": "Profile", "fields": [
        {"name": "user", "type": "string"}, {"name": "tier", "type": "string"},
        {"name": "since", "type": {"type": "int", "logicalType": "date"}}]}"#;
    let profiles = [
        json!({"user": "u1", "tier": "gold", "since": "2025-03-04"}),
        json!({"user": "u2", "tier": "silver", "since": "2024-01-01"}),
    ];
    let key = ["--key-field", "user"];
    produce_avro(
        &s.broker.bootstrap,
        &registry.url,
        &s.topic,
        profile,
        &profiles,
        &key,
    );
    let connection = Connection::plain(&s.broker.bootstrap);
    let producer: ThreadedProducer<DefaultProducerContext> =
        connection.client_config(&[]).create().unwrap();
    let not_avro = BaseRecord::<str, [u8]>::to(&s.topic)
        .key("u2")
        .payload(b"{}");
    producer.send(not_avro).map_err(|(e, _)| e).unwrap();
    producer.flush(Duration::from_secs(30)).unwrap();

    let config = RegistryConfig {
        url: registry.url.clone(),
        ..RegistryConfig::default()
    };
    let decoder = Decoder::new(Format::Avro, Some(&config), None, None).unwrap();
    let mut loader = TopicLoader::new("profiles", &s.topic, &connection, 1 << 20)
        .unwrap()
        .with_decoder(decoder);
    let mut table = std::sync::Arc::new(loader.empty());
    assert!(loader.refresh(&mut table).unwrap());
    let u1: Value = serde_json::from_slice(table.get(b"u1").unwrap()).unwrap();
    assert_eq!(
        u1,
        json!({"user": "u1", "tier": "gold", "since": "2025-03-04"})
    );
    assert_eq!(
        table.get(b"u2"),
        None,
        "its last value is not Avro: the key is deleted"
    );
}

/// A stream-stream join whose both sides are Avro topics of one registry: the right
/// records are read to JSON with the source's schemas, and their fields join the rows.
#[test]
fn a_join_reads_its_avro_right_topic_with_the_sources_registry() {
    let registry = SchemaRegistry::start(&[]);
    let mut s = Setup::new("avro-join");
    let right = s.side_topic("profiles");
    let schema = |name: &str, field: &str| {
        format!(
            r#"{{"type": "record", "name": "{name}", "fields": [
            {{"name": "user", "type": "string"}}, {{"name": "{field}", "type": "string"}},
            {{"name": "ts", "type": {{"type": "long", "logicalType": "timestamp-millis"}}}}]}}"#
        )
    };
    let profiles = [json!({"user": "u1", "tier": "gold", "ts": "2026-01-02T03:00:00Z"})];
    let (bootstrap, url) = (s.broker.bootstrap.clone(), registry.url.clone());
    produce_avro(
        &bootstrap,
        &url,
        &right,
        &schema("Profile", "tier"),
        &profiles,
        &[],
    );
    let clicks = [
        json!({"user": "u1", "page": "/a", "ts": "2026-01-02T03:10:00Z"}),
        json!({"user": "u2", "page": "/b", "ts": "2026-01-02T03:11:00Z"}),
    ];
    produce_avro(
        &bootstrap,
        &url,
        &s.topic,
        &schema("Click", "page"),
        &clicks,
        &[],
    );
    let joins = format!(
        r#"
[event-time]
field = "ts"
max-delay = "0s"
at-end = "flush"
[[joins]]
name = "with-profiles"
right-topic = "{right}"
right-time-field = "ts"
right-max-delay = "0s"
on = ["user"]
kind = "left-outer"
before = "1h"
left-fields = ["user", "page"]
right-fields = ["tier"]
[joins.iceberg]
table = "joined"
[sink]"#
    );
    let pipeline = config(&format!("url = \"{url}\""), "").replacen("[sink]", &joins, 1);
    s.write_config("pipeline.toml", &pipeline);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let mut joined = pyiceberg::read_table(&s.warehouse, "shop.joined");
    joined.sort_by_key(|r| r["user"].as_str().unwrap_or("").to_string());
    let pairs: Vec<(&str, &Value)> = joined
        .iter()
        .map(|r| (r["user"].as_str().unwrap(), &r["tier"]))
        .collect();
    assert_eq!(
        pairs,
        [("u1", &json!("gold")), ("u2", &Value::Null)],
        "{joined:?}"
    );
}
