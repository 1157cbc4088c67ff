//! Stage one of a repartition topic (issue 35) through the real loop: the members of a
//! group keyed by user send each event on time to a topic keyed by page, with markers of
//! the source partitions they read; a member that crashed after sending a batch and before
//! committing it has the batch sent again by the next, which stage two's memory of each
//! source partition takes once.

use std::collections::BTreeMap;

use sluice::event_time::extract::{Extractor, event_time};
use sluice::event_time::repartition::{Arrival, Seen};
use sluice::kafka::partitioner::Partitioner;
use sluice::pipeline::config::PipelineConfig;
use sluice::pipeline::config::repartition::RepartitionTopic;
use sluice::pipeline::crash::{Crash, CrashPoint};
use sluice::pipeline::{PipelineError, RunSummary};
use sluice::record::Header;
use sluice::sink::memory::MemoryTopics;
use sluice::sink::topic::TopicRecord;
use sluice::source::memory::Assignment;

use super::Engine;
use super::partitions::{BY_USER, PARTITIONS, engine, engine_with};

const TOPIC: &str = "by-user-pages-repartition";

/// A member owning every partition and feeding the repartition topic, run to the end or
/// to `crash`.
fn stage_one(engine: &Engine, crash: Crash) -> Result<RunSummary, PipelineError> {
    let every = Assignment::new(&[0, 1, 2]);
    let mut member = engine.open_member(&every, crash)?;
    let to = [RepartitionTopic {
        operator: "pages".into(),
        topic: TOPIC.into(),
        key: "page".into(),
        partitioner: Partitioner::Murmur2,
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
    let summary = stage_one(&engine, Crash::Never).unwrap();
    assert!(summary.repartition.sent > 0 && summary.repartition.markers_sent > 0);

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
            Arrival::Marker { origin, time, .. } => {
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

/// A 1-minute count per page: grouped by a field the source is not keyed by.
pub(super) const PAGES: &str = r#"
[[windows]]
group-by = ["page"]
name = "pages"
iceberg = { table = "pages" }
size = "1m"
aggregates = [{ name = "views", fn = "count" }, { name = "users", fn = "distinct-count", field = "user_id" }]
"#;

/// The window's rows without batch ids, sorted.
pub(super) fn pages(engine: &Engine) -> Vec<String> {
    let mut rows: Vec<String> = engine
        .rows(Some("pages"))
        .into_iter()
        .map(|mut row| {
            row.remove("batch_id");
            serde_json::Value::Object(row).to_string()
        })
        .collect();
    rows.sort();
    rows
}

/// The counts per page of one process reading every partition.
pub(super) fn pages_alone(name: &str) -> Vec<String> {
    let mut engine = engine_with(name, PAGES);
    let alone = (BY_USER.to_string() + PAGES).replace("scale-out = \"partitions\"\n", "");
    engine.config = PipelineConfig::parse(&alone, std::path::Path::new("alone.toml")).unwrap();
    engine
        .open(Crash::Never)
        .unwrap()
        .run(&Default::default())
        .unwrap();
    let rows = pages(&engine);
    assert!(rows.len() > 20, "{rows:?}");
    rows
}

/// A member of stage `stage` (1: feeding the repartition topic; 2: the window's, reading
/// it) that Kafka assigns `partitions` after it opened (a rebalance, which its stage
/// survives).
pub(super) fn stage_member(
    engine: &Engine,
    stage: u8,
    partitions: &[i32],
    crash: Crash,
) -> Result<sluice::pipeline::Pipeline, PipelineError> {
    let r = engine.config.repartitioned().pop().unwrap();
    let config = match stage {
        1 => engine.config.stage_one(),
        _ => engine.config.stage_two(&r),
    };
    let assignment = Assignment::new(partitions);
    let mut member = engine.open_member_as(&config, &assignment, crash)?;
    match stage {
        1 => member.repartition(&engine.topics, std::slice::from_ref(&r))?,
        _ => member.read_repartition("clicks")?,
    }
    assignment.set(partitions);
    Ok(member)
}

/// A member of stage `stage` ([`stage_member`]) run to its end.
fn run_stage(
    engine: &Engine,
    stage: u8,
    partitions: &[i32],
    crash: Crash,
) -> Result<RunSummary, PipelineError> {
    stage_member(engine, stage, partitions, crash)?.run(&Default::default())
}

/// Members of stage one and of the window's stage two, each owning `owns`, run in turn to
/// the end; first, for each of `crashes`, a member of that stage (1 or 2) owning every
/// partition that crashes at that point of that batch.
fn staged(engine: &Engine, owns: &[&[i32]], crashes: &[(u8, CrashPoint, u64)]) {
    let run =
        |stage: u8, partitions: &[i32], crash: Crash| run_stage(engine, stage, partitions, crash);
    for stage in [1, 2] {
        for &(_, point, batch) in crashes.iter().filter(|c| c.0 == stage) {
            let crashed = run(stage, &[0, 1, 2], Crash::Fail(point, batch));
            assert!(
                matches!(crashed, Err(PipelineError::Crashed { .. })),
                "{crashed:?}"
            );
        }
        for partitions in owns {
            run(stage, partitions, Crash::Never).unwrap();
        }
    }
}

#[test]
fn a_window_grouped_otherwise_counts_across_a_repartition_topic_as_one_process_does() {
    let expected = pages_alone("repartition-alone");
    let mut engine = engine_with("repartition-two", PAGES);
    engine.topics = MemoryTopics::with_log(&engine.log);
    staged(&engine, &[&[0, 1], &[2]], &[]);
    same(&pages(&engine), &expected);
    // Stage two committed its own marks to the table, and no rows.
    assert_eq!(engine.rows(None).len(), 72, "each event once");
    // A member of stage one frozen since sends its old events late: the next member of
    // stage two knows them (by what the table recorded) and drops them, neither counted
    // nor late.
    let r = engine.config.repartitioned().pop().unwrap();
    for p in 0..PARTITIONS {
        let old = engine.log.records(&r.topic, p);
        for record in old.iter().filter(|r| r.value.is_some()).take(3) {
            let (key, value) = (record.key.as_deref(), record.value.as_deref());
            let headers = record.headers.clone();
            engine.log.append_with(&r.topic, p, key, value, headers);
        }
    }
    let dead = engine.topic("dead").len();
    let mut two = engine
        .open_member_as(
            &engine.config.stage_two(&r),
            &Assignment::new(&[0, 1, 2]),
            Crash::Never,
        )
        .unwrap();
    two.read_repartition("clicks").unwrap();
    let summary = two.run(&Default::default()).unwrap();
    assert_eq!(summary.input_rows, 9, "{summary:?}");
    let read = summary.repartition;
    assert_eq!((read.taken, read.again, read.sent), (0, 9, 0), "{read:?}");
    assert_eq!(engine.topic("dead").len(), dead);
    same(&pages(&engine), &expected);
}

#[test]
fn crashes_in_either_stage_leave_the_counts_of_one_process() {
    let expected = pages_alone("repartition-crashes-alone");
    let resent = (1, CrashPoint::AfterDeadLetter, 4);
    for crashes in [
        vec![resent],
        vec![(2, CrashPoint::AfterState, 5)],
        vec![(2, CrashPoint::AfterWindowCommit, 6)],
        vec![(2, CrashPoint::AfterCommit, 3)],
        // Stage two's next members drop what stage one sent again by what the crashed
        // one committed.
        vec![resent, (2, CrashPoint::AfterCommit, 8)],
        vec![resent, (2, CrashPoint::AfterWindowCommit, 12)],
    ] {
        let mut engine = engine_with("repartition-crashes", PAGES);
        engine.topics = MemoryTopics::with_log(&engine.log);
        staged(&engine, &[&[1], &[0, 2]], &crashes);
        eprintln!("{crashes:?}");
        same(&pages(&engine), &expected);
    }
}

/// With `at-end = "flush"`, a member's stage two that reaches its end before another
/// member's stage one has read its source partitions to the end leaves the windows open
/// (flushed, they would find that member's events late); once stage one marked every
/// source partition ended, stage two flushes them, as one process does.
#[test]
fn stage_two_flushes_once_every_source_partition_ended() {
    let expected = pages_alone("repartition-ended-alone");
    let mut engine = engine_with("repartition-ended", PAGES);
    engine.topics = MemoryTopics::with_log(&engine.log);
    let run = |stage: u8, partitions: &[i32]| {
        run_stage(&engine, stage, partitions, Crash::Never).unwrap()
    };
    run(1, &[0, 1]);
    run(2, &[0, 1, 2]);
    let early = pages(&engine);
    assert!(early.len() < expected.len() / 2, "{early:#?}");
    run(1, &[2]);
    let last = run(2, &[0, 1, 2]);
    assert_eq!(
        (last.rows_late, last.rows_dead_lettered),
        (0, 0),
        "{last:?}"
    );
    same(&pages(&engine), &expected);
}

/// A replay of a batch that ended a run (its member killed before committing it) marks
/// no source partition ended: the member replaying it has not read its own partitions to
/// the end yet (marked ended, stage two would flush windows those partitions still fill).
#[test]
fn a_replayed_end_of_run_marks_no_partition_ended() {
    let expected = pages_alone("repartition-replayed-end-alone");
    let mut engine = engine_with("repartition-replayed-end", PAGES);
    engine.topics = MemoryTopics::with_log(&engine.log);
    let run =
        |stage: u8, partitions: &[i32], crash: Crash| run_stage(&engine, stage, partitions, crash);
    // Partition 1's 29 records take 8 batches; the 9th ends the run.
    let killed = run(1, &[1], Crash::Fail(CrashPoint::AfterDeadLetter, 9));
    assert!(
        matches!(killed, Err(PipelineError::Crashed { .. })),
        "{killed:?}"
    );
    let replayed = run(1, &[0, 1, 2], Crash::Fail(CrashPoint::AfterCommit, 9));
    assert!(
        matches!(replayed, Err(PipelineError::Crashed { .. })),
        "{replayed:?}"
    );
    let early = run(2, &[0, 1, 2], Crash::Never).unwrap();
    assert_eq!(early.window_rows, 0, "{early:?}");
    run(1, &[0, 1, 2], Crash::Never).unwrap();
    let last = run(2, &[0, 1, 2], Crash::Never).unwrap();
    assert_eq!(
        (last.rows_late, last.rows_dead_lettered),
        (0, 0),
        "{last:?}"
    );
    same(&pages(&engine), &expected);
}

/// `got` is `expected`, or the rows each lacks of the other are named.
pub(super) fn same(got: &[String], expected: &[String]) {
    let missing: Vec<&String> = expected.iter().filter(|r| !got.contains(r)).collect();
    let extra: Vec<&String> = got.iter().filter(|r| !expected.contains(r)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{} rows of {}; missing {missing:#?}; extra {extra:#?}",
        got.len(),
        expected.len()
    );
}
