//! `[sink] unknown-fields` end to end, on a real broker (tansu) and the SQL catalog on
//! SQLite, without plugins: fields the table has no column for are dropped and counted (the
//! progress line, `sluice_dropped_fields_total{field}`, a warning once per name), or send
//! their whole event to the dead-letter topic with the code `unknown_field`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::fixture::{Running, Setup, progress_lines, text};

use crate::hot_swap::http;
use crate::pipeline::{dead_letters, rows};

/// A table of two columns; `{policy}` is the `unknown-fields` line, `{trigger}` and
/// `{admin}` the rest of their sections.
fn config(policy: &str, trigger: &str, admin: &str) -> String {
    format!(
        r#"
[pipeline]
name = "unknown"
[source]
bootstrap-servers = "${{KAFKA_BOOTSTRAP}}"
topics = ["${{KAFKA_TOPIC}}"]
[trigger]
max-records = 2
{trigger}
[sink]
warehouse = "${{SLUICE_WAREHOUSE}}"
namespace = "unknown"
table = "events"
columns = [
  {{ name = "event_id", type = "string", required = true }},
  {{ name = "quantity", type = "int" }},
]
{policy}
[dead-letter]
topic = "${{SLUICE_DEAD_LETTER_TOPIC}}"
{admin}
"#
    )
}

/// Six events, two a batch: flat ones (the encoder's fast path), one with a nested value
/// (serde_json's), one that does not fit its column, and `utm` in the first and last batch.
const EVENTS: [&str; 6] = [
    r#"{"event_id":"e1","quantity":1,"utm":"mail"}"#,
    r#"{"event_id":"e2","ctx":{"page":"/"},"utm":"ad"}"#,
    r#"{"event_id":"e3","quantity":3}"#,
    r#"{"event_id":"e4","utm":"mail","quantity":"many"}"#,
    r#"{"event_id":"e5","n":null,"utm":"x"}"#,
    r#"{"event_id":"e6","quantity":6}"#,
];

/// Produces [`EVENTS`], in order, to the setup's topic (one partition).
fn produce_events(s: &Setup) {
    let file = s.warehouse.join("events.jsonl");
    std::fs::create_dir_all(&s.warehouse).unwrap();
    std::fs::write(&file, EVENTS.join("\n") + "\n").unwrap();
    let produced = s.produce(&["--partitions", "1", "--input", file.to_str().unwrap()]);
    assert_eq!(produced.delivered, 6);
}

/// The event ids of the table's rows, sorted, and each row's columns.
fn landed(s: &Setup) -> (Vec<String>, Vec<Vec<String>>) {
    let shown = s.show();
    let mut ids: Vec<String> = rows(&shown)
        .iter()
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    let columns = rows(&shown)
        .iter()
        .map(|r| r.as_object().unwrap().keys().cloned().collect())
        .collect();
    (ids, columns)
}

/// (value's event id, code, field) of each dead letter, sorted.
pub(crate) fn dead(s: &Setup) -> Vec<(String, String, String)> {
    let shown = s.show();
    let mut dead: Vec<_> = dead_letters(&shown)
        .iter()
        .map(|d| {
            let value: Value = serde_json::from_str(d["value"].as_str().unwrap()).unwrap();
            let header = |name: &str| d["headers"][name].as_str().unwrap_or("").to_string();
            (
                value["event_id"].as_str().unwrap().to_string(),
                header("sluice.error.code"),
                header("sluice.error.field"),
            )
        })
        .collect();
    dead.sort();
    dead
}

/// The dropped fields of `progress`, added up over the batches.
fn dropped(progress: &[Value]) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for p in progress {
        for (field, n) in p["dropped_fields"].as_object().unwrap() {
            *total.entry(field.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    total
}

/// Follows the log until the batches seen have read `records` records.
pub(crate) fn follow_until_read(running: &Running, progress: &mut Vec<Value>, records: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let read = |p: &[Value]| -> u64 { p.iter().map(|p| p["input_rows"].as_u64().unwrap()).sum() };
    while read(progress) < records {
        assert!(Instant::now() < deadline, "not everything was read");
        running.follow(progress, "sluice::progress", Duration::from_secs(60));
    }
}

/// The admin API's metrics once they hold every line of `series` (or after 10 s).
fn scrape_until(addr: &str, series: &[String]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, metrics) = http(addr, "GET", "/metrics", None, b"", None);
        assert_eq!(status, 200, "{metrics}");
        let all = series.iter().all(|s| metrics.lines().any(|l| l == s));
        if all || Instant::now() > deadline {
            return metrics;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn counts(list: &[(&str, u64)]) -> BTreeMap<String, u64> {
    list.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// A dead letter as [`dead`] lists it.
fn reason(id: &str, code: &str, field: &str) -> (String, String, String) {
    (id.to_string(), code.to_string(), field.to_string())
}

#[test]
fn by_default_unknown_fields_are_dropped_counted_and_logged_once() {
    let mut s = Setup::new("unknown-drop");
    let addr = format!("127.0.0.1:{}", sluice_tests::free_port());
    let trigger = "mode = \"interval\"\ninterval = \"200ms\"";
    let admin = format!("[admin]\nlisten = \"{addr}\"");
    s.write_config("pipeline.toml", &config("", trigger, &admin));
    produce_events(&s);
    let running = s.start(&["run"], &[]);
    let mut progress = Vec::new();
    follow_until_read(&running, &mut progress, 6);
    let expected = counts(&[("ctx", 1), ("n", 1), ("utm", 3)]);
    let series: Vec<String> = expected
        .iter()
        .map(|(field, n)| format!("sluice_dropped_fields_total{{field=\"{field}\"}} {n}"))
        .collect();
    // The admin API records a batch just after its progress line is logged.
    let metrics = scrape_until(&addr, &series);
    let (_, _, log) = running.terminate();

    // The rows land without the fields; the misfit is dead-lettered whole, uncounted.
    let (ids, columns) = landed(&s);
    assert_eq!(ids, ["e1", "e2", "e3", "e5", "e6"]);
    assert!(
        columns.iter().all(|c| c == &["event_id", "quantity"]),
        "{columns:?}"
    );
    assert_eq!(dead(&s), [reason("e4", "type_mismatch", "quantity")]);

    // Each drop is counted, per field, in the progress lines and the metrics.
    assert_eq!(dropped(&progress), expected, "{progress:?}");
    for line in &series {
        assert!(metrics.lines().any(|l| l == line), "no {line}: {metrics}");
    }
    // `utm`, in two batches, is logged once; each name is.
    for field in ["utm", "ctx", "n"] {
        let warning = format!("events carry a field `{field}`");
        assert_eq!(log.matches(&warning).count(), 1, "{field}: {log}");
    }
}

#[test]
fn with_dead_letter_the_events_go_whole_to_the_dead_letter_topic() {
    let mut s = Setup::new("unknown-dead");
    let policy = "unknown-fields = \"dead-letter\"";
    let trigger = "mode = \"available-now\"";
    s.write_config("pipeline.toml", &config(policy, trigger, ""));
    produce_events(&s);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let (ids, _) = landed(&s);
    assert_eq!(ids, ["e3", "e6"]);
    // The first field the table lacks, in the event's order, is named.
    let unknown = |id: &str, field: &str| reason(id, "unknown_field", field);
    assert_eq!(
        dead(&s),
        [
            unknown("e1", "utm"),
            unknown("e2", "ctx"),
            unknown("e4", "utm"),
            unknown("e5", "n"),
        ]
    );
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(dropped(&progress), BTreeMap::new(), "{progress:?}");
    let by_code: u64 = progress
        .iter()
        .map(|p| {
            p["dead_lettered_by_code"]["unknown_field"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(by_code, 4);
}
