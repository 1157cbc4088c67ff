//! Late data, dedup and windows through the real loop, with the analytics tutorial's
//! twelve events (see `tests/all/event_time.rs` for how each outcome follows from them).

use serde_json::Value;
use sluice_tests::repo_root;

use super::{Engine, pipeline_file};

/// The analytics pipeline without its plugin: 4 records per batch, a 2-minute delay,
/// dedup on `event_id`, 1-minute counts per `event_type` to a topic and a table, open
/// windows flushed at the end.
pub(crate) const ANALYTICS: &str = pipeline_file!(
    "analytics",
    r#"
[sink]
warehouse = "warehouse"
namespace = "analytics"
table = "events"
partition-by = ["day(timestamp)"]
columns = [
  { name = "event_id", type = "string", required = true },
  { name = "user_id", type = "string" },
  { name = "event_type", type = "string" },
  { name = "timestamp", type = "timestamptz", required = true },
  { name = "page", type = "string" },
]

[dead-letter]
topic = "dead"

[event-time]
field = "timestamp"
max-delay = "2m"
late = "dead-letter"
at-end = "flush"

[dedup]
keys = ["event_id"]

[[windows]]
name = "counts"
size = "1m"
group-by = ["event_type"]
aggregates = [{ name = "count", fn = "count" }, { name = "users", fn = "distinct-count", field = "user_id" }]
kafka = { topic = "counts" }
iceberg = { table = "counts" }
"#
);

/// The analytics tutorial's twelve events.
pub(crate) fn analytics_events() -> Vec<String> {
    let text =
        std::fs::read_to_string(repo_root().join("examples/clickstream-analytics/events.jsonl"))
            .unwrap();
    text.lines().map(str::to_string).collect()
}

#[test]
fn late_events_duplicates_and_windows() {
    let engine = Engine::new("event-time", ANALYTICS);
    engine.append(&analytics_events());
    let summary = engine.run().unwrap();
    assert_eq!(summary.rows_written, 6);
    assert_eq!((summary.rows_late, summary.rows_deduplicated), (2, 3));
    let ids = engine.sorted_column("event_id");
    assert_eq!(ids, ["e1", "e2", "e3", "e5", "e6", "e7"]);
    let dead: Vec<(String, String)> = engine
        .topic("dead")
        .iter()
        .map(|d| {
            let h = |k: &str| d.headers[k].clone();
            (h("sluice.source.offset"), h("sluice.error.code"))
        })
        .collect();
    let expected = [
        ("4", "late_event"),
        ("11", "invalid_timestamp"),
        ("8", "late_event"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(o, c)| (o.to_string(), c.to_string()))
        .collect();
    let mut sorted = dead.clone();
    sorted.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(sorted, want, "{dead:?}");
    // Every window, flushed at the end: (start minute, type, count, users).
    let mut windows: Vec<(String, String, i64, i64)> = engine
        .rows(Some("counts"))
        .iter()
        .map(|r| {
            (
                r["window_start"].as_str().unwrap()[11..16].to_string(),
                r["event_type"].as_str().unwrap().to_string(),
                r["count"].as_i64().unwrap(),
                r["users"].as_i64().unwrap(),
            )
        })
        .collect();
    windows.sort();
    let expected = [
        ("10:00", "page_view", 2, 2),
        ("10:00", "purchase", 1, 1),
        ("10:01", "page_view", 1, 1),
        ("10:02", "page_view", 1, 1),
        ("10:03", "add_to_cart", 1, 1),
    ];
    let expected: Vec<(String, String, i64, i64)> = expected
        .iter()
        .map(|(s, t, c, u)| (s.to_string(), t.to_string(), *c, *u))
        .collect();
    assert_eq!(windows, expected);
    // The topic carries the same results, keyed by window and group.
    // (Rows of a batch come in no particular order.)
    let topic = engine.topic("counts");
    let mut keys: Vec<(String, String)> = topic
        .iter()
        .map(|m| {
            let key: Value = serde_json::from_str(m.key.as_deref().unwrap()).unwrap();
            let start = key["window_start"].as_str().unwrap();
            assert!(start.starts_with("2026-07-29T"), "{start}");
            (
                start[11..16].to_string(),
                key["event_type"].as_str().unwrap().into(),
            )
        })
        .collect();
    keys.sort();
    let expected_keys: Vec<(String, String)> =
        windows.iter().map(|w| (w.0.clone(), w.1.clone())).collect();
    assert_eq!(keys, expected_keys);
}

/// One event stamped `9999-01-01` first: it is dead-lettered as `event_time_in_future`,
/// and the tutorial's events after it come out exactly as without it (the watermark never
/// went there).
#[test]
fn an_event_from_the_far_future_changes_nothing_else() {
    let engine = Engine::new("far-future", ANALYTICS);
    let mut events = vec![
        r#"{"event_id":"z1","user_id":"u9","event_type":"page_view","timestamp":"9999-01-01T00:00:00Z","page":"/"}"#
            .to_string(),
    ];
    events.extend(analytics_events());
    engine.append(&events);
    let summary = engine.run().unwrap();
    assert_eq!(summary.rows_written, 6);
    assert_eq!((summary.rows_late, summary.rows_deduplicated), (2, 3));
    let codes: Vec<(String, String)> = engine
        .topic("dead")
        .iter()
        .map(|d| {
            (
                d.headers["sluice.source.offset"].clone(),
                d.headers["sluice.error.code"].clone(),
            )
        })
        .filter(|(_, code)| code != "late_event" && code != "invalid_timestamp")
        .collect();
    assert_eq!(
        codes,
        [("0".to_string(), "event_time_in_future".to_string())]
    );
}
