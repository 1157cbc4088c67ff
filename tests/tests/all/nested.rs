//! Nested columns end to end: `sluice run` (real broker, the SQL catalog on SQLite) writes
//! struct, list and map columns, three levels deep at most, which pyiceberg and DuckDB read
//! back with the same values; an event whose nested value does not fit is dead-lettered
//! with the path to the value.

use serde_json::{Value, json};
use sluice_tests::fixture::{Setup, text};
use sluice_tests::pyiceberg;

const CONFIG: &str = r#"
[pipeline]
name = "nested"
[source]
bootstrap-servers = "${KAFKA_BOOTSTRAP}"
topics = ["${KAFKA_TOPIC}"]
[trigger]
mode = "interval"
interval = "1s"
[sink]
warehouse = "${SLUICE_WAREHOUSE}"
namespace = "shop"
table = "orders"
columns = [
  { name = "order_id", type = "string", required = true },
  { name = "items", type = "list<struct<sku: string, qty: int, price: decimal(10,2)>>" },
  { name = "context", type = "struct<device: string, os: string, seen: timestamptz>" },
  { name = "utm", type = "map<string, string>" },
  { name = "deep", type = "map<string, list<struct<n: long>>>" },
]
[dead-letter]
topic = "${SLUICE_DEAD_LETTER_TOPIC}"
"#;

/// Three events that fit (offsets 0 to 2) and three that do not (3 to 5).
const EVENTS: &str = r#"{"order_id": "o1", "items": [{"sku": "A", "qty": 2, "price": "1.50"}, {"sku": "B", "qty": 1, "price": 20}], "context": {"device": "ios", "os": "17", "seen": "2026-01-09T10:04:00+01:00"}, "utm": {"source": "news", "campaign": "jan"}, "deep": {"x": [{"n": 1}, {"n": 2}], "y": []}}
{"order_id": "o2", "items": [], "context": {"device": "web"}, "utm": null}
{"order_id": "o3", "items": [null, {"sku": "C"}], "deep": {"z": null}}
{"order_id": "o4", "items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 1}, {"sku": "C", "qty": 1}, {"sku": "D", "qty": "two"}]}
{"order_id": "o5", "context": {"device": "ios", "browser": "safari"}}
{"order_id": "o6", "deep": {"x": [{"n": 1}], "w\"y": [{"n": "many"}]}}
"#;

/// The rows of the three events that fit, as both readers print them (a decimal with its
/// scale, a timestamptz in UTC, a missing nested field or value as null).
fn expected() -> Vec<Value> {
    vec![
        json!({
            "order_id": "o1",
            "items": [
                {"sku": "A", "qty": 2, "price": "1.50"},
                {"sku": "B", "qty": 1, "price": "20.00"}
            ],
            "context": {"device": "ios", "os": "17", "seen": "2026-01-09T09:04:00.000000+00:00"},
            "utm": {"source": "news", "campaign": "jan"},
            "deep": {"x": [{"n": 1}, {"n": 2}], "y": []}
        }),
        json!({
            "order_id": "o2",
            "items": [],
            "context": {"device": "web", "os": null, "seen": null},
            "utm": null,
            "deep": null
        }),
        json!({
            "order_id": "o3",
            "items": [null, {"sku": "C", "qty": null, "price": null}],
            "context": null,
            "utm": null,
            "deep": {"z": null}
        }),
    ]
}

#[test]
fn nested_columns_land_as_pyiceberg_and_duckdb_read_them_and_misfits_name_their_path() {
    let mut s = Setup::new("nested");
    s.write_config("nested.toml", CONFIG);
    let events = s.warehouse.join("events.jsonl");
    std::fs::write(&events, EVENTS).unwrap();
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);

    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("6 records read, 3 rows written, 3 dead-lettered"),
        "{}",
        text(&out)
    );

    assert_eq!(
        pyiceberg::read_table(&s.warehouse, "shop.orders"),
        expected()
    );
    assert_eq!(
        pyiceberg::read_duckdb(&s.warehouse, "shop.orders"),
        expected()
    );

    let shown = s.show();
    let mut reasons: Vec<(String, String, String)> = shown["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let header = |name: &str| d["headers"][name].as_str().unwrap_or("").to_string();
            (
                header("sluice.source.offset"),
                header("sluice.error.code"),
                header("sluice.error.field"),
            )
        })
        .collect();
    reasons.sort();
    let expected_reasons = [
        ("3", "type_mismatch", "items[3].qty"),
        ("4", "unknown_field", "context.browser"),
        ("5", "type_mismatch", r#"deep["w\"y"][0].n"#),
    ]
    .map(|(o, c, f)| (o.to_string(), c.to_string(), f.to_string()));
    assert_eq!(reasons, expected_reasons, "{shown}");
}
