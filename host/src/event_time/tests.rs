//! The operators together: late events, duplicates, closing windows, the future
//! horizon, saved state and flushing.

use std::time::Duration;

use super::config::{AggregateConfig, AtEnd, EmitMode, Function, LateData};
use super::*;

const S: i64 = 1_000_000;

/// Event time in the field `ts`, 10 s of delay, 5 s of idleness, late events dropped.
pub(super) fn config() -> EventTimeConfig {
    EventTimeConfig {
        field: "ts".into(),
        max_delay: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(5),
        max_future: Duration::from_secs(3600),
        late: LateData::Drop,
        late_topic: None,
        late_topic_properties: Default::default(),
        at_end: AtEnd::Keep,
        scale_out: Default::default(),
    }
}

pub(super) fn operators(emit: EmitMode) -> EventTime {
    let config = config();
    let window = WindowConfig {
        name: "counts".into(),
        size: Some(Duration::from_secs(60)),
        gap: None,
        slide: None,
        group_by: vec!["type".into()],
        aggregates: vec![AggregateConfig {
            name: "count".into(),
            function: Function::Count,
            field: None,
        }],
        emit,
        kafka: None,
        iceberg: None,
    };
    EventTime::new(
        &config,
        Some(&DedupConfig {
            keys: vec!["id".into()],
        }),
        &[window],
    )
}

pub(super) fn event(op: &EventTime, id: &str, secs: i64, ty: &str) -> Fields {
    op.fields(Some(
        format!(r#"{{"id":"{id}","ts":{},"type":"{ty}"}}"#, secs * 1000).as_bytes(),
    ))
    .unwrap()
}

fn counts(outcome: &EventTimeOutcome) -> Vec<(i64, String, i64)> {
    let mut rows = outcome.emitted[0].clone();
    window::sort_rows(&mut rows);
    rows.iter()
        .map(|r| {
            (
                r.start.0 / S,
                r.key[0].clone().unwrap(),
                r.values[0].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn late_duplicates_and_closing() {
    let mut op = operators(EmitMode::OnWindowClose);
    let batch = [
        event(&op, "a", 10, "view"),
        event(&op, "b", 50, "view"),
        event(&op, "a", 10, "view"), // duplicate in the same batch
        event(&op, "c", 65, "buy"),
    ];
    let out = op.process(batch.iter().map(|f| ("t/0", f)), Millis(0), false);
    assert_eq!(
        out.verdicts,
        [
            Arrival::OnTime,
            Arrival::OnTime,
            Arrival::Duplicate,
            Arrival::OnTime
        ]
    );
    assert_eq!(out.watermark, Some(Micros(55 * S)));
    assert!(out.emitted[0].is_empty());
    // 40 s is late (behind 55 s); 58 s is on time; "c" again is a duplicate.
    let batch = [
        event(&op, "d", 40, "view"),
        event(&op, "e", 58, "view"),
        event(&op, "c", 65, "buy"),
        event(&op, "f", 75, "view"),
    ];
    let out = op.process(batch.iter().map(|f| ("t/0", f)), Millis(1_000), false);
    assert_eq!(
        out.verdicts,
        [
            Arrival::Late,
            Arrival::OnTime,
            Arrival::Duplicate,
            Arrival::OnTime
        ]
    );
    assert_eq!((out.late, out.duplicates), (1, 1));
    assert_eq!(out.watermark, Some(Micros(65 * S)));
    assert_eq!(counts(&out), vec![(0, "view".into(), 3)]);
    // Dedup keys behind the watermark (65 s) are forgotten: a, b, e.
    assert_eq!(op.state_sizes()["dedup"].rows, 2);
    assert!(!op.due(Millis(1_000), false));
    // Input stops: after the idle timeout the watermark moves with processing time.
    assert!(!op.due(Millis(6_000), false));
    assert!(op.due(Millis(6_000 + 55_000), false)); // 75 - 10 + 55 = 120: closes [60, 120)
    let out = op.process([], Millis(6_000 + 55_000), false);
    assert_eq!(
        counts(&out),
        vec![(60, "buy".into(), 1), (60, "view".into(), 1)]
    );
}

#[test]
fn events_too_far_in_the_future_never_move_the_watermark() {
    let mut op = operators(EmitMode::OnWindowClose);
    // Processing time 100 s, max-future 1 h: the horizon is 3 700 s.
    let now = Millis(100_000);
    let batch = [
        event(&op, "a", 50, "view"),
        event(&op, "x", 3_701, "view"),
        event(&op, "y", 3_700, "view"),
    ];
    let out = op.process(batch.iter().map(|f| ("t/0", f)), now, false);
    assert_eq!(
        out.verdicts,
        [Arrival::OnTime, Arrival::Future, Arrival::OnTime]
    );
    assert_eq!(out.future, 1);
    assert_eq!(out.watermark, Some(Micros(3_690 * S)));
    let mut op = operators(EmitMode::OnWindowClose);
    let batch = [
        event(&op, "x", 9_999_999, "view"),
        event(&op, "a", 50, "view"),
    ];
    let out = op.process(batch.iter().map(|f| ("t/0", f)), now, false);
    assert_eq!(out.verdicts, [Arrival::Future, Arrival::OnTime]);
    assert_eq!(out.watermark, Some(Micros(40 * S)));
    // Later events are judged against the real watermark, not the future one.
    let batch = [event(&op, "b", 45, "view")];
    let out = op.process(batch.iter().map(|f| ("t/0", f)), now, false);
    assert_eq!(out.verdicts, [Arrival::OnTime]);
}

#[test]
fn state_round_trips_and_flush_closes_everything() {
    let mut op = operators(EmitMode::OnWindowClose);
    let batch = [event(&op, "a", 10, "view"), event(&op, "b", 30, "view")];
    op.process(batch.iter().map(|f| ("t/0", f)), Millis(0), false);
    let json = serde_json::to_string(&op.save_ref()).unwrap();
    let mut again = operators(EmitMode::OnWindowClose);
    again.restore(serde_json::from_str(&json).unwrap());
    let saved = |et: &EventTime| {
        let json = serde_json::to_string(&et.save_ref()).unwrap();
        serde_json::from_str::<SavedState>(&json).unwrap().sorted()
    };
    assert_eq!(saved(&again), saved(&op));
    assert!(again.due(Millis(0), true));
    let out = again.process([], Millis(0), true);
    assert_eq!(counts(&out), vec![(0, "view".into(), 2)]);
    assert_eq!(out.watermark, Some(Micros(60 * S)));
    assert!(!again.due(Millis(0), true));
}

#[test]
fn events_without_a_dedup_key_are_not_deduplicated() {
    let mut op = operators(EmitMode::OnWindowClose);
    let anonymous = op.fields(Some(br#"{"ts":1000,"type":"view"}"#)).unwrap();
    assert_eq!(anonymous.dedup_key, None);
    let out = op.process([("t/0", &anonymous), ("t/0", &anonymous)], Millis(0), false);
    assert_eq!(out.verdicts, [Arrival::OnTime, Arrival::OnTime]);
    assert_eq!(out.duplicates, 0);
}

#[test]
fn bad_event_times_are_reported() {
    let op = operators(EmitMode::Update);
    let e = op.fields(Some(br#"{"id":"x"}"#)).unwrap_err();
    assert_eq!(e.code, "missing_event_time");
    let e = op.fields(Some(br#"{"ts":"soon"}"#)).unwrap_err();
    assert_eq!(e.code, "invalid_event_time");
    let e = op.fields(Some(b"nope")).unwrap_err();
    assert_eq!(e.code, "malformed_json");
}

mod paths;
mod split;
mod tasks;
