//! Event time's windows beyond the analytics example's tumbling ones: a lagging partition,
//! the last window closed when input stops, sliding windows with update mode and a late
//! topic, and session windows across batches and crashes.

use super::*;

/// Writes JSON lines of `(event_id, event_type, time)` events for one user to a file.
fn lines_file(s: &Setup, name: &str, events: &[(String, &str, String)]) -> PathBuf {
    std::fs::create_dir_all(&s.warehouse).unwrap();
    let path = s.warehouse.join(name);
    let text: String = events
        .iter()
        .map(|(id, ty, time)| {
            format!(
                "{{\"event_id\":\"{id}\",\"user_id\":\"u\",\"event_type\":\"{ty}\",\"timestamp\":\"{time}\",\"page\":\"/\"}}\n"
            )
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_lagging_partition_is_not_dropped_as_late() {
    // Partition 0 is ten minutes ahead of partition 1. Spark's watermark (the global
    // maximum minus 2 minutes) would drop partition 1's events read after the first
    // batch; the minimum over partitions drops none.
    let s = analytics("lagging");
    let fast: Vec<_> = (0..12)
        .map(|i| {
            (
                format!("f{i}"),
                "page_view",
                format!("2026-07-29T10:10:{:02}Z", i * 5),
            )
        })
        .collect();
    let slow: Vec<_> = (0..12)
        .map(|i| {
            (
                format!("s{i}"),
                "purchase",
                format!("2026-07-29T10:00:{:02}Z", i * 5),
            )
        })
        .collect();
    let fast = lines_file(&s, "fast.jsonl", &fast);
    let slow = lines_file(&s, "slow.jsonl", &slow);
    for (file, partition) in [(&fast, "0"), (&slow, "1")] {
        s.produce(&[
            "--partitions",
            "2",
            "--partition",
            partition,
            "--input",
            file.to_str().unwrap(),
        ]);
    }
    let out = s.run(&[("SLUICE_MAX_RECORDS", "4"), ("SLUICE_AT_END", "flush")]);
    assert!(out.status.success(), "{}", text(&out));
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    assert!(
        progress.len() >= 6,
        "batches of at most four: {}",
        progress.len()
    );
    assert_eq!(sum(&progress, "rows_late"), 0);
    assert_eq!(s.show()["rows"].as_array().unwrap().len(), 24);
    let counts: Vec<(String, String, i64)> =
        sorted(show_window(&s)["rows"].as_array().unwrap().iter().map(|r| {
            let (start, ty, count, ..) = window_row(r);
            (start, ty, count)
        }));
    assert_eq!(
        counts,
        [
            (
                "2026-07-29T10:00:00".to_string(),
                "purchase".to_string(),
                12
            ),
            ("2026-07-29T10:10:00".into(), "page_view".into(), 12),
        ]
    );
}

#[test]
fn the_last_window_closes_when_input_stops() {
    // Three events near the end of [10:00, 10:01); 1-second delay: the watermark stops at
    // 10:00:58. Nothing else arrives. After the 1-second idle timeout the watermark moves
    // on with processing time and closes the window about two seconds later, in a batch
    // without input (Spark would wait for the next event forever).
    let s = analytics("idle");
    let events: Vec<_> = (57..60)
        .map(|sec| {
            (
                format!("i{sec}"),
                "page_view",
                format!("2026-07-29T10:00:{sec}Z"),
            )
        })
        .collect();
    let file = lines_file(&s, "idle.jsonl", &events);
    s.produce(&["--partitions", "1", "--input", file.to_str().unwrap()]);
    let running = s.start(
        &["run"],
        &[
            ("SLUICE_INTERVAL", "200ms"),
            ("SLUICE_MAX_DELAY", "1s"),
            ("SLUICE_IDLE_TIMEOUT", "1s"),
        ],
    );
    let first = running
        .progress(Duration::from_secs(60))
        .expect("a first batch");
    assert_eq!(first["input_rows"], 3);
    assert_eq!(first["event_time"]["watermark"], "2026-07-29T10:00:58Z");
    // The one partition's own watermark: its newest event less the maximum delay.
    let own = &first["event_time"]["partition_watermarks"];
    assert_eq!(
        own[format!("{}/0", s.topic)],
        "2026-07-29T10:00:58Z",
        "{own}"
    );
    assert_eq!(
        first["event_time"]["windows_emitted"]["event-type-counts"],
        0
    );
    // Batches without input follow: the join's, once its empty profiles side is idle and
    // lets the events go, then the window's.
    let emitted = |p: &Value| p["event_time"]["windows_emitted"]["event-type-counts"].clone();
    let mut closing = Vec::new();
    while let Some(p) = running.progress(Duration::from_secs(30)) {
        closing.push(p);
        if closing.last().is_some_and(|p| emitted(p) != 0) || closing.len() > 5 {
            break;
        }
    }
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");
    assert!(closing.iter().all(|p| p["input_rows"] == 0), "{closing:?}");
    let last = closing.last().expect("the window closes without new input");
    assert_eq!(emitted(last), 1, "{closing:?}");
    let rows = show_window(&s)["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1);
    assert_eq!(window_row(&rows[0]).2, 3);
}

#[test]
fn sliding_windows_update_mode_and_a_late_topic() {
    // Windows of one minute every 30 seconds, one event per batch, a 10-minute delay:
    //   10:00:10 → [09:59:30, 10:00:30) and [10:00:00, 10:01:00)
    //   10:00:40 → [10:00:00, 10:01:00) and [10:00:30, 10:01:30)
    //   10:01:10 → [10:00:30, 10:01:30) and [10:01:00, 10:02:00)
    //   09:40:00 → late (watermark 09:51:10 after the third batch) → the late topic
    // `update` emits the windows each batch changed, with their running counts;
    // `on-window-close` emits each window once, here at the flush.
    let mut s = Setup::new("sliding");
    s.write_config(
        "sliding.toml",
        r#"
[pipeline]
name = "sliding"
on-invalid = "fail"
[source]
bootstrap-servers = "${KAFKA_BOOTSTRAP}"
topics = ["${KAFKA_TOPIC}"]
[trigger]
mode = "available-now"
max-records = 1
[sink]
warehouse = "${SLUICE_WAREHOUSE}"
namespace = "sliding"
table = "events"
columns = [{ name = "event_id", type = "string" }, { name = "timestamp", type = "timestamptz" }]
[event-time]
field = "timestamp"
max-delay = "10m"
late = "topic"
late-topic = "${KAFKA_TOPIC}-late"
at-end = "flush"
[[windows]]
name = "closed"
size = "1m"
slide = "30s"
aggregates = [{ name = "count", fn = "count" }]
kafka = { topic = "${KAFKA_TOPIC}-closed" }
[[windows]]
name = "updates"
size = "1m"
slide = "30s"
aggregates = [{ name = "count", fn = "count" }]
emit = "update"
kafka = { topic = "${KAFKA_TOPIC}-updates" }
"#,
    );
    let events: Vec<_> = ["10:00:10", "10:00:40", "10:01:10", "09:40:00"]
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("x{i}"), "page_view", format!("2026-07-29T{t}Z")))
        .collect();
    let file = lines_file(&s, "sliding.jsonl", &events);
    s.produce(&["--partitions", "1", "--input", file.to_str().unwrap()]);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let window = |name: &str| -> Vec<(String, i64, i64)> {
        s.show_window(name)["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let v: Value = serde_json::from_str(m["value"].as_str().unwrap()).unwrap();
                let start = v["window_start"].as_str().unwrap();
                (
                    start[11..19].to_string(),
                    v["count"].as_i64().unwrap(),
                    v["batch_id"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let w = |start: &str, count: i64, batch: i64| (start.to_string(), count, batch);
    assert_eq!(
        window("closed"),
        [
            w("09:59:30", 1, 5),
            w("10:00:00", 2, 5),
            w("10:00:30", 2, 5),
            w("10:01:00", 1, 5)
        ]
    );
    assert_eq!(
        window("updates"),
        [
            w("09:59:30", 1, 1),
            w("10:00:00", 1, 1),
            w("10:00:00", 2, 2),
            w("10:00:30", 1, 2),
            w("10:00:30", 2, 3),
            w("10:01:00", 1, 3),
        ]
    );
    let late = sluice::sink::topic::read_all(
        &sluice::kafka::Connection::plain(&s.broker.bootstrap),
        &format!("{}-late", s.topic),
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].headers["sluice.error.code"], "late_event");
    assert_eq!(late[0].headers["sluice.source.offset"], "3");
    assert!(late[0].value.as_deref().unwrap().contains("09:40:00"));
}

/// The pipeline of [`session_windows_merge_across_batches_and_a_crash_changes_no_output`].
const SESSIONS: &str = r#"
[pipeline]
name = "sessions"
on-invalid = "fail"
[source]
bootstrap-servers = "${KAFKA_BOOTSTRAP}"
topics = ["${KAFKA_TOPIC}"]
[trigger]
mode = "available-now"
max-records = ${SLUICE_MAX_RECORDS:-4}
[sink]
warehouse = "${SLUICE_WAREHOUSE}"
namespace = "web"
table = "events"
columns = [{ name = "event_id", type = "string" }, { name = "event_type", type = "string" }, { name = "timestamp", type = "timestamptz" }]
[event-time]
field = "timestamp"
max-delay = "30m"
late = "drop"
at-end = "flush"
[[windows]]
name = "sessions"
gap = "10m"
group-by = ["event_id"]
aggregates = [{ name = "pages", fn = "count" }, { name = "types", fn = "distinct-count", field = "event_type" }]
kafka = { topic = "${KAFKA_TOPIC}-sessions" }
iceberg = { table = "sessions" }
[[windows]]
name = "session-updates"
gap = "10m"
group-by = ["event_id"]
aggregates = [{ name = "pages", fn = "count" }]
emit = "update"
kafka = { topic = "${KAFKA_TOPIC}-session-updates" }
"#;

#[test]
fn session_windows_merge_across_batches_and_a_crash_changes_no_output() {
    // Sessions per `event_id` (a session id here), gap 10 minutes, delay 30 minutes, four
    // events per batch (times 10:MM):
    //   batch 1: s1 00, s1 15, s2 20, s2 21 → s1 [10:00, 10:10) and [10:15, 10:25)
    //   batch 2: s1 08 bridges them, s1 16, s3 40, s3 41 → s1 [10:00, 10:26)
    //   batch 3: s4 11:30 .. 11:33 → watermark 11:03 closes s1, s2, s3
    //   batch 4: the flush closes s4
    let mut s = Setup::new("sessions");
    s.write_config("sessions.toml", SESSIONS);
    let times = [
        ("s1", "10:00"),
        ("s1", "10:15"),
        ("s2", "10:20"),
        ("s2", "10:21"),
        ("s1", "10:08"),
        ("s1", "10:16"),
        ("s3", "10:40"),
        ("s3", "10:41"),
        ("s4", "11:30"),
        ("s4", "11:31"),
        ("s4", "11:32"),
        ("s4", "11:33"),
    ];
    let events: Vec<_> = times
        .iter()
        .enumerate()
        .map(|(i, (id, t))| {
            let ty = if i % 2 == 0 {
                "page_view"
            } else {
                "add_to_cart"
            };
            (id.to_string(), ty, format!("2026-07-29T{t}:00Z"))
        })
        .collect();
    let file = lines_file(&s, "sessions.jsonl", &events);
    s.produce(&["--partitions", "1", "--input", file.to_str().unwrap()]);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    // (session, start, end, pages, distinct types, batch).
    let closed = |s: &Setup| -> Vec<(String, String, String, i64, i64, i64)> {
        let shown = s.show_window("sessions");
        let row = |r: &Value| {
            let time = |k: &str| r[k].as_str().unwrap()[11..16].to_string();
            (
                r["event_id"].as_str().unwrap().to_string(),
                time("window_start"),
                time("window_end"),
                number(&r["pages"]) as i64,
                number(&r["types"]) as i64,
                number(&r["batch_id"]) as i64,
            )
        };
        sorted(shown["rows"].as_array().unwrap().iter().map(row))
    };
    let row = |id: &str, start: &str, end: &str, pages, types, batch| {
        (
            id.to_string(),
            start.to_string(),
            end.to_string(),
            pages,
            types,
            batch,
        )
    };
    let want = [
        row("s1", "10:00", "10:26", 4, 2, 3),
        row("s2", "10:20", "10:31", 2, 2, 3),
        row("s3", "10:40", "10:51", 2, 2, 3),
        row("s4", "11:30", "11:43", 4, 2, 4),
    ];
    assert_eq!(closed(&s), want);
    assert_eq!(
        s.show_window("sessions")["messages"]
            .as_array()
            .unwrap()
            .len(),
        4,
        "each session emitted once"
    );
    // Update mode: the sessions each batch changed; the merge is emitted once, from
    // the earliest start, and the session merged away is not emitted again.
    let updates: Vec<(i64, String, String, String, i64)> = sorted(
        s.show_window("session-updates")["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let v: Value = serde_json::from_str(m["value"].as_str().unwrap()).unwrap();
                let time = |k: &str| v[k].as_str().unwrap()[11..16].to_string();
                let id = v["event_id"].as_str().unwrap().to_string();
                let pages = v["pages"].as_i64().unwrap();
                (
                    v["batch_id"].as_i64().unwrap(),
                    id,
                    time("window_start"),
                    time("window_end"),
                    pages,
                )
            }),
    );
    let u = |batch, id: &str, start: &str, end: &str, pages| {
        (
            batch,
            id.to_string(),
            start.to_string(),
            end.to_string(),
            pages,
        )
    };
    assert_eq!(
        updates,
        [
            u(1, "s1", "10:00", "10:10", 1),
            u(1, "s1", "10:15", "10:25", 1),
            u(1, "s2", "10:20", "10:31", 2),
            u(2, "s1", "10:00", "10:26", 4),
            u(2, "s3", "10:40", "10:51", 2),
            u(3, "s4", "11:30", "11:43", 4),
        ]
    );

    // A power cut in batch 3 (which emits the merged session) before anything is sent,
    // or after the window commit (the sessions emitted, the table not yet committed),
    // then a run with a larger batch cap: the batch is replayed as planned from the
    // sessions saved by batch 2 (a delta with s1's merge), and the outputs are the same.
    for (round, point) in ["after-state:3", "after-window-commit:3"]
        .iter()
        .enumerate()
    {
        s.renew(&format!("sessions-crash{round}"));
        s.write_config("sessions.toml", SESSIONS);
        let file = lines_file(&s, "sessions.jsonl", &events);
        s.produce(&["--partitions", "1", "--input", file.to_str().unwrap()]);
        let out = s.run(&[("SLUICE_CRASH_AT", point)]);
        assert!(!out.status.success(), "{point}: {}", text(&out));
        let out = s.run(&[("SLUICE_MAX_RECORDS", "100")]);
        assert!(out.status.success(), "{point}: {}", text(&out));
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(log.contains("replaying it exactly"), "{point}");
        assert_eq!(closed(&s), want, "{point}");
    }
}
