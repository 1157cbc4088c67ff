//! Stream-stream join throughput and state memory: 1 000 000 clickstream events (the left
//! side) joined left-outer with profile updates (the right side) of 100 000 users on
//! `user_id`, profile within the hour before the event, in batches of 100 000 events, in
//! this process (no broker: this measures the operator).
//!
//! Run with `cargo bench -p sluice-tests --bench join` (optionally `-- EVENTS USERS`).
//! Every user first gets a profile (an hour before the events start), then one update per
//! ten events comes along the events; event time spans ten minutes (about 1 700 events per
//! second of event time), 2 minutes of delay on both sides.
//!
//! Prints: the rate of reading the join's fields (left events and right records, JSON, one
//! thread), the rate of the operators with the join (one thread: the join runs on the
//! thread that routes the batch), in events per second per core, the rows joined, the
//! largest state (rows, keys, bytes per key and per row) and the state at the end, and the
//! state files saved per batch (snapshots and deltas).

use std::time::{Duration, Instant};

use sluice::event_time::config::{AtEnd, EventTimeConfig, LateData, WindowKafkaConfig};
use sluice::event_time::delta::DELTA_SUFFIX;
use sluice::event_time::join::config::{JoinConfig, JoinField, JoinKind};
use sluice::event_time::join::{RightFields, row_id};
use sluice::event_time::state::{Plan, StateError, StateStore};
use sluice::event_time::{EventTime, Fields};
use sluice::units::Millis;

const START_MS: i64 = 1_785_319_200_000;

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .filter_map(|a| a.parse::<u64>().ok());
    let events = args.next().unwrap_or(1_000_000);
    let users = args.next().unwrap_or(100_000);
    let batch = 100_000usize;
    let op = operators();

    let (lefts, rights) = generate(events, users);
    let t = Instant::now();
    // Each record's row id from its position, as a pipeline reads it.
    let left: Vec<Fields> = lefts
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut f = op.fields(Some(v.as_bytes())).unwrap();
            f.id = row_id("events", 0, i as i64);
            f
        })
        .collect();
    let right: Vec<RightFields> = rights
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut f = op.right_fields(0, Some(v.as_bytes())).unwrap();
            f.id = row_id("profiles", 0, i as i64);
            f
        })
        .collect();
    let extract = t.elapsed();
    drop((lefts, rights));

    let mut op = op;
    let batches = left.len().div_ceil(batch).max(1);
    // The first profiles (one per user) come with the first batch, the updates spread over
    // the batches.
    let initial = users as usize;
    let per_batch = (right.len() - initial).div_ceil(batches);
    let (mut process, mut joined, mut save_time) = (Duration::ZERO, 0usize, Duration::ZERO);
    let (mut snapshots, mut deltas, mut saved_bytes) = (0u64, 0u64, 0u64);
    let mut largest = (0u64, 0u64, 0usize); // rows, bytes, keys
    for (i, chunk) in left.chunks(batch).enumerate() {
        let from = if i == 0 { 0 } else { initial + i * per_batch };
        let to = (initial + (i + 1) * per_batch).min(right.len());
        let records: Vec<(&str, &RightFields)> = right[from.min(to)..to]
            .iter()
            .map(|r| ("profiles/0", r))
            .collect();
        let now = Millis(START_MS + (i as i64 + 1) * 600_000 / batches as i64);
        let t = Instant::now();
        let out = op.process_joined(
            chunk.iter().map(|f| ("clicks/0", f)),
            &[records],
            now,
            false,
        );
        process += t.elapsed();
        joined += out.joined[0].len();
        let size = op.state_sizes()["join:j"];
        if size.bytes > largest.1 {
            largest = (size.rows, size.bytes, op.joins().next().unwrap().keys());
        }
        let plan = Plan {
            batch_id: i as u64 + 1,
            start: "{}".into(),
            end: "{}".into(),
            now_ms: now,
            session_start_ms: Millis(0),
            flush: false,
            held: Vec::new(),
            lookups: Default::default(),
            key: None,
        };
        let t = Instant::now();
        let (path, bytes) = op
            .save(&Discard, "mem://wh/t", "bench", "run", &plan)
            .unwrap();
        save_time += t.elapsed();
        saved_bytes += bytes;
        if path.ends_with(DELTA_SUFFIX) {
            deltas += 1;
        } else {
            snapshots += 1;
        }
    }
    let flushed = op.process_joined([], &[], Millis(START_MS + 1_200_000), true);
    joined += flushed.joined[0].len();
    let inputs = left.len() + right.len();
    assert!(
        joined >= left.len(),
        "every event is emitted at least once (left-outer)"
    );
    println!(
        "join of {} events with {} profile records ({users} users), batches of {batch}:",
        left.len(),
        right.len()
    );
    println!(
        "  reading the join's fields: {:.0} records/s on one thread",
        inputs as f64 / extract.as_secs_f64()
    );
    println!(
        "  operators with the join: {:.0} events/s per core ({:.0} records/s with the profiles), {:.1} ms per batch; {joined} rows joined",
        left.len() as f64 / process.as_secs_f64(),
        inputs as f64 / process.as_secs_f64(),
        process.as_secs_f64() * 1000.0 / batches as f64
    );
    let (rows, bytes, keys) = largest;
    println!(
        "  largest state: {rows} rows over {keys} keys, {:.1} MiB: {:.0} bytes per key, {:.0} bytes per row",
        bytes as f64 / 1048576.0,
        bytes as f64 / keys.max(1) as f64,
        bytes as f64 / rows.max(1) as f64
    );
    let end = op.state_sizes()["join:j"];
    println!(
        "  state after the flush: {} rows (the profiles of the last hour of event time), {:.1} MiB",
        end.rows,
        end.bytes as f64 / 1048576.0
    );
    println!(
        "  state files: {snapshots} snapshots, {deltas} deltas, {:.1} MiB and {:.0} ms per batch on average",
        saved_bytes as f64 / batches as f64 / 1048576.0,
        save_time.as_secs_f64() * 1000.0 / batches as f64
    );
}

/// Event time in `timestamp` (2 minutes of delay), the join `j` of the events with
/// profiles on `user_id`.
fn operators() -> EventTime {
    let et = EventTimeConfig {
        field: "timestamp".into(),
        max_delay: Duration::from_secs(120),
        idle_timeout: Duration::from_secs(30),
        max_future: Duration::from_secs(3600),
        late: LateData::Drop,
        late_topic: None,
        late_topic_properties: Default::default(),
        at_end: AtEnd::Keep,
        scale_out: Default::default(),
    };
    let name = |n: &str| JoinField::Name(n.into());
    let join = JoinConfig {
        name: "j".into(),
        right_topic: "profiles".into(),
        right_time_field: "updated_at".into(),
        right_max_delay: Duration::from_secs(120),
        on: vec!["user_id".into()],
        right_on: None,
        kind: JoinKind::LeftOuter,
        before: Duration::from_secs(3600),
        after: Duration::ZERO,
        left_fields: ["event_id", "user_id", "event_type", "timestamp", "page"]
            .map(name)
            .to_vec(),
        right_fields: ["tier", "country", "updated_at"].map(name).to_vec(),
        // Unbounded: the benchmark measures the operator, not the backstop.
        max_rows: usize::MAX,
        kafka: Some(WindowKafkaConfig {
            topic: "out".into(),
            properties: Default::default(),
        }),
        iceberg: None,
    };
    EventTime::new(&et, None, &[]).with_joins(&[join])
}

/// The events, and the profiles: one per user an hour before the events, then one
/// update per ten events, in time order.
fn generate(events: u64, users: u64) -> (Vec<String>, Vec<String>) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let types = ["page_view", "add_to_cart", "purchase"];
    let tiers = ["bronze", "silver", "gold", "platinum"];
    let span = 600_000u64;
    let left = (0..events)
        .map(|i| {
            let t = START_MS + (i * span / events.max(1)) as i64 + (next() % 5_000) as i64;
            format!(
                "{{\"event_id\":\"evt_{i:09}\",\"user_id\":\"user_{}\",\"event_type\":\"{}\",\"timestamp\":{t},\"page\":\"/p/{}\"}}",
                next() % users,
                types[(next() % 3) as usize],
                next() % 50
            )
        })
        .collect();
    let profile = |user: u64, t: i64, tier: &str| {
        format!(
            "{{\"user_id\":\"user_{user}\",\"tier\":\"{tier}\",\"country\":\"PT\",\"updated_at\":{t}}}"
        )
    };
    let mut right: Vec<String> = (0..users)
        .map(|u| profile(u, START_MS - 3_000_000, tiers[(u % 4) as usize]))
        .collect();
    let updates = events / 10;
    right.extend((0..updates).map(|i| {
        let t = START_MS + (i * span / updates.max(1)) as i64;
        profile(next() % users, t, tiers[(next() % 4) as usize])
    }));
    (left, right)
}

/// A store that keeps nothing: the benchmark measures encoding, not a disk.
struct Discard;

impl StateStore for Discard {
    fn put(&self, _: &str, _: Vec<u8>) -> Result<(), StateError> {
        Ok(())
    }

    fn get(&self, _: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(None)
    }

    fn delete(&self, _: &str) -> Result<(), StateError> {
        Ok(())
    }
}
