//! A stream-stream join through the real loop and real Iceberg tables: clicks joined with
//! profile updates of a second topic (read by the source, kept out of the stages and the
//! table), left-outer rows once the profiles' watermark passes, a late profile
//! dead-lettered, and a crash at every point of every batch replaying to the same outputs.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use serde_json::Value;
use sluice::iceberg::{IcebergCatalog, IcebergTable};
use sluice::pipeline::PipelineError;
use sluice::pipeline::crash::{Crash, CrashPoint};

use super::{Engine, Outputs, by_key, pipeline_file, sorted_json};

/// The right topic.
const PROFILES: &str = "profiles";

/// Clicks (`event_id`, `user_id`, `timestamp`) joined left-outer with profiles
/// (`user_id`, `tier`, `updated_at`) updated within the hour before the click; 30 minutes
/// of delay on the clicks, 1 minute on the profiles.
pub(super) const JOIN: &str = pipeline_file!(
    "join",
    r#"
[sink]
warehouse = "warehouse"
namespace = "web"
table = "clicks"
columns = [
  { name = "event_id", type = "string", required = true },
  { name = "user_id", type = "string" },
  { name = "timestamp", type = "timestamptz", required = true },
]

[dead-letter]
topic = "dead"

[event-time]
field = "timestamp"
max-delay = "30m"
late = "dead-letter"
at-end = "flush"

[[joins]]
name = "enriched"
right-topic = "profiles"
right-time-field = "updated_at"
right-max-delay = "1m"
on = ["user_id"]
kind = "left-outer"
before = "1h"
after = "0s"
left-fields = ["event_id", "user_id", "timestamp"]
right-fields = ["tier", { field = "updated_at", name = "profile_updated_at", type = "timestamptz" }]
kafka = { topic = "enriched" }
iceberg = { table = "enriched", partition-by = ["day(timestamp)"] }
"#
);

fn click(id: &str, user: &str, time: &str) -> String {
    format!(r#"{{"event_id":"{id}","user_id":"{user}","timestamp":"2026-07-29T{time}:00Z"}}"#)
}

fn profile(user: &str, tier: &str, time: &str) -> String {
    format!(r#"{{"user_id":"{user}","tier":"{tier}","updated_at":"2026-07-29T{time}:00Z"}}"#)
}

/// Clicks, then profiles (the source reads `clicks` first, 4 records a batch):
/// 1. e1 u1 10:00, e2 u2 10:05, e3 u1 10:30, e4 u4 10:10: held, no profile yet;
/// 2. e5 u3 11:50, then u1 gold 09:30 (matches e1, e3), u2 silver 09:50 (e2), u1
///    platinum 10:20 (e3); the profiles' watermark 10:19 lets e1, e2 and e4 go (e4 as a
///    left-outer row);
/// 3. u3 gold 12:00 (after e5: no match; watermark 11:59, e3 and e5 go, e5 unmatched) and
///    u2 bronze 10:00, late (behind 10:19): dead-lettered.
fn appended(engine: &Engine) {
    engine.log.create(PROFILES, 1);
    engine.append(&[
        click("e1", "u1", "10:00"),
        click("e2", "u2", "10:05"),
        click("e3", "u1", "10:30"),
        click("e4", "u4", "10:10"),
        click("e5", "u3", "11:50"),
    ]);
    for p in [
        profile("u1", "gold", "09:30"),
        profile("u2", "silver", "09:50"),
        profile("u1", "platinum", "10:20"),
        profile("u3", "gold", "12:00"),
        profile("u2", "bronze", "10:00"),
    ] {
        engine.log.append(PROFILES, 0, None, p.as_bytes());
    }
}

pub(super) fn join_table(engine: &Engine) -> IcebergTable {
    let sink = &engine.config.sink;
    let catalog = IcebergCatalog::open(sink, &engine.dir).unwrap();
    let config = sluice::sink::join::table_config(&engine.config.joins[0], sink).unwrap();
    IcebergTable::open(&catalog, config).unwrap()
}

/// (event, tier, batch) of the join table, sorted.
fn joined(engine: &Engine) -> Vec<(String, Option<String>, i64)> {
    let mut rows: Vec<_> = join_table(engine)
        .read_rows()
        .unwrap()
        .iter()
        .map(|r| {
            let tier = r["tier"].as_str().map(String::from);
            let event = r["event_id"].as_str().unwrap().to_string();
            (event, tier, r["batch_id"].as_i64().unwrap())
        })
        .collect();
    rows.sort();
    rows
}

/// Everything the outputs hold: the pipeline's, the join table and the join topic.
fn outputs(engine: &Engine) -> (Outputs, Vec<String>, BTreeMap<String, String>) {
    let table = sorted_json(join_table(engine).read_rows().unwrap());
    (engine.outputs(), table, by_key(&engine.topic("enriched")))
}

#[test]
fn clicks_are_joined_with_profiles_and_unmatched_clicks_come_once_the_profiles_pass() {
    let engine = Engine::new("join", JOIN);
    appended(&engine);
    let summary = engine.run().unwrap();
    // The table holds the clicks alone; the late profile is a dead letter.
    assert_eq!((summary.rows_written, summary.rows_late), (5, 1));
    let ids: Vec<String> = engine
        .rows(None)
        .iter()
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 5, "{ids:?}");
    let dead = engine.outputs().dead;
    assert_eq!(dead.len(), 1, "{dead:?}");
    let late = dead.iter().next().unwrap();
    assert!(late.starts_with("0@4 late_event"), "{late}");
    assert!(late.contains("join `enriched`"), "{late}");
    let row = |e: &str, tier: Option<&str>, batch| (e.to_string(), tier.map(String::from), batch);
    assert_eq!(
        joined(&engine),
        [
            row("e1", Some("gold"), 2),
            row("e2", Some("silver"), 2),
            row("e3", Some("gold"), 2),
            row("e3", Some("platinum"), 2),
            row("e4", None, 2),
            row("e5", None, 3),
        ]
    );
    // Columns by their table types: the click's time and the profile's.
    let rows = join_table(&engine).read_rows().unwrap();
    let e1 = rows.iter().find(|r| r["event_id"] == "e1").unwrap();
    assert_eq!(e1["user_id"], "u1");
    assert!(
        e1["timestamp"]
            .as_str()
            .unwrap()
            .starts_with("2026-07-29T10:00:00"),
        "{e1:?}"
    );
    assert!(
        e1["profile_updated_at"]
            .as_str()
            .unwrap()
            .starts_with("2026-07-29T09:30:00"),
        "{e1:?}"
    );
    let e4 = rows.iter().find(|r| r["event_id"] == "e4").unwrap();
    assert_eq!(e4["profile_updated_at"], Value::Null);
    // The topic carries each row once, keyed by its left and right ids.
    let topic = engine.topic("enriched");
    assert_eq!(topic.len(), 6);
    assert_eq!(by_key(&topic).len(), 6);
    // The profiles' offsets were committed with the table: a second run reads nothing.
    let again = engine.run().unwrap();
    assert_eq!((again.batches, again.input_rows), (0, 0));
}

#[test]
fn a_crash_at_every_point_of_every_batch_changes_no_output() {
    let reference = Engine::new("join-reference", JOIN);
    appended(&reference);
    reference.run().unwrap();
    let want = outputs(&reference);
    assert_eq!(want.1.len(), 6);
    for batch in 1..=3 {
        for point in CrashPoint::ALL {
            let name = format!("join-crash-{batch}-{}", point.name());
            let engine = Engine::new(&name, JOIN);
            appended(&engine);
            let error = engine
                .open(Crash::Fail(point, batch))
                .unwrap()
                .run(&AtomicBool::new(false));
            assert!(
                matches!(error, Err(PipelineError::Crashed { point: p, batch_id }) if p == point && batch_id == batch),
                "{name}: {error:?}"
            );
            engine.run().unwrap();
            assert_eq!(outputs(&engine), want, "after a crash at {name}");
        }
    }
}
