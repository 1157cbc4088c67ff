//! Active and standby: an event-time pipeline shared by processes runs in the one its
//! election makes active. A standby reads nothing; made active, it resumes from the table
//! (positions and event-time state) and its outputs are those of an uninterrupted run. A
//! process demoted in the middle of a batch is fenced and stands by again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sluice::election::MemoryElection;
use sluice::pipeline::crash::{Crash, CrashPoint};

use super::Engine;
use super::event_time::{ANALYTICS, analytics_events};
use super::fence::hold_at;

/// The outputs of the analytics pipeline run once, without interruption.
fn uninterrupted(name: &str) -> super::Outputs {
    let reference = Engine::new(name, ANALYTICS);
    reference.append(&analytics_events());
    reference.run().unwrap();
    reference.outputs()
}

fn elected(engine: &Engine, crash: Crash, election: &MemoryElection) -> sluice::pipeline::Pipeline {
    engine
        .open_elected(&engine.config, crash, Some(Box::new(election.clone())))
        .unwrap()
}

#[test]
fn a_standby_takes_over_where_the_active_process_died() {
    let want = uninterrupted("standby-reference");
    let engine = Engine::new("standby-takeover", ANALYTICS);
    engine.append(&analytics_events());
    let (first, second) = (MemoryElection::default(), MemoryElection::default());
    first.set(true);
    let mut standby = elected(&engine, Crash::Never, &second);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let waiting = s.spawn(|| standby.run(&stop));
        // The active process commits two batches (8 of the 12 events) and dies.
        let mut active = elected(&engine, Crash::Fail(CrashPoint::AfterCommit, 2), &first);
        assert!(active.run(&AtomicBool::new(false)).is_err());
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            engine.table_batch(None),
            Some(2),
            "the standby read nothing"
        );
        second.set(true);
        let took_over = waiting.join().unwrap().unwrap();
        assert_eq!(took_over.input_rows, 4, "{took_over:?}");
        assert!(!took_over.stopped);
    });
    assert_eq!(engine.outputs(), want);
}

#[test]
fn a_demoted_process_is_fenced_and_stands_by() {
    let want = uninterrupted("demoted-reference");
    let engine = Engine::new("standby-demoted", ANALYTICS);
    engine.append(&analytics_events());
    let (first, second) = (MemoryElection::default(), MemoryElection::default());
    first.set(true);
    let (crash, reached, go) = hold_at(CrashPoint::AfterDeadLetter, 1);
    let mut demoted = elected(&engine, crash, &first);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let held = s.spawn(|| demoted.run(&stop));
        // The active process is held in its first batch (a long pause) and the election
        // moves: the new active process runs everything.
        reached.recv().unwrap();
        first.set(false);
        second.set(true);
        let summary = elected(&engine, Crash::Never, &second)
            .run(&AtomicBool::new(false))
            .unwrap();
        assert_eq!(summary.input_rows, 12);
        // The old one thaws: its batch is fenced, and it stands by until stopped.
        go.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        assert!(!held.is_finished(), "it stands by");
        stop.store(true, Ordering::SeqCst);
        let old = held.join().unwrap().unwrap();
        assert_eq!((old.batches_fenced, old.batches), (1, 0), "{old:?}");
        assert!(old.stopped);
    });
    assert_eq!(engine.outputs(), want);
}
