//! Stage one of a repartition topic (issue 35) through the real loop: the members of a
//! group keyed by user send each event on time to a topic keyed by page, with markers of
//! the source partitions they read; a member that crashed after sending a batch and before
//! committing it has the batch sent again by the next, which stage two's memory of each
//! source partition takes once.

use std::collections::BTreeMap;

use sluice::event_time::extract::{Extractor, event_time};
use sluice::event_time::repartition::{Arrival, Seen};
use sluice::kafka::partitioner::Partitioner;
use sluice::pipeline::crash::{Crash, CrashPoint};
use sluice::pipeline::repartition::Repartition;
use sluice::pipeline::{PipelineError, RunSummary};
use sluice::record::Header;
use sluice::sink::memory::MemoryTopics;
use sluice::sink::topic::TopicRecord;
use sluice::source::memory::Assignment;

use super::Engine;
use super::partitions::{PARTITIONS, engine};

const TOPIC: &str = "by-user-pages-repartition";

/// A member owning every partition and feeding the repartition topic, run to the end or
/// to `crash`.
fn stage_one(engine: &Engine, crash: Crash) -> Result<RunSummary, PipelineError> {
    let every = Assignment::new(&[0, 1, 2]);
    let mut member = engine.open_member(&every, crash)?;
    let to = [Repartition {
        topic: TOPIC.into(),
        key: "page".into(),
    }];
    member.repartition(&engine.topics, &to)?;
    member.run(&Default::default())
}

fn headers(record: &TopicRecord) -> Vec<Header> {
    let each = record.headers.iter().map(|(name, value)| Header {
        name: name.clone(),
        value: Some(value.as_bytes().to_vec()),
    });
    each.collect()
}

fn field(value: &str, name: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(value).unwrap();
    value[name].as_str().unwrap().to_string()
}

#[test]
fn stage_one_sends_each_event_on_time_once_with_its_sources_markers() {
    let mut engine = engine("repartition-one");
    engine.topics = MemoryTopics::with_log(&engine.log);
    let crashed = stage_one(&engine, Crash::Fail(CrashPoint::AfterDeadLetter, 4));
    assert!(
        matches!(crashed, Err(PipelineError::Crashed { .. })),
        "{crashed:?}"
    );
    stage_one(&engine, Crash::Never).unwrap();

    let sent = engine.topic(TOPIC);
    let mut seen: BTreeMap<i32, Seen> = BTreeMap::new();
    let mut taken = Vec::new();
    let mut again = 0;
    // partition of the topic → source partition → newest event time its markers said.
    let mut marked: BTreeMap<i32, BTreeMap<String, i64>> = BTreeMap::new();
    for record in &sent {
        match seen
            .entry(record.partition)
            .or_default()
            .admit(&headers(record))
        {
            Arrival::Event(_) => {
                let value = record.value.as_deref().unwrap();
                let page = field(value, "page");
                assert_eq!(record.key.as_deref(), Some(page.as_str()));
                let placed = Partitioner::Murmur2.partition(page.as_bytes(), PARTITIONS);
                assert_eq!(Some(record.partition), placed, "{value}");
                taken.push(field(value, "event_id"));
            }
            Arrival::Again(_) => again += 1,
            Arrival::Marker { origin, time } => {
                let newest = marked.entry(record.partition).or_default();
                let time = time.unwrap().0;
                let at = newest.entry(origin.partition).or_insert(time);
                *at = (*at).max(time);
            }
            Arrival::Foreign(why) => panic!("{why}"),
        }
    }
    // Each event of the table once (duplicates and late events stay behind), whatever
    // was sent twice.
    taken.sort();
    assert_eq!(taken, engine.sorted_column("event_id"));
    assert!(again > 0, "the crashed batch was not sent again");
    // Every partition of the topic heard of every source partition, up to its newest
    // event.
    let newest = newest_per_partition(&engine);
    for p in 0..PARTITIONS {
        assert_eq!(marked.get(&p), Some(&newest), "partition {p}");
    }
}

/// The newest event time of each source partition, in microseconds.
fn newest_per_partition(engine: &Engine) -> BTreeMap<String, i64> {
    let mut newest = BTreeMap::new();
    for p in 0..PARTITIONS {
        let records = engine.log.records("clicks", p);
        let read = Extractor::new(["timestamp"]);
        let times = records.iter().map(|r| {
            let values = read.read(r.value.as_deref()).unwrap();
            event_time("timestamp", values[0].as_ref()).unwrap().0
        });
        newest.insert(format!("clicks/{p}"), times.max().unwrap());
    }
    newest
}
