//! Event-time state by partition (`scale-out = "partitions"`, issue 35) through the real
//! loop and real Iceberg tables, with members of a group as in-memory twins owning
//! partitions that the test moves: one member, two members, partitions moved between
//! batches, and a member crashed between its window commit and its table commit whose
//! batch two others replay, all give the outputs of one member.

use sluice::event_time::state::files::old_state_files;
use sluice::kafka::partitioner::Partitioner;
use sluice::pipeline::crash::{Crash, CrashPoint};
use sluice::pipeline::{PipelineError, RunSummary};
use sluice::source::memory::Assignment;

use super::{Engine, Outputs, TOPIC, pipeline_file, sorted_json};

pub(super) const PARTITIONS: i32 = 3;

/// Users' events keyed by `user_id`: dedup by event and user, 1-minute counts per user and
/// 2-minute sessions per user, to topics and tables; 4 records per batch, a 30-second
/// delay, open windows flushed at the end.
pub(super) const BY_USER: &str = pipeline_file!(
    "by-user",
    r#"
[sink]
warehouse = "warehouse"
namespace = "web"
table = "events"
columns = [
  { name = "event_id", type = "string", required = true },
  { name = "user_id", type = "string" },
  { name = "page", type = "string" },
  { name = "timestamp", type = "timestamptz", required = true },
]

[dead-letter]
topic = "dead"

[event-time]
field = "timestamp"
max-delay = "30s"
late = "dead-letter"
at-end = "flush"
scale-out = "partitions"

[dedup]
keys = ["event_id", "user_id"]

[[windows]]
name = "minutes"
size = "1m"
group-by = ["user_id"]
aggregates = [{ name = "views", fn = "count" }, { name = "pages", fn = "distinct-count", field = "page" }]
kafka = { topic = "minutes" }
iceberg = { table = "minutes" }

[[windows]]
name = "sessions"
gap = "2m"
group-by = ["user_id"]
aggregates = [{ name = "views", fn = "count" }]
kafka = { topic = "sessions" }
iceberg = { table = "sessions" }
"#
);

/// A new engine over the same events: 8 users, 72 events 10 to 40 seconds apart per user
/// (in time order in each partition, so none is late however batches fall), now and then
/// one sent twice in a row; each in the partition murmur2 gives its user.
pub(super) fn engine(name: &str) -> Engine {
    engine_with(name, "")
}

/// [`engine`], with `more` added to the pipeline file.
pub(super) fn engine_with(name: &str, more: &str) -> Engine {
    let toml = (BY_USER.to_string() + more).replace(
        "topics = [\"clicks\"]",
        "topics = [\"clicks\"]\nmode = \"group\"\nkeyed-by = \"user_id\"",
    );
    let engine = Engine::new(name, &toml);
    engine.log.recreate(TOPIC, PARTITIONS);
    for i in 0..72u32 {
        let user = format!("user_{}", i % 8);
        let secs = 600 + i * 17 + (i % 8) * 3;
        let time = format!("2026-07-29T10:{:02}:{:02}Z", secs / 60 % 60, secs % 60);
        let event = format!(
            r#"{{"event_id":"e{i}","user_id":"{user}","page":"/p{}","timestamp":"{time}"}}"#,
            i % 5
        );
        let p = Partitioner::Murmur2
            .partition(user.as_bytes(), PARTITIONS)
            .unwrap();
        engine.log.append(TOPIC, p, None, event.as_bytes());
        if i % 11 == 0 {
            engine.log.append(TOPIC, p, None, event.as_bytes());
        }
    }
    engine
}

/// Runs a member owning `assignment` to the end (or to `crash`).
pub(super) fn member(
    engine: &Engine,
    owns: &[i32],
    crash: Crash,
) -> Result<RunSummary, PipelineError> {
    let assignment = Assignment::new(owns);
    engine
        .open_member(&assignment, crash)?
        .run(&Default::default())
}

/// Runs a member owning every partition that crashes at `point` of `batch`.
pub(super) fn crash_alone(engine: &Engine, point: CrashPoint, batch: u64) {
    let crashed = member(engine, &[0, 1, 2], Crash::Fail(point, batch));
    assert!(
        matches!(crashed, Err(PipelineError::Crashed { .. })),
        "{crashed:?}"
    );
}

/// The outputs without the batch ids (each member numbers its batches its own way): the
/// tables' rows, and each window topic's last value by key (a key sent again must carry
/// the same value, but for the batch id).
pub(super) fn outputs(engine: &Engine) -> Outputs {
    let strip = |row: &String| {
        let mut value: serde_json::Value = serde_json::from_str(row).unwrap();
        if let Some(o) = value.as_object_mut() {
            o.remove("batch_id");
        }
        value.to_string()
    };
    let mut windows = std::collections::BTreeMap::new();
    for w in &engine.config.windows {
        let mut table: Vec<String> = sorted_json(engine.rows(Some(&w.name)))
            .iter()
            .map(strip)
            .collect();
        table.sort();
        let topic = w.kafka.as_ref().map(|k| {
            let mut by_key = std::collections::BTreeMap::new();
            for r in engine.topic(&k.topic) {
                let value = strip(r.value.as_ref().unwrap());
                if let Some(before) = by_key.insert(r.key.clone().unwrap(), value.clone()) {
                    assert_eq!(before, value, "a key sent again with another value");
                }
            }
            by_key
        });
        windows.insert(w.name.clone(), (Some(table), topic));
    }
    Outputs {
        rows: sorted_json(engine.rows(None)),
        dead: Default::default(),
        windows,
    }
}

/// Prints each window table's rows missing from `got` and extra in it, beside `expected`.
pub(super) fn report_windows(got: &Outputs, expected: &Outputs) {
    for (name, (table, _)) in &got.windows {
        let (want, _) = &expected.windows[name];
        let (table, want) = (table.as_ref().unwrap(), want.as_ref().unwrap());
        let missing: Vec<_> = want.iter().filter(|r| !table.contains(r)).collect();
        let extra: Vec<_> = table.iter().filter(|r| !want.contains(r)).collect();
        eprintln!(
            "{name}: {} of {}; missing {missing:?}; extra {extra:?}",
            table.len(),
            want.len()
        );
    }
}

/// One member owning every partition.
pub(super) fn alone(name: &str) -> Outputs {
    let engine = engine(&format!("{name}-alone"));
    let summary = member(&engine, &[0, 1, 2], Crash::Never).unwrap();
    assert!(summary.rows_deduplicated > 0 && summary.window_rows > 0);
    assert_eq!(summary.rows_late, 0);
    outputs(&engine)
}

#[test]
fn two_members_give_the_outputs_of_one() {
    let expected = alone("partitions-two");
    assert!(expected.windows["sessions"].0.as_ref().unwrap().len() >= 8);
    let engine = engine("partitions-two");
    member(&engine, &[0, 1], Crash::Never).unwrap();
    member(&engine, &[2], Crash::Never).unwrap();
    assert_eq!(outputs(&engine), expected);
}

#[test]
fn partitions_moved_between_batches_take_their_state_along() {
    let expected = alone("partitions-moved");
    let engine = engine("partitions-moved");
    crash_alone(&engine, CrashPoint::AfterCommit, 4);
    member(&engine, &[1], Crash::Never).unwrap();
    member(&engine, &[0, 2], Crash::Never).unwrap();
    assert_eq!(outputs(&engine), expected);
}

#[test]
fn a_batch_crashed_after_its_window_commit_is_replayed_once_by_its_partitions_new_owners() {
    let expected = alone("partitions-crashed");
    let crashed = |point, batch| {
        let engine = engine("partitions-crashed");
        crash_alone(&engine, point, batch);
        engine
    };
    let window_rows = |e: &Engine| e.rows(Some("minutes")).len() + e.rows(Some("sessions")).len();
    let mut windows_held = 0;
    for batch in [4, 6, 8, 10] {
        let before = window_rows(&crashed(CrashPoint::AfterCommit, batch - 1));
        for point in [CrashPoint::AfterState, CrashPoint::AfterWindowCommit] {
            let engine = crashed(point, batch);
            if window_rows(&engine) > before {
                windows_held += 1; // the window tables hold rows of the batch; the table not
            }
            member(&engine, &[0, 1], Crash::Never).unwrap();
            member(&engine, &[2], Crash::Never).unwrap();
            assert_eq!(outputs(&engine), expected, "{point:?} of batch {batch}");
        }
    }
    assert!(
        windows_held > 0,
        "no crash fell between a window commit and the table's"
    );
}

#[test]
fn old_plans_are_dropped_and_maintain_keeps_every_partitions_state() {
    let expected = alone("partitions-maintain");
    let engine = engine("partitions-maintain");
    member(&engine, &[0, 1], Crash::Never).unwrap();
    member(&engine, &[2], Crash::Never).unwrap();
    let table = engine.table(None);
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    // Members delete the pointers to the plans of batches they committed past.
    let plans = engine
        .dir
        .join("warehouse/web/_sluice-state/events/by-user/plans");
    let pointers = std::fs::read_dir(&plans).unwrap().count();
    assert!(pointers <= PARTITIONS as usize, "{pointers} pointers");
    let old = old_state_files(&table, later).unwrap();
    table.delete_files(&old).unwrap();
    // A member given every partition restores each one's state from what is left.
    member(&engine, &[0, 1, 2], Crash::Never).unwrap();
    assert_eq!(outputs(&engine), expected);
}

#[test]
fn a_member_whose_batch_is_fenced_off_a_partition_replays_the_rest_of_it() {
    let expected = alone("partitions-overlap");
    let engine = engine("partitions-overlap");
    crash_alone(&engine, CrashPoint::AfterCommit, 3);
    // a opens owning 0 and 2 (positioned where the table says), then b takes 2 to the end
    // first: a's first batch is fenced off 2 and goes on with 0.
    let both = Assignment::new(&[0, 2]);
    let mut a = engine.open_member(&both, Crash::Never).unwrap();
    member(&engine, &[2], Crash::Never).unwrap();
    let summary = a.run(&Default::default()).unwrap();
    assert_eq!(summary.batches_fenced, 1);
    member(&engine, &[1], Crash::Never).unwrap();
    let got = outputs(&engine);
    report_windows(&got, &expected);
    assert_eq!(got, expected);
}

#[test]
fn a_member_frozen_while_another_committed_its_partitions_state_is_fenced_off() {
    use sluice::batch::trigger::Batches;
    let expected = alone("partitions-frozen");
    let engine = engine("partitions-frozen");
    crash_alone(&engine, CrashPoint::AfterCommit, 3);
    // a restores every partition's task and freezes; b takes them all and commits a batch
    // of no records (open windows flushed), reading nothing further: the offsets stand.
    let every = Assignment::new(&[0, 1, 2]);
    let mut a = engine.open_member(&every, Crash::Never).unwrap();
    let mut b = engine.open_member(&every, Crash::Never).unwrap();
    let table = engine.table(None);
    let before = table.last_mark("by-user").unwrap().unwrap();
    b.tick(true).unwrap();
    drop(b);
    let table = engine.table(None);
    let after = table.last_mark("by-user").unwrap().unwrap();
    assert!(after.batch_id > before.batch_id, "b committed nothing");
    assert_eq!(after.offsets, before.offsets);
    // a wakes: its first batch builds on state another member replaced, so it is fenced
    // off (its state files would have been recorded over b's), and a goes on from b's.
    let summary = a.run(&Default::default()).unwrap();
    assert_eq!(summary.batches_fenced, 1);
    // Each event once: in the table, or late (b's flush closed every window).
    let rows = outputs(&engine).rows;
    assert!(rows.iter().all(|r| expected.rows.contains(r)));
    assert_eq!(
        rows.len() as u64 + summary.rows_late,
        expected.rows.len() as u64
    );
    // The state the table names is whole.
    member(&engine, &[0, 1, 2], Crash::Never).unwrap();
}
