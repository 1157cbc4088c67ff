//! Fenced commits: a batch commits only if the table still records, for the pipeline,
//! the offsets the batch started from. Two processes on one pipeline write every record
//! once; a commit of another pipeline on the same table does not fence it. (That the
//! catalog refuses a commit on a table that moved after the check, instead of rebasing, is
//! `sink::iceberg::commit`'s unit test.)

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use sluice::pipeline::config::PipelineConfig;
use sluice::pipeline::crash::{Crash, CrashPoint};

use super::{Engine, PLAIN, plain};
use crate::hot_swap::http;

/// A hook that holds a pipeline at `point` of batch `batch`: it says so on the first
/// channel and waits for a word on the second.
pub(crate) fn hold_at(
    point: CrashPoint,
    batch: u64,
) -> (Crash, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (reached, at) = mpsc::channel();
    let (go, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let hook = Arc::new(move |p: CrashPoint, b: u64| {
        if (p, b) == (point, batch) {
            reached.send(()).unwrap();
            wait.lock().unwrap().recv().unwrap();
        }
    });
    (Crash::Hook(hook), at, go)
}

/// A second process commits batch 1 (the records it read) and dies before anything else.
fn commit_batch_one_and_die(engine: &Engine) {
    let mut second = engine
        .open(Crash::Fail(CrashPoint::AfterCommit, 1))
        .unwrap();
    assert!(second.run(&AtomicBool::new(false)).is_err());
}

#[test]
fn the_second_of_two_processes_on_one_pipeline_is_fenced() {
    let engine = Engine::new("fence-two", PLAIN);
    engine.append(&(0..10).map(plain).collect::<Vec<_>>());
    let (crash, reached, go) = hold_at(CrashPoint::AfterDeadLetter, 1);
    let mut first = engine.open(crash).unwrap();
    std::thread::scope(|s| {
        let held = s.spawn(move || first.run(&AtomicBool::new(false)));
        // The first process read batch 1 and is about to commit it; a second one, started
        // from the same table, commits everything.
        reached.recv().unwrap();
        let second = engine.run().unwrap();
        assert_eq!((second.batches, second.rows_written), (3, 10));
        go.send(()).unwrap();
        let first = held.join().unwrap().unwrap();
        // Its batch 1 is fenced; it then resumes from the table, where nothing is left.
        assert_eq!((first.batches_fenced, first.batches), (1, 0));
    });
    assert_eq!(engine.rows(None).len(), 10);
    assert_eq!(engine.table_batch(None), Some(3));
}

#[test]
fn a_fenced_process_goes_on_from_what_the_table_holds() {
    let engine = Engine::new("fence-resume", PLAIN);
    engine.append(&(0..6).map(plain).collect::<Vec<_>>());
    let (crash, reached, go) = hold_at(CrashPoint::AfterDeadLetter, 1);
    let mut first = engine.open(crash).unwrap();
    std::thread::scope(|s| {
        let held = s.spawn(move || first.run(&AtomicBool::new(false)));
        reached.recv().unwrap();
        commit_batch_one_and_die(&engine);
        go.send(()).unwrap();
        let first = held.join().unwrap().unwrap();
        // Its own batch 1 is fenced; it goes on from the table with the last two records.
        assert_eq!((first.batches_fenced, first.batches), (1, 1), "{first:?}");
        assert_eq!(first.input_rows, 2);
    });
    // Batch 1 by the second process, batch 2 by the first.
    let ids = engine.sorted_column("id");
    let mut want: Vec<String> = (0..6).map(|i| format!("e{i}")).collect();
    want.sort();
    assert_eq!(ids, want, "every record exactly once");
}

#[test]
fn a_commit_of_another_pipeline_on_the_table_leaves_the_fence_standing() {
    let engine = Engine::new("fence-other", PLAIN);
    engine.log.create("others", 1);
    engine.append(&(0..4).map(plain).collect::<Vec<_>>());
    engine.log.append("others", 0, None, plain(100).as_bytes());
    let other = PLAIN
        .replace("name = \"engine\"", "name = \"other\"")
        .replace("topics = [\"clicks\"]", "topics = [\"others\"]");
    let other = PipelineConfig::parse(&other, Path::new("other.toml")).unwrap();
    let (crash, reached, go) = hold_at(CrashPoint::AfterDeadLetter, 1);
    let mut first = engine.open(crash).unwrap();
    std::thread::scope(|s| {
        let held = s.spawn(move || first.run(&AtomicBool::new(false)));
        reached.recv().unwrap();
        let summary = engine
            .open_as(&other, Crash::Never)
            .unwrap()
            .run(&AtomicBool::new(false));
        assert_eq!(summary.unwrap().rows_written, 1);
        go.send(()).unwrap();
        let first = held.join().unwrap().unwrap();
        assert_eq!((first.batches, first.batches_fenced), (1, 0));
    });
    assert_eq!(engine.rows(None).len(), 5);
    assert_eq!(engine.table_batch(None), Some(1));
}

/// Readiness says a fenced process reloads its positions, too briefly for a probe: the
/// admin API's `/status` keeps the change, and the return to ready after it.
#[test]
fn a_fenced_process_says_so_in_its_readiness_changes() {
    let toml = format!("{PLAIN}\n[admin]\nlisten = \"127.0.0.1:0\"\n");
    let engine = Engine::new("fence-readiness", &toml);
    engine.append(&(0..6).map(plain).collect::<Vec<_>>());
    let (crash, reached, go) = hold_at(CrashPoint::AfterDeadLetter, 1);
    let mut first = engine.open(crash).unwrap();
    let admin = first.admin().expect("an admin API").addr().to_string();
    let status = std::thread::scope(|s| {
        let held = s.spawn(move || {
            let summary = first.run(&AtomicBool::new(false)).unwrap();
            let status = http(&admin, "GET", "/status", None, b"", None);
            (summary, status)
        });
        reached.recv().unwrap();
        commit_batch_one_and_die(&engine);
        go.send(()).unwrap();
        let (first, status) = held.join().unwrap();
        assert_eq!(first.batches_fenced, 1, "{first:?}");
        status
    });
    assert_eq!(status.0, 200, "{}", status.1);
    let status: serde_json::Value = serde_json::from_str(&status.1).unwrap();
    let changes: Vec<String> = status["readiness_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {}", c["state"], c["reason"]))
        .collect();
    let fenced = r#""waiting" "batch 1 was fenced: reloading positions from the table""#;
    let at = changes.iter().position(|c| c == fenced);
    let at = at.unwrap_or_else(|| panic!("no fence among {changes:?}"));
    assert_eq!(
        changes.get(at + 1).map(String::as_str),
        Some(r#""running" null"#),
        "ready again after the fence: {changes:?}"
    );
}
