//! Event-time state by partition: what a member's batch leaves behind when it stops
//! between its window commits and its table commit (frozen, killed, or both), and what
//! the partitions' next owners do about it, through the real loop and real Iceberg
//! tables with members as in-memory twins interleaved by crash-point hooks: every case
//! gives the outputs of one member.

use sluice::pipeline::crash::{Crash, CrashPoint};
use sluice::pipeline::{PipelineError, RunSummary};
use sluice::source::memory::Assignment;

use super::Engine;
use super::partitions::{alone, crash_alone, engine, member, outputs, report_windows};

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

/// Runs `member` until it ends or a minute has passed (fenced over and over, it would
/// never end; then it is stopped), and gives what its run gave, a panic included.
pub(super) fn run_bounded(
    member: &mut sluice::pipeline::Pipeline,
) -> std::thread::Result<Result<RunSummary, PipelineError>> {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let ran = scope.spawn(|| member.run(&stop));
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !ran.is_finished() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        ran.join()
    })
}

/// Runs `member` to the end, or stops it after a minute.
pub(super) fn run_for_a_minute(member: &mut sluice::pipeline::Pipeline) -> RunSummary {
    run_bounded(member).unwrap().unwrap()
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

/// A member held right after a batch that committed window rows, while another takes its
/// partitions and commits a batch: its next batch is fenced off before any window commit
/// of its own, and must not take back the rows of the batch before, which counted (found
/// by the chaos test, seed 34).
#[test]
fn a_batch_fenced_off_before_its_window_commits_takes_back_nothing_of_the_one_before() {
    use sluice::batch::trigger::Batches;
    let expected = alone("partitions-window-before");
    let engine = std::sync::Arc::new(engine("partitions-window-before"));
    let window_rows = |e: &Engine| e.rows(Some("minutes")).len() + e.rows(Some("sessions")).len();
    let (hook_engine, done) = (engine.clone(), std::sync::atomic::AtomicBool::new(false));
    let hook: sluice::pipeline::crash::Hook = std::sync::Arc::new(move |point, _| {
        use std::sync::atomic::Ordering::Relaxed;
        if point != CrashPoint::AfterCommit
            || window_rows(&hook_engine) == 0
            || done.swap(true, Relaxed)
        {
            return;
        }
        let mut b = hook_engine
            .open_member(&Assignment::new(&[0]), Crash::Never)
            .unwrap();
        let ends = b.end_offsets().unwrap();
        assert!(b.batch(&ends, &Default::default()).unwrap());
    });
    // Both given partition 0 alone: the batch fenced off has no partition left where it
    // started, so it would take back what it finds it committed last.
    let mut a = engine
        .open_member(&Assignment::new(&[0]), Crash::Hook(hook))
        .unwrap();
    let summary = a.run(&Default::default()).unwrap();
    assert_eq!(summary.batches_fenced, 1, "{summary:?}");
    member(&engine, &[1, 2], Crash::Never).unwrap();
    let got = outputs(&engine);
    report_windows(&got, &expected);
    assert_eq!(got, expected);
}
