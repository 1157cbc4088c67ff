//! Batches cut under the caps, refused records, `on-invalid = "fail"`, stopping, and a
//! position the source cannot honour.

use std::sync::atomic::AtomicBool;

use sluice::pipeline::PipelineError;
use sluice::pipeline::crash::Crash;
use sluice::source::SourceError;

use super::{Engine, PLAIN, TOPIC, plain};

#[test]
fn batches_are_cut_under_the_caps_and_resume_from_the_table() {
    let engine = Engine::new("caps", PLAIN);
    engine.append(&(0..10).map(plain).collect::<Vec<_>>());
    let summary = engine.run().unwrap();
    assert_eq!((summary.batches, summary.rows_written), (3, 10));
    assert_eq!(engine.table_batch(None), Some(3));
    // Nothing new: nothing committed.
    assert_eq!(engine.run().unwrap().batches, 0);
    engine.append(&[plain(10), plain(11)]);
    let summary = engine.run().unwrap();
    assert_eq!((summary.batches, summary.input_rows), (1, 2));
    assert_eq!(engine.rows(None).len(), 12);
    let mark = engine.table_batch(None);
    assert_eq!(mark, Some(4));
}

#[test]
fn a_byte_cap_cuts_batches_too() {
    let config = PLAIN.replace("max-records = 4", "max-bytes = \"60\"");
    let engine = Engine::new("bytes", &config);
    // 28 to 29 bytes each: two make a batch of at least 56 bytes, three pass 60.
    engine.append(&(0..6).map(plain).collect::<Vec<_>>());
    let summary = engine.run().unwrap();
    assert_eq!((summary.batches, summary.rows_written), (3, 6));
}

#[test]
fn refused_records_are_dead_lettered_with_the_reason() {
    let engine = Engine::new("refused", PLAIN);
    engine.append(&[
        plain(0),
        r#"{"id":"e1","n":"several"}"#.to_string(),
        r#"{"kind":"view"}"#.to_string(),
        "not json".to_string(),
    ]);
    let summary = engine.run().unwrap();
    assert_eq!((summary.rows_written, summary.rows_dead_lettered), (1, 3));
    let dead = engine.topic("dead");
    let codes: Vec<(&str, &str, &str)> = dead
        .iter()
        .map(|d| {
            (
                d.headers["sluice.source.offset"].as_str(),
                d.headers["sluice.error.stage"].as_str(),
                d.headers["sluice.error.code"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("1", "encode", "type_mismatch"),
            ("2", "encode", "missing_required"),
            ("3", "encode", "malformed_json")
        ]
    );
    assert_eq!(
        dead[0].value.as_deref(),
        Some(r#"{"id":"e1","n":"several"}"#)
    );
    assert_eq!(dead[0].headers["sluice.batch-id"], "1");
}

#[test]
fn on_invalid_fail_stops_without_committing_the_batch() {
    let config = PLAIN.replace("threads = 2", "threads = 2\non-invalid = \"fail\"");
    let engine = Engine::new("fail", &config);
    let mut values: Vec<String> = (0..6).map(plain).collect();
    values[5] = r#"{"id":"e5","n":"several"}"#.to_string();
    engine.append(&values);
    for _ in 0..2 {
        let error = engine.run().unwrap_err();
        let PipelineError::Invalid { position, code, .. } = &error else {
            panic!("{error}");
        };
        assert_eq!(
            (position.as_str(), code.as_str()),
            ("clicks/0@5", "type_mismatch")
        );
        // The first batch committed; the one with the refused event did not.
        assert_eq!(engine.table_batch(None), Some(1));
        assert_eq!(engine.rows(None).len(), 4);
    }
    assert!(engine.topic("dead").is_empty());
}

#[test]
fn a_stop_while_reading_abandons_the_batch() {
    let engine = Engine::new("stop", PLAIN);
    engine.append(&[plain(0)]);
    let mut pipeline = engine.open(Crash::Never).unwrap();
    let summary = pipeline.run(&AtomicBool::new(true)).unwrap();
    assert!(summary.stopped);
    assert_eq!(summary.batches, 0);
    assert_eq!(engine.table_batch(None), None);
}

#[test]
fn a_position_past_the_end_of_a_partition_is_refused() {
    let engine = Engine::new("stale", PLAIN);
    engine.append(&(0..5).map(plain).collect::<Vec<_>>());
    engine.run().unwrap();
    engine.log.recreate(TOPIC, 1);
    engine.append(&[plain(9)]);
    let error = engine.open(Crash::Never).unwrap_err();
    assert!(
        matches!(
            error,
            PipelineError::Source(SourceError::OffsetBeyondEnd {
                next: 5,
                end: 1,
                ..
            })
        ),
        "{error}"
    );
}
