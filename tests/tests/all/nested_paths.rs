//! Nested fields end to end: `sluice run` against tansu and the SQLite catalog, with the
//! event time, the dedup key, a window's group-by and its summed field all dotted paths
//! into nested objects. The expected rows are worked out by hand from the events below.

use serde_json::Value;
use sluice_tests::fixture::{Setup, text};
use sluice_tests::pyiceberg;

/// A window row: (start, end as HH:MM, os, orders, revenue).
type Row = (String, String, Option<String>, i64, f64);

/// The rows of the window table (from `sluice show` or pyiceberg), sorted; checks that no
/// column is named by the whole path.
fn window_rows(rows: &[Value]) -> Vec<Row> {
    let mut out: Vec<Row> = rows
        .iter()
        .map(|r| {
            let time = |k: &str| r[k].as_str().unwrap()[11..16].to_string();
            let number = |k: &str| match &r[k] {
                Value::Number(n) => n.as_f64().unwrap(),
                Value::String(s) => s.parse().unwrap(),
                other => panic!("{k} is not a number: {other}"),
            };
            assert!(r.get("context.device.os").is_none(), "{r}");
            (
                time("window_start"),
                time("window_end"),
                r["os"].as_str().map(String::from),
                number("orders") as i64,
                number("revenue"),
            )
        })
        .collect();
    out.sort_by(|a, b| a.partial_cmp(b).unwrap());
    out
}

const PIPELINE: &str = r#"
[pipeline]
name = "nested"
on-invalid = "fail"
[source]
bootstrap-servers = "${KAFKA_BOOTSTRAP}"
topics = ["${KAFKA_TOPIC}"]
[trigger]
mode = "available-now"
max-records = 3
[sink]
warehouse = "${SLUICE_WAREHOUSE}"
namespace = "shop"
table = "orders"
columns = [{ name = "order_id", type = "string" }]
[event-time]
field = "meta.ts"
max-delay = "10m"
late = "drop"
at-end = "flush"
[dedup]
keys = ["meta.id"]
[[windows]]
name = "revenue-by-os"
size = "1m"
group-by = ["context.device.os"]
aggregates = [{ name = "orders", fn = "count" }, { name = "revenue", fn = "sum", field = "item.price" }]
iceberg = { table = "revenue_by_os" }
"#;

/// One order: `id`, its time (10:MM:SS on 2026-07-29), the device's OS (none: no
/// `context`), its price, and any extra top-level keys.
fn order(id: &str, time: &str, os: Option<&str>, price: f64, extra: &str) -> String {
    let context = os.map_or(String::new(), |os| {
        format!(r#","context":{{"page":"/buy","device":{{"os":"{os}","v":[1]}}}}"#)
    });
    format!(
        r#"{{"order_id":"{id}","meta":{{"id":"{id}","ts":"2026-07-29T10:{time}Z"}}{context},"item":{{"sku":"s","price":{price}}}{extra}}}"#
    )
}

#[test]
fn event_time_dedup_and_a_window_read_nested_paths() {
    // Windows of one minute, flushed at the end:
    //   [10:00, 10:01): o1 ios 2.5, o2 android 1.0, o3 ios 4.0 (o1 again: a duplicate of
    //     `meta.id`) → ios 2 orders 6.5, android 1 order 1.0
    //   [10:01, 10:02): o4 ios 3.0; o5 has a top-level "context.device.os" = "web" that
    //     wins over its nested "ios" → web 7.0; o6 has no context → a null group, 1.0
    let mut s = Setup::new("nested-paths");
    s.write_config("nested.toml", PIPELINE);
    let lines = [
        order("o1", "00:10", Some("ios"), 2.5, ""),
        order("o2", "00:20", Some("android"), 1.0, ""),
        order("o1", "00:10", Some("ios"), 2.5, ""),
        order("o3", "00:40", Some("ios"), 4.0, ""),
        order("o4", "01:05", Some("ios"), 3.0, ""),
        order(
            "o5",
            "01:30",
            Some("ios"),
            7.0,
            r#","context.device.os":"web""#,
        ),
        order("o6", "01:40", None, 1.0, ""),
    ];
    let file = s.warehouse.join("orders.jsonl");
    std::fs::create_dir_all(&s.warehouse).unwrap();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    s.produce(&["--partitions", "1", "--input", file.to_str().unwrap()]);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let mut ids: Vec<String> = s.show()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["order_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["o1", "o2", "o3", "o4", "o5", "o6"]);

    let shown = s.show_window("revenue-by-os");
    let rows = window_rows(shown["rows"].as_array().unwrap());
    let row = |start: &str, end: &str, os: Option<&str>, orders, revenue| {
        (
            start.to_string(),
            end.to_string(),
            os.map(String::from),
            orders,
            revenue,
        )
    };
    let want = [
        row("10:00", "10:01", Some("android"), 1, 1.0),
        row("10:00", "10:01", Some("ios"), 2, 6.5),
        row("10:01", "10:02", None, 1, 1.0),
        row("10:01", "10:02", Some("ios"), 1, 3.0),
        row("10:01", "10:02", Some("web"), 1, 7.0),
    ];
    assert_eq!(rows, want);
    // An independent reader sees the same table, its group-by column named `os`.
    let read = pyiceberg::read_table(&s.warehouse, "shop.revenue_by_os");
    assert_eq!(window_rows(&read), want);
}
