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
fn member(engine: &Engine, owns: &[i32], crash: Crash) -> Result<RunSummary, PipelineError> {
    let assignment = Assignment::new(owns);
    engine
        .open_member(&assignment, crash)?
        .run(&Default::default())
}

/// Runs a member owning every partition that crashes at `point` of `batch`.
fn crash_alone(engine: &Engine, point: CrashPoint, batch: u64) {
    let crashed = member(engine, &[0, 1, 2], Crash::Fail(point, batch));
    assert!(
        matches!(crashed, Err(PipelineError::Crashed { .. })),
        "{crashed:?}"
    );
}

/// The outputs without the batch ids (each member numbers its batches its own way): the
/// tables' rows, and each window topic's last value by key (a key sent again must carry
/// the same value, but for the batch id).
fn outputs(engine: &Engine) -> Outputs {
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
fn report_windows(got: &Outputs, expected: &Outputs) {
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
fn alone(name: &str) -> Outputs {
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

/// A member owning every partition, held after checking the table's fence and before its
/// window commits (its first batch to get there) while another, `b`, takes its partitions
/// and commits a batch of one record (which closes no window); with `killed`, stopped
/// (a panic) once that batch is fenced off, before it takes its window commits back.
fn held_member(engine: &Engine, killed: bool) -> sluice::pipeline::Pipeline {
    use sluice::batch::trigger::Batches;
    let every = Assignment::new(&[0, 1, 2]);
    let mut small = engine.config.clone();
    small.trigger.max_records = 1;
    let b = engine.open_member_as(&small, &every, Crash::Never).unwrap();
    let b = std::sync::Mutex::new(Some(b));
    let hook: sluice::pipeline::crash::Hook = std::sync::Arc::new(move |point, _| match point {
        CrashPoint::AfterFenceCheck => {
            if let Some(mut b) = b.lock().unwrap().take() {
                let ends = b.end_offsets().unwrap();
                assert!(b.batch(&ends, &Default::default()).unwrap());
            }
        }
        CrashPoint::BeforeUndo if killed => panic!("killed before taking its commits back"),
        _ => {}
    });
    engine.open_member(&every, Crash::Hook(hook)).unwrap()
}

/// Runs `member` to the end, or stops it after a minute (fenced over and over, it would
/// never end).
fn run_for_a_minute(member: &mut sluice::pipeline::Pipeline) -> RunSummary {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let ran = scope.spawn(|| member.run(&stop));
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !ran.is_finished() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        ran.join().unwrap().unwrap()
    })
}

/// How many snapshots of the window table `name` took a commit back.
fn undone(engine: &Engine, name: &str) -> usize {
    let table = engine.table(Some(name));
    let snapshots = table.table().metadata().snapshots();
    snapshots
        .filter(|s| {
            s.summary()
                .additional_properties
                .contains_key("sluice.undone")
        })
        .count()
}

/// A member held after checking the table's fence and before its window commits, while
/// another takes its partitions and commits a batch that commits one window table
/// (`sessions`) and not the other: the held member's `minutes` commit lands, `sessions`
/// fences its batch off, and it takes its `minutes` rows back (the other member emits
/// those windows again, later). Left there, they would fence every later batch of the
/// partition off `minutes`.
#[test]
fn a_member_frozen_before_its_window_commit_adds_no_rows_once_its_partitions_moved_on() {
    let expected = alone("partitions-window-fence");
    let engine = engine("partitions-window-fence");
    crash_alone(&engine, CrashPoint::AfterCommit, 3);
    let mut a = held_member(&engine, false);
    let summary = run_for_a_minute(&mut a);
    assert!(!summary.stopped, "fenced over and over: {summary:?}");
    assert_eq!(summary.batches_fenced, 1, "{summary:?}");
    // a's commit to `minutes` landed, then `sessions` fenced the batch off: a took its
    // minutes rows back.
    assert_eq!(undone(&engine, "minutes"), 1);
    assert_eq!(outputs(&engine), expected);
}

/// A member held after its window commits and before the table's, while another takes its
/// partitions: the other replays the held batch (the window tables hold it already) and
/// goes on. The held member, fenced off the table when it wakes, must not take back window
/// rows that now count.
#[test]
fn a_member_frozen_after_its_window_commit_leaves_the_rows_another_replayed() {
    let expected = alone("partitions-window-replayed");
    let engine = std::sync::Arc::new(engine("partitions-window-replayed"));
    let every = Assignment::new(&[0, 1, 2]);
    let window_rows = |e: &Engine| e.rows(Some("minutes")).len() + e.rows(Some("sessions")).len();
    let held = std::sync::atomic::AtomicBool::new(false);
    let hook_engine = std::sync::Arc::clone(&engine);
    let hook: sluice::pipeline::crash::Hook = std::sync::Arc::new(move |point, _| {
        if point != CrashPoint::AfterWindowCommit || window_rows(&hook_engine) == 0 {
            return;
        }
        if held.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        // b takes every partition now: it replays the held batch, then reads to the end.
        let b = hook_engine.open_member(&Assignment::new(&[0, 1, 2]), Crash::Never);
        b.unwrap().run(&Default::default()).unwrap();
    });
    let summary = engine
        .open_member(&every, Crash::Hook(hook))
        .unwrap()
        .run(&Default::default())
        .unwrap();
    assert_eq!(summary.batches_fenced, 1, "{summary:?}");
    let got = outputs(&engine);
    report_windows(&got, &expected);
    assert_eq!(got, expected);
}

/// As above, but the held member is killed right after its batch is fenced off, before it
/// takes its `minutes` rows back: the partitions' next owner, fenced off `minutes` by
/// them, makes sure that batch can never count and takes them back itself.
#[test]
fn a_window_commit_left_by_a_member_killed_before_taking_it_back_is_taken_back_by_the_next_owner() {
    let expected = alone("partitions-window-left");
    let engine = engine("partitions-window-left");
    crash_alone(&engine, CrashPoint::AfterCommit, 3);
    let mut a = held_member(&engine, true);
    let killed = std::thread::scope(|scope| scope.spawn(|| a.run(&Default::default())).join());
    assert!(killed.is_err(), "a was not stopped before taking back");
    drop(a);
    assert_eq!(undone(&engine, "minutes"), 0);
    // The next owner is fenced off `minutes` by a's rows until it takes them back.
    let every = Assignment::new(&[0, 1, 2]);
    let mut c = engine.open_member(&every, Crash::Never).unwrap();
    let summary = run_for_a_minute(&mut c);
    assert!(!summary.stopped, "fenced over and over: {summary:?}");
    assert_eq!(undone(&engine, "minutes"), 1);
    let got = outputs(&engine);
    report_windows(&got, &expected);
    assert_eq!(got, expected);
}

/// How the owner of a batch whose window rows landed stops before its table commit.
#[derive(Clone, Copy, PartialEq)]
enum Left {
    /// Killed.
    Killed,
    /// Held while the next owner runs a batch.
    Held,
    /// Killed, then the batch replayed by a member given some of its partitions.
    ReplayedInPart,
}

/// A member, `c`, takes the partitions (restores their tasks) while their owner `a` still
/// runs; `a` plans a batch and commits its window rows, then stops before its table
/// commit as `left` says. `c`'s batch replaces the plan's pointers (they are at the same
/// offsets), so nobody can replay `a`'s batch there:
/// - where the table records its partitions where it started, `a` alone could still
///   commit it: `c` claims the partitions (which fences `a` off), then takes the rows
///   back. Held, `c` runs one batch meanwhile and `a` wakes to find its batch fenced off
///   by the claim; killed, `c` runs to the end;
/// - replayed in part (`c` owns partition 0 alone, and a member given 1 and 2 after `a`
///   was killed replayed the batch there), the batch counts: `c` replays it on 0 too.
fn left_by_an_owner(name: &str, left: Left) {
    use sluice::batch::trigger::Batches;
    type Member = std::sync::Arc<std::sync::Mutex<Option<sluice::pipeline::Pipeline>>>;
    let expected = alone(name);
    let engine = std::sync::Arc::new(engine(name));
    let window_rows = |e: &Engine| e.rows(Some("minutes")).len() + e.rows(Some("sessions")).len();
    let c: Member = Default::default();
    let rows_before = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (hook_engine, hook_c, before) = (engine.clone(), c.clone(), rows_before.clone());
    let hook: sluice::pipeline::crash::Hook = std::sync::Arc::new(move |point, _| {
        use std::sync::atomic::Ordering::Relaxed;
        match point {
            CrashPoint::AfterCommit if before.load(Relaxed) != usize::MAX => {
                // c restores the tasks as this commit left them. Held, `a`'s batch is one
                // `c` reads less of (its rows then differ), and `c` stops after its window
                // commits (the table records the partitions where `a`'s batch started).
                let owns: &[i32] = match left {
                    Left::ReplayedInPart => &[0],
                    _ => &[0, 1, 2],
                };
                let mut config = hook_engine.config.clone();
                let mut crash = Crash::Never;
                if left == Left::Held {
                    config.trigger.max_records = 2;
                    crash = Crash::Fail(CrashPoint::AfterWindowCommit, 2);
                }
                let member = hook_engine.open_member_as(&config, &Assignment::new(owns), crash);
                *hook_c.lock().unwrap() = Some(member.unwrap());
                before.store(window_rows(&hook_engine), Relaxed);
            }
            CrashPoint::AfterWindowCommit
                if before.load(Relaxed) != usize::MAX
                    && window_rows(&hook_engine) > before.load(Relaxed) =>
            {
                if left != Left::Held {
                    panic!("killed after its window commit");
                }
                before.store(usize::MAX, Relaxed);
                let mut c = hook_c.lock().unwrap().take().unwrap();
                let ends = c.end_offsets().unwrap();
                let stopped = c.batch(&ends, &Default::default());
                assert!(
                    matches!(stopped, Err(PipelineError::Crashed { .. })),
                    "{stopped:?}"
                );
            }
            _ => {}
        }
    });
    let every = Assignment::new(&[0, 1, 2]);
    let mut a = engine.open_member(&every, Crash::Hook(hook)).unwrap();
    let ran = std::thread::scope(|scope| scope.spawn(|| a.run(&Default::default())).join());
    if left == Left::Held {
        let summary = ran.unwrap().unwrap();
        assert_eq!(summary.batches_fenced, 1, "{summary:?}");
    } else {
        assert!(ran.is_err(), "a was not killed after a window commit");
        drop(a);
        if left == Left::ReplayedInPart {
            member(&engine, &[1, 2], Crash::Never).unwrap();
        }
        let mut c = c.lock().unwrap().take().expect("c took the partitions");
        let summary = run_for_a_minute(&mut c);
        assert!(!summary.stopped, "fenced over and over: {summary:?}");
    }
    let table = engine.table(None);
    let claims = table.table().metadata().snapshots().filter(|s| {
        let props = &s.summary().additional_properties;
        let planned = props.get("sluice.planned-batch").map(String::as_str);
        props.contains_key("sluice.claims") && planned == Some("0")
    });
    let (claimed, taken_back) = match left {
        Left::ReplayedInPart => (0, 0),
        _ => (1, 2),
    };
    assert_eq!(claims.count(), claimed);
    let undone = undone(&engine, "minutes") + undone(&engine, "sessions");
    assert_eq!(undone, taken_back);
    let got = outputs(&engine);
    report_windows(&got, &expected);
    assert_eq!(got, expected);
}

#[test]
fn a_window_commit_left_by_a_killed_owner_whose_partitions_stand_is_taken_back_once_claimed() {
    left_by_an_owner("partitions-window-claimed", Left::Killed);
}

#[test]
fn an_owner_held_after_its_window_commit_is_fenced_off_by_the_claim_of_its_partitions() {
    left_by_an_owner("partitions-window-claim-held", Left::Held);
}

#[test]
fn a_batch_left_by_a_killed_owner_and_replayed_in_part_is_replayed_where_its_plan_was_replaced() {
    left_by_an_owner("partitions-window-replayed-in-part", Left::ReplayedInPart);
}

/// A member killed after its window commits; the partitions' next owner killed while it
/// replays that batch (its state saved, so its own pointers name the replay); the owner
/// after that replays the replay: it must still be the same batch (its key), which the
/// window tables hold already.
#[test]
fn a_replay_killed_midway_is_replayed_as_the_batch_it_replays() {
    let expected = alone("partitions-replay-replayed");
    let engine = std::sync::Arc::new(engine("partitions-replay-replayed"));
    let window_rows = |e: &Engine| e.rows(Some("minutes")).len() + e.rows(Some("sessions")).len();
    let before = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (hook_engine, hook_before) = (engine.clone(), before.clone());
    let hook: sluice::pipeline::crash::Hook = std::sync::Arc::new(move |point, _| {
        use std::sync::atomic::Ordering::Relaxed;
        match point {
            CrashPoint::AfterCommit => hook_before.store(window_rows(&hook_engine), Relaxed),
            CrashPoint::AfterWindowCommit
                if window_rows(&hook_engine) > hook_before.load(Relaxed) =>
            {
                panic!("killed after its window commit")
            }
            _ => {}
        }
    });
    let killed = |owns: &[i32], crash: Crash| {
        let mut member = engine.open_member(&Assignment::new(owns), crash).unwrap();
        let ran =
            std::thread::scope(|scope| scope.spawn(|| member.run(&Default::default())).join());
        assert!(ran.is_err(), "not killed");
    };
    killed(&[0, 1, 2], Crash::Hook(hook));
    // The next owner of partition 0 replays that batch there first, and is killed once its
    // state is saved.
    let replaying: sluice::pipeline::crash::Hook = std::sync::Arc::new(|point, _| {
        if point == CrashPoint::AfterState {
            panic!("killed while replaying");
        }
    });
    killed(&[0], Crash::Hook(replaying));
    let mut last = engine
        .open_member(&Assignment::new(&[0]), Crash::Never)
        .unwrap();
    let summary = run_for_a_minute(&mut last);
    assert!(!summary.stopped, "fenced over and over: {summary:?}");
    member(&engine, &[1, 2], Crash::Never).unwrap();
    let got = outputs(&engine);
    report_windows(&got, &expected);
    assert_eq!(got, expected);
}
