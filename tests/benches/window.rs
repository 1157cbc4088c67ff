//! Event-time throughput and state memory: deduplication and a windowed aggregate over
//! 1 000 000 events with 100 000 distinct group keys, in batches of 100 000 (the pipeline's
//! default cap), in this process (no broker: this measures the operators).
//!
//! Run with `cargo bench -p sluice-tests --bench window` (optionally `-- EVENTS KEYS`).
//! Event time spans ten minutes (about 1 700 events per second of event time), so with a
//! 2-minute delay and 1-minute windows each open window holds tens of thousands of keys and
//! the dedup state holds every event id of the last two minutes or more. 5% of events are
//! repeats of a recent event.
//!
//! Prints: the rate of reading the fields from JSON (on one thread and on every core, as
//! the pipeline does), the rate of the operators (dedup, watermark, windows) with their
//! keyed state in one shard on one thread and in a shard per core, each on its own thread
//! (target: ≥ 1 000 000 events/s on 2 cores), the largest state (rows and bytes per
//! operator; target: ≤ 200 bytes per row, a dedup key or a window group), the size of
//! the whole state as one JSON file and the time to write it (as before state deltas), the
//! bytes and time per batch of the files actually saved (snapshots and deltas), the time to
//! recover a state of `RECOVERY_KEYS` dedup keys (default 1 000 000) from its snapshot and
//! deltas, and the process's peak resident memory.

use std::time::{Duration, Instant};

use sluice::event_time::config::{
    AggregateConfig, AtEnd, DedupConfig, EmitMode, EventTimeConfig, Function, LateData,
    WindowConfig,
};
use sluice::event_time::delta::DELTA_SUFFIX;
use sluice::event_time::state::{MemoryStore, Plan, StateError, StateStore};
use sluice::event_time::{EventTime, Fields};
use sluice::units::Millis;

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .filter_map(|a| a.parse::<u64>().ok());
    let events = args.next().unwrap_or(1_000_000);
    let keys = args.next().unwrap_or(100_000);
    let recovery_keys = args.next().unwrap_or(1_000_000);
    let batch = 100_000usize;

    let values = generate(events, keys);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    let t = Instant::now();
    let fields = extract(&operators(1), &values, 1);
    let extract_one = t.elapsed();
    let t = Instant::now();
    let again = extract(&operators(cores), &values, cores);
    let extract_all = t.elapsed();
    assert_eq!(again.len(), fields.len());
    drop(again);

    let mut run = operate(&fields, 1, batch, true);
    let (every_core, _) = operate(&fields, cores, batch, false);
    // Shards change where the work is done, never what it gives.
    assert_eq!(
        (every_core.emitted, every_core.duplicates, every_core.late),
        (run.0.emitted, run.0.duplicates, run.0.late),
        "one thread and every core disagree"
    );
    run.0.events = events;
    run.0.keys = keys;
    run.0.extract = (extract_one, extract_all);
    run.0.cores = cores;
    run.0.process_all = every_core.process;
    run.0.print(&run.1);
    drop((fields, values));
    recovery(recovery_keys);
    println!(
        "peak RSS of this process (including the {events} input events): {} MiB",
        peak_rss_kib() / 1024
    );
}

/// Reads the operators' fields of every event, on `threads` threads.
fn extract(operators: &EventTime, values: &[String], threads: usize) -> Vec<Fields> {
    let chunk = values.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let parts: Vec<_> = values
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|v| operators.fields(Some(v.as_bytes())).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts.into_iter().flat_map(|p| p.join().unwrap()).collect()
    })
}

/// Runs the operators, with their keyed state in a shard per thread of `threads`, over
/// `fields` in batches, saving the state after each batch as the pipeline does (and, with
/// `json`, timing the whole state written as JSON too).
fn operate(fields: &[Fields], threads: usize, batch: usize, json: bool) -> (Run, Saved) {
    let mut operators = operators(threads);
    let partition = "clicks/0";
    let mut run = Run {
        batch,
        ..Run::default()
    };
    let mut saved = Saved::default();
    let batches_in = fields.len().div_ceil(batch).max(1);
    for (i, chunk) in fields.chunks(batch).enumerate() {
        // Processing time keeps up with event time: each batch a minute after the last,
        // just past its events (they span ten minutes).
        let now = Millis(START_MS + (i as i64 + 1) * 600_000 / batches_in as i64);
        let t = Instant::now();
        let outcome = operators.process(chunk.iter().map(|f| (partition, f)), now, false);
        run.process += t.elapsed();
        run.emitted += outcome.emitted.iter().map(Vec::len).sum::<usize>();
        run.duplicates += outcome.duplicates;
        run.late += outcome.late;
        let sizes = operators.state_sizes();
        let (d, w) = (sizes["dedup"], sizes["window:by-user"]);
        let largest = &mut run.largest;
        if d.bytes + w.bytes > largest.1 + largest.3 {
            *largest = (d.rows, d.bytes, w.rows, w.bytes);
        }
        saved.save(&mut operators, &Discard, i as u64 + 1);
        if json {
            let t = Instant::now();
            let file = serde_json::to_vec(&operators.save_ref()).unwrap();
            run.save += t.elapsed();
            run.largest_file = run.largest_file.max(file.len());
        }
    }
    let flushed = operators.process([], Millis(START_MS + 1_200_000), true);
    run.emitted += flushed.emitted.iter().map(Vec::len).sum::<usize>();
    // A benchmark of operators that did nothing measures nothing (as when every event
    // fell beyond `max-future` of a processing time in 1970).
    assert!(
        run.emitted > 0 && run.duplicates > 0 && run.largest.0 > 0,
        "the operators did nothing: {} window results, {} duplicates",
        run.emitted,
        run.duplicates
    );
    (run, saved)
}

/// What a run of the operators measured.
#[derive(Default)]
struct Run {
    events: u64,
    keys: u64,
    batch: usize,
    /// Reading the fields on one thread and on every core.
    extract: (Duration, Duration),
    cores: usize,
    /// The operators on one thread (one shard), and on every core.
    process: Duration,
    process_all: Duration,
    save: Duration,
    emitted: usize,
    duplicates: u64,
    late: u64,
    /// Dedup rows and bytes, window rows and bytes, at the largest.
    largest: (u64, u64, u64, u64),
    largest_file: usize,
}

impl Run {
    fn print(&self, saved: &Saved) {
        let batches = self.events.div_ceil(self.batch as u64) as f64;
        let rate = |d: Duration| self.events as f64 / d.as_secs_f64();
        println!(
            "{} events, {} distinct group keys, batches of {}",
            self.events, self.keys, self.batch
        );
        let met = |ok: bool| if ok { "met" } else { "NOT met" };
        println!(
            "read fields from JSON:                     {:>10.0} events/s on one thread, {:>10.0} on {} threads",
            rate(self.extract.0),
            rate(self.extract.1),
            self.cores
        );
        println!(
            "dedup + watermark + window (one thread):   {:>10.0} events/s ({} duplicates dropped, {} late, {} window results)",
            rate(self.process),
            self.duplicates,
            self.late,
            self.emitted
        );
        let all = rate(self.process_all);
        println!(
            "dedup + watermark + window ({} threads):    {:>10.0} events/s (target ≥ 1 000 000 on 2 cores: {})",
            self.cores,
            all,
            met(all >= 1_000_000.0)
        );
        println!(
            "fields and operators, {} threads:           {:>10.0} events/s",
            self.cores,
            rate(self.extract.1 + self.process_all)
        );
        let (d_rows, d_bytes, w_rows, w_bytes) = self.largest;
        let per_row = (d_bytes + w_bytes) as f64 / (d_rows + w_rows).max(1) as f64;
        println!(
            "largest state: dedup {} keys ≈ {:.1} MiB ({:.0} B each), window {} groups ≈ {:.1} MiB ({:.0} B each); {:.0} bytes per row (target ≤ 200: {})",
            d_rows,
            d_bytes as f64 / 1048576.0,
            d_bytes as f64 / d_rows.max(1) as f64,
            w_rows,
            w_bytes as f64 / 1048576.0,
            w_bytes as f64 / w_rows.max(1) as f64,
            per_row,
            met(per_row <= 200.0)
        );
        println!(
            "state file: up to {:.1} MiB, written in {:.0} ms per batch on average",
            self.largest_file as f64 / 1048576.0,
            self.save.as_secs_f64() * 1000.0 / batches
        );
        println!(
            "state files saved (snapshot every 32 or when the deltas outweigh it): {} snapshots, {} deltas; {:.2} MiB per batch on average (largest delta {:.2} MiB), written in {:.0} ms per batch on average",
            saved.snapshots,
            saved.deltas,
            saved.bytes as f64 / batches / 1048576.0,
            saved.largest_delta as f64 / 1048576.0,
            saved.time.as_secs_f64() * 1000.0 / batches
        );
    }
}

/// A store that keeps nothing: the time of saving without the storage's.
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

/// The state files saved per batch, as the pipeline saves them.
#[derive(Default)]
struct Saved {
    snapshots: u64,
    deltas: u64,
    bytes: u64,
    largest_delta: u64,
    time: Duration,
    last: String,
}

impl Saved {
    fn save(&mut self, operators: &mut EventTime, store: &dyn StateStore, batch_id: u64) {
        let plan = Plan {
            batch_id,
            start: "{}".into(),
            end: "{}".into(),
            now_ms: Millis(0),
            session_start_ms: Millis(0),
            flush: false,
            held: Vec::new(),
            lookups: Default::default(),
            key: None,
        };
        let t = Instant::now();
        let (path, size) = operators
            .save(store, "mem://wh/t", "bench", "run", &plan)
            .unwrap();
        self.time += t.elapsed();
        self.bytes += size;
        if path.ends_with(DELTA_SUFFIX) {
            self.deltas += 1;
            self.largest_delta = self.largest_delta.max(size);
        } else {
            self.snapshots += 1;
        }
        self.last = path;
    }
}

/// Builds a state of `keys` dedup keys (and their window groups) in batches of 100 000,
/// then 20 batches of 1 000 events, saving each as the pipeline does; returns what the
/// small batches saved.
fn build_state(keys: u64) -> (EventTime, MemoryStore, Saved) {
    let mut operators = operators(1);
    let store = MemoryStore::default();
    let mut saved = Saved::default();
    // All within one minute of event time: nothing is forgotten (2-minute delay).
    let event = |i: u64| {
        format!(
            "{{\"event_id\":\"evt_{i:09}\",\"user_id\":\"user_{}\",\"timestamp\":{},\"page\":\"/p/{}\",\"price\":1.5}}",
            i % 100_000,
            START_MS + (i * 60_000 / keys.max(1)) as i64,
            i % 50
        )
    };
    let now = Millis(START_MS + 60_000);
    let large = (0..keys)
        .step_by(100_000)
        .map(|s| s..(s + 100_000).min(keys));
    let small = (0..20).map(|i| keys + i * 1_000..keys + (i + 1) * 1_000);
    let mut small_batches = Saved::default();
    for (batch_id, range) in (1..).zip(large.chain(small)) {
        let fields: Vec<Fields> = range
            .clone()
            .map(|i| operators.fields(Some(event(i).as_bytes())).unwrap())
            .collect();
        operators.process(fields.iter().map(|f| ("clicks/0", f)), now, false);
        let saved = if range.start < keys {
            &mut saved
        } else {
            &mut small_batches
        };
        saved.save(&mut operators, &store, batch_id);
    }
    (operators, store, small_batches)
}

/// Prints the time to recover a state of `keys` dedup keys from the last file saved (its
/// snapshot and deltas), and from one snapshot of the same state.
fn recovery(keys: u64) {
    let (operators, store, saved) = build_state(keys);
    println!(
        "batches of 1 000 events on a state of {} dedup keys: {} snapshots, {} deltas, {:.1} KiB and {:.1} ms per batch on average",
        operators.state_sizes()["dedup"].rows,
        saved.snapshots,
        saved.deltas,
        saved.bytes as f64 / 20.0 / 1024.0,
        saved.time.as_secs_f64() * 1000.0 / 20.0
    );
    let chain = operators.chain().expect("saved").clone();
    let mut again = self::operators(1);
    let t = Instant::now();
    again
        .recover(&store, Some(&saved.last), true, "none", "")
        .unwrap();
    let from_chain = t.elapsed();
    let bytes = |p: &String| store.get(p).unwrap().map_or(0, |b| b.len());
    let deltas: usize = chain.paths.deltas.iter().map(bytes).sum();
    let sizes = again.state_sizes();
    let rows = |et: &EventTime| {
        et.state_sizes()
            .values()
            .map(|s| s.rows)
            .collect::<Vec<_>>()
    };
    assert_eq!(rows(&again), rows(&operators), "the recovered state");
    // The same state as one snapshot.
    let mut snapshot = Saved::default();
    let mut restored = self::operators(1);
    let t = Instant::now();
    let whole = serde_json::to_vec(&again.save_ref()).unwrap();
    let json_time = t.elapsed();
    restored.restore(serde_json::from_slice(&whole).unwrap());
    snapshot.save(&mut restored, &store, 1_000_000);
    let t = Instant::now();
    self::operators(1)
        .recover(&store, Some(&snapshot.last), true, "none", "")
        .unwrap();
    let from_snapshot = t.elapsed();
    println!(
        "that state whole: as JSON {:.1} MiB in {:.0} ms; as a binary snapshot {:.1} MiB in {:.0} ms",
        whole.len() as f64 / 1048576.0,
        json_time.as_secs_f64() * 1000.0,
        snapshot.bytes as f64 / 1048576.0,
        snapshot.time.as_secs_f64() * 1000.0
    );
    println!(
        "recovery of {} dedup keys and {} window groups: {:.0} ms from a snapshot ({:.1} MiB) and {} deltas ({:.2} MiB); {:.0} ms from one snapshot ({:.1} MiB)",
        sizes["dedup"].rows,
        sizes["window:by-user"].rows,
        from_chain.as_secs_f64() * 1000.0,
        bytes(&chain.paths.base) as f64 / 1048576.0,
        chain.paths.deltas.len(),
        deltas as f64 / 1048576.0,
        from_snapshot.as_secs_f64() * 1000.0,
        snapshot.bytes as f64 / 1048576.0,
    );
}

fn operators(threads: usize) -> EventTime {
    let event_time = EventTimeConfig {
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
    let aggregate = |name: &str, function, field: Option<&str>| AggregateConfig {
        name: name.into(),
        function,
        field: field.map(String::from),
    };
    let window = WindowConfig {
        name: "by-user".into(),
        size: Some(Duration::from_secs(60)),
        gap: None,
        slide: None,
        group_by: vec!["user_id".into()],
        aggregates: vec![
            aggregate("events", Function::Count, None),
            aggregate("pages", Function::DistinctCount, Some("page")),
            aggregate("spent", Function::Sum, Some("price")),
        ],
        emit: EmitMode::OnWindowClose,
        kafka: None,
        iceberg: None,
    };
    EventTime::new(
        &event_time,
        Some(&DedupConfig {
            keys: vec!["event_id".into()],
        }),
        &[window],
    )
    .with_threads(threads)
}

/// `events` analytics events over ten minutes of event time, users drawn from `keys`, 5%
/// repeats of one of the previous 100 events.
/// The first event's time: 2026-07-29T10:00:00Z, in ms. The events span ten minutes.
const START_MS: i64 = 1_785_319_200_000;

fn generate(events: u64, keys: u64) -> Vec<String> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let types = ["page_view", "add_to_cart", "purchase"];
    let start = START_MS;
    let mut out: Vec<String> = Vec::with_capacity(events as usize);
    for i in 0..events {
        if i > 100 && next() % 100 < 5 {
            let copy = out[(i - 1 - next() % 100) as usize].clone();
            out.push(copy);
            continue;
        }
        let time = start + (i as i64 * 600_000) / events as i64;
        let user = next() % keys;
        let r = next();
        out.push(format!(
            "{{\"event_id\":\"evt_{i:09}\",\"user_id\":\"user_{user}\",\"event_type\":\"{}\",\"timestamp\":{time},\"page\":\"/product/{}\",\"price\":{}.{:02}}}",
            types[(r % 3) as usize],
            (r >> 8) % 50,
            (r >> 16) % 100,
            (r >> 24) % 100
        ));
    }
    out
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}
