//! Batches cut under the caps, refused records, `on-invalid = "fail"`, stopping, and a
//! position the source cannot honour.

use std::sync::atomic::AtomicBool;

use sluice::pipeline::PipelineError;
use sluice::pipeline::crash::Crash;
use sluice::source::SourceError;
use sluice::source::kafka::{OnDataLoss, StartingOffsets};

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
fn a_recreated_topic_is_refused_shorter_or_longer() {
    let engine = Engine::new("stale", PLAIN);
    engine.append(&(0..5).map(plain).collect::<Vec<_>>());
    engine.run().unwrap();
    engine.log.recreate(TOPIC, 1);
    engine.append(&[plain(9)]);
    let error = engine.open(Crash::Never).unwrap_err();
    assert!(
        error.to_string().contains("it holds no record at offset 4"),
        "{error}"
    );
    // Longer than the old one: the end offset alone would not tell.
    engine.append(&(10..18).map(plain).collect::<Vec<_>>());
    let error = engine.open(Crash::Never).unwrap_err();
    assert!(
        matches!(
            &error,
            PipelineError::Source(SourceError::NotTheSameTopic { found, .. })
                if found.contains("the record at offset 4 is another one")
        ),
        "{error}"
    );
    assert_eq!(engine.rows(None).len(), 5);
}

#[test]
fn a_recreated_topic_is_read_from_its_start_when_told_to_continue() {
    let mut engine = Engine::new("stale-continue", PLAIN);
    engine.append(&(0..5).map(plain).collect::<Vec<_>>());
    engine.run().unwrap();
    engine.log.recreate(TOPIC, 1);
    engine.append(&(10..13).map(plain).collect::<Vec<_>>());
    engine.config.source.on_data_loss = OnDataLoss::Continue;
    let summary = engine.run().unwrap();
    assert_eq!(summary.input_rows, 3);
    assert_eq!(engine.rows(None).len(), 8);
    let props = engine.mark_properties();
    assert!(props["sluice.data-loss"].contains("clicks/0"), "{props:?}");
}

#[test]
fn latest_is_anchored_once_so_records_produced_while_down_are_read() {
    let mut engine = Engine::new("latest", PLAIN);
    engine.config.source.starting_offsets = StartingOffsets::Latest;
    engine.append(&(0..3).map(plain).collect::<Vec<_>>());
    assert_eq!(engine.run().unwrap().input_rows, 0);
    assert_eq!(engine.table_batch(None), Some(0), "the anchor");
    engine.append(&(3..8).map(plain).collect::<Vec<_>>());
    assert_eq!(engine.run().unwrap().input_rows, 5);
    assert_eq!(engine.rows(None).len(), 5);
}

#[test]
fn a_transient_fault_is_retried_until_it_clears() {
    let engine = Engine::new("fault", PLAIN);
    engine.append(&(0..6).map(plain).collect::<Vec<_>>());
    engine.append(&["not json"]);
    engine.topics.set_failing("dead", true);
    let topics = engine.topics.clone();
    let healer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(2500));
        topics.set_failing("dead", false);
    });
    let summary = engine.run().unwrap();
    healer.join().unwrap();
    assert!(summary.faults_retried >= 1, "{summary:?}");
    assert_eq!(engine.rows(None).len(), 6);
    assert_eq!(engine.topic("dead").len(), 1);
}

#[test]
fn a_fault_that_outlasts_the_budget_ends_the_run() {
    let mut engine = Engine::new("fault-budget", PLAIN);
    engine.config.pipeline.fault_budget = std::time::Duration::from_secs(2);
    engine.append(&["not json"]);
    engine.topics.set_failing("dead", true);
    let error = engine.run().unwrap_err();
    assert!(error.to_string().contains("not acknowledged"), "{error}");
    assert_eq!(engine.table_batch(None), None);
}
