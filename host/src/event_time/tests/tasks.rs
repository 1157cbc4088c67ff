//! Tasks' files (issue 35): a task's chain replaced by a new snapshot, and the pointers to
//! a batch's plan on the partitions it moved, are what a commit makes obsolete; what is
//! left restores every task.

use std::collections::BTreeSet;

use super::*;
use crate::event_time::delta::SNAPSHOT_EVERY;
use crate::event_time::state::{MemoryStore, Plan, StateStore};
use crate::event_time::tasks::{Flush, Tasks, may_be_replayed};

fn plan(batch_id: u64, start: i64, end: i64) -> Plan {
    Plan {
        batch_id,
        start: format!(r#"{{"clicks":{{"0":{start},"1":{start}}}}}"#),
        end: format!(r#"{{"clicks":{{"0":{end},"1":{start}}}}}"#),
        now_ms: Millis(batch_id as i64 * 1000),
        session_start_ms: Millis(0),
        flush: false,
        held: Vec::new(),
        lookups: Default::default(),
        key: None,
    }
}

#[test]
fn a_commit_makes_replaced_chains_and_passed_plans_obsolete_and_the_rest_restores() {
    let et = EventTime::new(&config(), None, &[]);
    let mut tasks = Tasks::new(&et, "clicks");
    let assigned: BTreeSet<String> = ["clicks/0".to_string(), "clicks/1".to_string()].into();
    let store = MemoryStore::default();
    let mut obsolete = Vec::new();
    let mut last = None;
    for batch in 1..=(SNAPSHOT_EVERY as u64 + 2) {
        tasks
            .apply(
                Vec::new(),
                Vec::new(),
                &assigned,
                Millis(batch as i64 * 1000),
                &Flush::None,
            )
            .unwrap();
        let (from, to) = (batch as i64 * 10, batch as i64 * 10 + 10);
        let saved = tasks
            .save(&store, "loc", "p", "r", &plan(batch, from, to), None)
            .unwrap();
        for file in &saved.obsolete {
            store.delete(file).unwrap(); // as the commit's after-step does
        }
        obsolete.extend(saved.obsolete.iter().cloned());
        last = Some(saved);
    }
    let last = last.unwrap();
    let plans = obsolete
        .iter()
        .filter(|f| f.contains("/plans/clicks@0-"))
        .count();
    assert_eq!(
        plans,
        SNAPSHOT_EVERY + 2,
        "partition 0 moved on every batch"
    );
    assert!(
        !obsolete.iter().any(|f| f.contains("/plans/clicks@1-")),
        "1 never moved"
    );
    let chains = obsolete.iter().filter(|f| !f.contains("/plans/")).count();
    assert_eq!(chains, 2 * SNAPSHOT_EVERY, "each task's first chain, whole");
    for file in last.shares.values() {
        assert!(!obsolete.contains(file));
    }
    // A process given both partitions restores them from what is left.
    let mut again = Tasks::new(&et, "clicks");
    let mut positions = crate::record::Offsets::default();
    for p in 0..2 {
        let tp = crate::record::TopicPartition {
            topic: "clicks".into(),
            partition: p,
        };
        positions.set(tp, 1000);
    }
    again
        .recover(&store, "loc", "p", &last.shares, &positions)
        .unwrap();
    assert_eq!(again.partitions().count(), 2);
}

#[test]
fn a_batch_saved_again_under_the_same_id_writes_files_of_its_own() {
    // A member's own batch 2, committed; then, after a rebalance, another member's plan 2
    // replayed by the same process: the first save's files, which the table's chains name,
    // stay as they were.
    let et = EventTime::new(&config(), None, &[]);
    let mut tasks = Tasks::new(&et, "clicks");
    let assigned: BTreeSet<String> = ["clicks/0".to_string()].into();
    let store = MemoryStore::default();
    let mut files = Vec::new();
    // A snapshot first, then deltas.
    for _ in 0..3 {
        tasks
            .apply(
                Vec::new(),
                Vec::new(),
                &assigned,
                Millis(2000),
                &Flush::None,
            )
            .unwrap();
        let saved = tasks
            .save(&store, "loc", "p", "r", &plan(2, 20, 30), None)
            .unwrap();
        let file = saved.shares["clicks/0"].clone();
        files.push((file.clone(), store.get(&file).unwrap().unwrap()));
    }
    assert!(files[1].0.ends_with(".delta.json"), "{}", files[1].0);
    assert_ne!(files[1].0, files[2].0);
    assert_eq!(store.get(&files[1].0).unwrap().as_ref(), Some(&files[1].1));
}

#[test]
fn a_replay_on_some_partitions_saves_and_points_at_its_plan_on_those_alone() {
    // Batch 1 committed without moving either partition; batch 2 replayed on partition 0
    // alone, then fenced off: partition 1 is left as batch 1 left it, not pending.
    let et = EventTime::new(&config(), None, &[]);
    let mut tasks = Tasks::new(&et, "clicks");
    let assigned: BTreeSet<String> = ["clicks/0".to_string(), "clicks/1".to_string()].into();
    let store = MemoryStore::default();
    let run = |tasks: &mut Tasks, plan: &Plan, replayed: Option<&BTreeSet<String>>| {
        let ran = replayed.unwrap_or(&assigned);
        let now = plan.now_ms;
        (tasks.apply(Vec::new(), Vec::new(), ran, now, &Flush::None)).unwrap();
        tasks.save(&store, "loc", "p", "r", plan, replayed).unwrap()
    };
    let committed = run(&mut tasks, &plan(1, 10, 10), None);
    let before = tasks.states();
    let replayed: BTreeSet<String> = ["clicks/0".to_string()].into();
    let saved = run(&mut tasks, &plan(2, 10, 20), Some(&replayed));
    assert_eq!(saved.shares.keys().collect::<Vec<_>>(), ["clicks/0"]);
    assert_eq!(tasks.states()["clicks/1"], before["clicks/1"]);
    assert_ne!(tasks.states()["clicks/0"], before["clicks/0"]);
    let mut positions = crate::record::Offsets::default();
    for partition in 0..2 {
        let topic = "clicks".into();
        positions.set(crate::record::TopicPartition { topic, partition }, 10);
    }
    let mut again = Tasks::new(&et, "clicks");
    let unfinished = again
        .recover(&store, "loc", "p", &committed.shares, &positions)
        .unwrap();
    assert_eq!(unfinished.len(), 1, "{unfinished:?}");
    assert_eq!(unfinished[0].plan.batch_id, 2);
    assert_eq!(unfinished[0].partitions, replayed);
}

#[test]
fn a_batch_is_pending_only_where_the_table_records_the_state_it_built_on() {
    // Batch 1 committed, reading nothing; then two batches from its state and offsets
    // (a member frozen before saving, and the partitions' new owner): the new owner's
    // commits, and the frozen member's pointer, written last, names a batch that can no
    // longer be replayed there.
    let et = EventTime::new(&config(), None, &[]);
    let assigned: BTreeSet<String> = ["clicks/0".to_string(), "clicks/1".to_string()].into();
    let store = MemoryStore::default();
    let run = |tasks: &mut Tasks, plan: &Plan| {
        let now = plan.now_ms;
        (tasks.apply(Vec::new(), Vec::new(), &assigned, now, &Flush::None)).unwrap();
        tasks.save(&store, "loc", "p", "r", plan, None).unwrap()
    };
    let mut positions = crate::record::Offsets::default();
    for partition in 0..2 {
        let topic = "clicks".into();
        positions.set(crate::record::TopicPartition { topic, partition }, 10);
    }
    let mut frozen = Tasks::new(&et, "clicks");
    let committed = run(&mut frozen, &plan(1, 10, 10));
    let mut owner = Tasks::new(&et, "clicks");
    let none = owner
        .recover(&store, "loc", "p", &committed.shares, &positions)
        .unwrap();
    assert!(none.is_empty(), "{none:?}");
    let owners = run(&mut owner, &plan(2, 10, 10));
    let frozens = plan(3, 10, 10);
    run(&mut frozen, &frozens);
    // Neither committed: the pointer there is the frozen member's, from batch 1's state.
    let mut again = Tasks::new(&et, "clicks");
    let pending = again
        .recover(&store, "loc", "p", &committed.shares, &positions)
        .unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].plan.batch_id, 3);
    let starts = [("clicks/0".to_string(), 10)].into();
    let at = ("loc", "p", "clicks");
    let by_partition = [("clicks/0".to_string(), 10), ("clicks/1".to_string(), 10)].into();
    let same = |p: &Plan| p.batch_id == 3;
    let replayable = |shares: &crate::event_time::state::shares::Shares| {
        let pending = may_be_replayed(&store, at, &starts, same, (&by_partition, shares));
        pending.unwrap().anywhere()
    };
    assert!(replayable(&committed.shares));
    // The owner's batch committed: the frozen member's can never be replayed there.
    let unfinished = again
        .recover(&store, "loc", "p", &owners.shares, &positions)
        .unwrap();
    assert!(unfinished.is_empty(), "{unfinished:?}");
    assert!(!replayable(&owners.shares));
}
