//! Java Iceberg, through Spark, reads what sluice writes as pyiceberg does: a table with
//! nested columns (struct, list of structs, map, decimals, a timestamptz) whose schema
//! evolved under `unknown-fields = "add"` (columns added by later batches, `int` widened to
//! `long`, a decimal's precision widened), so that the older data files lack the newer
//! columns and hold the narrower types. Written by `sluice run` on a real broker into the
//! SQL catalog on SQLite; Spark loads the table from its current metadata file. Spark's rows
//! are pyiceberg's but for one known pyiceberg bug (a null list of structs read as empty),
//! where DuckDB reads what Spark does.

use serde_json::{Value, json};
use sluice_tests::fixture::{Setup, text};
use sluice_tests::{pyiceberg, spark};

use crate::evolution::{EVENTS, TABLE, config, fields, produce};

/// The nested columns declared beside evolution.rs's (as in nested.rs).
const NESTED_COLUMNS: &str = r#"
  { name = "items", type = "list<struct<sku: string, qty: int, price: decimal(10,2)>>" },
  { name = "context", type = "struct<device: string, os: string, seen: timestamptz>" },
  { name = "utm", type = "map<string, string>" },"#;

/// The first batch: nested values, and a `quantity` and a `price` that fit the declared
/// `int` and `decimal(6,2)`, so this data file keeps the narrow types and lacks every column
/// the later batches (evolution.rs's EVENTS) add.
const NESTED_EVENTS: [&str; 3] = [
    r#"{"event_id":"a1","quantity":7,"price":"12.50","items":[{"sku":"A","qty":2,"price":"1.50"},{"sku":"B","qty":1,"price":20}],"context":{"device":"ios","os":"17","seen":"2026-01-09T10:04:00+01:00"},"utm":{"source":"news","campaign":"jan"}}"#,
    r#"{"event_id":"a2","items":[],"context":{"device":"web"},"utm":{}}"#,
    r#"{"event_id":"a3","items":[null,{"sku":"C"}],"quantity":-2147483648,"price":"-9999.99"}"#,
];

#[test]
fn spark_reads_nested_columns_and_an_evolved_schema_as_pyiceberg_does() {
    let s = write_nested_and_evolved();
    let pyiceberg_rows = pyiceberg::read_table(&s.warehouse, TABLE);
    assert_eq!(pyiceberg_rows.len(), 11, "{pyiceberg_rows:#?}");
    // The oldest file's row: its narrow values widened, the later columns null.
    let a1 = &pyiceberg_rows[0];
    for (key, value) in [
        ("event_id", json!("a1")),
        ("quantity", json!(7)),
        ("price", json!("12.50")),
        ("tags", Value::Null),
        ("ctx", Value::Null),
    ] {
        assert_eq!(a1[key], value, "{key}: {a1}");
    }
    let spark_rows = spark::read_table(&s.warehouse, TABLE);
    assert_eq!(with_pyiceberg_empty_lists(&spark_rows), pyiceberg_rows);
    // Where they differ, DuckDB reads what Spark does: the null in the data files.
    let items = |rows: &[Value]| rows.iter().map(|r| r["items"].clone()).collect::<Vec<_>>();
    assert_eq!(
        items(&spark_rows),
        items(&pyiceberg::read_duckdb(&s.warehouse, TABLE))
    );
}

/// Runs a pipeline with evolution.rs's config and the nested columns, on the first batch
/// (NESTED_EVENTS) and then evolution.rs's EVENTS; checks that the schema evolved.
fn write_nested_and_evolved() -> Setup {
    let mut s = Setup::new("spark-evolved");
    let declared = r#"  { name = "price", type = "decimal(6,2)" },"#;
    let text_config = config("unknown-fields = \"add\"");
    assert!(text_config.contains(declared));
    s.write_config(
        "pipeline.toml",
        &text_config.replace(declared, &format!("{declared}{NESTED_COLUMNS}")),
    );
    produce(&s, &NESTED_EVENTS, "nested.jsonl");
    produce(&s, &EVENTS, "events.jsonl");
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    // e7's string meets the long `n`: dead-lettered; the other eleven are rows.
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("12 records read, 11 rows written, 1 dead-lettered"),
        "{}",
        text(&out)
    );
    let types: Vec<(String, String)> = fields(&s).into_iter().map(|f| (f.1, f.2)).collect();
    for (name, ty) in [
        ("quantity", "long"),
        ("price", "decimal(8, 2)"),
        ("tags", "list<string>"),
    ] {
        assert!(types.contains(&(name.into(), ty.into())), "{types:?}");
    }
    s
}

/// `rows` as pyiceberg 0.12 reads them: it reads a null `list<struct<…>>` as an empty list
/// (iceberg-python issue 3833, open), where Spark and DuckDB read the null that the data
/// file holds. The events without `items` (all but the first batch's) have such a null;
/// every other value must be the same.
fn with_pyiceberg_empty_lists(rows: &[Value]) -> Vec<Value> {
    let mut nulls = 0;
    let rows = rows
        .iter()
        .map(|row| {
            let mut row = row.clone();
            if row["items"].is_null() {
                row["items"] = json!([]);
                nulls += 1;
            }
            row
        })
        .collect();
    assert_eq!(nulls, 8, "e1 to e9 but e7 have no items: {rows:#?}");
    rows
}
