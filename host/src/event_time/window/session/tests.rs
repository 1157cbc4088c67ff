//! Session windows: merging (bridging events, across batches, out of order), closing on
//! the watermark, update mode, merged aggregates, against an independent computation,
//! and saved state (snapshots and deltas) that recovers what was in memory.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use crate::event_time::config::{EmitMode, WindowConfig};
use crate::event_time::window::tests::config as window_config;
use crate::event_time::window::{
    Input, PackedKey, SavedGroup, WindowInput, WindowOperator, key_hash, sort_rows, stable_hash,
};
use crate::units::Micros;

const S: i64 = 1_000_000;

fn s(n: i64) -> Micros {
    Micros(n * S)
}

fn config(gap: u64, emit: EmitMode) -> WindowConfig {
    WindowConfig {
        name: "sessions".into(),
        size: None,
        gap: Some(Duration::from_secs(gap)),
        ..window_config(60, None, emit)
    }
}

fn input(key: &str, x: f64, user: &str) -> WindowInput {
    let key = PackedKey::pack([Some(key)]);
    let x = Input::Number(x);
    WindowInput {
        hash: key_hash(&key),
        key,
        inputs: vec![Input::Present, x, x, x, x, Input::Hash(stable_hash(user))],
    }
}

/// Rows as (key, start s, end s, values), sorted.
type Row = (String, i64, i64, Vec<serde_json::Value>);

fn rows(mut rows: Vec<crate::event_time::window::WindowRow>) -> Vec<Row> {
    sort_rows(&mut rows);
    let row = |r: crate::event_time::window::WindowRow| {
        let key = r.key[0].clone().unwrap_or_default();
        (key, r.start.0 / S, r.end.0 / S, r.values)
    };
    let mut rows: Vec<Row> = rows.into_iter().map(row).collect();
    rows.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    rows
}

fn values(v: serde_json::Value) -> Vec<serde_json::Value> {
    v.as_array().unwrap().clone()
}

#[test]
fn a_bridging_event_merges_two_sessions_and_their_aggregates() {
    let mut op = WindowOperator::new(config(60, EmitMode::OnWindowClose));
    op.add(s(0), &input("a", 1.0, "u1"), None);
    op.add(s(100), &input("a", 4.0, "u2"), None);
    op.add(s(10), &input("b", 7.0, "u1"), None);
    assert_eq!(op.rows(), 3, "a: [0, 60) and [100, 160); b: [10, 70)");
    // [50, 110) overlaps both sessions of a.
    op.add(s(50), &input("a", 2.0, "u1"), None);
    assert_eq!(op.rows(), 2);
    assert!(op.finish_batch(Some(s(69))).is_empty());
    assert_eq!(
        rows(op.finish_batch(Some(s(160)))),
        vec![
            (
                "a".into(),
                0,
                160,
                values(serde_json::json!([3, 7.0, 1.0, 4.0, 7.0 / 3.0, 2]))
            ),
            (
                "b".into(),
                10,
                70,
                values(serde_json::json!([1, 7.0, 7.0, 7.0, 7.0, 1]))
            ),
        ]
    );
    assert_eq!(op.rows(), 0);
}

#[test]
fn sessions_merge_across_batches_and_close_on_the_watermark() {
    let mut op = WindowOperator::new(config(30, EmitMode::OnWindowClose));
    op.add(s(100), &input("a", 1.0, "u1"), None);
    assert!(op.finish_batch(Some(s(90))).is_empty());
    op.add(s(170), &input("a", 1.0, "u2"), Some(s(90)));
    assert!(op.finish_batch(Some(s(120))).is_empty());
    assert_eq!(op.rows(), 2, "[100, 130) and [170, 200)");
    // Out of order, within the watermark: 125 extends the first session to [100, 155),
    // then 150 bridges it with the second.
    op.add(s(125), &input("a", 1.0, "u3"), Some(s(120)));
    assert_eq!(op.rows(), 2);
    assert!(!op.closes_any(s(129)), "the first session now ends at 155");
    op.add(s(150), &input("a", 1.0, "u1"), Some(s(120)));
    assert_eq!(op.rows(), 1);
    assert!(op.finish_batch(Some(s(199))).is_empty());
    assert!(!op.closes_any(s(199)));
    assert!(op.closes_any(s(200)));
    assert_eq!(op.last_end(), Some(s(200)));
    let closed = rows(op.finish_batch(Some(s(200))));
    assert_eq!(closed.len(), 1, "emitted once, merged");
    assert_eq!((closed[0].1, closed[0].2), (100, 200));
    assert_eq!(closed[0].3[0], serde_json::json!(4));
    assert_eq!(
        closed[0].3[5],
        serde_json::json!(3),
        "users merged as a set union"
    );
    // An event behind the watermark whose span is closed opens nothing.
    op.add(s(150), &input("a", 1.0, "u1"), Some(s(200)));
    assert_eq!(op.rows(), 0);
}

#[test]
fn an_earlier_event_within_the_gap_moves_the_start_back() {
    let mut op = WindowOperator::new(config(30, EmitMode::OnWindowClose));
    op.add(s(100), &input("a", 5.0, "u1"), None);
    op.add(s(80), &input("a", 3.0, "u1"), None);
    op.add(s(70), &input("b", 1.0, "u1"), None);
    op.add(s(40), &input("b", 1.0, "u1"), None);
    let closed = rows(op.finish_batch(Some(s(1000))));
    let spans: Vec<_> = closed.iter().map(|r| (r.0.as_str(), r.1, r.2)).collect();
    assert_eq!(spans, [("a", 80, 130), ("b", 40, 70), ("b", 70, 100)]);
    assert_eq!(closed[0].3[2], serde_json::json!(3.0));
}

#[test]
fn update_mode_emits_the_changed_sessions_and_a_merge_once_from_its_earliest_start() {
    let mut op = WindowOperator::new(config(60, EmitMode::Update));
    op.add(s(0), &input("a", 1.0, "u1"), None);
    op.add(s(100), &input("a", 1.0, "u1"), None);
    op.add(s(0), &input("b", 1.0, "u1"), None);
    let first = rows(op.finish_batch(Some(s(0))));
    let spans: Vec<_> = first.iter().map(|r| (r.0.as_str(), r.1, r.2)).collect();
    assert_eq!(spans, [("a", 0, 60), ("a", 100, 160), ("b", 0, 60)]);
    op.add(s(50), &input("a", 1.0, "u2"), Some(s(0)));
    let second = rows(op.finish_batch(Some(s(10))));
    assert_eq!(
        second,
        vec![(
            "a".into(),
            0,
            160,
            values(serde_json::json!([3, 3.0, 1.0, 1.0, 1.0, 2]))
        )]
    );
    assert!(op.finish_batch(Some(s(20))).is_empty(), "nothing changed");
    // Closing emits nothing more in update mode.
    assert!(op.finish_batch(Some(s(1000))).is_empty());
    assert_eq!(op.rows(), 0);
}

#[test]
fn a_window_has_a_size_or_a_gap() {
    let mut both = config(60, EmitMode::Update);
    both.kafka = Some(crate::event_time::config::WindowKafkaConfig {
        topic: "t".into(),
        properties: Default::default(),
    });
    assert_eq!(both.check(), Ok(()));
    let refused = |c: &WindowConfig, needle: &str| {
        let err = c.check().unwrap_err();
        assert!(err.contains(needle), "{err}");
    };
    let mut c = both.clone();
    c.size = Some(Duration::from_secs(60));
    refused(&c, "not both");
    c.gap = None;
    assert_eq!(c.check(), Ok(()));
    c.size = None;
    refused(&c, "give size (tumbling or sliding windows) or gap");
    let mut c = both.clone();
    c.slide = Some(Duration::from_secs(1));
    refused(&c, "slide applies to size");
    c.slide = None;
    c.gap = Some(Duration::ZERO);
    refused(&c, "gap must be positive");
}

/// Saved state of the operator, sorted (compares by content).
fn saved(op: &WindowOperator) -> Vec<SavedGroup> {
    let json = serde_json::to_vec(&op.save_ref()).unwrap();
    let mut groups: Vec<SavedGroup> = serde_json::from_slice(&json).unwrap();
    groups.sort_by(|a, b| (a.start, &a.key).cmp(&(b.start, &b.key)));
    groups
}

#[test]
fn snapshots_and_deltas_of_sessions_recover_the_state_in_memory() {
    let mut op = WindowOperator::new(config(60, EmitMode::OnWindowClose));
    op.add(s(0), &input("a", 1.0, "u1"), None);
    op.add(s(100), &input("a", 2.0, "u2"), None);
    op.add(s(300), &input("b", 3.0, "u3"), None);
    op.finish_batch(Some(s(0)));
    // A snapshot, in postcard as snapshot files are, and in JSON.
    let binary = postcard::to_allocvec(&op.save_ref()).unwrap();
    let mut base = WindowOperator::new(config(60, EmitMode::OnWindowClose));
    base.restore(postcard::from_bytes(&binary).unwrap());
    assert_eq!(saved(&base), saved(&op));
    assert_eq!(base.rows(), 3);
    op.track();
    base.track();
    // A merge (100 merged away), a start moved back (300 to 260), a close (none yet).
    op.add(s(50), &input("a", 1.0, "u3"), Some(s(0)));
    op.add(s(260), &input("b", 1.0, "u1"), Some(s(0)));
    op.add(s(900), &input("c", 1.0, "u1"), Some(s(0)));
    op.finish_batch(Some(s(161)));
    assert_eq!(
        op.changed(),
        4,
        "2 open sessions changed (a's closed), 2 removed"
    );
    let delta = serde_json::to_vec(&op.delta()).unwrap();
    let delta: crate::event_time::delta::WindowDelta = serde_json::from_slice(&delta).unwrap();
    assert_eq!(delta.removed.len(), 2);
    base.apply(delta, Some(s(161)));
    assert_eq!(saved(&base), saved(&op));
    assert_eq!(base.rows(), 2, "a's merged session closed at 160");
    // Both go on alike.
    for o in [&mut op, &mut base] {
        o.add(s(330), &input("b", 1.0, "u9"), Some(s(161)));
    }
    assert_eq!(
        rows(op.finish_batch(Some(s(10_000)))),
        rows(base.finish_batch(Some(s(10_000))))
    );
}

#[test]
fn saved_tumbling_groups_do_not_load_into_sessions_nor_the_reverse() {
    let mut tumbling_config = config(60, EmitMode::OnWindowClose);
    tumbling_config.gap = None;
    tumbling_config.size = Some(Duration::from_secs(60));
    let mut tumbling = WindowOperator::new(tumbling_config.clone());
    tumbling.add(s(1), &input("a", 1.0, "u1"), None);
    let mut sessions = WindowOperator::new(config(60, EmitMode::OnWindowClose));
    sessions.add(s(1), &input("a", 1.0, "u1"), None);
    let mut op = WindowOperator::new(config(60, EmitMode::OnWindowClose));
    op.restore(saved(&tumbling));
    assert_eq!(op.rows(), 0);
    op.restore(saved(&sessions));
    assert_eq!(op.rows(), 1);
    let mut op = WindowOperator::new(tumbling_config);
    op.restore(saved(&sessions));
    assert_eq!(op.rows(), 0);
}

/// The sessions of the events, computed on their own: per key, times sorted, split where
/// consecutive events are `gap` or more apart. (key, start, end, count, sum, distinct).
fn expected(events: &[(usize, i64, u8)], gap: i64) -> Vec<(String, i64, i64, u64, f64, u64)> {
    let mut by_key: BTreeMap<usize, Vec<(i64, u8)>> = BTreeMap::new();
    for &(key, t, user) in events {
        by_key.entry(key).or_default().push((t, user));
    }
    let mut sessions = Vec::new();
    for (key, mut times) in by_key {
        times.sort_unstable();
        let mut current: Vec<(i64, u8)> = Vec::new();
        let mut flush = |current: &mut Vec<(i64, u8)>| {
            let (Some(first), Some(last)) = (current.first(), current.last()) else {
                return;
            };
            let mut users: Vec<u8> = current.iter().map(|e| e.1).collect();
            users.sort_unstable();
            users.dedup();
            let sum = current.iter().map(|e| e.0 as f64).sum();
            let n = current.len() as u64;
            sessions.push((
                format!("k{key}"),
                first.0,
                last.0 + gap,
                n,
                sum,
                users.len() as u64,
            ));
            current.clear();
        };
        for (t, user) in times {
            if current.last().is_some_and(|last| t - last.0 >= gap) {
                flush(&mut current);
            }
            current.push((t, user));
        }
        flush(&mut current);
    }
    sessions.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    sessions
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Events in random order, in random batches, with a watermark after each batch at
    /// most the earliest event still to come (so none is late): the sessions emitted on
    /// close are those of the independent computation. After each batch the state is
    /// saved, as a snapshot (postcard) or a delta (JSON) applied to a replica recovered
    /// from the earlier files, which then holds the same state; the operator sometimes
    /// restarts from that replica.
    #[test]
    fn sessions_emitted_on_close_are_those_computed_independently(
        events in prop::collection::vec((0usize..3, 0i64..400, 0u8..4), 0..60),
        cuts in prop::collection::vec((1usize..8, 0u8..3), 1..40),
        gap in 1i64..40,
    ) {
        let config = config(gap as u64, EmitMode::OnWindowClose);
        let mut op = WindowOperator::with_shards(config.clone(), 2);
        let mut replica = WindowOperator::with_shards(config.clone(), 3);
        let mut emitted = Vec::new();
        let (mut at, mut w) = (0, None);
        let mut cuts = cuts.into_iter().cycle();
        op.track();
        while at < events.len() {
            let (len, save) = cuts.next().unwrap_or((1, 0));
            let batch = &events[at..(at + len).min(events.len())];
            at += batch.len();
            for &(key, t, user) in batch {
                let key = format!("k{key}");
                op.add(s(t), &input(&key, t as f64, &format!("u{user}")), w);
            }
            let rest = events[at..].iter().map(|e| e.1).min();
            w = Some(s(rest.unwrap_or(100_000))).max(w);
            emitted.extend(rows(op.finish_batch(w)));
            if save == 1 {
                let snapshot = postcard::to_allocvec(&op.save_ref()).unwrap();
                replica.restore(postcard::from_bytes(&snapshot).unwrap());
            } else {
                let delta = serde_json::to_vec(&op.delta()).unwrap();
                replica.apply(serde_json::from_slice(&delta).unwrap(), w);
            }
            prop_assert_eq!(saved(&replica), saved(&op));
            if save == 2 {
                op = replica.clone();
            }
            op.track();
        }
        emitted.extend(rows(op.finish_batch(Some(s(1_000_000)))));
        emitted.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        let got: Vec<_> = emitted
            .into_iter()
            .map(|(key, start, end, v)| {
                let n = v[0].as_u64().unwrap();
                (key, start, end, n, v[1].as_f64().unwrap(), v[5].as_u64().unwrap())
            })
            .collect();
        prop_assert_eq!(got, expected(&events, gap));
    }
}

/// Snapshots are postcard, which saves an enum variant by its index: the accumulators of
/// older state files must read as they were written, so the session's last event time is
/// a variant after all of theirs, and a saved group's layout is unchanged.
#[test]
fn the_last_event_time_leaves_older_state_files_readable() {
    use crate::event_time::window::Accumulator;
    let old = [
        (Accumulator::Count(3), vec![0, 3]),
        (Accumulator::Min(None), vec![2, 0]),
        (
            Accumulator::Distinct([7].into_iter().collect()),
            vec![5, 1, 7],
        ),
    ];
    for (acc, bytes) in old {
        assert_eq!(postcard::to_allocvec(&acc).unwrap(), bytes, "{acc:?}");
        assert_eq!(postcard::from_bytes::<Accumulator>(&bytes).unwrap(), acc);
    }
    assert_eq!(
        postcard::to_allocvec(&Accumulator::Last(Micros(1))).unwrap(),
        [6, 2]
    );
    let group: SavedGroup =
        serde_json::from_str(r#"{"start":60000000,"key":["a"],"acc":[{"count":2}]}"#).unwrap();
    assert_eq!(group.acc, [Accumulator::Count(2)]);
}
