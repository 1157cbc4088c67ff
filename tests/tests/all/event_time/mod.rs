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

pub(crate) mod join;
mod windows;
