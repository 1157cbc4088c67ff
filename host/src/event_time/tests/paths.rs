//! The operators reading nested fields by dotted path: event time, dedup keys, a window's
//! group-by and aggregated fields, a join's keys and fields.

use std::time::Duration;

use super::*;
use crate::event_time::config::WindowKafkaConfig;
use crate::event_time::join::RightFields;
use crate::event_time::join::config::{JoinField, JoinKind};

/// Event time in `meta.ts`, dedup on `meta.id`, a 1-minute window by `context.device.os`
/// summing `item.price`.
fn operators() -> EventTime {
    let config = EventTimeConfig {
        field: "meta.ts".into(),
        ..config()
    };
    let window = WindowConfig {
        name: "by-os".into(),
        size: Some(Duration::from_secs(60)),
        gap: None,
        slide: None,
        group_by: vec!["context.device.os".into()],
        aggregates: vec![
            AggregateConfig {
                name: "n".into(),
                function: Function::Count,
                field: None,
            },
            AggregateConfig {
                name: "revenue".into(),
                function: Function::Sum,
                field: Some("item.price".into()),
            },
        ],
        emit: EmitMode::OnWindowClose,
        kafka: None,
        iceberg: None,
    };
    let dedup = DedupConfig {
        keys: vec!["meta.id".into()],
    };
    EventTime::new(&config, Some(&dedup), &[window])
}

fn event(op: &EventTime, id: &str, secs: i64, os: &str, price: f64) -> Fields {
    let json = format!(
        r#"{{"meta":{{"id":"{id}","ts":{}}},"context":{{"page":"/","device":{{"os":"{os}"}}}},"item":{{"price":{price}}},"id":"same"}}"#,
        secs * 1000
    );
    op.fields(Some(json.as_bytes())).unwrap()
}

#[test]
fn event_time_dedup_and_a_window_read_nested_fields() {
    let mut op = operators();
    let batch = [
        event(&op, "a", 10, "ios", 2.5),
        event(&op, "b", 20, "android", 1.0),
        event(&op, "a", 10, "ios", 2.5), // the same `meta.id`: a duplicate
        event(&op, "c", 30, "ios", 4.0),
    ];
    assert_eq!(batch[0].time, Micros(10 * S));
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
    let out = op.process([], Millis(0), true);
    let mut rows = out.emitted[0].clone();
    window::sort_rows(&mut rows);
    let rows: Vec<(Option<String>, i64, f64)> = rows
        .iter()
        .map(|r| {
            (
                r.key[0].clone(),
                r.values[0].as_i64().unwrap(),
                r.values[1].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (Some("android".into()), 1, 1.0),
            (Some("ios".into()), 2, 6.5)
        ]
    );
}

#[test]
fn a_missing_nested_event_time_or_key_is_reported_or_grouped_as_null() {
    let op = operators();
    // `meta` without `ts`, or `meta` not an object: no event time, named by its path.
    for json in [r#"{"meta":{"id":"a"}}"#, r#"{"meta":"10"}"#] {
        let e = op.fields(Some(json.as_bytes())).unwrap_err();
        assert_eq!(e.code, "missing_event_time", "{json}");
        assert_eq!(e.field.as_deref(), Some("meta.ts"));
        assert!(e.message.contains("`meta.ts`"), "{}", e.message);
    }
    // No `meta.id`: not deduplicated (the top-level `id` is another field).
    let f = op
        .fields(Some(br#"{"meta":{"ts":1000},"id":"x"}"#))
        .unwrap();
    assert_eq!(f.dedup_key, None);
}

/// A join of events on `ctx.user` with records on `profile.uid`, their event times in
/// `meta.ts` and `at.ts`.
fn join() -> JoinConfig {
    JoinConfig {
        name: "j".into(),
        right_topic: "profiles".into(),
        right_time_field: "at.ts".into(),
        right_max_delay: Duration::from_secs(5),
        on: vec!["ctx.user".into()],
        right_on: Some(vec!["profile.uid".into()]),
        kind: JoinKind::Inner,
        before: Duration::from_secs(60),
        after: Duration::ZERO,
        left_fields: vec![JoinField::Name("meta.id".into())],
        right_fields: vec![JoinField::Name("profile.tier".into())],
        max_rows: 1_000,
        kafka: Some(WindowKafkaConfig {
            topic: "out".into(),
            properties: Default::default(),
        }),
        iceberg: None,
    }
}

#[test]
fn a_join_matches_on_nested_keys_and_reads_nested_fields() {
    let config = EventTimeConfig {
        field: "meta.ts".into(),
        ..config()
    };
    let join = join();
    let mut et = EventTime::new(&config, None, &[]).with_joins(std::slice::from_ref(&join));
    let left = |id: &str, secs: i64, user: &str| {
        let json = format!(
            r#"{{"meta":{{"id":"{id}","ts":{}}},"ctx":{{"user":"{user}"}},"user":"wrong"}}"#,
            secs * 1000
        );
        et.fields(Some(json.as_bytes())).unwrap()
    };
    let right = |secs: i64, uid: &str, tier: &str| -> RightFields {
        let json = format!(
            r#"{{"at":{{"ts":{}}},"profile":{{"uid":"{uid}","tier":"{tier}"}},"uid":"wrong"}}"#,
            secs * 1000
        );
        et.right_fields(0, Some(json.as_bytes())).unwrap()
    };
    let records = [right(100, "u1", "gold"), right(100, "u2", "silver")];
    let events = [left("e1", 130, "u1"), left("e2", 130, "u3")];
    let pairs: Vec<(&str, &RightFields)> = records.iter().map(|r| ("profiles/0", r)).collect();
    let out = et.process_joined(
        events.iter().map(|f| ("clicks/0", f)),
        &[pairs],
        Millis(0),
        false,
    );
    let rows: Vec<(Option<&str>, Option<&str>)> = out.joined[0]
        .iter()
        .map(|r| {
            let right = r.right.as_ref().unwrap();
            (
                r.left.values().next().unwrap(),
                right.values().next().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, [(Some(r#""e1""#), Some(r#""gold""#))]);
    // A right record without its nested key is dead-lettered as missing it.
    let e = et
        .right_fields(0, Some(br#"{"at":{"ts":1000},"uid":"u1"}"#))
        .unwrap_err();
    assert_eq!(e.code, "missing_join_key");
    assert!(e.message.contains("profile.uid"), "{}", e.message);
    // The output columns are the paths' last segments.
    let columns: Vec<String> = join.columns(&[]).into_iter().map(|c| c.name).collect();
    assert_eq!(columns, ["id", "tier", "batch_id"]);
}
