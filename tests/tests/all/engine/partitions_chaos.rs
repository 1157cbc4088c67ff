//! Event-time state by partition under crashes at random points: members given random
//! sets of partitions one after another, each killed (a panic, its pipeline dropped
//! unfinished) at a random point of a random batch, then one member given every partition
//! to the end, write what one member writes; and members held at a random point while
//! another, given some of their partitions, runs (a member frozen past its session), then
//! going on or killed. The seeds are fixed: a failure names the one to run again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice::pipeline::crash::{Crash, CrashPoint, Hook};
use sluice::source::memory::Assignment;

use super::partitions::{alone, engine, outputs};
use super::partitions_left::{run_bounded, run_for_a_minute};
use super::{Engine, Outputs};

/// Seeds that found a defect once, run every time.
const FOUND: [u64; 5] = [34, 189, 320, 335, 611];

/// Seeds from here on may stop a batch at [`CrashPoint::BeforeState`] too: a point added
/// after the seeds below found what they found, so that each still runs what it ran.
pub(super) const WITH_BEFORE_STATE: u64 = 1001;

/// The random runs of each kind: 8 of each point list and `found` (the seeds that found a
/// defect once), or `SLUICE_CHAOS_SEEDS` (a count, to search further, or `from..to` to run
/// some again; from [`WITH_BEFORE_STATE`] on, with `before-state`).
pub(super) fn seeds(found: &[u64]) -> Vec<u64> {
    let asked = std::env::var("SLUICE_CHAOS_SEEDS").unwrap_or_default();
    if let Some((from, to)) = asked.split_once("..")
        && let (Ok(from), Ok(to)) = (from.parse(), to.parse())
    {
        return (from..=to).collect();
    }
    if let Ok(count) = asked.parse() {
        return (1..=count).collect();
    }
    (1..=8)
        .chain(WITH_BEFORE_STATE..WITH_BEFORE_STATE + 8)
        .chain(found.iter().copied())
        .collect()
}

/// Members killed in each run, before the last one.
const KILLED: usize = 4;

/// Members held in each run, before the last one.
const HELD: usize = 3;

/// Where a member can be killed or held: every point a batch of this pipeline passes.
const POINTS: [CrashPoint; 8] = [
    CrashPoint::AfterState,
    CrashPoint::AfterWrite,
    CrashPoint::AfterDeadLetter,
    CrashPoint::AfterFenceCheck,
    CrashPoint::AfterWindowCommit,
    CrashPoint::BeforeUndo,
    CrashPoint::AfterCommit,
    CrashPoint::BeforeState,
];

/// xorshift64*: enough randomness for choosing, the same on every machine.
pub(super) struct Random {
    state: u64,
    /// The points it chooses from.
    points: &'static [CrashPoint],
}

impl Random {
    /// The choices of `seed`, spread by `spread` (one per kind of run).
    pub(super) fn new(seed: u64, spread: u64) -> Random {
        Random {
            state: seed.wrapping_mul(spread),
            // `before-state` is the last of them.
            points: if seed < WITH_BEFORE_STATE {
                &POINTS[..POINTS.len() - 1]
            } else {
                &POINTS
            },
        }
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        (self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }

    /// A non-empty set of the partitions.
    pub(super) fn partitions(&mut self) -> Vec<i32> {
        loop {
            let set: Vec<i32> = (0..3).filter(|_| self.below(2) == 1).collect();
            if !set.is_empty() {
                return set;
            }
        }
    }

    /// A point, and the how-many-th time a batch passes it counts.
    pub(super) fn point(&mut self) -> (CrashPoint, usize) {
        (
            self.points[self.below(self.points.len())],
            1 + self.below(4),
        )
    }
}

/// Kills the member the `nth` time a batch passes `point`.
pub(super) fn killed_at((point, nth): (CrashPoint, usize)) -> Crash {
    let passed = Arc::new(AtomicUsize::new(0));
    Crash::Hook(Arc::new(move |at, _| {
        if at == point && passed.fetch_add(1, Ordering::Relaxed) + 1 == nth {
            panic!("killed at {} ({nth})", point.name());
        }
    }))
}

/// Runs a member given `owns` until it ends or is killed; fenced over and over for a
/// minute (a livelock), it panics, naming `run` (the seed and what happened).
fn run_or_die(engine: &Engine, owns: &[i32], crash: Crash, run: &str) {
    let mut member = engine.open_member(&Assignment::new(owns), crash).unwrap();
    match run_bounded(&mut member) {
        Ok(Ok(summary)) => assert!(
            !summary.stopped,
            "{run}: {owns:?} fenced over and over: {summary:?}"
        ),
        Ok(Err(error)) => panic!("{run}: {owns:?} failed: {error}"),
        Err(_killed) => {}
    }
}

/// Runs a member given every partition to the end (fenced over and over, it stops after a
/// minute), then compares what was written with `expected`.
fn last_member_writes(engine: &Engine, expected: &Outputs, seed: u64, story: &[String]) {
    let every = Assignment::new(&[0, 1, 2]);
    let mut last = engine.open_member(&every, Crash::Never).unwrap();
    let summary = run_for_a_minute(&mut last);
    assert!(
        !summary.stopped,
        "seed {seed}: fenced over and over: {story:?}"
    );
    let got = outputs(engine);
    if got != *expected {
        super::partitions::report_windows(&got, expected);
        let missing = expected
            .rows
            .iter()
            .filter(|r| !got.rows.contains(r))
            .count();
        let extra = got
            .rows
            .iter()
            .filter(|r| !expected.rows.contains(r))
            .count();
        panic!("seed {seed}: rows missing {missing}, extra {extra}: {story:?}");
    }
}

#[test]
fn members_killed_at_random_points_write_what_one_member_writes() {
    let expected = alone("partitions-chaos");
    for seed in seeds(&FOUND) {
        let mut random = Random::new(seed, 0x9E37_79B9_7F4A_7C15);
        let engine = engine(&format!("partitions-chaos-{seed}"));
        let mut story = Vec::new();
        for _ in 0..KILLED {
            let (owns, (point, nth)) = (random.partitions(), random.point());
            story.push(format!("{owns:?} killed at {} ({nth})", point.name()));
            let run = format!("killed, seed {seed}: {story:?}");
            run_or_die(&engine, &owns, killed_at((point, nth)), &run);
        }
        last_member_writes(&engine, &expected, seed, &story);
    }
}

/// A member given `a` held the `nth` time a batch passes `held` while a member given `b`
/// runs (killed as `b_dies` says), then going on (killed as `a_dies` says).
struct Held {
    a: Vec<i32>,
    held: (CrashPoint, usize),
    b: Vec<i32>,
    b_dies: Option<(CrashPoint, usize)>,
    a_dies: Option<(CrashPoint, usize)>,
}

impl Held {
    fn random(random: &mut Random) -> Held {
        Held {
            a: random.partitions(),
            held: random.point(),
            b: random.partitions(),
            b_dies: (random.below(3) > 0).then(|| random.point()),
            a_dies: (random.below(2) > 0).then(|| random.point()),
        }
    }

    fn story(&self) -> String {
        let name = |d: Option<(CrashPoint, usize)>| d.map(|(p, n)| (p.name(), n));
        format!(
            "{:?} held at {:?} while {:?} runs (killed at {:?}), then killed at {:?}",
            self.a,
            name(Some(self.held)),
            self.b,
            name(self.b_dies),
            name(self.a_dies)
        )
    }

    /// The held member's hook; `run` names the run in a failure.
    fn hook(&self, engine: &Arc<Engine>, run: String) -> Hook {
        let (engine, b, b_dies) = (engine.clone(), self.b.clone(), self.b_dies);
        held_while(self.held, self.a_dies, move || {
            let crash = b_dies.map_or(Crash::Never, killed_at);
            run_or_die(&engine, &b, crash, &run);
        })
    }
}

/// A hook that holds its member the `nth` time a batch passes `point` while `meanwhile`
/// runs, then lets it go on, killed as `dies` says.
pub(super) fn held_while(
    (point, nth): (CrashPoint, usize),
    dies: Option<(CrashPoint, usize)>,
    meanwhile: impl Fn() + Send + Sync + 'static,
) -> Hook {
    let (passed, killed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    Arc::new(move |at, _| {
        if at == point && passed.fetch_add(1, Ordering::Relaxed) + 1 == nth {
            meanwhile();
        }
        if let Some((point, nth)) = dies
            && at == point
            && killed.fetch_add(1, Ordering::Relaxed) + 1 == nth
        {
            panic!("killed at {}", point.name());
        }
    })
}

#[test]
fn members_held_while_others_take_their_partitions_write_what_one_member_writes() {
    let expected = alone("partitions-chaos-held");
    for seed in seeds(&FOUND) {
        let mut random = Random::new(seed, 0xD1B5_4A32_D192_ED03);
        let engine = Arc::new(engine(&format!("partitions-chaos-held-{seed}")));
        let mut story = Vec::new();
        for _ in 0..HELD {
            let held = Held::random(&mut random);
            story.push(held.story());
            let run = format!("held, seed {seed}: {story:?}");
            let hook = held.hook(&engine, run.clone());
            run_or_die(&engine, &held.a, Crash::Hook(hook), &run);
        }
        last_member_writes(&engine, &expected, seed, &story);
    }
}
