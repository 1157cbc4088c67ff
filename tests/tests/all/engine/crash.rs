//! A crash at every point of a batch's commit, then a restart: the outputs must equal
//! those of a run without the crash, and at each point exactly the outputs that the
//! documented order puts before it must show the batch.

use sluice::pipeline::PipelineError;
use sluice::pipeline::crash::{Crash, CrashPoint};

use super::event_time::{ANALYTICS, analytics_events};
use super::{Engine, PLAIN, plain};

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
        CrashPoint::AfterState | CrashPoint::AfterWrite => (false, false, false, false),
        CrashPoint::AfterDeadLetter => (true, true, false, false),
        CrashPoint::AfterWindowCommit => (true, true, true, false),
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
