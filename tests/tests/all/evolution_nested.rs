//! Schema evolution inside nested columns, end to end (tansu, the SQL catalog on SQLite,
//! pyiceberg and DuckDB reading back): with `unknown-fields = "add"`, a struct column
//! gains the fields its events bring, a list of structs its elements' new fields, and an
//! `int` inside a struct widens to a `long`; rows written before read the new fields as
//! null, and a value no growth fits is dead-lettered with its path. With
//! `infer-timestamps`, new fields of timestamp strings become timestamp columns.

use serde_json::json;
use sluice_tests::fixture::{Setup, text};
use sluice_tests::pyiceberg;

use crate::evolution::{TABLE, config_with, field, fields_of, produce};
use crate::unknown_fields::dead;

const COLUMNS: &str = r#"{ name = "event_id", type = "string", required = true },
  { name = "ctx", type = "struct<os: string, v: int, amount: decimal(6,2)>" },
  { name = "items", type = "list<struct<sku: string>>" },"#;

/// Batch 1 adds `ctx.browser` and the items' `qty`; batch 2 widens `ctx.v` (a value past
/// 32 bits) and `ctx.amount` (8 digits), and meets a string where `ctx.v` holds numbers.
const EVENTS: [&str; 6] = [
    r#"{"event_id":"e1","ctx":{"os":"ios","v":1}}"#,
    r#"{"event_id":"e2","ctx":{"os":"web","browser":"ff"}}"#,
    r#"{"event_id":"e3","items":[{"sku":"a","qty":2},{"sku":"b"}]}"#,
    r#"{"event_id":"e4","ctx":{"v":3000000000}}"#,
    r#"{"event_id":"e5","ctx":{"os":"x","v":"many"}}"#,
    r#"{"event_id":"e6","ctx":{"os":"y","nothing":null,"amount":"123456.78"}}"#,
];

#[test]
fn struct_columns_gain_fields_and_widen_inside() {
    let mut s = Setup::new("evolve-nested");
    s.write_config(
        "pipeline.toml",
        &config_with(COLUMNS, "unknown-fields = \"add\""),
    );
    produce(&s, &EVENTS, "events.jsonl");
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("6 records read, 5 rows written, 1 dead-lettered"),
        "{}",
        text(&out)
    );

    // Top-level columns are numbered first (1 to 3), then what they hold (4 to 8); the
    // new fields take ids after the table's last, column by column.
    let schema = pyiceberg::schema(&s.warehouse, TABLE, &[]);
    assert_eq!(
        fields_of(&schema),
        [
            field(1, "event_id", "string"),
            field(
                2,
                "ctx",
                "struct<4: os: optional string, 5: v: optional long, 6: amount: optional decimal(8, 2), 9: browser: optional string>"
            ),
            field(
                3,
                "items",
                "list<struct<8: sku: optional string, 10: qty: optional long>>"
            ),
        ]
    );
    let ctx = |os: Option<&str>, v: Option<u64>, browser: Option<&str>| json!({"os": os, "v": v, "amount": null, "browser": browser});
    let expected = vec![
        json!({"event_id": "e1", "ctx": ctx(Some("ios"), Some(1), None), "items": null}),
        json!({"event_id": "e2", "ctx": ctx(Some("web"), None, Some("ff")), "items": null}),
        json!({"event_id": "e3", "ctx": null,
            "items": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": null}]}),
        json!({"event_id": "e4", "ctx": ctx(None, Some(3000000000), None), "items": null}),
        json!({"event_id": "e6", "ctx": {"os": "y", "v": null, "amount": "123456.78",
            "browser": null}, "items": null}),
    ];
    assert_eq!(pyiceberg::read_duckdb(&s.warehouse, TABLE), expected);
    // pyiceberg reads a null list of structs as an empty list (apache/iceberg-python#3833,
    // open; the data files hold the nulls, as DuckDB shows).
    let mut as_pyiceberg = expected;
    for row in &mut as_pyiceberg {
        if row["items"].is_null() {
            row["items"] = json!([]);
        }
    }
    assert_eq!(pyiceberg::read_table(&s.warehouse, TABLE), as_pyiceberg);
    assert_eq!(
        dead(&s),
        [("e5".into(), "type_mismatch".into(), "ctx.v".into())]
    );
}

/// With `infer-timestamps = true`, a new field of RFC 3339 strings becomes a
/// `timestamptz` column, one of zoneless timestamps a `timestamp`, one that mixes them
/// with other strings a `string`; a later non-timestamp is dead-lettered.
#[test]
fn timestamp_strings_become_timestamp_columns_when_asked() {
    let mut s = Setup::new("evolve-timestamps");
    let columns = r#"{ name = "event_id", type = "string", required = true },"#;
    s.write_config(
        "pipeline.toml",
        &config_with(columns, "unknown-fields = \"add\"\ninfer-timestamps = true"),
    );
    let events = [
        r#"{"event_id":"e1","seen":"2026-01-09T10:04:00+01:00","local":"2026-01-09 10:04:00","note":"2026-01-09T10:04:00Z"}"#,
        r#"{"event_id":"e2","seen":"2026-01-09T11:00:00Z","note":"soon"}"#,
        r#"{"event_id":"e3","local":"2026-01-09T12:30:00.5"}"#,
        r#"{"event_id":"e4","seen":"yesterday"}"#,
    ];
    produce(&s, &events, "events.jsonl");
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let types: Vec<(String, String)> = fields_of(&pyiceberg::schema(&s.warehouse, TABLE, &[]))
        .into_iter()
        .map(|(_, name, ty)| (name, ty))
        .collect();
    let expected_types = [
        ("event_id", "string"),
        ("local", "timestamp"),
        ("note", "string"),
        ("seen", "timestamptz"),
    ]
    .map(|(n, t)| (n.to_string(), t.to_string()));
    assert_eq!(types, expected_types);
    let expected = vec![
        json!({"event_id": "e1", "local": "2026-01-09T10:04:00.000000",
            "note": "2026-01-09T10:04:00Z", "seen": "2026-01-09T09:04:00.000000+00:00"}),
        json!({"event_id": "e2", "local": null, "note": "soon",
            "seen": "2026-01-09T11:00:00.000000+00:00"}),
        json!({"event_id": "e3", "local": "2026-01-09T12:30:00.500000", "note": null,
            "seen": null}),
    ];
    assert_eq!(pyiceberg::read_table(&s.warehouse, TABLE), expected);
    assert_eq!(
        dead(&s),
        [("e4".into(), "invalid_timestamp".into(), "seen".into())]
    );
}
