//! The retail enricher's cost per event through Wasm, beside the validator's on the same
//! events (the retail example's two stages), with the enricher's lookup tables as the
//! ingest benchmark loads them: 50 000 customers and the product catalog.
//!
//! Both run on the same chunks (the pipeline's chunk size), round by round, so that a noisy
//! neighbour slows both alike; the best times are judged. The enricher's cost is the whole
//! call: the chunk's lookups (announced ahead, one call per table), the plugin's loop and
//! the host's reading of its patches.
//!
//! Run with `cargo bench -p sluice-tests --bench enricher` (optionally `-- EVENTS ROUNDS`).
//! Target (issue 33): the enricher costs less per event than the validator.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use sluice::generate::{Generator, GeneratorConfig, Shape};
use sluice::lookup::{Lookups, Table, Version};
use sluice::plugin::config::{Grants, Limits, RuntimeConfig};
use sluice::plugin::{Chunk, Plugin, Runtime, Verdict};
use sluice_tests::{chunks, plugins};

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let events: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let chunk = RuntimeConfig::default().chunk_size;

    let values: Vec<String> = generated(Shape::Retail, events)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    let chunks = chunks(&values, chunk);

    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    runtime.lookups().set(tables());
    let load = |name: &str, path: &str, tables: &[&str]| {
        let grants = Grants {
            lookups: tables.iter().map(|t| t.to_string()).collect(),
            ..Grants::default()
        };
        runtime
            .load_file(name, Path::new(path), Vec::new(), Limits::default(), grants)
            .expect("plugin loads")
    };
    let validator = load("validate", plugins::CLICKSTREAM_VALIDATOR, &[]);
    let enricher = load(
        "enrich",
        plugins::RETAIL_ENRICHER,
        &["profiles", "products"],
    );
    let patched = run(&enricher, &chunks);
    assert!(
        patched > events / 2,
        "the enricher patched {patched} of {events}"
    );

    let per_event = |start: Instant| start.elapsed().as_nanos() as f64 / events as f64;
    let (mut t_validator, mut t_enricher) = (Vec::new(), Vec::new());
    for round in 0..rounds.max(1) + 3 {
        let start = Instant::now();
        std::hint::black_box(run(&validator, &chunks));
        let v = per_event(start);
        let start = Instant::now();
        std::hint::black_box(run(&enricher, &chunks));
        let e = per_event(start);
        if round >= 3 {
            // The first rounds warm up.
            t_validator.push(v);
            t_enricher.push(e);
        }
    }
    println!(
        "enricher benchmark: {events} generated retail events ({patched} patched), chunks of {chunk}, {rounds} interleaved rounds"
    );
    println!("{:<40} {:>10} {:>10}", "ns per event", "median", "best");
    let row = |name: &str, t: &mut Vec<f64>| {
        t.sort_by(f64::total_cmp);
        println!("{name:<40} {:>10.1} {:>10.1}", t[t.len() / 2], t[0]);
        t[0]
    };
    let v = row("validator, Wasm", &mut t_validator);
    let e = row("enricher, Wasm (lookups and patch)", &mut t_enricher);
    println!(
        "enricher / validator: {:.2}x of best times (target < 1: {})",
        e / v,
        if e < v { "met" } else { "NOT met" }
    );
}

/// Calls `plugin` on every chunk; the events it did not keep unchanged.
fn run(plugin: &Plugin, chunks: &[Chunk]) -> usize {
    let mut changed = 0;
    for chunk in chunks {
        let verdicts = plugin.process(chunk).expect("plugin call");
        changed += verdicts
            .iter()
            .filter(|v| !matches!(v, Verdict::Keep))
            .count();
    }
    changed
}

/// `count` generated events of `shape`: key and value.
fn generated(shape: Shape, count: usize) -> Vec<(String, String)> {
    let config = GeneratorConfig {
        shape,
        ..GeneratorConfig::default()
    };
    Generator::new(config)
        .take(count)
        .map(|e| (e.key, e.value))
        .collect()
}

/// The enricher's tables: the 50 000 customers and the product catalog.
fn tables() -> Lookups {
    let table = |shape, count| {
        let mut t = Table::new(Version::File {
            digest: format!("{shape:?}"),
        });
        for (key, value) in generated(shape, count) {
            t.insert(key.as_bytes(), value.as_bytes());
        }
        Arc::new(t)
    };
    Lookups::new(BTreeMap::from([
        ("profiles".to_string(), table(Shape::Customers, 50_000)),
        ("products".to_string(), table(Shape::Products, 4)),
    ]))
}
