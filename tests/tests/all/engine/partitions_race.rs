//! Two members that take the same step from one partition's state: a member given every
//! partition frozen after processing a batch and before saving it, while a member given
//! some of them restores their state from the table (nothing of the frozen batch saved
//! yet) and plans its own batch from the same offsets. Where both read nothing (the last
//! batch of a run, which closes every open window), offsets do not tell them apart: the
//! state they built on does, and one alone lands its window rows. At batches in the middle
//! of the run (both read the same records), the offsets they read past fence the loser.
//! Each run checks that both batches passed their fence checks (the race happened).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sluice::pipeline::crash::{Crash, CrashPoint, Hook};
use sluice::source::memory::Assignment;

use super::Engine;
use super::partitions::{alone, engine, outputs, report_windows};
use super::partitions_left::{run_bounded, run_for_a_minute};

/// Words the test and its members' threads pass: how far each has come, how far each may go.
#[derive(Default)]
struct Gate {
    said: Mutex<Vec<&'static str>>,
    changed: Condvar,
}

impl Gate {
    fn say(&self, word: &'static str) {
        self.said.lock().unwrap().push(word);
        self.changed.notify_all();
    }

    /// Waits until one of `words` was said; returns it.
    fn wait(&self, words: &[&'static str]) -> &'static str {
        let until = Instant::now() + Duration::from_secs(90);
        let mut said = self.said.lock().unwrap();
        loop {
            if let Some(word) = words.iter().find(|w| said.contains(w)) {
                return word;
            }
            let left = until.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "stuck waiting for {words:?}; said {said:?}"
            );
            said = self.changed.wait_timeout(said, left).unwrap().0;
        }
    }
}

/// Which of the two saved batches goes on first.
#[derive(Debug, Clone, Copy)]
enum First {
    /// The other member commits its batch whole; then the frozen one goes on.
    Other,
    /// The frozen member goes on; then the other.
    Frozen,
}

/// The frozen member's hook: frozen before saving its `nth` batch, held again after its
/// fence check, then killed at its next window commit if `kill`.
fn frozen(gate: &Arc<Gate>, nth: usize, kill: bool) -> Hook {
    let (gate, passed) = (gate.clone(), AtomicUsize::new(0));
    let (holding, released) = (AtomicBool::new(false), AtomicBool::new(false));
    Arc::new(move |at, _| {
        if at == CrashPoint::BeforeState && passed.fetch_add(1, Ordering::SeqCst) + 1 == nth {
            gate.say("frozen");
            gate.wait(&["save"]);
            holding.store(true, Ordering::SeqCst);
        }
        if at == CrashPoint::AfterFenceCheck && holding.swap(false, Ordering::SeqCst) {
            gate.say("checked");
            gate.wait(&["frozen-go"]);
            released.store(true, Ordering::SeqCst);
        }
        if kill && at == CrashPoint::AfterWindowCommit && released.load(Ordering::SeqCst) {
            panic!("killed after its window commit");
        }
    })
}

/// The other member's hook: held before saving its first batch if `saves_last` (until
/// the frozen member saved), and after its first fence check (its batch saved).
fn other(gate: &Arc<Gate>, saves_last: bool) -> Hook {
    let (gate, first, checked) = (
        gate.clone(),
        AtomicBool::new(saves_last),
        AtomicBool::new(true),
    );
    Arc::new(move |at, _| {
        if at == CrashPoint::BeforeState && first.swap(false, Ordering::SeqCst) {
            gate.say("processed");
            gate.wait(&["other-save"]);
        }
        if at == CrashPoint::AfterFenceCheck && checked.swap(false, Ordering::SeqCst) {
            gate.say("planned");
            gate.wait(&["other-go"]);
        }
    })
}

/// Runs a member given `owns` in a thread; says `done` when it ends or is killed.
fn spawn(
    engine: &Arc<Engine>,
    gate: &Arc<Gate>,
    owns: &'static [i32],
    hook: Hook,
    done: &'static str,
) -> std::thread::JoinHandle<()> {
    let (engine, gate) = (engine.clone(), gate.clone());
    std::thread::spawn(move || {
        let opened = engine.open_member(&Assignment::new(owns), Crash::Hook(hook));
        if let Ok(mut member) = opened {
            let _ = run_bounded(&mut member);
        }
        gate.say(done);
    })
}

/// How many batches one member given every partition runs.
fn batches() -> usize {
    let engine = engine("partitions-race-count");
    let passed = Arc::new(AtomicUsize::new(0));
    let counted = passed.clone();
    let hook: Hook = Arc::new(move |at, _| {
        if at == CrashPoint::BeforeState {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut member = (engine.open_member(&Assignment::new(&[0, 1, 2]), Crash::Hook(hook))).unwrap();
    run_for_a_minute(&mut member);
    passed.load(Ordering::SeqCst)
}

/// One run of the race.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// The frozen member's batch frozen.
    nth: usize,
    /// The other member's partitions.
    owns: &'static [i32],
    /// Whether the other member saves its batch after the frozen one (else before).
    saves_last: bool,
    /// Which goes on first once both saved.
    first: First,
    /// Whether the frozen member is killed after its window commits.
    kill: bool,
}

impl Run {
    fn new(nth: usize, owns: &'static [i32], saves_last: bool, first: First, kill: bool) -> Run {
        Run {
            nth,
            owns,
            saves_last,
            first,
            kill,
        }
    }

    /// The run's name, for its engine's files and a failure.
    fn name(&self) -> String {
        let owns: String = self.owns.iter().map(i32::to_string).collect();
        let (saves_last, first, kill) = (self.saves_last, self.first, self.kill);
        format!(
            "partitions-race-{}-{owns}-{saves_last}-{first:?}-{kill}",
            self.nth
        )
    }
}

/// One run: the frozen member (every partition) at its `nth` batch, the other given
/// `owns`, `first` going on first; then a member given every partition to the end.
/// Returns what the tables hold.
fn race(name: &str, run: Run) -> super::Outputs {
    let Run {
        nth,
        owns,
        saves_last,
        first,
        kill,
    } = run;
    let engine = Arc::new(engine(name));
    let gate = Arc::new(Gate::default());
    let frozen_member = spawn(
        &engine,
        &gate,
        &[0, 1, 2],
        frozen(&gate, nth, kill),
        "frozen-done",
    );
    assert_eq!(gate.wait(&["frozen", "frozen-done"]), "frozen", "{name}");
    let other_member = spawn(&engine, &gate, owns, other(&gate, saves_last), "other-done");
    if saves_last {
        gate.wait(&["processed", "other-done"]);
        gate.say("save");
        gate.wait(&["checked", "frozen-done"]);
        gate.say("other-save");
        gate.wait(&["planned", "other-done"]);
    } else {
        gate.wait(&["planned", "other-done"]);
        gate.say("save");
        gate.wait(&["checked", "frozen-done"]);
    }
    match first {
        First::Other => {
            gate.say("other-go");
            gate.wait(&["other-done"]);
            gate.say("frozen-go");
            gate.wait(&["frozen-done"]);
        }
        First::Frozen => {
            gate.say("frozen-go");
            gate.wait(&["frozen-done"]);
            gate.say("other-go");
            gate.wait(&["other-done"]);
        }
    }
    frozen_member.join().unwrap();
    other_member.join().unwrap();
    let said = gate.said.lock().unwrap().clone();
    assert!(
        said.contains(&"checked") && said.contains(&"planned"),
        "{name}: both batches did not pass their fence checks: {said:?}"
    );
    let every = Assignment::new(&[0, 1, 2]);
    let mut last = engine.open_member(&every, Crash::Never).unwrap();
    let summary = run_for_a_minute(&mut last);
    assert!(!summary.stopped, "{name}: fenced over and over");
    outputs(&engine)
}

/// The runs CI makes: the last batch (every order), the next-to-last, the second and one
/// in the middle.
fn some(last: usize) -> Vec<Run> {
    let run = Run::new;
    vec![
        run(last, &[0][..], false, First::Other, false),
        run(last, &[0], false, First::Other, true),
        run(last, &[0, 1], false, First::Other, true),
        run(last, &[0], false, First::Frozen, false),
        run(last, &[0], false, First::Frozen, true),
        run(last, &[0, 1], false, First::Frozen, true),
        run(last, &[0], true, First::Frozen, true),
        run(last, &[0, 1], true, First::Frozen, true),
        run(last, &[0, 1], true, First::Other, false),
        run(last - 1, &[0], false, First::Other, true),
        run(last - 1, &[0, 1], true, First::Frozen, true),
        run(2, &[0], false, First::Other, true),
        run(2, &[0, 1], true, First::Frozen, true),
        run(2, &[0], true, First::Other, false),
        run(last / 2, &[0], true, First::Frozen, false),
        run(last / 2, &[0, 1], false, First::Other, true),
        run(last / 2, &[1, 2], true, First::Frozen, true),
    ]
}

/// Every run: each batch, each set of partitions for the other member, each order
/// (`SLUICE_RACE=all`, a search of about 20 minutes).
fn every(last: usize) -> Vec<Run> {
    let sets: [&'static [i32]; 7] = [&[0], &[1], &[2], &[0, 1], &[0, 2], &[1, 2], &[0, 1, 2]];
    let mut runs = Vec::new();
    for nth in 1..=last {
        for owns in sets {
            for saves_last in [false, true] {
                for first in [First::Other, First::Frozen] {
                    runs.extend(
                        [false, true].map(|kill| Run::new(nth, owns, saves_last, first, kill)),
                    );
                }
            }
        }
    }
    runs
}

#[test]
fn two_members_that_take_one_step_from_one_state_land_it_once() {
    let expected = alone("partitions-race");
    let last = batches();
    assert!(last > 4, "{last} batches");
    let runs = match std::env::var("SLUICE_RACE").as_deref() {
        Ok("all") => every(last),
        _ => some(last),
    };
    let mut failed = Vec::new();
    for run in runs {
        let name = run.name();
        let got = race(&name, run);
        if got != expected {
            report_windows(&got, &expected);
            failed.push(name);
        }
    }
    assert!(failed.is_empty(), "not what one member writes: {failed:?}");
}
