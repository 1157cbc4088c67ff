//! The join against a naive computation over the same events: every pair within the bound,
//! left-outer rows once the right watermark passes, state bounded by the watermarks, across
//! restarts from snapshots and deltas.

use std::time::Duration;

use proptest::prelude::*;

use super::config::{JoinColumn, JoinConfig, JoinField, JoinKind};
use super::*;
use crate::event_time::config::WindowKafkaConfig;
use crate::event_time::delta::tests::plan;
use crate::event_time::state::{MemoryStore, SavedState, StateStore, forget_old};
use crate::event_time::tests::config;
use crate::event_time::{EventTime, Fields};

const S: i64 = 1_000_000;

/// A join of events (`id`, `ts`, `user`) with records (`rid`, `ts`, `uid`, `tier`) on
/// user = uid.
fn join_config(kind: JoinKind, before: u64, after: u64, right_delay: u64) -> JoinConfig {
    JoinConfig {
        name: "j".into(),
        right_topic: "profiles".into(),
        right_time_field: "ts".into(),
        right_max_delay: Duration::from_secs(right_delay),
        on: vec!["user".into()],
        right_on: Some(vec!["uid".into()]),
        kind,
        before: Duration::from_secs(before),
        after: Duration::from_secs(after),
        left_fields: vec![JoinField::Name("id".into()), JoinField::Name("user".into())],
        right_fields: vec![
            JoinField::Name("rid".into()),
            JoinField::Column(JoinColumn {
                field: "ts".into(),
                name: Some("right_ts".into()),
                ty: Some("long".into()),
            }),
        ],
        max_rows: 1_000_000,
        kafka: Some(WindowKafkaConfig {
            topic: "out".into(),
            properties: Default::default(),
        }),
        iceberg: None,
    }
}

/// Event time in `ts` with 10 s of delay, late events dropped, no dedup, no windows.
fn operators(join: &JoinConfig) -> EventTime {
    EventTime::new(&config(), None, &[]).with_joins(std::slice::from_ref(join))
}

fn left(et: &EventTime, id: u32, secs: i64, user: Option<u32>) -> Fields {
    let user = user.map_or(String::new(), |u| format!(r#","user":"u{u}""#));
    et.fields(Some(
        format!(r#"{{"id":"e{id}","ts":{}{user}}}"#, secs * 1000).as_bytes(),
    ))
    .unwrap()
}

fn right(et: &EventTime, id: u32, secs: i64, user: u32) -> RightFields {
    let value = format!(
        r#"{{"rid":"r{id}","ts":{},"uid":"u{user}","tier":"gold"}}"#,
        secs * 1000
    );
    et.right_fields(0, Some(value.as_bytes())).unwrap()
}

/// A joined row as (left event id, right record id).
fn ids(row: &JoinRow) -> (String, Option<String>) {
    let text = |v: Option<&str>| serde_json::from_str::<String>(v.unwrap()).unwrap();
    let l = text(row.left.values().next().unwrap());
    let r = row.right.as_ref().map(|r| text(r.values().next().unwrap()));
    (l, r)
}

fn run(
    et: &mut EventTime,
    events: &[Fields],
    records: &[RightFields],
    flush: bool,
) -> Vec<(String, Option<String>)> {
    run_at(et, events, records, flush, Millis(0))
}

/// [`run`] at processing time `now`.
fn run_at(
    et: &mut EventTime,
    events: &[Fields],
    records: &[RightFields],
    flush: bool,
    now: Millis,
) -> Vec<(String, Option<String>)> {
    let right: Vec<(&str, &RightFields)> = records.iter().map(|r| ("profiles/0", r)).collect();
    let out = et.process_joined(events.iter().map(|f| ("clicks/0", f)), &[right], now, flush);
    let mut rows: Vec<_> = out.joined[0].iter().map(ids).collect();
    rows.sort();
    rows
}

fn pair(l: &str, r: Option<&str>) -> (String, Option<String>) {
    (l.to_string(), r.map(String::from))
}

fn join_op(et: &EventTime) -> &JoinOperator {
    et.joins().next().unwrap()
}

#[test]
fn pairs_within_the_bound_and_left_outer_rows_when_the_right_watermark_passes() {
    // right.ts in [left.ts - 60 s, left.ts + 0 s]; right watermark 5 s behind.
    let join = join_config(JoinKind::LeftOuter, 60, 0, 5);
    let mut et = operators(&join);
    // Batch 1: profiles of u1 at 100 s and u2 at 10 s; events of u1 at 130 s (matches
    // the 100 s profile), u2 at 130 s (the 10 s profile is 120 s before: no match), u3.
    let r = [right(&et, 1, 100, 1), right(&et, 2, 10, 2)];
    let e = [
        left(&et, 1, 130, Some(1)),
        left(&et, 2, 130, Some(2)),
        left(&et, 3, 131, Some(3)),
        left(&et, 4, 131, None),
    ];
    let rows = run(&mut et, &e, &r, false);
    // A left event without a key matches nothing: its left-outer row comes at once.
    assert_eq!(rows, [pair("e1", Some("r1")), pair("e4", None)]);
    // Right watermark 95 s, left 121 s: the 10 s profile leaves (10 + 60 < 121), the
    // 100 s one stays; no left row leaves (none is before 95 s).
    assert_eq!(join_op(&et).side_rows(), (3, 1));
    // Batch 2: a profile of u2 at 125 s and one of u3 at 200 s (only the right
    // watermark moves, to 195 s): e2 matches r3; e1 and e3 leave, e3 as a left-outer row.
    let r = [right(&et, 3, 125, 2), right(&et, 4, 200, 3)];
    let rows = run(&mut et, &[], &r, false);
    assert_eq!(rows, [pair("e2", Some("r3")), pair("e3", None)]);
    assert_eq!(join_op(&et).side_rows(), (0, 3));
    // A late profile (behind 195 s) is late; a left event at 140 s whose bound the right
    // watermark is past comes and goes in its batch, unmatched (the u1 profile at 100 s
    // is 40 s before it: it matches).
    let r = [right(&et, 5, 150, 1)];
    let e = [left(&et, 5, 140, Some(1)), left(&et, 6, 141, Some(7))];
    let out = et.process_joined(
        e.iter().map(|f| ("clicks/0", f)),
        &[r.iter().map(|r| ("profiles/0", r)).collect()],
        Millis(0),
        false,
    );
    assert_eq!(out.right_verdicts[0], [Arrival::Late]);
    let mut rows: Vec<_> = out.joined[0].iter().map(ids).collect();
    rows.sort();
    assert_eq!(rows, [pair("e5", Some("r1")), pair("e6", None)]);
    // The left watermark (131 s) passes 100 + 60 = 160 s only later: r1 stays till then.
    assert_eq!(join_op(&et).side_rows(), (0, 3));
    let e = [left(&et, 7, 300, Some(9))];
    run(&mut et, &e, &[], false);
    // Left watermark 290 s: r1 (160), r3 (185) and r4 (260) leave. e7 waits.
    assert_eq!(join_op(&et).side_rows(), (1, 0));
    // A flush moves the right watermark past every left row: e7 is emitted.
    assert!(et.due(Millis(0), true));
    let rows = run(&mut et, &[], &[], true);
    assert_eq!(rows, [pair("e7", None)]);
    assert_eq!(join_op(&et).side_rows(), (0, 0));
    assert!(!et.due(Millis(0), true));
}

#[test]
fn an_inner_join_emits_pairs_only_and_its_state_drops_with_the_watermarks() {
    let join = join_config(JoinKind::Inner, 60, 10, 0);
    let mut et = operators(&join);
    let r = [right(&et, 1, 100, 1), right(&et, 2, 115, 1)];
    let e = [
        left(&et, 1, 105, Some(1)),
        left(&et, 2, 170, Some(1)),
        left(&et, 3, 50, Some(2)),
    ];
    let rows = run(&mut et, &e, &r, false);
    // e1 at 105 s: [45, 115] holds both; e2 at 170: [110, 180] holds r2; e3 matches none.
    assert_eq!(
        rows,
        [
            pair("e1", Some("r1")),
            pair("e1", Some("r2")),
            pair("e2", Some("r2"))
        ]
    );
    // Right watermark 115 s: left rows before 105 s leave (e3). Left watermark 160 s:
    // right rows before 100 s leave (none: r1 is at 100).
    assert_eq!(join_op(&et).side_rows(), (2, 2));
    let sizes = et.state_sizes();
    assert_eq!(sizes["join:j"].rows, 4);
    assert!(sizes["join:j"].bytes > 0);
    // Both watermarks move far on: everything leaves, nothing is emitted.
    let e = [left(&et, 4, 1000, Some(3))];
    let r = [right(&et, 3, 1000, 4)];
    assert_eq!(run(&mut et, &e, &r, false), []);
    assert_eq!(join_op(&et).side_rows(), (1, 1));
}

#[test]
fn bad_right_records_are_reported() {
    let join = join_config(JoinKind::Inner, 60, 0, 0);
    let et = operators(&join);
    let e = et.right_fields(0, Some(br#"{"ts":1000}"#)).unwrap_err();
    assert_eq!(e.code, "missing_join_key");
    let e = et.right_fields(0, Some(br#"{"uid":"u1"}"#)).unwrap_err();
    assert_eq!(e.code, "missing_event_time");
    let e = et.right_fields(0, Some(b"[]")).unwrap_err();
    assert_eq!(e.code, "not_an_object");
}

/// The state, in a form that compares by content.
fn state(et: &EventTime) -> SavedState {
    let saved: SavedState =
        serde_json::from_slice(&serde_json::to_vec(&et.save_ref()).unwrap()).unwrap();
    saved.sorted()
}

/// One random batch: left events (user or none, seconds past the batch's base), right
/// records (user, seconds past the base), whether a restart follows it.
type Batch = (Vec<(Option<u32>, i64)>, Vec<(u32, i64)>, bool);

fn batches() -> impl Strategy<Value = Vec<Batch>> {
    let user = prop_oneof![9 => (0u32..5).prop_map(Some), 1 => Just(None)];
    let batch = (
        prop::collection::vec((user, -40i64..25), 0..8),
        prop::collection::vec((0u32..5, -60i64..25), 0..5),
        prop::bool::weighted(0.25),
    );
    prop::collection::vec(batch, 1..40)
}

/// What the naive computation expects of every batch: the rows emitted (left id, right id)
/// and the rows held after it (left, right).
type Expected = Vec<(Vec<(String, Option<String>)>, (usize, usize))>;

/// Every pair of on-time events and records within the bound, in the batch where the later
/// of the two came; every on-time left event matching none, in the first batch at or after
/// its own whose right watermark is past its time plus `after` (at once without a key).
/// Watermarks: one partition per side, so the newest time seen before the batch minus
/// the side's delay; before the right side has a partition, it follows the left one.
fn naive(batches: &[Batch], join: &JoinConfig, left_delay: i64) -> Expected {
    let (before, after) = (join.before_micros() / S, join.after_micros() / S);
    let right_delay = join.right_max_delay.as_secs() as i64;
    let outer = join.kind == JoinKind::LeftOuter;
    // (batch, id, user, secs)
    let mut lefts: Vec<(usize, u32, Option<u32>, i64)> = Vec::new();
    let mut rights: Vec<(usize, u32, u32, i64)> = Vec::new();
    let (mut left_max, mut right_max): (Option<i64>, Option<i64>) = (None, None);
    let mut watermarks = Vec::new(); // after each batch: (left, right)
    let (mut next_left, mut next_right) = (0u32, 0u32);
    let mut right_reached: Option<i64> = None;
    for (b, (events, records, _)) in batches.iter().enumerate() {
        let base = b as i64 * 10 + 100;
        let lw = left_max.map(|m| m - left_delay);
        let rw = right_max.map(|m| m - right_delay).or(lw).max(right_reached);
        for &(user, off) in events {
            let t = base + off;
            if lw.is_none_or(|w| t >= w) {
                lefts.push((b, next_left, user, t));
            }
            next_left += 1;
            left_max = Some(left_max.map_or(t, |m| m.max(t)));
        }
        for &(user, off) in records {
            let t = base + off;
            if rw.is_none_or(|w| t >= w) {
                rights.push((b, next_right, user, t));
            }
            next_right += 1;
            right_max = Some(right_max.map_or(t, |m| m.max(t)));
        }
        let lw = left_max.map(|m| m - left_delay).max(lw);
        let rw = right_max.map(|m| m - right_delay).or(lw).max(rw);
        right_reached = rw;
        watermarks.push((lw, rw));
    }
    let mut expected: Expected = watermarks.iter().map(|_| (Vec::new(), (0, 0))).collect();
    for &(bl, l, user, tl) in &lefts {
        let mut matched = false;
        for &(br, r, ruser, tr) in &rights {
            if Some(ruser) == user && tr >= tl - before && tr <= tl + after {
                matched = true;
                let b = bl.max(br);
                expected[b].0.push((format!("e{l}"), Some(format!("r{r}"))));
            }
        }
        if outer && !matched {
            let gone = (bl..watermarks.len())
                .find(|&b| user.is_none() || watermarks[b].1.is_some_and(|w| tl + after < w));
            if let Some(b) = gone {
                expected[b].0.push((format!("e{l}"), None));
            }
        }
    }
    for (b, (lw, rw)) in watermarks.iter().enumerate() {
        let held_left = lefts
            .iter()
            .filter(|&&(bl, _, user, tl)| {
                bl <= b && user.is_some() && rw.is_none_or(|w| tl + after >= w)
            })
            .count();
        let held_right = rights
            .iter()
            .filter(|&&(br, _, _, tr)| br <= b && lw.is_none_or(|w| tr + before >= w))
            .count();
        expected[b].1 = (held_left, held_right);
        expected[b].0.sort();
    }
    expected
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Over random batches (late and out-of-order events and profile updates, events
    /// without a key, restarts from the last state file saved, a snapshot or a delta), the
    /// join emits what the naive computation does, batch by batch, and holds exactly the
    /// rows the bound and the watermarks allow.
    #[test]
    fn the_join_is_the_naive_join_through_restarts(
        batches in batches(),
        outer in any::<bool>(),
        before in 0u64..60,
        after in 0u64..30,
        right_delay in 0u64..20,
    ) {
        let kind = if outer { JoinKind::LeftOuter } else { JoinKind::Inner };
        let join = join_config(kind, before, after, right_delay);
        let want = naive(&batches, &join, 10);
        let store = MemoryStore::default();
        let mut et = operators(&join);
        let (mut next_left, mut next_right) = (0u32, 0u32);
        for (b, (events, records, restart)) in batches.iter().enumerate() {
            let base = b as i64 * 10 + 100;
            let events: Vec<Fields> = events
                .iter()
                .map(|&(user, off)| {
                    next_left += 1;
                    left(&et, next_left - 1, base + off, user)
                })
                .collect();
            let records: Vec<RightFields> = records
                .iter()
                .map(|&(user, off)| {
                    next_right += 1;
                    right(&et, next_right - 1, base + off, user)
                })
                .collect();
            let rows = run(&mut et, &events, &records, false);
            prop_assert_eq!(&rows, &want[b].0, "rows of batch {}", b);
            prop_assert_eq!(join_op(&et).side_rows(), want[b].1, "rows held after batch {}", b);
            let batch_id = b as u64 + 1;
            let (file, _) = et.save(&store, "m", "p", "r", &plan(batch_id)).unwrap();
            let chain_start = et.chain().map_or(0, crate::event_time::delta::Chain::first_batch);
            forget_old(&store, "m", "p", batch_id, chain_start);
            if *restart {
                let mut again = operators(&join);
                again.recover(&store, Some(&file), true, "none", "").unwrap();
                prop_assert_eq!(state(&again), state(&et));
                et = again;
            }
        }
    }
}

/// A snapshot of a pipeline without joins reads as before (no bytes after the older
/// layout), and one with joins reads its joins back.
#[test]
fn snapshots_with_and_without_joins_read_back() {
    let store = MemoryStore::default();
    let mut plain = EventTime::new(&config(), None, &[]);
    let fields = plain.fields(Some(br#"{"ts":60000}"#)).unwrap();
    plain.process([("t/0", &fields)], Millis(0), false);
    let (path, _) = plain.save(&store, "m", "p", "r", &plan(1)).unwrap();
    let bytes = store.get(&path).unwrap().unwrap();
    let older = crate::event_time::state::StateFileRef {
        version: 1,
        pipeline: "p",
        plan: &plan(1),
        state: plain.save_ref(),
    };
    let mut expected = b"sluice-state-snapshot\n".to_vec();
    expected.extend(postcard::to_allocvec(&older).unwrap());
    assert_eq!(bytes, expected, "no trailing bytes without joins");
    let join = join_config(JoinKind::LeftOuter, 60, 0, 5);
    let mut et = operators(&join);
    let r = [right(&et, 1, 100, 1)];
    let e = [left(&et, 1, 130, Some(1)), left(&et, 2, 131, Some(2))];
    run(&mut et, &e, &r, false);
    let (path, _) = et.save(&store, "m", "q", "r", &plan(1)).unwrap();
    let mut again = operators(&join);
    again
        .recover(&store, Some(&path), true, "none", "")
        .unwrap();
    assert_eq!(state(&again), state(&et));
    assert_eq!(join_op(&again).side_rows(), (2, 1));
    // An older snapshot (no joins) restores a join empty.
    let mut from_plain = operators(&join);
    let plain_path = crate::event_time::state::run_path("m", "p", 1, "r");
    from_plain
        .recover(&store, Some(&plain_path), true, "none", "")
        .unwrap();
    assert_eq!(join_op(&from_plain).side_rows(), (0, 0));
}

/// The events of users 1 to `n` at `secs`, ids from `first`.
fn lefts(et: &EventTime, first: u32, n: u32, secs: i64) -> Vec<Fields> {
    (0..n)
        .map(|i| left(et, first + i, secs, Some(i + 1)))
        .collect()
}

/// A right topic that has sent nothing holds no left row back: the right watermark
/// follows the left one, and a left-outer join emits its unmatched rows as the left
/// watermark passes them (before: state grew with every event and nothing was emitted).
#[test]
fn a_right_side_that_sent_nothing_follows_the_left_watermark() {
    let join = join_config(JoinKind::LeftOuter, 60, 0, 5);
    let mut et = operators(&join);
    let mut emitted = Vec::new();
    for b in 0..20i64 {
        let e = lefts(&et, b as u32 * 10, 10, 100 + b * 20);
        emitted.extend(run_at(&mut et, &e, &[], false, Millis(b * 1_000)));
    }
    // Left watermark 470 s (480 - 10): every event up to 460 s has left, unmatched.
    assert_eq!(join_op(&et).side_rows(), (10, 0));
    assert_eq!(emitted.len(), 190);
    assert!(emitted.iter().all(|(_, r)| r.is_none()));
    assert_eq!(join_op(&et).watermark(), Some(Micros(470 * S)));
    // A profile arriving now behind the left watermark is late, as in Flink.
    let r = [right(&et, 1, 400, 1)];
    let out = et.process_joined([], &[vec![("profiles/0", &r[0])]], Millis(20_000), false);
    assert_eq!(out.right_verdicts[0], [Arrival::Late]);
}

/// In a backfill (event time 20 times faster than the wall clock), a right side that goes
/// quiet stops holding the left rows once idle, and then keeps up with the left side's
/// event time, not the wall clock's: the state stays bounded.
#[test]
fn an_idle_right_side_keeps_up_with_a_backfill() {
    let join = join_config(JoinKind::LeftOuter, 60, 0, 5);
    let mut et = operators(&join);
    let r = [right(&et, 1, 100, 99)];
    let first = lefts(&et, 0, 10, 100);
    let rows = run_at(&mut et, &first, &r, false, Millis(0));
    assert!(rows.is_empty(), "{rows:?}");
    let mut most_held = 0;
    for b in 1..100i64 {
        let e = lefts(&et, b as u32 * 10, 10, 100 + b * 20);
        run_at(&mut et, &e, &[], false, Millis(b * 1_000));
        if b > 5 {
            most_held = most_held.max(join_op(&et).side_rows().0);
        }
    }
    // Idle after 5 s: from then on only the last batch's events wait (before: ~940).
    assert!(most_held <= 10, "{most_held} left rows held");
    assert_eq!(
        join_op(&et).watermark(),
        Some(Micros((100 + 99 * 20 - 10) * S))
    );
}

/// `max-rows` bounds each side when the watermarks cannot: the oldest left rows leave
/// early, emitted unmatched in a left-outer join, and are counted.
#[test]
fn max_rows_evicts_the_oldest_rows_and_counts_them() {
    let mut join = join_config(JoinKind::LeftOuter, 60, 0, 5);
    join.max_rows = 25;
    let mut et = operators(&join);
    // A right side that keeps sending records at 0 s: its watermark stays at -5 s.
    let mut emitted = Vec::new();
    for b in 0..5i64 {
        let r = [right(&et, b as u32, 0, 99)];
        let e = lefts(&et, b as u32 * 10, 10, 100 + b);
        emitted.extend(run(&mut et, &e, &r, false));
    }
    // 50 events arrived, 10 at each time: past 25 the oldest time's rows all leave, so
    // 20 are held and the first 30 left, unmatched.
    assert_eq!(join_op(&et).side_rows().0, 20);
    assert_eq!(join_op(&et).evicted(), (30, 0));
    let mut ids: Vec<u32> = emitted
        .iter()
        .map(|(l, r)| {
            assert!(r.is_none());
            l[1..].parse().unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, (0..30).collect::<Vec<_>>());
}

#[test]
fn a_rows_id_is_its_records_position_and_the_same_in_every_run() {
    let id = row_id("clicks", 3, 1_234);
    assert_eq!(
        id,
        row_id("clicks", 3, 1_234),
        "the same position, the same id"
    );
    let others = [
        row_id("clicks", 3, 1_235),
        row_id("clicks", 4, 1_234),
        row_id("views", 3, 1_234),
    ];
    assert!(others.iter().all(|&o| o != id && o != 0), "{id} {others:?}");
    // Fixed by the hash's specification (xxHash64), so a row keeps its key across
    // versions of sluice.
    assert_eq!(
        id,
        twox_hash::XxHash64::oneshot(0, b"clicks\x03\0\0\0\xd2\x04\0\0\0\0\0\0")
    );
    // Events read with ids join under those ids; without, the join numbers them.
    let join = join_config(JoinKind::Inner, 60, 0, 5);
    let mut et = operators(&join);
    let mut l = left(&et, 1, 10, Some(1));
    l.id = row_id("clicks", 0, 7);
    let mut r = right(&et, 1, 5, 1);
    r.id = row_id("profiles", 0, 9);
    let out = et.process_joined(
        [("clicks/0", &l)],
        &[vec![("profiles/0", &r)]],
        Millis(0),
        false,
    );
    let ids: Vec<(u64, Option<u64>)> = out.joined[0]
        .iter()
        .map(|j| (j.left_id, j.right_id))
        .collect();
    assert_eq!(
        ids,
        [(row_id("clicks", 0, 7), Some(row_id("profiles", 0, 9)))]
    );
}

#[test]
fn a_record_read_for_a_join_carries_its_positions_id() {
    let record = crate::record::Record::with_value(
        "clicks".into(),
        41,
        br#"{"id":"e1","ts":1000,"user":"u1"}"#.to_vec(),
    );
    let join = join_config(JoinKind::Inner, 60, 0, 5);
    let fields = operators(&join).record_fields(&record).unwrap();
    assert_eq!(fields.id, row_id("clicks", record.partition, 41));
    let without = EventTime::new(&config(), None, &[]);
    assert_eq!(
        without.record_fields(&record).unwrap().id,
        0,
        "no join, no id"
    );
}
