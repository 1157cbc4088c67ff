//! Lookup cost per key from a plugin: through Wasm (the `lookup` import, one call per key,
//! and `lookup-many`, one call per event for all its keys) vs the same SDK calls compiled
//! natively (reading the SDK's in-memory twin), and the host's own hash-map read.
//!
//! Every event names `KEYS` user ids of a table of 50,000 generated customer profiles
//! (`sluice produce --shape customers`); the `lookup-probe` test guest looks them up and
//! keeps the event. Its `none` mode parses the same events without looking anything up:
//! the Wasm cost of a lookup is the difference, divided by the keys. Rounds are
//! interleaved and the best time of each measurement is used (noise only adds time).
//!
//! Then what refreshing a topic's table costs between batches when nothing changed (the
//! end offsets asked for, the last record read again to tell a replaced topic), against
//! a tansu broker: the median of [`REFRESHES`], with the target (≤ [`REFRESH_TARGET`]).
//!
//! Run with `cargo bench -p sluice-tests --bench lookups` (optionally `-- EVENTS ROUNDS`).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::generate::{Generator, GeneratorConfig, Shape};
use sluice::lookup::{Lookups, Table, Version};
use sluice::plugin::config::{Grants, Limits, RuntimeConfig};
use sluice::plugin::{Chunk, Plugin, Runtime};
use sluice::record::Record;
use sluice_guest::testing;
use sluice_tests::{plugins, records};

/// Keys each event looks up.
const KEYS: usize = 16;
/// Refreshes timed with nothing new.
const REFRESHES: usize = 10;
/// The most a refresh with nothing new should cost: at 10 000 records per batch a batch
/// takes ~0.1 s of CPU, and the wait is paid per table at every batch boundary.
const REFRESH_TARGET: Duration = Duration::from_millis(50);
const WARM_UP_ROUNDS: usize = 2;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let events: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);

    let customers: Vec<(String, String)> = Generator::new(GeneratorConfig {
        shape: Shape::Customers,
        invalid_share: 0.0,
        ..GeneratorConfig::default()
    })
    .take(50_000)
    .map(|e| (e.key, e.value))
    .collect();
    let keys = event_keys(&customers, events);
    let values: Vec<String> = keys
        .chunks(KEYS)
        .map(|k| serde_json::json!({"table": "profiles", "keys": k}).to_string())
        .collect();
    let records = records(&values);
    let refs: Vec<&Record> = records.iter().collect();
    let chunks: Vec<Chunk> = refs
        .chunks(RuntimeConfig::default().chunk_size)
        .map(|c| Chunk::from_records(c.iter().copied()))
        .collect();

    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let table = host_table(&customers);
    runtime.lookups().set(table.clone());
    let probe = |mode| probe(&runtime, mode);
    let (none, single, many) = (probe("none"), probe("single"), probe("many"));
    testing::lookups([("profiles", twin_table(&customers))]);

    let mut best = [Duration::MAX; 6];
    for round in 0..WARM_UP_ROUNDS + rounds {
        let times = [
            time(|| run(&none, &chunks)),
            time(|| run(&single, &chunks)),
            time(|| run(&many, &chunks)),
            time(|| native_single(&keys)),
            time(|| native_many(&keys)),
            time(|| host_get(&table, &keys)),
        ];
        if round >= WARM_UP_ROUNDS {
            for (b, t) in best.iter_mut().zip(times) {
                *b = (*b).min(t);
            }
        }
    }
    report(events, keys.len(), best);
    refresh_with_nothing_new();
}

/// Times refreshes of a table read from a topic on tansu, with nothing new in between.
fn refresh_with_nothing_new() {
    use sluice::lookup::load::Loader;
    use sluice::lookup::topic::TopicLoader;

    let broker = sluice_tests::broker::Broker::start();
    let args = [
        "--shape",
        "customers",
        "--count",
        "1000",
        "--partitions",
        "2",
    ];
    let produced = sluice_tests::produce(&broker.bootstrap, "profiles", &args);
    let connection = sluice::kafka::Connection::plain(&broker.bootstrap);
    let mut loader = TopicLoader::new("profiles", "profiles", &connection, 1 << 30).unwrap();
    let mut table = Arc::new(loader.empty());
    loader.refresh(&mut table).unwrap();
    assert!(!table.is_empty() && table.len() as u64 <= produced.delivered);
    let mut times: Vec<Duration> = (0..REFRESHES)
        .map(|_| {
            let start = Instant::now();
            assert!(!loader.refresh(&mut table).unwrap(), "nothing changed");
            start.elapsed()
        })
        .collect();
    times.sort();
    let median = times[REFRESHES / 2];
    let met = if median <= REFRESH_TARGET {
        "met"
    } else {
        "NOT met"
    };
    println!(
        "refresh of a topic's table (2 partitions, tansu) with nothing new: median {:.1} ms, \
         slowest {:.1} ms (target ≤ {} ms: {met})",
        median.as_secs_f64() * 1e3,
        times[REFRESHES - 1].as_secs_f64() * 1e3,
        REFRESH_TARGET.as_millis()
    );
}

/// `KEYS` user ids per event, spread over the table, a few of them absent.
fn event_keys(customers: &[(String, String)], events: usize) -> Vec<String> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..events * KEYS)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let pick = (state >> 33) as usize % (customers.len() + customers.len() / 20);
            customers
                .get(pick)
                .map_or_else(|| format!("nobody_{pick}"), |c| c.0.clone())
        })
        .collect()
}

fn host_table(customers: &[(String, String)]) -> Lookups {
    let mut table = Table::new(Version::File {
        digest: "bench".into(),
    });
    for (k, v) in customers {
        table.insert(k.as_bytes(), v.as_bytes());
    }
    Lookups::new(BTreeMap::from([("profiles".into(), Arc::new(table))]))
}

fn twin_table(customers: &[(String, String)]) -> testing::Table {
    customers
        .iter()
        .fold(testing::Table::new(), |t, (k, v)| t.raw(k, v.as_bytes()))
}

fn probe(runtime: &Runtime, mode: &str) -> Plugin {
    let grants = Grants {
        lookups: vec!["profiles".into()],
        ..Grants::default()
    };
    let params = vec![("mode".into(), mode.into()), ("keep".into(), "true".into())];
    let path = Path::new(plugins::LOOKUP_PROBE);
    runtime
        .load_file(mode, path, params, Limits::default(), grants)
        .expect("the probe loads")
}

fn time(f: impl FnOnce() -> usize) -> Duration {
    let start = Instant::now();
    black_box(f());
    start.elapsed()
}

fn run(plugin: &Plugin, chunks: &[Chunk]) -> usize {
    chunks
        .iter()
        .map(|c| {
            plugin
                .process(c)
                .expect("the probe keeps every event")
                .len()
        })
        .sum()
}

fn native_single(keys: &[String]) -> usize {
    keys.iter()
        .filter(|k| {
            let value = sluice_guest::lookup_raw("profiles", black_box(k.as_bytes()));
            value.expect("the table is set").is_some()
        })
        .count()
}

fn native_many(keys: &[String]) -> usize {
    keys.chunks(KEYS)
        .map(|k| {
            let values = sluice_guest::lookup_many_raw("profiles", black_box(k));
            values.expect("the table is set").iter().flatten().count()
        })
        .sum()
}

fn host_get(lookups: &Lookups, keys: &[String]) -> usize {
    let table = lookups.table("profiles").expect("the table is set");
    keys.iter()
        .filter(|k| table.get(black_box(k.as_bytes())).is_some())
        .count()
}

fn report(events: usize, lookups: usize, best: [Duration; 6]) {
    let per = |d: Duration, n: usize| d.as_nanos() as f64 / n as f64;
    let [none, single, many, native_single, native_many, host] = best;
    let wasm = |d: Duration| per(d.saturating_sub(none), lookups);
    println!("lookups: {events} events x {KEYS} keys, table of 50,000 profiles (best of rounds)");
    println!(
        "  probe without lookups (baseline)  {:>8.1} ns/event",
        per(none, events)
    );
    println!(
        "  Wasm, lookup per key              {:>8.1} ns/lookup",
        wasm(single)
    );
    println!(
        "  Wasm, lookup-many per event       {:>8.1} ns/lookup",
        wasm(many)
    );
    println!(
        "  native SDK twin, lookup per key   {:>8.1} ns/lookup",
        per(native_single, lookups)
    );
    println!(
        "  native SDK twin, lookup_many      {:>8.1} ns/lookup",
        per(native_many, lookups)
    );
    println!(
        "  host Table::get (hash map read)   {:>8.1} ns/lookup",
        per(host, lookups)
    );
}
