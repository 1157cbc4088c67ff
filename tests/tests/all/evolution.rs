//! Schema evolution end to end, on a real broker (tansu) and the SQL catalog on SQLite,
//! read back with pyiceberg: `[sink] unknown-fields = "add"` makes new fields columns and
//! widens outgrown ones in the snapshot of the batch that needs them (a crash on either
//! side of that commit leaves the old schema and no rows, or both); and a schema changed
//! by someone else (pyiceberg) is used from the next batch, values going by field id.

use std::time::Duration;

use serde_json::{Value, json};
use sluice_tests::fixture::{Running, Setup, text};
use sluice_tests::postgres::Postgres;
use sluice_tests::pyiceberg::{self, CatalogAt, RestCatalog};

use crate::group::wait_for_rows;
use crate::pipeline::feed_lookups;
use crate::unknown_fields::{dead, follow_until_read};

pub(crate) const TABLE: &str = "shop.events";

/// Three batches of three events (`{policy}`: the `unknown-fields` lines).
pub(crate) fn config(policy: &str) -> String {
    config_with(
        r#"{ name = "event_id", type = "string", required = true },
  { name = "quantity", type = "int" },
  { name = "price", type = "decimal(6,2)" },"#,
        policy,
    )
}

/// A pipeline of batches of three events into `shop.events`, declaring `columns` (TOML
/// inline tables, comma-terminated), with `{policy}` in `[sink]`.
pub(crate) fn config_with(columns: &str, policy: &str) -> String {
    format!(
        r#"
[pipeline]
name = "evolve"
[source]
bootstrap-servers = "${{KAFKA_BOOTSTRAP}}"
topics = ["${{KAFKA_TOPIC}}"]
[trigger]
max-records = 3
[sink]
warehouse = "${{SLUICE_WAREHOUSE}}"
namespace = "shop"
table = "events"
columns = [
  {columns}
]
{policy}
[sink.catalog]
type = "sql"
name = "sluice"
[dead-letter]
topic = "${{SLUICE_DEAD_LETTER_TOPIC}}"
"#
    )
}

pub(crate) const ADD: &str = "unknown-fields = \"add\"\nmax-columns = 12";

/// Batch 1 adds `ctx` (a struct) and `tier`; batch 2 adds `n` and widens `quantity` (a
/// value past 32 bits) and `price` (8 digits); in batch 3 a string meets the long `n`,
/// `tags` (a list) is added, and `attrs`, with six dynamic keys, would pass 12 fields.
pub(crate) const EVENTS: [&str; 9] = [
    r#"{"event_id":"e1","quantity":1}"#,
    r#"{"event_id":"e2","tier":"gold"}"#,
    r#"{"event_id":"e3","ctx":{"os":"ios","v":2}}"#,
    r#"{"event_id":"e4","quantity":3000000000}"#,
    r#"{"event_id":"e5","price":"123456.78","tier":"silver"}"#,
    r#"{"event_id":"e6","n":1}"#,
    r#"{"event_id":"e7","n":"x"}"#,
    r#"{"event_id":"e8","tags":["a","b"],"n":2}"#,
    r#"{"event_id":"e9","attrs":{"a1":1,"a2":1,"a3":1,"a4":1,"a5":1,"a6":1}}"#,
];

/// Produces `events` to the pipeline's topic (one partition), through the file `file` in
/// the warehouse folder.
pub(crate) fn produce(s: &Setup, events: &[&str], file: &str) {
    std::fs::create_dir_all(&s.warehouse).unwrap();
    let path = s.warehouse.join(file);
    std::fs::write(&path, events.join("\n") + "\n").unwrap();
    let produced = s.produce(&["--partitions", "1", "--input", path.to_str().unwrap()]);
    assert_eq!(produced.delivered, events.len() as u64);
}

/// The table's top-level fields as pyiceberg reads its schema: (id, name, type).
pub(crate) fn fields(s: &Setup) -> Vec<(u64, String, String)> {
    fields_in(s, TABLE)
}

fn fields_in(s: &Setup, table: &str) -> Vec<(u64, String, String)> {
    fields_of(&pyiceberg::schema(&s.warehouse, table, &[]))
}

pub(crate) fn fields_of(schema: &Value) -> Vec<(u64, String, String)> {
    schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["id"].as_u64().unwrap(),
                f["name"].as_str().unwrap().to_string(),
                f["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

pub(crate) fn field(id: u64, name: &str, ty: &str) -> (u64, String, String) {
    (id, name.to_string(), ty.to_string())
}

#[test]
fn new_fields_become_columns_and_outgrown_values_widen_theirs() {
    let mut s = Setup::new("evolve-add");
    s.write_config("pipeline.toml", &config(ADD));
    add_and_widen(&s, CatalogAt::Warehouse(&s.warehouse));
}

#[test]
fn new_fields_become_columns_and_outgrown_values_widen_theirs_postgresql() {
    let pg = Postgres::start();
    let mut s = Setup::new("evolve-add-postgres");
    s.write_config("pipeline.toml", &config(ADD));
    s.use_postgres_catalog(&pg.url);
    let catalog = CatalogAt::Sql {
        uri: &pg.url,
        name: "sluice",
    };
    add_and_widen(&s, catalog);
}

#[test]
fn new_fields_become_columns_and_outgrown_values_widen_theirs_rest() {
    let mut s = Setup::new("evolve-add-rest");
    s.write_config("pipeline.toml", &config(ADD));
    let server = RestCatalog::start(&s.warehouse);
    s.use_rest_catalog(&server.url);
    let catalog = CatalogAt::Rest {
        url: &server.url,
        name: "rest",
    };
    add_and_widen(&s, catalog);
}

/// A REST catalog that keeps the schema id the client sends (pyiceberg's metadata update,
/// as a server built on it does) accepts the schema change but never makes it current:
/// the pipeline stops on the first such batch and says why, rather than writing values
/// no reader sees.
#[test]
fn a_catalog_that_does_not_apply_the_schema_change_stops_the_pipeline() {
    let mut s = Setup::new("evolve-add-rest-ids");
    s.write_config("pipeline.toml", &config(ADD));
    let server = RestCatalog::start_with(&s.warehouse, &["--keep-schema-ids"]);
    s.use_rest_catalog(&server.url);
    produce(&s, &EVENTS[..3], "events.jsonl");
    let out = s.run(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("with a schema change the catalog did not apply")
            && log.contains(r#"lacks its fields: ["ctx", "tier"]"#),
        "{log}"
    );
}

/// Nine events in three batches into `catalog`: new columns, widened ones, and the
/// values that fit neither dead-lettered; pyiceberg (and DuckDB, on SQLite) read the rows.
pub(crate) fn add_and_widen(s: &Setup, catalog: CatalogAt<'_>) {
    produce(s, &EVENTS, "events.jsonl");
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("9 records read, 7 rows written, 2 dead-lettered"),
        "{}",
        text(&out)
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        log.matches("the table's schema changed with the batch")
            .count(),
        3,
        "{log}"
    );
    check_added_and_widened(s, catalog);
}

/// What [`add_and_widen`] leaves in the table, as pyiceberg (and DuckDB) read it.
pub(crate) fn check_added_and_widened(s: &Setup, catalog: CatalogAt<'_>) {
    // Ids from the table's last one up, in name order per batch; ctx.os and ctx.v are 5
    // and 6, tags' element 10.
    assert_eq!(
        fields_of(&pyiceberg::schema_in(catalog, TABLE, &[])),
        [
            field(1, "event_id", "string"),
            field(2, "quantity", "long"),
            field(3, "price", "decimal(8, 2)"),
            field(
                4,
                "ctx",
                "struct<5: os: optional string, 6: v: optional long>"
            ),
            field(7, "tier", "string"),
            field(8, "n", "long"),
            field(9, "tags", "list<string>"),
        ]
    );
    // Each row: its id, its values, null in every other column.
    let row = |id: &str, values: Value| {
        let mut row = json!({"event_id": id, "quantity": null, "price": null, "ctx": null,
            "tier": null, "n": null, "tags": null});
        for (k, v) in values.as_object().unwrap() {
            row[k] = v.clone();
        }
        row
    };
    let expected = vec![
        row("e1", json!({"quantity": 1})),
        row("e2", json!({"tier": "gold"})),
        row("e3", json!({"ctx": {"os": "ios", "v": 2}})),
        row("e4", json!({"quantity": 3000000000u64})),
        row("e5", json!({"price": "123456.78", "tier": "silver"})),
        row("e6", json!({"n": 1})),
        row("e8", json!({"n": 2, "tags": ["a", "b"]})),
    ];
    assert_eq!(pyiceberg::read_table_in(catalog, TABLE), expected);
    if let CatalogAt::Warehouse(warehouse) = catalog {
        assert_eq!(pyiceberg::read_duckdb(warehouse, TABLE), expected);
    }
    let reason = |id: &str, code: &str, field: &str| (id.into(), code.into(), field.into());
    assert_eq!(
        dead(s),
        [
            reason("e7", "type_mismatch", "n"),
            reason("e9", "too_many_columns", "attrs"),
        ]
    );
}

#[test]
fn a_crash_around_the_schema_change_leaves_the_old_schema_and_no_rows_or_both() {
    let mut s = Setup::new("evolve-crash");
    let before = [
        field(1, "event_id", "string"),
        field(2, "quantity", "int"),
        field(3, "price", "decimal(6, 2)"),
    ];
    let mut after = before.to_vec();
    after.push(field(
        4,
        "ctx",
        "struct<5: os: optional string, 6: v: optional long>",
    ));
    after.push(field(7, "tier", "string"));
    for (round, point) in ["after-write:1", "after-dead-letter:1", "after-commit:1"]
        .into_iter()
        .enumerate()
    {
        s.renew(&format!("evolve-crash{round}"));
        s.write_config("pipeline.toml", &config(ADD));
        produce(&s, &EVENTS[..3], "events.jsonl");
        let out = s.run(&[("SLUICE_CRASH_AT", point)]);
        assert!(!out.status.success(), "{point}: {}", text(&out));
        let committed = point == "after-commit:1";
        let rows = pyiceberg::read_table(&s.warehouse, TABLE).len();
        let schema = fields(&s);
        if committed {
            assert_eq!((schema, rows), (after.clone(), 3), "{point}");
        } else {
            assert_eq!((schema, rows), (before.to_vec(), 0), "{point}");
        }
        let out = s.run(&[]);
        assert!(out.status.success(), "{point}: {}", text(&out));
        assert_eq!(fields(&s), after, "{point}");
        let ids: Vec<Value> = pyiceberg::read_table(&s.warehouse, TABLE)
            .iter()
            .map(|r| r["event_id"].clone())
            .collect();
        assert_eq!(ids, [json!("e1"), json!("e2"), json!("e3")], "{point}");
    }
}

#[test]
fn a_schema_changed_by_someone_else_is_used_from_the_next_batch_by_field_id() {
    let mut s = Setup::new("evolve-outside");
    let interval = "[trigger]\nmode = \"interval\"\ninterval = \"200ms\"\nmax-records = 3";
    s.write_config(
        "pipeline.toml",
        &config("").replace("[trigger]\nmax-records = 3", interval),
    );
    produce(
        &s,
        &[r#"{"event_id":"e1","quantity":1,"note":"x"}"#],
        "one.jsonl",
    );
    let running = s.start(&["run"], &[]);
    let mut progress = Vec::new();
    follow_until_read(&running, &mut progress, 1);

    // A user renames `quantity`, adds `note`, then widens the renamed column.
    pyiceberg::schema(
        &s.warehouse,
        TABLE,
        &["--add", "note:string", "--rename", "quantity:qty"],
    );
    let schema = pyiceberg::schema(&s.warehouse, TABLE, &["--widen", "qty:long"]);
    assert_eq!(
        fields_of(&schema),
        [
            field(1, "event_id", "string"),
            field(2, "qty", "long"),
            field(3, "price", "decimal(6, 2)"),
            field(4, "note", "string"),
        ]
    );
    produce(
        &s,
        &[r#"{"event_id":"e2","qty":3000000000,"note":"y","quantity":5}"#],
        "two.jsonl",
    );
    follow_until_read(&running, &mut progress, 2);
    let (_, _, log) = running.terminate();
    assert!(
        log.contains("the table's schema changed: encoding against the new one"),
        "{log}"
    );

    // e1's `quantity` (field 2) reads as `qty`; e2's `qty` went to field 2 and its
    // `quantity`, a column no more, was dropped and counted.
    assert_eq!(
        pyiceberg::read_table(&s.warehouse, TABLE),
        [
            json!({"event_id": "e1", "qty": 1, "price": null, "note": null}),
            json!({"event_id": "e2", "qty": 3000000000u64, "price": null, "note": "y"}),
        ]
    );
    let dropped: Vec<(String, u64)> = progress
        .iter()
        .flat_map(|p| {
            p["dropped_fields"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        dropped,
        [("note".to_string(), 1), ("quantity".to_string(), 1)],
        "{progress:?}"
    );
}

#[test]
fn two_processes_adding_columns_at_once_converge_with_every_row_once() {
    let mut s = Setup::new("evolve-group");
    let member = "mode = \"group\"\nproperties = { \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"500\" }\n[trigger]\nmode = \"interval\"\ninterval = \"1s\"\nmax-records = 5";
    let text = config("unknown-fields = \"add\"").replace("[trigger]\nmax-records = 3", member);
    s.write_config("pipeline.toml", &text);
    // Every event asks for a shared column (`a_shared_…`, in both partitions), every fifth
    // one for a column of its own (`only_…`): both members ask for columns in the same
    // seconds, and commit schema changes planned against the same schema.
    let events: Vec<String> = (0..40)
        .map(|i| match i % 5 {
            0 => format!(
                r#"{{"event_id":"e{i:02}","a_shared_{}":{i},"only_{i}":"x"}}"#,
                i % 3
            ),
            _ => format!(r#"{{"event_id":"e{i:02}","a_shared_{}":{i}}}"#, i % 3),
        })
        .collect();
    let produce_part = |part: &[String], file: &str| {
        let path = s.warehouse.join(file);
        std::fs::write(&path, part.join("\n") + "\n").unwrap();
        let produced = s.produce(&["--partitions", "2", "--input", path.to_str().unwrap()]);
        assert_eq!(produced.delivered, part.len() as u64);
    };
    produce_part(&events[..20], "first.jsonl");
    let mut processes: Vec<Running> = (0..2).map(|_| s.start(&["run"], &[])).collect();
    std::thread::sleep(Duration::from_secs(3));
    produce_part(&events[20..], "second.jsonl");
    wait_for_rows(&s, 40, Duration::from_secs(120), &mut processes);
    let logs: Vec<String> = processes.into_iter().map(|p| p.terminate().2).collect();
    let all = logs.join("\n----\n");

    let rows = pyiceberg::read_table(&s.warehouse, TABLE);
    let ids: Vec<String> = rows
        .iter()
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = (0..40).map(|i| format!("e{i:02}")).collect();
    assert_eq!(ids, expected, "every event once: {all}");
    assert_eq!(dead(&s), []);
    // Every column asked for is there once, and each row's values are its own.
    let names: Vec<String> = fields(&s).into_iter().map(|f| f.1).collect();
    assert_eq!(names.len(), 3 + 3 + 8, "{names:?}");
    for row in &rows {
        let i: u64 = row["event_id"].as_str().unwrap()[1..].parse().unwrap();
        assert_eq!(row[format!("a_shared_{}", i % 3)], json!(i), "{row}");
        if i.is_multiple_of(5) {
            assert_eq!(row[format!("only_{i}")], json!("x"), "{row}");
        }
    }
}

/// The retail example's enrich stage adds `tier`, `country` and `list_price` to events;
/// with `unknown-fields = "add"` they need not be declared: they become columns, typed by
/// their values, like any field of the events.
#[test]
fn fields_a_plugin_adds_become_columns() {
    let mut s = Setup::new("evolve-enrich");
    s.edit_example_config(|text| {
        let start = text.find("  # Added by the enrich stage").unwrap();
        let end = text[start..].find("]\n").unwrap() + start;
        let mut edited = text[..start].to_string() + &text[end..];
        edited = edited.replace(
            "target-file-size =",
            "unknown-fields = \"add\"\ntarget-file-size =",
        );
        edited
    });
    feed_lookups(&s);
    s.produce(&["--count", "300", "--invalid-share", "0"]);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let names: Vec<(String, String)> = fields_in(&s, TABLE_RETAIL)
        .into_iter()
        .map(|(_, name, ty)| (name, ty))
        .collect();
    let added = &names[names.len() - 3..];
    let expected = [
        ("country", "string"),
        ("list_price", "double"),
        ("tier", "string"),
    ]
    .map(|(n, t)| (n.to_string(), t.to_string()));
    assert_eq!(added, expected, "{names:?}");
    assert_eq!(names[names.len() - 4].0, "traffic_source", "{names:?}");
    let rows = pyiceberg::read_table(&s.warehouse, TABLE_RETAIL);
    assert_eq!(rows.len(), 300);
    let enriched = rows.iter().filter(|r| r["tier"].is_string()).count();
    assert!(enriched > 0 && enriched < 300, "{enriched} of 300 enriched");
    for row in &rows {
        assert_eq!(row["tier"].is_string(), row["country"].is_string(), "{row}");
    }
}

const TABLE_RETAIL: &str = "tutorial.retail_clickstream_events";
