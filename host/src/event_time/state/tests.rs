//! Saving and recovering state against the in-memory store: plans, held triggers,
//! lookup versions, binary snapshots and paths.

use std::collections::BTreeMap;

use super::saved::{SNAPSHOT_MAGIC, read_snapshot};
use super::*;
use crate::checkpoint::lookups::Version;
use crate::event_time::watermark::Watermark;
use crate::event_time::window::{Accumulator, PackedKey, SavedGroup};
use crate::units::{Micros, Millis};

fn operators() -> EventTime {
    EventTime::new(&super::super::tests::config(), None, &[])
}

fn plan(batch_id: u64, start: &str) -> Plan {
    Plan {
        batch_id,
        start: start.into(),
        end: "{}".into(),
        now_ms: Millis(7),
        session_start_ms: Millis(1),
        flush: false,
        held: Vec::new(),
        lookups: BTreeMap::new(),
        key: None,
    }
}

#[test]
fn saved_state_is_recovered_with_the_plan_of_an_uncommitted_batch() {
    let store = MemoryStore::default();
    let mut et = operators();
    let fields = et.fields(Some(br#"{"ts":60000}"#)).unwrap();
    et.process([("t/0", &fields)], Millis(0), false);
    let (saved, size) = et
        .save(&store, "mem://t", "p", "run1", &plan(1, "a"))
        .unwrap();
    assert_eq!(saved, run_path("mem://t", "p", 1, "run1"));
    assert!(size > 0);
    // Batch 2 was planned from offsets "b" but not committed, then planned by another
    // process too: its state file does not replace the first one's.
    let next = path("mem://t", "p", 2);
    operators()
        .save(&store, "mem://t", "p", "run1", &plan(2, "b"))
        .unwrap();
    let (other_file, _) = operators()
        .save(&store, "mem://t", "p", "run2", &plan(2, "b"))
        .unwrap();
    assert_ne!(other_file, run_path("mem://t", "p", 2, "run1"));
    assert!(
        store
            .get(&run_path("mem://t", "p", 2, "run1"))
            .unwrap()
            .is_some()
    );
    let mut again = operators();
    let replay = again
        .recover(&store, Some(&saved), true, &next, "b")
        .unwrap();
    assert_eq!(replay, Some(plan(2, "b")));
    assert_eq!(again.watermark_at(Millis(0)), et.watermark_at(Millis(0)));
    // A plan from other offsets is not replayed; a missing named state is an error.
    let mut other = operators();
    assert_eq!(
        other
            .recover(&store, Some(&saved), true, &next, "c")
            .unwrap(),
        None
    );
    let missing = path("mem://t", "p", 9);
    assert!(matches!(
        other.recover(&store, Some(&missing), true, &next, "b"),
        Err(StateError::Missing(_))
    ));
}

/// A batch of held triggers (commit cadence) lists each in its plan's pointer, in
/// order, and a restart gets them all back to replay; the state files do not carry
/// them (a snapshot's binary layout is that of a plan of one trigger).
#[test]
fn the_plan_of_held_triggers_lists_each_and_is_recovered_whole() {
    let trigger = |end: &str, now: i64, flush: bool| TriggerPlan {
        end: end.into(),
        now_ms: Millis(now),
        flush,
    };
    let mut held = plan(2, "a");
    let later = |end: &str, now: i64, flush: bool| Plan {
        end: end.into(),
        now_ms: Millis(now),
        flush,
        ..plan(2, "x")
    };
    held.then(&later("b", 8, false));
    held.then(&later("c", 9, true));
    assert_eq!((held.start.as_str(), held.batch_id), ("a", 2));
    let all = [trigger("{}", 7, false), trigger("b", 8, false)];
    assert_eq!(held.held, all);
    assert_eq!(
        held.triggers(),
        [&all[..], &[trigger("c", 9, true)]].concat()
    );
    let store = MemoryStore::default();
    let mut et = operators();
    let (saved, _) = et.save(&store, "mem://t", "p", "r", &held).unwrap();
    let pointer = store.get(&path("mem://t", "p", 2)).unwrap().unwrap();
    let pointer: PlanFile = serde_json::from_slice(&pointer).unwrap();
    assert_eq!(pointer.held, all);
    let alone = Plan {
        held: Vec::new(),
        ..held.clone()
    };
    let file = read_snapshot(&store, &saved).unwrap().unwrap().0;
    assert_eq!(file.plan, alone);
    let encoded = |plan: &Plan| {
        let file = StateFileRef {
            version: 1,
            pipeline: "p",
            plan,
            state: et.save_ref(),
        };
        postcard::to_allocvec(&file).unwrap()
    };
    assert_eq!(encoded(&held), encoded(&alone));
    let next = path("mem://t", "p", 2);
    let replay = operators()
        .recover(&store, None, false, &next, "a")
        .unwrap();
    assert_eq!(replay, Some(held));
}

/// Without event time, a batch that saw lookup tables writes its plan alone, with the
/// tables' versions; a restart gets them back. A pointer of an older version (no
/// lookups) still reads.
#[test]
fn a_plan_alone_keeps_the_lookup_versions_and_old_pointers_still_read() {
    let store = MemoryStore::default();
    let mut planned_batch = plan(4, "a");
    let version = Version::Topic {
        offsets: BTreeMap::from([(0, 7), (1, 3)]),
    };
    planned_batch.lookups = BTreeMap::from([("profiles".into(), version)]);
    write_plan(&store, "mem://t", "p", &planned_batch, None).unwrap();
    let next = path("mem://t", "p", 4);
    let pointer = String::from_utf8(store.get(&next).unwrap().unwrap()).unwrap();
    assert!(
        pointer.contains(r#""lookups":{"profiles":{"kind":"topic""#),
        "{pointer}"
    );
    assert!(!pointer.contains("state_file"), "{pointer}");
    assert_eq!(planned(&store, &next, "a"), Some(planned_batch));
    assert_eq!(planned(&store, &next, "b"), None);
    let old = r#"{"plan":{"batch_id":5,"start":"a","end":"{}","now_ms":7,"session_start_ms":1,"flush":false},"state_file":"s"}"#;
    store.put(&path("mem://t", "p", 5), old.into()).unwrap();
    assert_eq!(
        planned(&store, &path("mem://t", "p", 5), "a"),
        Some(plan(5, "a"))
    );
}

/// A binary snapshot written from the borrowed state reads back as the owned one, with
/// every kind of accumulator, partition clock and key.
#[test]
fn binary_snapshots_read_back_what_was_written() {
    use super::super::watermark::PartitionClock;
    let clock = |max_event| PartitionClock {
        max_event,
        last_seen: Millis(-3),
    };
    let acc = vec![
        Accumulator::Count(3),
        Accumulator::Sum(1.5, 2),
        Accumulator::Min(None),
        Accumulator::Max(Some(-2.25)),
        Accumulator::Avg(3.0, 2),
        Accumulator::Distinct([1, u64::MAX].into_iter().collect()),
    ];
    let group = SavedGroup {
        start: Micros(-60),
        key: vec![Some("Zoë".into()), None],
        acc,
    };
    let state = SavedState {
        watermark: Watermark {
            partitions: BTreeMap::from([
                ("t/0".into(), clock(None)),
                ("t/1".into(), clock(Some(Micros(i64::MIN)))),
            ]),
            current: Some(Micros(42)),
        },
        dedup: vec![("k\u{1f}1".into(), Micros(-5))],
        windows: BTreeMap::from([("w".into(), vec![group.clone()])]),
        joins: BTreeMap::new(),
    };
    let key = PackedKey::of(&group.key);
    let written = StateFileRef {
        version: 1,
        pipeline: "p",
        plan: &plan(3, "a"),
        state: SavedStateRef {
            watermark: &state.watermark,
            dedup: vec![(state.dedup[0].0.as_str(), state.dedup[0].1)],
            windows: BTreeMap::from([(
                "w",
                vec![SavedGroupRef {
                    start: group.start,
                    key: &key,
                    acc: &group.acc,
                }],
            )]),
            joins: BTreeMap::new(),
        },
    };
    let store = MemoryStore::default();
    let bytes = postcard::to_extend(&written, SNAPSHOT_MAGIC.to_vec()).unwrap();
    store.put("x/1-r.snapshot.bin", bytes.clone()).unwrap();
    let (read, size) = read_snapshot(&store, "x/1-r.snapshot.bin")
        .unwrap()
        .unwrap();
    assert_eq!(read.state, state);
    assert_eq!(read.plan, plan(3, "a"));
    assert_eq!(size, bytes.len() as u64);
    store
        .put("x/2-r.snapshot.bin", bytes[1..].to_vec())
        .unwrap();
    assert!(matches!(
        read_snapshot(&store, "x/2-r.snapshot.bin"),
        Err(StateError::Undecodable { .. })
    ));
}

#[test]
fn paths_sort_by_batch() {
    let a = path("file:///w/ns/t/", "p", 9);
    let b = path("file:///w/ns/t", "p", 10);
    assert_eq!(
        a,
        "file:///w/ns/_sluice-state/t/p/00000000000000000009.json"
    );
    assert!(a < b);
    let s3 = path("s3://bucket/wh/ns/t", "p", 1);
    assert_eq!(
        s3,
        "s3://bucket/wh/ns/_sluice-state/t/p/00000000000000000001.json"
    );
    assert!(
        !s3.starts_with("s3://bucket/wh/ns/t"),
        "outside the table's prefix"
    );
    assert_eq!(state_root("mem://t"), "mem://t/_sluice-state");
}
