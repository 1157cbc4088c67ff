//! Snapshot and delta files against the in-memory store: recovery gives the state kept in
//! memory, deltas cost what changed, old files still read, cleanup keeps the live chain.

use proptest::prelude::*;

use super::*;
use crate::event_time::Fields;
use crate::event_time::config::EmitMode;
use crate::event_time::state::{
    KEEP_STATE_FILES, MemoryStore, SavedState, StateError, StateFile, StateStore, forget_old, path,
    run_path,
};
use crate::event_time::tests::{event, operators};
use crate::units::Millis;

/// The plan of batch `batch_id` (its contents do not matter here).
pub(crate) fn plan(batch_id: u64) -> Plan {
    Plan {
        batch_id,
        start: format!("{batch_id}"),
        end: "{}".into(),
        now_ms: Millis(7),
        session_start_ms: Millis(1),
        flush: false,
        held: Vec::new(),
        lookups: Default::default(),
        key: None,
    }
}

/// The state, in a form that compares by content (distinct counts are hash sets).
fn state(et: &EventTime) -> SavedState {
    let saved: SavedState =
        serde_json::from_slice(&serde_json::to_vec(&et.save_ref()).unwrap()).unwrap();
    saved.sorted()
}

/// Fresh operators recovered from the file `saved`.
fn recovered(store: &MemoryStore, saved: &str, emit: EmitMode) -> EventTime {
    let mut et = operators(emit);
    et.recover(store, Some(saved), true, "none", "").unwrap();
    et
}

/// Saves batch `batch_id` and forgets old files, as the pipeline does after a commit.
fn save(et: &mut EventTime, store: &MemoryStore, batch_id: u64) -> (String, u64) {
    let saved = et.save(store, "m", "p", "r", &plan(batch_id)).unwrap();
    let chain_start = et.chain().map_or(0, Chain::first_batch);
    forget_old(store, "m", "p", batch_id, chain_start);
    saved
}

fn run(et: &mut EventTime, events: &[Fields], now: Millis, flush: bool) {
    et.process(events.iter().map(|f| ("t/0", f)), now, flush);
}

/// One random batch: events as (id, seconds past the batch's base time, type), the
/// processing time that passes, whether it flushes, whether a restart follows it.
type Batch = (Vec<(u32, i64, usize)>, i64, bool, bool);

fn batches() -> impl Strategy<Value = Vec<Batch>> {
    let event = (0u32..400, 0i64..90, 0usize..3);
    let batch = (
        prop::collection::vec(event, 0..30),
        0i64..40_000,
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.1),
    );
    prop::collection::vec(batch, 1..90)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Over random batches (repeats, late events, expired keys, closed windows, flushes,
    /// restarts that continue the chain), recovering from the last file saved gives the
    /// state in memory, across snapshots and deltas alike.
    #[test]
    fn recovering_from_snapshot_and_deltas_gives_the_state_in_memory(
        batches in batches(),
        update in any::<bool>(),
    ) {
        let emit = if update { EmitMode::Update } else { EmitMode::OnWindowClose };
        let store = MemoryStore::default();
        let mut et = operators(emit);
        let mut now = 0;
        let n = batches.len();
        let (mut snapshots, mut deltas) = (0, 0);
        for (i, (events, step, flush, restart)) in batches.into_iter().enumerate() {
            let base = i as i64 * 15;
            let types = ["view", "buy", "cart"];
            let fields: Vec<Fields> = events
                .iter()
                .map(|&(id, secs, ty)| event(&et, &format!("e{id}"), base + secs - 30, types[ty]))
                .collect();
            now += step;
            run(&mut et, &fields, Millis(now), flush);
            let (saved, _) = save(&mut et, &store, i as u64 + 1);
            if saved.ends_with(DELTA_SUFFIX) { deltas += 1 } else { snapshots += 1 }
            let again = recovered(&store, &saved, emit);
            prop_assert_eq!(state(&again), state(&et), "batch {}: {}", i + 1, saved);
            if restart {
                et = again;
            }
        }
        // The states are small: a snapshot every SNAPSHOT_EVERY files, deltas between.
        prop_assert_eq!(snapshots, n.div_ceil(SNAPSHOT_EVERY));
        prop_assert_eq!(deltas, n - snapshots);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A commit cadence saves once over several batches (the held triggers): recovering
    /// from that one file, a delta of what all of them changed (keys added then expired,
    /// groups changed then closed) or a snapshot, gives the state in memory.
    #[test]
    fn one_save_over_several_batches_recovers_the_state_in_memory(
        batches in batches(),
        commits in prop::collection::vec(prop::bool::weighted(0.3), 90),
        update in any::<bool>(),
    ) {
        let emit = if update { EmitMode::Update } else { EmitMode::OnWindowClose };
        let store = MemoryStore::default();
        let mut et = operators(emit);
        let (mut now, mut batch_id, mut held) = (0, 0, 0);
        let n = batches.len();
        for (i, (events, step, flush, restart)) in batches.into_iter().enumerate() {
            let types = ["view", "buy", "cart"];
            let fields: Vec<Fields> = events
                .iter()
                .map(|&(id, secs, ty)| event(&et, &format!("e{id}"), i as i64 * 15 + secs - 30, types[ty]))
                .collect();
            now += step;
            run(&mut et, &fields, Millis(now), flush);
            held += 1;
            if !commits[i] && i + 1 < n {
                continue; // held: nothing saved
            }
            batch_id += 1;
            let (saved, _) = save(&mut et, &store, batch_id);
            let again = recovered(&store, &saved, emit);
            prop_assert_eq!(state(&again), state(&et), "commit {} of {} batches: {}", batch_id, held, saved);
            held = 0;
            if restart {
                et = again;
            }
        }
    }
}

/// A delta lists what was added and changed; what expired and closed is what its
/// watermark is past, and recovery forgets and closes it too.
#[test]
fn a_delta_carries_expiries_and_window_closes_by_its_watermark() {
    let store = MemoryStore::default();
    let mut et = operators(EmitMode::OnWindowClose);
    let first = [event(&et, "a", 45, "view"), event(&et, "b", 50, "buy")];
    run(&mut et, &first, Millis(0), false);
    let (snapshot, _) = save(&mut et, &store, 1);
    assert!(!snapshot.ends_with(DELTA_SUFFIX));
    // Watermark 65 s: key "a" and "b" expire, the window [0, 60) closes.
    let second = [event(&et, "c", 75, "view")];
    run(&mut et, &second, Millis(1_000), false);
    let (delta, _) = save(&mut et, &store, 2);
    assert!(delta.ends_with(DELTA_SUFFIX), "{delta}");
    let file: DeltaFile = serde_json::from_slice(&store.get(&delta).unwrap().unwrap()).unwrap();
    assert_eq!(file.chain.base, snapshot);
    assert!(file.delta.dedup_removed.is_empty());
    assert_eq!(
        file.delta.dedup_added,
        [("c".to_string(), Micros(75_000_000))]
    );
    assert_eq!(file.delta.watermark.current, Some(Micros(65_000_000)));
    let counts = &file.delta.windows["counts"];
    assert!(counts.removed.is_empty());
    assert_eq!(counts.upserted.len(), 1);
    let again = recovered(&store, &delta, EmitMode::OnWindowClose);
    assert_eq!(again.state_sizes()["dedup"].rows, 1, "a and b forgotten");
    assert_eq!(
        again.state_sizes()["window:counts"].rows,
        1,
        "[0, 60) closed"
    );
    assert_eq!(state(&again), state(&et));
}

/// A state of 100 000 dedup keys, then a batch of 100 new events: the delta is a small
/// fraction of the snapshot.
#[test]
fn a_delta_costs_what_the_batch_changed_not_the_state() {
    let store = MemoryStore::default();
    let mut et = operators(EmitMode::OnWindowClose);
    let many: Vec<Fields> = (0..100_000)
        .map(|i| event(&et, &format!("key-{i:06}"), 1_000, "view"))
        .collect();
    run(&mut et, &many, Millis(0), false);
    let (_, snapshot) = save(&mut et, &store, 1);
    let few: Vec<Fields> = (0..100)
        .map(|i| event(&et, &format!("new-{i:03}"), 1_000, "buy"))
        .collect();
    run(&mut et, &few, Millis(1), false);
    let (delta_file, delta) = save(&mut et, &store, 2);
    assert!(delta_file.ends_with(DELTA_SUFFIX));
    assert!(
        delta * 200 < snapshot,
        "delta {delta} bytes, snapshot {snapshot} bytes"
    );
    assert!(delta < 16 * 1024, "delta {delta} bytes for 100 keys");
    assert_eq!(et.state_sizes()["dedup"].rows, 100_100);
}

/// A whole-state file of an older version (at the batch's pointer name) still recovers,
/// and the next files build on it.
#[test]
fn an_old_whole_state_file_still_recovers() {
    let store = MemoryStore::default();
    let mut et = operators(EmitMode::OnWindowClose);
    let first = [event(&et, "a", 10, "view"), event(&et, "b", 50, "buy")];
    run(&mut et, &first, Millis(0), false);
    let old = StateFile {
        version: 1,
        pipeline: "p".into(),
        plan: plan(4),
        state: state(&et),
    };
    let old_path = path("m", "p", 4);
    store
        .put(&old_path, serde_json::to_vec(&old).unwrap())
        .unwrap();
    let mut again = recovered(&store, &old_path, EmitMode::OnWindowClose);
    assert_eq!(state(&again), state(&et));
    let more = [event(&et, "c", 55, "view")];
    run(&mut et, &more, Millis(1), false);
    run(&mut again, &more, Millis(1), false);
    let (delta, _) = save(&mut again, &store, 5);
    assert!(delta.ends_with(DELTA_SUFFIX));
    let third = recovered(&store, &delta, EmitMode::OnWindowClose);
    assert_eq!(state(&third), state(&et));
}

/// Many batches with cleanup after each: every file of the live chain stays (the state
/// recovers after every batch), old batches' files go, and the last batches' pointers stay.
#[test]
fn cleanup_keeps_every_file_of_the_live_chain() {
    let store = MemoryStore::default();
    let mut et = operators(EmitMode::OnWindowClose);
    // A large first snapshot, so that deltas go on for the longest chain.
    let many: Vec<Fields> = (0..5_000)
        .map(|i| event(&et, &format!("k{i}"), 1_000, "view"))
        .collect();
    run(&mut et, &many, Millis(0), false);
    let mut snapshots = Vec::new();
    for batch in 1..=100u64 {
        let fields = [event(&et, &format!("b{batch}"), 1_000, "view")];
        run(&mut et, &fields, Millis(batch as i64), false);
        let (saved, _) = save(&mut et, &store, batch);
        if !saved.ends_with(DELTA_SUFFIX) {
            snapshots.push(batch);
        }
        let chain = et.chain().unwrap();
        let again = recovered(&store, &saved, EmitMode::OnWindowClose);
        assert_eq!(state(&again), state(&et), "batch {batch}");
        // What `sluice maintain` keeps: exactly the chain, every file of it still there.
        let files = crate::event_time::state::chain_files(&store, &saved).unwrap();
        let mut expected = vec![chain.paths.base.clone()];
        expected.extend(chain.paths.deltas.iter().cloned());
        assert_eq!(files, expected);
        assert!(files.iter().all(|f| store.get(f).unwrap().is_some()));
        let keep_from = (batch + 1)
            .saturating_sub(KEEP_STATE_FILES)
            .min(chain.first_batch());
        for b in 1..=batch {
            let kept = store.get(&path("m", "p", b)).unwrap().is_some();
            assert_eq!(
                kept,
                b >= keep_from,
                "batch {b}'s pointer after batch {batch}"
            );
        }
    }
    // Snapshots every SNAPSHOT_EVERY files (the deltas stay light): 1, 33, 65, 97.
    assert_eq!(snapshots, [1, 33, 65, 97]);
    assert!(store.get(&run_path("m", "p", 97, "r")).unwrap().is_some());
    assert_eq!(store.get(&run_path("m", "p", 65, "r")).unwrap(), None);
}

/// A chain with a file missing is an error, not a silently wrong state.
#[test]
fn a_broken_chain_is_an_error() {
    let store = MemoryStore::default();
    let mut et = operators(EmitMode::OnWindowClose);
    for batch in 1..=3 {
        let fields = [event(&et, &format!("b{batch}"), 100 + batch as i64, "view")];
        run(&mut et, &fields, Millis(0), false);
        et.save(&store, "m", "p", "r", &plan(batch)).unwrap();
    }
    let chain = et.chain().unwrap().paths.clone();
    assert_eq!(chain.deltas.len(), 2);
    store.delete(&chain.deltas[0]).unwrap();
    let mut again = operators(EmitMode::OnWindowClose);
    let recovered = again.recover(
        &store,
        chain.deltas.last().map(String::as_str),
        true,
        "x",
        "",
    );
    assert!(
        matches!(recovered, Err(StateError::Chain { .. })),
        "{recovered:?}"
    );
}

#[test]
fn a_chain_takes_deltas_until_long_or_heavy() {
    // 10 rows of 10 % of the floor each in the snapshot, DELTA_ROW_WEIGHT times that in
    // a delta.
    let heavy = MIN_CHAIN_BYTES;
    let mut chain = Chain::new("x/00000000000000000007-r.json".into(), heavy, 10);
    assert_eq!(chain.first_batch(), 7);
    assert!(chain.takes(3));
    assert!(!chain.takes(4));
    assert!(chain.takes_bytes(heavy));
    assert!(!chain.takes_bytes(heavy + 1));
    chain.delta_bytes = heavy / 2;
    assert!(chain.takes(1));
    assert!(!chain.takes(2));
    chain.delta_bytes = 0;
    chain.paths.deltas = vec![String::new(); SNAPSHOT_EVERY - 2];
    assert!(chain.takes(1));
    chain.paths.deltas.push(String::new());
    assert!(!chain.takes(1));
    // A small state chains up to MIN_CHAIN_BYTES of deltas.
    let small = Chain::new(String::new(), 1_000, 10);
    assert!(small.takes(870));
    assert!(!small.takes(880));
    assert_eq!(batch_of("a/b.json"), None);
}
