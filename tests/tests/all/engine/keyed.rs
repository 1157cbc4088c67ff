//! A source declared keyed by a field (`[source] keyed-by`, issue 35): records placed by
//! their producer's partitioner run; a record in another partition stops the pipeline
//! before its batch commits, named, and a named partitioner is held to every record.

use serde_json::Value;
use sluice::kafka::partitioner::Partitioner;
use sluice::pipeline::PipelineError;

use super::event_time::{ANALYTICS, analytics_events};
use super::{Engine, TOPIC};

const PARTITIONS: i32 = 3;

/// The analytics pipeline with its source declared keyed by `user_id` (and `extra`).
fn keyed(name: &str, extra: &str) -> Engine {
    let toml = ANALYTICS.replace(
        "topics = [\"clicks\"]",
        &format!("topics = [\"clicks\"]\nkeyed-by = \"user_id\"\n{extra}"),
    );
    let engine = Engine::new(name, &toml);
    engine.log.recreate(TOPIC, PARTITIONS);
    engine
}

/// Appends `events` where `partitioner` puts their `user_id`.
fn place(engine: &Engine, events: &[String], partitioner: Partitioner) {
    let mut used = std::collections::BTreeSet::new();
    for event in events {
        let value: Value = serde_json::from_str(event).unwrap();
        let user = value["user_id"].as_str().unwrap();
        let partition = partitioner.partition(user.as_bytes(), PARTITIONS).unwrap();
        engine.log.append(TOPIC, partition, None, event.as_bytes());
        used.insert(partition);
    }
    assert!(used.len() > 1, "one partition proves nothing");
}

fn not_keyed(error: Result<impl std::fmt::Debug, PipelineError>) -> (String, String, String) {
    match error {
        Err(PipelineError::NotKeyed {
            topic,
            field,
            verdict,
            ..
        }) => (topic, field, verdict),
        other => panic!("not caught: {other:?}"),
    }
}

#[test]
fn a_source_keyed_as_declared_runs_and_a_misplaced_record_stops_it_uncommitted() {
    let engine = keyed("keyed", "");
    let events = analytics_events();
    place(&engine, &events, Partitioner::Murmur2);
    let summary = engine.run().unwrap();
    assert!(summary.rows_written > 0);
    let committed = engine.table_batch(None);

    // user_9 where neither partitioner puts it
    let home = [Partitioner::Murmur2, Partitioner::Crc32]
        .map(|p| p.partition(b"user_9", PARTITIONS).unwrap());
    let elsewhere = (0..PARTITIONS).find(|p| !home.contains(p)).unwrap();
    let stray = r#"{"event_id":"e9","user_id":"user_9","event_type":"page_view","timestamp":"2026-07-29T10:05:00.000Z","page":"/home"}"#;
    engine.log.append(TOPIC, elsewhere, None, stray.as_bytes());
    let (topic, field, verdict) = not_keyed(engine.run());
    assert_eq!((topic.as_str(), field.as_str()), (TOPIC, "user_id"));
    assert!(
        verdict.contains(&format!("key \"user_9\" in partition {elsewhere}")),
        "{verdict}"
    );
    assert_eq!(engine.table_batch(None), committed, "nothing of the batch");
    assert!(!engine.rows(None).iter().any(|r| r["event_id"] == "e9"));
}

#[test]
fn a_named_partitioner_is_held_to_every_record() {
    let events = analytics_events();
    let engine = keyed("keyed-crc32", "partitioner = \"crc32\"");
    place(&engine, &events, Partitioner::Crc32);
    assert!(engine.run().unwrap().rows_written > 0);

    let engine = keyed("keyed-not-crc32", "partitioner = \"crc32\"");
    place(&engine, &events, Partitioner::Murmur2);
    let (_, _, verdict) = not_keyed(engine.run());
    assert!(verdict.contains("partition crc32 gives"), "{verdict}");
    assert_eq!(engine.table_batch(None), None);
}
