//! The two stages of a repartition topic under crashes at random points: members of
//! either stage given random sets of partitions, one after another, each killed (a
//! panic, its pipeline dropped unfinished) at a random point of a random batch or held
//! there while a member of either stage runs (maybe killed too), then going on; then one
//! member of each stage given every partition to the end. The window's counts are those
//! of one process, and the table holds each event once. The seeds are fixed: a failure
//! names the one to run again (`SLUICE_CHAOS_SEEDS`, as in [`super::partitions_chaos`]).

use std::sync::Arc;

use sluice::pipeline::crash::{Crash, CrashPoint, Hook};
use sluice::sink::memory::MemoryTopics;

use super::Engine;
use super::partitions::engine_with;
use super::partitions_chaos::{Random, held_while, killed_at, seeds};
use super::partitions_left::run_bounded;
use super::repartition::{PAGES, pages, pages_alone, same, stage_member};

/// Seeds that found a defect once, run every time.
const FOUND: [u64; 4] = [209, 266, 329, 369];

/// Members run in each seed before the last two.
const ROUNDS: usize = 5;

/// A member of a stage given some partitions, maybe killed at a point.
#[derive(Clone, Debug)]
struct Member {
    stage: u8,
    owns: Vec<i32>,
    dies: Option<(CrashPoint, usize)>,
}

impl Member {
    fn random(random: &mut Random) -> Member {
        Member {
            stage: 1 + random.below(2) as u8,
            owns: random.partitions(),
            dies: (random.below(4) > 0).then(|| random.point()),
        }
    }

    fn story(&self) -> String {
        let dies = self.dies.map(|(p, n)| (p.name(), n));
        format!("stage {} {:?} killed at {dies:?}", self.stage, self.owns)
    }
}

/// Runs `member` (with `hook`, or killed as it says) until it ends or is killed; fenced
/// over and over for a minute (a livelock) or failing, it panics naming `run`.
fn run_or_die(engine: &Engine, member: &Member, hook: Option<Hook>, run: &str) {
    let crash = match hook {
        Some(hook) => Crash::Hook(hook),
        None => member.dies.map_or(Crash::Never, killed_at),
    };
    let mut pipeline = stage_member(engine, member.stage, &member.owns, crash).unwrap();
    match run_bounded(&mut pipeline) {
        Ok(Ok(summary)) => assert!(
            !summary.stopped,
            "{run}: {} fenced over and over: {summary:?}",
            member.story()
        ),
        Ok(Err(error)) => panic!("{run}: {} failed: {error}", member.story()),
        Err(_killed) => {}
    }
}

/// `a` held the `nth` time a batch passes `at` while `b` runs, then going on (killed as
/// `a.dies` says); `run` names the run in a failure.
fn held(a: &Member, at: (CrashPoint, usize), b: Member, engine: &Arc<Engine>, run: String) -> Hook {
    let engine = engine.clone();
    held_while(at, a.dies, move || run_or_die(&engine, &b, None, &run))
}

#[test]
fn both_stages_killed_and_held_at_random_points_count_as_one_process() {
    let expected = pages_alone("repartition-chaos-alone");
    for seed in seeds(&FOUND) {
        let mut random = Random::new(seed, 0xA076_1D64_78BD_642F);
        let mut engine = engine_with(&format!("repartition-chaos-{seed}"), PAGES);
        engine.topics = MemoryTopics::with_log(&engine.log);
        // Stage one, opened, creates the repartition topic (as a process starting does).
        drop(stage_member(&engine, 1, &[0, 1, 2], Crash::Never).unwrap());
        let engine = Arc::new(engine);
        let mut story = Vec::new();
        for _ in 0..ROUNDS {
            let a = Member::random(&mut random);
            let hold =
                (random.below(3) == 0).then(|| (random.point(), Member::random(&mut random)));
            let hook = hold.map(|(at, b)| {
                story.push(format!(
                    "{} held at {at:?} while {} runs",
                    a.story(),
                    b.story()
                ));
                held(&a, at, b, &engine, format!("seed {seed}: {story:?}"))
            });
            if hook.is_none() {
                story.push(a.story());
            }
            run_or_die(&engine, &a, hook, &format!("seed {seed}: {story:?}"));
        }
        for stage in [1, 2] {
            let last = Member {
                stage,
                owns: vec![0, 1, 2],
                dies: None,
            };
            run_or_die(&engine, &last, None, &format!("seed {seed}: {story:?}"));
        }
        assert_eq!(engine.rows(None).len(), 72, "seed {seed}: {story:?}");
        let got = pages(&engine);
        if got != expected {
            eprintln!("seed {seed}: {story:?}");
            same(&got, &expected);
        }
    }
}
