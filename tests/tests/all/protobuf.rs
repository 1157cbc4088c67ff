//! Protobuf topics end to end: messages written by confluent-kafka-python's
//! `ProtobufSerializer` (which registers the `.proto`, and the file it imports as a
//! subject of its own) land in a table made from the message, through the direct path and
//! through a plugin stage (the JSON path) alike; read back with pyiceberg.

use serde_json::{Value, json};
use sluice_tests::fixture::{Setup, text};
use sluice_tests::registry::{SchemaRegistry, produce_protobuf};
use sluice_tests::{plugins, pyiceberg};

const MONEY: &str = include_str!("../../data/proto/money.proto");

const ORDER: &str = include_str!("../../data/proto/order.proto");

fn order(i: u32) -> Value {
    let mut order = json!({
        "order_id": format!("p-{i}"), "quantity": 5_000_000_000u64 + u64::from(i),
        "customer": {"name": "Ann", "tier": i}, "tags": ["a", "b"],
        "placed_at": format!("2026-01-02T03:04:0{i}Z"), "status": if i == 1 { "PAID" } else { "NEW" },
        "counts": {"x": i}, "total": {"currency": "EUR", "units": 10 + i},
    });
    if i != 2 {
        order["note"] = json!(format!("note {i}"));
        order["points"] = json!(i);
    }
    order
}

/// A pipeline of the Protobuf topic into `shop.{table}`, its table made from the message;
/// `stages` goes before `[sink]`.
fn config(registry: &str, table: &str, stages: &str) -> String {
    format!(
        r#"
[pipeline]
name = "proto-{table}"
[source]
bootstrap-servers = "${{KAFKA_BOOTSTRAP}}"
topics = ["${{KAFKA_TOPIC}}"]
format = "protobuf"
[source.schema-registry]
url = "{registry}"
{stages}
[sink]
warehouse = "${{SLUICE_WAREHOUSE}}"
namespace = "shop"
table = "{table}"
[sink.catalog]
type = "sql"
name = "sluice"
[dead-letter]
topic = "${{SLUICE_DEAD_LETTER_TOPIC}}"
"#
    )
}

fn rows(s: &Setup, table: &str) -> Vec<Value> {
    let mut rows = pyiceberg::read_table(&s.warehouse, table);
    rows.sort_by_key(|r| r["order_id"].as_str().unwrap_or("").to_string());
    rows
}

#[test]
fn a_protobuf_topic_lands_in_a_table_made_from_its_message_with_or_without_a_plugin() {
    let registry = SchemaRegistry::start(&[]);
    let mut s = Setup::new("proto-table");
    let files = [("order.proto", ORDER), ("money.proto", MONEY)];
    let orders: Vec<Value> = (1..=3).map(order).collect();
    produce_protobuf(
        &s.broker.bootstrap,
        &registry.url,
        &s.topic,
        &files,
        "shop.Order",
        &orders,
    );
    s.write_config("direct.toml", &config(&registry.url, "orders", ""));
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let direct = rows(&s, "shop.orders");
    assert_eq!(direct.len(), 3, "{direct:?}");
    let first = &direct[0];
    assert_eq!(first["order_id"], "p-1");
    assert_eq!(first["quantity"], 5_000_000_001u64);
    assert_eq!(first["customer"], json!({"name": "Ann", "tier": 1}));
    assert_eq!(first["placed_at"], "2026-01-02T03:04:01.000000+00:00");
    assert_eq!(first["status"], "PAID");
    assert_eq!(first["points"], 1);
    assert_eq!(first["total"]["currency"], "EUR");
    assert_eq!(
        direct[1]["note"],
        Value::Null,
        "an unset optional field is null"
    );
    assert_eq!(direct[1]["points"], Value::Null, "an unset wrapper is null");
    assert_eq!(direct[1]["status"], "NEW", "an unset enum has its default");

    std::fs::copy(plugins::KEEP_ALL, s.warehouse.join("keep.wasm")).unwrap();
    let stage = "[[stages]]\nname = \"keep\"\nplugin = \"keep.wasm\"";
    s.write_config("plugin.toml", &config(&registry.url, "kept", stage));
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        rows(&s, "shop.kept"),
        direct,
        "the JSON path reads what the direct one does"
    );
}
