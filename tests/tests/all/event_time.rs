//! Event time end to end: watermarks, dedup, windows, late data and exactly-once window
//! outputs, with `sluice run` against tansu, the SQL catalog, and the enricher plugin built
//! from source. Expected outputs are worked out by hand from the inputs (see each test).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use sluice_tests::fixture::{Setup, progress_lines, text};
use sluice_tests::{pyiceberg, repo_root};

use crate::pipeline::snapshot_count;

pub(crate) fn analytics_config() -> PathBuf {
    repo_root().join("examples/clickstream-analytics/pipeline.toml")
}

/// `examples/clickstream-analytics/events.jsonl`: twelve events, in this order (times are
/// 2026-07-29T10:MM:SS):
///
/// | offset | id | type | time | with 4 records per batch and a 2-minute delay |
/// |---|---|---|---|---|
/// | 0 | e1 | page_view | 00:10 | batch 1; window [10:00, 10:01) |
/// | 1 | e2 | purchase | 00:50 | batch 1; window [10:00, 10:01) |
/// | 2 | e3 | page_view | 02:30 | batch 1; watermark after batch 1: 00:30 |
/// | 3 | e1 | page_view | 00:10 | duplicate |
/// | 4 | e4 | page_view | 00:20 | batch 2: late (behind 00:30) |
/// | 5 | e5 | page_view | 00:40 | batch 2; window [10:00, 10:01) |
/// | 6 | e2 | purchase | 00:50 | duplicate (first copy not behind 00:30) |
/// | 7 | e6 | add_to_cart | 03:30 | watermark after batch 2: 01:30, closing [10:00, 10:01) |
/// | 8 | e2 | purchase | 00:50 | batch 3: late (behind 01:30), not a duplicate |
/// | 9 | e7 | page_view | 01:45 | batch 3; window [10:01, 10:02) |
/// | 10 | e3 | page_view | 02:30 | duplicate |
/// | 11 | e8 | page_view | "yesterday" | not a timestamp: dead-lettered by encode |
///
/// Table: e1, e2, e3, e5, e6, e7. Dead letters: offsets 4 and 8 (`late_event`), 11
/// (`invalid_timestamp`). Three duplicates. The windows, with the enricher's funnel step
/// (page_view 1, add_to_cart 4, purchase 6), are [`expected_windows`].
pub(crate) fn events_file() -> PathBuf {
    repo_root().join("examples/clickstream-analytics/events.jsonl")
}

/// (window start, event_type, count, distinct users, max funnel step, batch id): two
/// windows closed by batch 2's watermark, three by the flush at the end (batch 4).
pub(crate) fn expected_windows() -> Vec<(String, String, i64, i64, f64, i64)> {
    [
        ("10:00", "page_view", 2, 2, 1.0, 2),
        ("10:00", "purchase", 1, 1, 6.0, 2),
        ("10:01", "page_view", 1, 1, 1.0, 4),
        ("10:02", "page_view", 1, 1, 1.0, 4),
        ("10:03", "add_to_cart", 1, 1, 4.0, 4),
    ]
    .into_iter()
    .map(|(start, ty, count, users, step, batch)| {
        (
            format!("2026-07-29T{start}:00"),
            ty.to_string(),
            count,
            users,
            step,
            batch,
        )
    })
    .collect()
}

fn number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap(),
        Value::String(s) => s.parse().unwrap(),
        other => panic!("not a number: {other}"),
    }
}

/// A window row (from the table, pyiceberg or the topic) in the form of
/// [`expected_windows`]; also checks that the end is one minute after the start.
fn window_row(row: &Value) -> (String, String, i64, i64, f64, i64) {
    let start = row["window_start"].as_str().unwrap();
    let end = row["window_end"].as_str().unwrap();
    let minute: u32 = start[14..16].parse().unwrap();
    assert_eq!(&end[14..16], format!("{:02}", minute + 1), "{row}");
    (
        start[..16].to_string() + ":00",
        row["event_type"].as_str().unwrap().to_string(),
        number(&row["count"]) as i64,
        number(&row["users"]) as i64,
        number(&row["max_funnel_step"]),
        number(&row["batch_id"]) as i64,
    )
}

fn sorted<T: Ord + Clone>(rows: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = rows.into_iter().collect();
    v.sort();
    v
}

fn sorted_f(
    rows: impl IntoIterator<Item = (String, String, i64, i64, f64, i64)>,
) -> Vec<(String, String, i64, i64, f64, i64)> {
    let mut v: Vec<_> = rows.into_iter().collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

pub(crate) fn analytics(name: &str) -> Setup {
    let mut s = Setup::new(name);
    s.config = analytics_config();
    s.extra_env
        .push(("SLUICE_ANALYTICS_TOPIC".into(), format!("{name}-analytics")));
    s
}

/// `sluice show --window event-type-counts --json`.
pub(crate) fn show_window(s: &Setup) -> Value {
    s.show_window("event-type-counts")
}

pub(crate) fn table_windows(shown: &Value) -> Vec<(String, String, i64, i64, f64, i64)> {
    sorted_f(shown["rows"].as_array().unwrap().iter().map(window_row))
}

/// The distinct window results on the topic (delivery is at least once), checking that
/// each key is the window and the group.
pub(crate) fn topic_windows(shown: &Value) -> Vec<(String, String, i64, i64, f64, i64)> {
    let mut distinct = BTreeSet::new();
    for m in shown["messages"].as_array().unwrap() {
        let key: Value = serde_json::from_str(m["key"].as_str().unwrap()).unwrap();
        let value: Value = serde_json::from_str(m["value"].as_str().unwrap()).unwrap();
        assert_eq!(
            key.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["window_start", "window_end", "event_type"]
        );
        for k in ["window_start", "window_end", "event_type"] {
            assert_eq!(key[k], value[k]);
        }
        distinct.insert(value.to_string());
    }
    sorted_f(
        distinct
            .iter()
            .map(|v| window_row(&serde_json::from_str(v).unwrap())),
    )
}

pub(crate) fn event_ids(shown: &Value) -> Vec<String> {
    sorted(
        shown["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["event_id"].as_str().unwrap().to_string()),
    )
}

/// The distinct (source offset, code) of the dead letters (delivery is at least once).
fn dead_letters(shown: &Value) -> Vec<(String, String)> {
    let distinct: BTreeSet<(String, String)> = shown["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["headers"]["sluice.source.offset"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                d["headers"]["sluice.error.code"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    distinct.into_iter().collect()
}

pub(crate) fn expected_dead_letters() -> Vec<(String, String)> {
    vec![
        ("11".to_string(), "invalid_timestamp".to_string()),
        ("4".into(), "late_event".into()),
        ("8".into(), "late_event".into()),
    ]
}

fn sum(progress: &[Value], key: &str) -> u64 {
    progress
        .iter()
        .map(|p| p["event_time"][key].as_u64().unwrap())
        .sum()
}

#[test]
fn the_analytics_example_dedups_counts_windows_and_dead_letters_late_events() {
    let s = analytics("windows");
    let events = events_file();
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
    let out = s.run(&[("SLUICE_MAX_RECORDS", "4"), ("SLUICE_AT_END", "flush")]);
    assert!(out.status.success(), "{}", text(&out));
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        progress
            .iter()
            .map(|p| p["input_rows"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [4, 4, 4, 0],
        "three batches of four, then the flush"
    );
    assert_eq!(sum(&progress, "rows_deduplicated"), 3);
    assert_eq!(sum(&progress, "rows_late"), 2);
    let watermarks: Vec<&str> = progress
        .iter()
        .map(|p| p["event_time"]["watermark"].as_str().unwrap())
        .collect();
    assert_eq!(
        watermarks,
        [
            "2026-07-29T10:00:30Z",
            "2026-07-29T10:01:30Z",
            "2026-07-29T10:01:30Z",
            // The flush moves it to the end of the last session (e6 at 10:03:30 plus
            // the 30-minute gap), past the last tumbling window's end.
            "2026-07-29T10:33:30Z"
        ]
    );
    let emitted: Vec<u64> = progress
        .iter()
        .map(|p| {
            p["event_time"]["windows_emitted"]["event-type-counts"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(emitted, [0, 2, 0, 3]);
    // State is reported and bounded by the watermark: after batch 2, the dedup keys left
    // are e3 and e6 (e1, e2, e5 are behind 10:01:30); the flush leaves no window open.
    assert_eq!(progress[1]["event_time"]["state"]["dedup"]["rows"], 2);
    assert_eq!(
        progress[1]["event_time"]["state"]["window:event-type-counts"]["rows"],
        2
    );
    assert_eq!(
        progress[3]["event_time"]["state"]["window:event-type-counts"]["rows"],
        0
    );
    assert!(
        progress[3]["event_time"]["state_file_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );

    let shown = s.show();
    assert_eq!(event_ids(&shown), ["e1", "e2", "e3", "e5", "e6", "e7"]);
    let steps: Vec<i64> = sorted(
        shown["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["funnel_step"].as_i64().unwrap()),
    );
    assert_eq!(
        steps,
        [1, 1, 1, 1, 4, 6],
        "the enricher ran before the table"
    );
    assert_eq!(dead_letters(&shown), expected_dead_letters());
    let summary = &shown["snapshot_summary"];
    assert_eq!(summary["sluice.watermark"], "2026-07-29T10:33:30Z");
    // The state file of batch 4 (a delta on batch 1's snapshot), named with the run of the
    // process that wrote it.
    let run = summary["sluice.run"].as_str().unwrap();
    assert!(
        summary["sluice.state"]
            .as_str()
            .unwrap()
            .ends_with(&format!(
                "/_sluice-state/clickstream_events/clickstream-analytics/00000000000000000004-{run}.delta.json"
            )),
        "{summary}"
    );

    let windows = show_window(&s);
    assert_eq!(table_windows(&windows), expected_windows());
    assert_eq!(windows["messages"].as_array().unwrap().len(), 5);
    assert_eq!(topic_windows(&windows), expected_windows());
    // An independent reader sees the same window table.
    let read = pyiceberg::read_table(&s.warehouse, "analytics.event_type_counts");
    assert_eq!(sorted_f(read.iter().map(window_row)), expected_windows());
    // Sessions per user, all closed by the flush: user_2's purchase at 10:00:50 (batch 1)
    // and page view at 10:00:40 (batch 2, out of order) make one session from 10:00:40.
    let sessions: Vec<(String, String, String, i64, i64, f64, i64)> = sorted_f7(
        s.show_window("user-sessions")["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let time = |k: &str| r[k].as_str().unwrap()[11..19].to_string();
                (
                    r["user_id"].as_str().unwrap().to_string(),
                    time("window_start"),
                    time("window_end"),
                    number(&r["pages"]) as i64,
                    number(&r["distinct_pages"]) as i64,
                    number(&r["max_funnel_step"]),
                    number(&r["batch_id"]) as i64,
                )
            }),
    );
    let session = |user: &str, start: &str, end: &str, pages, distinct, step| {
        let (user, start, end) = (user.to_string(), start.to_string(), end.to_string());
        (user, start, end, pages, distinct, step, 4)
    };
    assert_eq!(
        sessions,
        [
            session("user_1", "10:00:10", "10:33:30", 3, 3, 4.0),
            session("user_2", "10:00:40", "10:30:50", 2, 2, 6.0),
            session("user_4", "10:01:45", "10:31:45", 1, 1, 1.0),
        ]
    );
}

fn sorted_f7<T: PartialOrd>(rows: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = rows.into_iter().collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

#[test]
fn open_windows_wait_for_the_next_run_and_a_crash_anywhere_changes_no_output() {
    let mut s = analytics("crash");
    let events = events_file();
    let small = ("SLUICE_MAX_RECORDS", "4");
    let flush = ("SLUICE_AT_END", "flush");

    // `at-end = "keep"`: the first run emits what the watermark closed; the open windows
    // are saved and a later run (here, flushing) emits them. Same outputs as one run.
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
    let out = s.run(&[small]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(table_windows(&show_window(&s)), expected_windows()[..2]);
    let out = s.run(&[small, flush]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(table_windows(&show_window(&s)), expected_windows());

    // A power cut at each point of batch 2 (which emits two windows) and of batch 4 (the
    // flush), then a run with a larger batch cap: the interrupted batch is replayed as it
    // was planned (four records), so the outputs are those of a run without a crash.
    // (Read anew with the larger cap, batch 2 would take all eight records left: e2 at
    // offset 8 would be a duplicate instead of late, and the flush would be batch 3.)
    for (round, point) in [
        "after-state:2",
        "after-dead-letter:2",
        "after-write:2",
        "after-window-commit:2",
        "after-commit:2",
        "after-state:4",
        "after-window-commit:4",
    ]
    .into_iter()
    .enumerate()
    {
        s.renew(&format!("crash{round}"));
        s.extra_env = vec![(
            "SLUICE_ANALYTICS_TOPIC".into(),
            format!("crash{round}-analytics"),
        )];
        s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
        let out = s.run(&[small, flush, ("SLUICE_CRASH_AT", point)]);
        assert!(!out.status.success(), "{point}: {}", text(&out));
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(log.contains("SLUICE_CRASH_AT: aborting"), "{}", text(&out));
        let out = s.run(&[("SLUICE_MAX_RECORDS", "100"), flush]);
        assert!(out.status.success(), "{point}: {}", text(&out));
        let replayed = String::from_utf8_lossy(&out.stderr).contains("replaying it exactly");
        assert_eq!(
            replayed,
            point != "after-commit:2",
            "{point}: a planned, uncommitted batch is replayed"
        );
        let shown = s.show();
        assert_eq!(
            event_ids(&shown),
            ["e1", "e2", "e3", "e5", "e6", "e7"],
            "{point}"
        );
        assert_eq!(dead_letters(&shown), expected_dead_letters(), "{point}");
        let windows = show_window(&s);
        assert_eq!(table_windows(&windows), expected_windows(), "{point}");
        assert_eq!(topic_windows(&windows), expected_windows(), "{point}");
    }
}

/// The analytics example with a commit cadence: triggers held until they read 8 records
/// (or an hour passes), in the warehouse folder of `s` (after [`Setup::renew`]).
fn with_cadence(s: &mut Setup) {
    let example = std::fs::read_to_string(analytics_config()).unwrap();
    let table = "table = \"clickstream_events\"\n";
    let text = example.replace(
        table,
        &format!("{table}commit-interval = \"1h\"\nmin-commit-rows = 8\n"),
    );
    assert!(text.contains("min-commit-rows"));
    s.write_config("pipeline.toml", &text);
}

/// With `[sink.expire-snapshots]` (every commit, keeping one snapshot), the window
/// table's snapshots are expired as well as the main table's, the outputs are those of a
/// run without expiry, and a second run reads nothing again.
#[test]
fn snapshot_expiry_covers_the_window_table_and_changes_no_output() {
    let mut s = analytics("expire-windows");
    let example = std::fs::read_to_string(analytics_config()).unwrap();
    let expiry =
        "[sink.expire-snapshots]\nolder-than = \"0s\"\nretain-last = 1\nevery-commits = 1\n";
    s.write_config("pipeline.toml", &format!("{example}\n{expiry}"));
    let events = events_file();
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
    let env = [("SLUICE_MAX_RECORDS", "4"), ("SLUICE_AT_END", "flush")];
    let out = s.run(&env);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("cannot expire snapshots"), "{said}");
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(progress.len(), 4, "{said}");
    // Four commits to the main table, two to the window table (batches 2 and 4); one
    // snapshot of each is left.
    let expired: u64 = progress
        .iter()
        .map(|p| p["snapshots_expired"].as_u64().unwrap())
        .sum();
    assert_eq!(expired, 3 + 1, "{said}");
    assert_eq!(snapshot_count(&s, "analytics", "clickstream_events"), 1);
    assert_eq!(snapshot_count(&s, "analytics", "event_type_counts"), 1);

    let shown = s.show();
    assert_eq!(event_ids(&shown), ["e1", "e2", "e3", "e5", "e6", "e7"]);
    assert_eq!(dead_letters(&shown), expected_dead_letters());
    assert_eq!(table_windows(&show_window(&s)), expected_windows());
    a_second_run_changes_nothing(&s, &env);
}

/// A second run with `env` reads nothing again, and the window table still holds the
/// example's windows.
pub(crate) fn a_second_run_changes_nothing(s: &Setup, env: &[(&str, &str)]) {
    let again = s.run(env);
    assert!(
        String::from_utf8_lossy(&again.stdout).starts_with("0 batches"),
        "{}",
        text(&again)
    );
    assert_eq!(table_windows(&show_window(s)), expected_windows());
}

/// A commit cadence with event time: with 4 records per trigger, the twelve events and
/// the flush are four triggers held into two commits (batch 1: the first two triggers,
/// batch 2: the third and the flush), fewer snapshots than triggers, and the outputs are
/// those of a commit per trigger (the windows carry the batch that committed them). A
/// power cut in either commit, then a run with a larger batch cap: the held triggers are
/// replayed one by one as planned (read anew as one trigger, e4 and the second e2 would
/// not be late), so nothing changes.
#[test]
fn a_commit_cadence_holds_event_time_triggers_and_a_crash_changes_no_output() {
    let mut s = analytics("cadence-et");
    let events = events_file();
    let flush = ("SLUICE_AT_END", "flush");
    let expected: Vec<_> = expected_windows()
        .into_iter()
        .map(|(start, ty, count, users, step, batch)| {
            (
                start,
                ty,
                count,
                users,
                step,
                if batch == 2 { 1 } else { 2 },
            )
        })
        .collect();
    for (round, point) in [
        None,
        Some("after-state:1"),
        Some("after-dead-letter:1"),
        Some("after-commit:1"),
        Some("after-window-commit:2"),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("cadence-et{round}");
        s.renew(&name);
        s.extra_env = vec![("SLUICE_ANALYTICS_TOPIC".into(), format!("{name}-analytics"))];
        with_cadence(&mut s);
        s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
        let mut cap = "4";
        if let Some(point) = point {
            let out = s.run(&[
                ("SLUICE_MAX_RECORDS", "4"),
                flush,
                ("SLUICE_CRASH_AT", point),
            ]);
            assert!(!out.status.success(), "{point}: {}", text(&out));
            let log = String::from_utf8_lossy(&out.stderr);
            assert!(log.contains("SLUICE_CRASH_AT: aborting"), "{}", text(&out));
            cap = "100";
        }
        let out = s.run(&[("SLUICE_MAX_RECORDS", cap), flush]);
        assert!(out.status.success(), "{point:?}: {}", text(&out));
        let log = String::from_utf8_lossy(&out.stderr);
        let replayed = log.contains("replaying it exactly");
        assert_eq!(
            replayed,
            point.is_some_and(|p| p != "after-commit:1"),
            "{point:?}"
        );
        let commits: Vec<u64> = progress_lines(&log)
            .iter()
            .map(|p| p["input_rows"].as_u64().unwrap())
            .collect();
        let want: &[u64] = match point {
            None => &[8, 4],
            Some("after-commit:1") => &[4],
            Some(p) if p.ends_with(":1") => &[8, 4],
            Some(_) => &[4],
        };
        assert_eq!(commits, want, "{point:?}: {}", text(&out));
        let shown = s.show();
        assert_eq!(
            event_ids(&shown),
            ["e1", "e2", "e3", "e5", "e6", "e7"],
            "{point:?}"
        );
        assert_eq!(dead_letters(&shown), expected_dead_letters(), "{point:?}");
        let summary = &shown["snapshot_summary"];
        assert_eq!(summary["sluice.watermark"], "2026-07-29T10:33:30Z");
        let state = summary["sluice.state"].as_str().unwrap();
        assert!(state.contains("/00000000000000000002-"), "{state}");
        let windows = show_window(&s);
        assert_eq!(table_windows(&windows), expected, "{point:?}");
        assert_eq!(topic_windows(&windows), expected, "{point:?}");
    }
}

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

#[test]
fn the_analytics_example_parses() {
    let config = sluice::pipeline::config::PipelineConfig::load(&analytics_config()).unwrap();
    let et = config.event_time.as_ref().unwrap();
    assert_eq!(
        (et.field.as_str(), et.max_delay),
        ("timestamp", Duration::from_secs(120))
    );
    assert_eq!(config.dedup.as_ref().unwrap().keys, ["event_id"]);
    let w = &config.windows[0];
    assert_eq!(
        (w.size, w.slide, &w.group_by[..]),
        (
            Some(Duration::from_secs(60)),
            None,
            &["event_type".to_string()][..]
        )
    );
    let sessions = &config.windows[1];
    assert_eq!(
        (sessions.size, sessions.gap, &sessions.group_by[..]),
        (
            None,
            Some(Duration::from_secs(1800)),
            &["user_id".to_string()][..]
        )
    );
    assert_eq!(config.stages.len(), 1);
    let join = &config.joins[0];
    assert_eq!(
        (
            join.right_topic.as_str(),
            &join.on[..],
            join.before,
            join.after
        ),
        (
            "user-profiles",
            &["user_id".to_string()][..],
            Duration::from_secs(3600),
            Duration::ZERO
        )
    );
    assert_eq!(
        join.kind,
        sluice::event_time::join::config::JoinKind::LeftOuter
    );
    // The profiles topic is read by the source, for the join alone.
    assert!(config.source.topics.contains(&"user-profiles".to_string()));
}

/// `sluice maintain` deletes old state files, but never one of the chain that the last
/// commit's state builds on (its snapshot and deltas): the next run recovers from it.
#[test]
fn maintain_keeps_the_state_chain_that_the_next_run_recovers_from() {
    let s = analytics("maintain-chain");
    let events = events_file();
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
    // One record per batch: twelve batches, a snapshot at batch 1 and deltas after it.
    let out = s.run(&[("SLUICE_MAX_RECORDS", "1")]);
    assert!(out.status.success(), "{}", text(&out));
    let root = s
        .warehouse
        .join("analytics/_sluice-state/clickstream_events/clickstream-analytics");
    let files = || -> BTreeSet<String> {
        std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let snapshot = files()
        .into_iter()
        .find(|f| f.starts_with("00000000000000000001-") && f.ends_with(".snapshot.bin"))
        .expect("batch 1's snapshot");
    assert!(
        files()
            .iter()
            .any(|f| f.starts_with("00000000000000000012-"))
    );
    for file in files() {
        let old = std::process::Command::new("touch")
            .args(["-d", "2 days ago"])
            .arg(root.join(file))
            .status()
            .unwrap();
        assert!(old.success());
    }
    let out = s.maintain("1d");
    assert!(out.status.success(), "{}", text(&out));
    let left = files();
    assert!(
        !left.contains("00000000000000000001.json"),
        "batch 1's pointer, out of the kept ones, is deleted: {left:?}"
    );
    assert!(
        left.contains(&snapshot),
        "the chain's snapshot is kept: {left:?}"
    );
    let out = s.run(&[("SLUICE_AT_END", "flush")]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("restored event-time state"),
        "{}",
        text(&out)
    );
}

/// Profile updates for the analytics example's join (times 2026-07-29T..., one
/// partition, read after the events): user_1 gold 09:30 (within the hour before e1, e3,
/// e6), user_2 silver 09:59 (e2, e5), user_1 platinum 10:02 (e3, e6), user_3 bronze 10:05
/// (user_3's only event, e4, is late: not joined), then user_2 at 09:00, behind the
/// profiles' watermark (10:03) by then: a late profile, dead-lettered.
fn profiles_file(s: &Setup) -> PathBuf {
    let profile = |user: &str, tier: &str, time: &str| {
        format!(
            r#"{{"user_id":"{user}","tier":"{tier}","country":"PT","updated_at":"2026-07-29T{time}.000Z"}}"#
        )
    };
    let lines = [
        profile("user_1", "gold", "09:30:00"),
        profile("user_2", "silver", "09:59:00"),
        profile("user_1", "platinum", "10:02:00"),
        profile("user_3", "bronze", "10:05:00"),
        profile("user_2", "gold", "09:00:00"),
    ];
    std::fs::create_dir_all(&s.warehouse).unwrap();
    let path = s.warehouse.join("profiles.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// The rows of the analytics example's join table.
pub(crate) fn join_table_rows(s: &Setup) -> Vec<serde_json::Map<String, Value>> {
    let example = std::fs::read_to_string(analytics_config()).unwrap();
    let warehouse = s.warehouse.to_str().unwrap();
    let text = example.replace("${SLUICE_WAREHOUSE:-../../warehouse}", warehouse);
    let config =
        sluice::pipeline::config::PipelineConfig::parse(&text, &analytics_config()).unwrap();
    let catalog = sluice::iceberg::IcebergCatalog::open(&config.sink, &s.warehouse).unwrap();
    let table = sluice::sink::join::table_config(&config.joins[0], &config.sink).unwrap();
    let table = sluice::iceberg::IcebergTable::open(&catalog, table).unwrap();
    table.read_rows().unwrap()
}

/// (event, tier) of the example's join table, sorted; each row checked against its event.
fn joined_rows(s: &Setup) -> Vec<(String, Option<String>)> {
    sorted(join_table_rows(s).iter().map(|r| {
        let tier = r["tier"].as_str().map(String::from);
        assert_eq!(r["profile_updated_at"].is_null(), tier.is_none(), "{r:?}");
        assert!(
            r["timestamp"]
                .as_str()
                .unwrap()
                .starts_with("2026-07-29T10:0"),
            "{r:?}"
        );
        (r["event_id"].as_str().unwrap().to_string(), tier)
    }))
}

fn expected_joined() -> Vec<(String, Option<String>)> {
    let row = |e: &str, tier: Option<&str>| (e.to_string(), tier.map(String::from));
    sorted([
        row("e1", Some("gold")),
        row("e3", Some("gold")),
        row("e6", Some("gold")),
        row("e2", Some("silver")),
        row("e5", Some("silver")),
        row("e3", Some("platinum")),
        row("e6", Some("platinum")),
        row("e7", None),
    ])
}

/// The late profile's dead letters (source offset, code), read from the profiles topic.
fn profile_dead_letters(s: &Setup) -> Vec<(String, String)> {
    let shown = s.show();
    let profiles = s.profiles_topic();
    let distinct: BTreeSet<(String, String)> = shown["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["headers"]["sluice.source.topic"].as_str() == Some(profiles.as_str()))
        .map(|d| {
            let h = |k: &str| d["headers"][k].as_str().unwrap().to_string();
            (h("sluice.source.offset"), h("sluice.error.code"))
        })
        .collect();
    distinct.into_iter().collect()
}

/// The analytics example's join end to end: the events are read first (no profile yet:
/// the events wait in the join state, saved with the table), then the profile updates in a
/// later run, matched against the saved events; the flush at the end emits the event that
/// matched nothing (user_4) with null profile columns. The main table holds the events
/// alone. A crash at points of the profiles' batches, then a run, gives the same outputs.
#[test]
fn the_analytics_example_joins_events_with_profiles_through_crashes() {
    let mut s = analytics("join");
    let events = events_file();
    let small = ("SLUICE_MAX_RECORDS", "4");
    let flush = ("SLUICE_AT_END", "flush");
    let both = |s: &Setup, crash: Option<&str>| {
        s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
        let out = s.run(&[small]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(joined_rows(s), [], "no profile yet");
        let profiles = profiles_file(s);
        let file = profiles.to_str().unwrap();
        sluice_tests::produce(
            &s.broker.bootstrap,
            &s.profiles_topic(),
            &["--partitions", "1", "--input", file],
        );
        if let Some(point) = crash {
            let out = s.run(&[small, flush, ("SLUICE_CRASH_AT", point)]);
            assert!(!out.status.success(), "{point}: {}", text(&out));
            assert!(String::from_utf8_lossy(&out.stderr).contains("SLUICE_CRASH_AT: aborting"));
        }
        let out = s.run(&[small, flush]);
        assert!(out.status.success(), "{}", text(&out));
        out
    };
    let out = both(&s, None);
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    // Batches 4 (four profiles) and 5 (the late one), then the flush.
    assert_eq!(
        progress
            .iter()
            .map(|p| p["input_rows"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [4, 1, 0]
    );
    assert_eq!(sum(&progress, "rows_late"), 1);
    assert_eq!(joined_rows(&s), expected_joined());
    assert_eq!(event_ids(&s.show()), ["e1", "e2", "e3", "e5", "e6", "e7"]);
    assert_eq!(
        profile_dead_letters(&s),
        [("4".to_string(), "late_event".to_string())]
    );
    // The state is bounded: the flush let every event go; a profile goes once the events'
    // watermark (10:33:30 after the flush) is an hour past it: 09:30 went, three stay.
    let state = &progress[2]["event_time"]["state"]["join:events-with-profiles"];
    assert_eq!(state["rows"], 3, "{state}");
    for (round, point) in [
        "after-state:4",
        "after-window-commit:4",
        "after-commit:4",
        "after-window-commit:6",
    ]
    .into_iter()
    .enumerate()
    {
        s.renew(&format!("join-crash{round}"));
        both(&s, Some(point));
        assert_eq!(joined_rows(&s), expected_joined(), "{point}");
        assert_eq!(
            profile_dead_letters(&s),
            [("4".to_string(), "late_event".to_string())],
            "{point}"
        );
    }
}
