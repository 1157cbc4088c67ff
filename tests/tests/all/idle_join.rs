//! A stream-stream join whose right topic is empty, against a real broker (tansu): the
//! analytics example reads two hours of events in seconds (a backfill) while its profiles
//! topic holds nothing. The profiles' side goes idle after `idle-timeout` and follows the
//! events' watermark, so the events leave the join state as left-outer rows (profile
//! columns null) instead of waiting forever.
//!
//! Found by an adversarial pass: with `user-profiles` created but empty and events at
//! 200/s for 200 s, the join held all 39 989 events and its table stayed empty.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::event_time::analytics;
use crate::event_time::join::join_table_rows;

/// Events 6 s apart over two hours of event time, twelve users.
const EVENTS: usize = 1_200;

fn events_file(s: &sluice_tests::fixture::Setup) -> std::path::PathBuf {
    let lines: String = (0..EVENTS)
        .map(|i| {
            let t = 6 * i; // seconds after 10:00
            let time = format!(
                "2026-07-29T{:02}:{:02}:{:02}.000Z",
                10 + t / 3600,
                t / 60 % 60,
                t % 60
            );
            format!(
                "{{\"event_id\":\"b{i}\",\"user_id\":\"user_{}\",\"event_type\":\"page_view\",\"timestamp\":\"{time}\",\"page\":\"/\"}}\n",
                i % 12
            )
        })
        .collect();
    std::fs::create_dir_all(&s.warehouse).unwrap();
    let path = s.warehouse.join("backfill.jsonl");
    std::fs::write(&path, lines).unwrap();
    path
}

/// The join's rows held after a batch.
fn join_state(progress: &Value) -> u64 {
    progress["event_time"]["state"]["join:events-with-profiles"]["rows"]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn an_empty_right_topic_holds_no_event_back_in_a_backfill() {
    let s = analytics("idle-join");
    let events = events_file(&s);
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
    let env = [
        ("SLUICE_TRIGGER", "interval"),
        ("SLUICE_INTERVAL", "1s"),
        ("SLUICE_MAX_RECORDS", "200"),
        ("SLUICE_IDLE_TIMEOUT", "2s"),
    ];
    let p = s.start(&["run"], &env);
    // Every event read, then the profiles' side idle: the held events leave.
    let (mut read, mut held, mut most) = (0, u64::MAX, 0);
    let deadline = Instant::now() + Duration::from_secs(120);
    while (read < EVENTS as u64 || held > 25) && Instant::now() < deadline {
        let Some(progress) = p.progress(Duration::from_secs(30)) else {
            break;
        };
        read += progress["input_rows"].as_u64().unwrap_or(0);
        held = join_state(&progress);
        most = most.max(held);
    }
    let (status, _, log) = p.terminate();
    assert!(status.success(), "{log}");
    eprintln!("idle join: {read} events read, join state at most {most} rows, {held} at the end");
    assert_eq!(read, EVENTS as u64, "{log}");
    // What stays is the last two minutes (the events' max-delay): 20 events, 6 s apart.
    assert!(held <= 25, "{held} rows still held: {log}");
    let rows = join_table_rows(&s);
    assert_eq!(rows.len() as u64 + held, EVENTS as u64, "every event once");
    assert!(
        rows.iter().all(|r| r["tier"].is_null()),
        "no profile to match"
    );
}
