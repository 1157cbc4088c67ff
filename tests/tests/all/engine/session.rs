//! Session windows through the real loop and real Iceberg tables: a session that spans
//! two batches is merged by a bridging event and emitted once, and a crash at every point
//! of the batches that merge and emit it replays to the same outputs.

use sluice::pipeline::crash::CrashPoint;

use super::{Engine, pipeline_file};

/// Sessions of `session_id` with a 10-minute gap (page count and distinct pages), a
/// 30-minute delay, 4 records per batch, open sessions flushed at the end.
const SESSIONS: &str = pipeline_file!(
    "sessions",
    r#"
[sink]
warehouse = "warehouse"
namespace = "web"
table = "events"
columns = [
  { name = "session_id", type = "string", required = true },
  { name = "page", type = "string" },
  { name = "timestamp", type = "timestamptz", required = true },
]

[dead-letter]
topic = "dead"

[event-time]
field = "timestamp"
max-delay = "30m"
late = "dead-letter"
at-end = "flush"

[[windows]]
name = "sessions"
gap = "10m"
group-by = ["session_id"]
aggregates = [{ name = "pages", fn = "count" }, { name = "distinct_pages", fn = "distinct-count", field = "page" }]
kafka = { topic = "sessions" }
iceberg = { table = "sessions" }
"#
);

/// Four batches of four events (times 2026-07-29T10:MM, or 11:MM for s4):
/// 1. s1 00 /home, s1 15 /cart, s2 20 /home, s2 21 /a: s1 has two sessions,
///    [10:00, 10:10) and [10:15, 10:25); watermark 09:51.
/// 2. s1 08 /product bridges them ([10:08, 10:18) overlaps both), s1 16 /cart, s3 40 /a,
///    s3 41 /a; watermark 10:11, nothing closes.
/// 3. s4 11:30 .. 11:33: watermark 11:03 closes s1 [10:00, 10:26) (4 pages, 3 distinct),
///    s2 [10:20, 10:31) (2, 2) and s3 [10:40, 10:51) (2, 1).
/// 4. the flush: s4 [11:30, 11:43) (4, 1).
fn events() -> Vec<String> {
    let event = |id: &str, time: &str, page: &str| {
        format!(r#"{{"session_id":"{id}","page":"{page}","timestamp":"2026-07-29T{time}:00Z"}}"#)
    };
    [
        ("s1", "10:00", "/home"),
        ("s1", "10:15", "/cart"),
        ("s2", "10:20", "/home"),
        ("s2", "10:21", "/a"),
        ("s1", "10:08", "/product"),
        ("s1", "10:16", "/cart"),
        ("s3", "10:40", "/a"),
        ("s3", "10:41", "/a"),
        ("s4", "11:30", "/home"),
        ("s4", "11:31", "/home"),
        ("s4", "11:32", "/home"),
        ("s4", "11:33", "/home"),
    ]
    .iter()
    .map(|(id, time, page)| event(id, time, page))
    .collect()
}

/// (session, start, end, pages, distinct pages, batch) of the window table.
fn sessions(engine: &Engine) -> Vec<(String, String, String, i64, i64, i64)> {
    let mut rows: Vec<_> = engine
        .rows(Some("sessions"))
        .iter()
        .map(|r| {
            let time = |k: &str| r[k].as_str().unwrap()[11..16].to_string();
            (
                r["session_id"].as_str().unwrap().to_string(),
                time("window_start"),
                time("window_end"),
                r["pages"].as_i64().unwrap(),
                r["distinct_pages"].as_i64().unwrap(),
                r["batch_id"].as_i64().unwrap(),
            )
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn a_session_spanning_two_batches_is_merged_and_emitted_once() {
    let engine = Engine::new("sessions", SESSIONS);
    engine.append(&events());
    let summary = engine.run().unwrap();
    assert_eq!((summary.rows_written, summary.rows_late), (12, 0));
    let row = |id: &str, start: &str, end: &str, pages, distinct, batch| {
        let (id, start, end) = (id.to_string(), start.to_string(), end.to_string());
        (id, start, end, pages, distinct, batch)
    };
    assert_eq!(
        sessions(&engine),
        [
            row("s1", "10:00", "10:26", 4, 3, 3),
            row("s2", "10:20", "10:31", 2, 2, 3),
            row("s3", "10:40", "10:51", 2, 1, 3),
            row("s4", "11:30", "11:43", 4, 1, 4),
        ]
    );
    // The topic carries each session once, keyed by its span and session id.
    let topic = engine.topic("sessions");
    assert_eq!(topic.len(), 4);
    let key = topic
        .iter()
        .find(|m| m.value.as_deref().unwrap().contains("\"s1\""));
    let key: serde_json::Value =
        serde_json::from_str(key.unwrap().key.as_deref().unwrap()).unwrap();
    assert_eq!(key["session_id"], "s1");
    assert!(
        key["window_end"].as_str().unwrap().contains("T10:26:00"),
        "{key}"
    );
}

#[test]
fn a_crash_at_every_point_of_the_merging_and_emitting_batches_changes_no_output() {
    let reference = Engine::new("sessions-reference", SESSIONS);
    reference.append(&events());
    reference.run().unwrap();
    let want = reference.outputs();
    assert_eq!(sessions(&reference).len(), 4);
    for batch in [2, 3] {
        for point in CrashPoint::ALL {
            let name = format!("sessions-crash-{batch}-{}", point.name());
            let engine = Engine::crashed(&name, SESSIONS, &events(), point, batch);
            engine.run().unwrap();
            assert_eq!(engine.outputs(), want, "after a crash at {name}");
        }
    }
}
