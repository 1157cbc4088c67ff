//! A crash at every point of a batch's commit, then a restart: the outputs must equal
//! those of a run without the crash, and at each point exactly the outputs that the
//! documented order puts before it must show the batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice::pipeline::PipelineError;
use sluice::pipeline::crash::{Crash, CrashPoint};

use super::event_time::{ANALYTICS, analytics_events};
use super::{Engine, Outputs, PLAIN, plain};

/// What shows the batch that crashed, at the moment of the crash.
#[derive(Debug, PartialEq, Eq)]
struct Visible {
    dead_letters: bool,
    window_topic: bool,
    window_table: bool,
    table: bool,
}

/// The batch whose commit is cut short: the second of the analytics events, which has
/// dead letters (a late event) and closes a window.
const BATCH: u64 = 2;

fn visible(engine: &Engine) -> Visible {
    let sent = |topic: &str| {
        engine
            .topic(topic)
            .iter()
            .any(|r| r.headers["sluice.batch-id"] == BATCH.to_string())
    };
    Visible {
        dead_letters: sent("dead"),
        window_topic: sent("counts"),
        window_table: engine.table_batch(Some("counts")) >= Some(BATCH),
        table: engine.table_batch(None) >= Some(BATCH),
    }
}

/// What the order of side effects (`pipeline::commit::SEQUENCE`) makes visible at each
/// point: (dead letters, window topic, window table, table).
fn expected(point: CrashPoint) -> Visible {
    let (dead_letters, window_topic, window_table, table) = match point {
        CrashPoint::BeforeState | CrashPoint::AfterState | CrashPoint::AfterWrite => {
            (false, false, false, false)
        }
        CrashPoint::AfterDeadLetter | CrashPoint::AfterFenceCheck => (true, true, false, false),
        CrashPoint::AfterWindowCommit | CrashPoint::BeforeUndo => (true, true, true, false),
        CrashPoint::AfterCommit => (true, true, true, true),
    };
    Visible {
        dead_letters,
        window_topic,
        window_table,
        table,
    }
}

#[test]
fn every_crash_point_replays_to_the_same_outputs_in_the_documented_order() {
    let reference = Engine::new("crash-reference", ANALYTICS);
    reference.append(&analytics_events());
    reference.run().unwrap();
    let want = reference.outputs();
    assert_eq!(want.rows.len(), 6);
    for point in CrashPoint::ALL {
        let engine = Engine::new(&format!("crash-{}", point.name()), ANALYTICS);
        engine.append(&analytics_events());
        let error = engine
            .open(Crash::Fail(point, BATCH))
            .unwrap()
            .run(&Default::default());
        assert!(
            matches!(error, Err(PipelineError::Crashed { point: p, batch_id: BATCH }) if p == point),
            "{point:?}: {error:?}"
        );
        assert_eq!(visible(&engine), expected(point), "at {}", point.name());
        engine.run().unwrap();
        assert_eq!(engine.outputs(), want, "after a crash at {}", point.name());
    }
}

#[test]
fn a_stateless_pipeline_recovers_from_every_crash_point_too() {
    let values: Vec<String> = (0..9)
        .map(|i| {
            if i == 5 {
                r#"{"id":"bad","n":"x"}"#.into()
            } else {
                plain(i)
            }
        })
        .collect();
    let reference = Engine::new("plain-reference", PLAIN);
    reference.append(&values);
    reference.run().unwrap();
    let want = reference.outputs();
    for point in [
        CrashPoint::AfterWrite,
        CrashPoint::AfterDeadLetter,
        CrashPoint::AfterCommit,
    ] {
        let engine = Engine::new(&format!("plain-{}", point.name()), PLAIN);
        engine.append(&values);
        let crashed = engine
            .open(Crash::Fail(point, 2))
            .unwrap()
            .run(&Default::default());
        assert!(crashed.is_err(), "{point:?}");
        engine.run().unwrap();
        assert_eq!(engine.outputs(), want, "after a crash at {}", point.name());
    }
}

/// The analytics pipeline with a commit cadence: triggers of 4 records held until 8 are
/// read, so its 12 events and the flush at the end make 4 triggers in 2 commits.
fn analytics_with_cadence() -> String {
    ANALYTICS.replace(
        "table = \"events\"\n",
        "table = \"events\"\ncommit-interval = \"1h\"\nmin-commit-rows = 8\n",
    )
}

/// Outputs without the batch ids that window results carry (held triggers commit as one
/// batch, so the ids differ from a commit per trigger; nothing else may).
fn without_batch_ids(mut outputs: Outputs) -> Outputs {
    let strip = |text: &mut String| {
        let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
        value.as_object_mut().unwrap().remove("batch_id");
        *text = value.to_string();
    };
    for (table, topic) in outputs.windows.values_mut() {
        if let Some(rows) = table {
            rows.iter_mut().for_each(strip);
            rows.sort();
        }
        topic
            .iter_mut()
            .flat_map(|t| t.values_mut())
            .for_each(strip);
    }
    outputs
}

/// Event time with a commit cadence: the held triggers commit together (fewer commits
/// than triggers, each naming its state file), and the outputs are exactly those of a
/// commit per trigger, also when either commit is cut short at any point and the pipeline
/// restarts (replaying the held triggers one by one from the plan, or from the table).
#[test]
fn held_event_time_triggers_commit_together_and_replay_after_a_crash_at_every_point() {
    let reference = Engine::new("cadence-reference", ANALYTICS);
    reference.append(&analytics_events());
    let summary = reference.run().unwrap();
    assert_eq!(
        summary.batches, 4,
        "three triggers of records and the flush"
    );
    let want = without_batch_ids(reference.outputs());
    let cadence = analytics_with_cadence();
    let engine = Engine::new("cadence", &cadence);
    engine.append(&analytics_events());
    let summary = engine.run().unwrap();
    assert_eq!(summary.batches, 2, "{summary:?}");
    assert_eq!((summary.rows_late, summary.rows_deduplicated), (2, 3));
    assert_eq!(engine.table_batch(None), Some(2));
    assert!(engine.mark_properties().contains_key("sluice.state"));
    assert_eq!(without_batch_ids(engine.outputs()), want);
    for batch in [1, 2] {
        for point in CrashPoint::ALL {
            let at = format!("{} of batch {batch}", point.name());
            let name = format!("cadence-{batch}-{}", point.name());
            let engine = Engine::crashed(&name, &cadence, &analytics_events(), point, batch);
            let committed = engine.table_batch(None);
            let before = point != CrashPoint::AfterCommit;
            assert_eq!(
                committed,
                Some(batch - u64::from(before)).filter(|&b| b > 0),
                "{at}"
            );
            let summary = engine.run().unwrap();
            assert_eq!(summary.batches, 2 - batch + u64::from(before), "{at}");
            assert_eq!(
                without_batch_ids(engine.outputs()),
                want,
                "after a crash at {at}"
            );
        }
    }
}

/// A fault in the commit of held event-time triggers (the dead-letter topic refuses the
/// first try): the process reads the state again from the table, not the operators that
/// ran past the held triggers, replays them and gives the outputs of a commit per trigger.
#[test]
fn a_fault_in_the_commit_of_held_event_time_triggers_replays_them_from_the_table() {
    let reference = Engine::new("cadence-fault-reference", ANALYTICS);
    reference.append(&analytics_events());
    reference.run().unwrap();
    let want = without_batch_ids(reference.outputs());
    let engine = Engine::new("cadence-fault", &analytics_with_cadence());
    engine.append(&analytics_events());
    let topics = engine.topics.clone();
    let tries = Arc::new(AtomicU64::new(0));
    let seen = tries.clone();
    // The first commit's dead letters fail on its first try only.
    let hook = Arc::new(move |point: CrashPoint, batch: u64| {
        if (point, batch) == (CrashPoint::AfterState, 1) {
            let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
            topics.set_failing("dead", first);
        }
    });
    let summary = engine
        .open(Crash::Hook(hook))
        .unwrap()
        .run(&Default::default())
        .unwrap();
    assert_eq!(tries.load(Ordering::SeqCst), 2);
    assert_eq!(
        (summary.faults_retried, summary.batches),
        (1, 2),
        "{summary:?}"
    );
    assert_eq!((summary.rows_late, summary.rows_deduplicated), (2, 3));
    assert_eq!(without_batch_ids(engine.outputs()), want);
}
