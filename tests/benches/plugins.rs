//! Plugin cost per event: the clickstream validator through Wasm vs the same rules compiled
//! natively, on the same events, in one run; and the boundary overhead of a plugin that
//! keeps everything.
//!
//! Run with `cargo bench -p sluice-tests --bench plugins` (optionally `-- EVENTS ROUNDS`).
//! Targets: Wasm ≤ 1.5× native per event; boundary overhead < 100 ns per event.

use std::time::Instant;

use clickstream_validator::Rules;
use sluice::generate::{Generator, GeneratorConfig};
use sluice::record::Record;
use sluice::udf::Verdict;
use sluice_tests::{load, plugins, records};

const CHUNK: usize = 1024;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let events: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(9);

    let values: Vec<String> = Generator::new(GeneratorConfig::default())
        .take(events)
        .collect();
    let records = records(&values);
    let refs: Vec<&Record> = records.iter().collect();

    let rules = Rules::default();
    let native_rejected = values
        .iter()
        .filter(|v| {
            rules
                .check(&sluice_guest::Event::new(v.as_bytes()))
                .is_err()
        })
        .count();
    let native = measure(rounds, events, || {
        let mut rejected = 0;
        for v in &values {
            rejected += usize::from(
                rules
                    .check(&sluice_guest::Event::new(std::hint::black_box(
                        v.as_bytes(),
                    )))
                    .is_err(),
            );
        }
        rejected
    });

    let validator = load(plugins::CLICKSTREAM_VALIDATOR, &[]).expect("validator loads");
    let wasm_rejected = run_plugin(&validator, &refs);
    assert_eq!(
        wasm_rejected, native_rejected,
        "Wasm and native verdicts differ"
    );
    let wasm = measure(rounds, events, || run_plugin(&validator, &refs));

    let keep_all = load(plugins::KEEP_ALL, &[]).expect("keep-all loads");
    let boundary = measure(rounds, events, || run_plugin(&keep_all, &refs));

    let encode = measure(rounds, events, || {
        refs.chunks(CHUNK)
            .map(|c| sluice::udf::chunk::encode(c.iter().copied()).values.len())
            .sum()
    });
    let ratio = wasm.median / native.median;
    println!(
        "plugin benchmark: {events} generated clickstream events ({native_rejected} invalid), chunks of {CHUNK}, {rounds} rounds"
    );
    println!("{:<44} {:>10} {:>10}", "", "median", "best");
    println!(
        "{:<44} {:>7.1} ns {:>7.1} ns",
        "validator, native (same rules, in the host)", native.median, native.best
    );
    println!(
        "{:<44} {:>7.1} ns {:>7.1} ns",
        "validator, Wasm (encode + call + decode)", wasm.median, wasm.best
    );
    println!(
        "{:<44} {:>7.1} ns {:>7.1} ns",
        "keep-all plugin, Wasm (boundary overhead)", boundary.median, boundary.best
    );
    println!(
        "{:<44} {:>7.1} ns {:>7.1} ns",
        "  of which chunk encoding on the host", encode.median, encode.best
    );
    println!(
        "Wasm/native: {ratio:.2}x (target <= 1.5x: {}); boundary: {:.1} ns/event (target < 100 ns: {})",
        verdict(ratio <= 1.5),
        boundary.median,
        verdict(boundary.median < 100.0)
    );
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

fn run_plugin(plugin: &sluice::udf::Plugin, records: &[&Record]) -> usize {
    let mut rejected = 0;
    for chunk in records.chunks(CHUNK) {
        let verdicts = plugin.process(chunk).expect("plugin call");
        rejected += verdicts
            .iter()
            .filter(|v| matches!(v, Verdict::Reject(_)))
            .count();
    }
    rejected
}

struct Timing {
    median: f64,
    best: f64,
}

/// Nanoseconds per event of `pass` over `events` events: median and best of `rounds`.
fn measure(rounds: usize, events: usize, mut pass: impl FnMut() -> usize) -> Timing {
    std::hint::black_box(pass()); // warm-up
    let mut per_event: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(pass());
            start.elapsed().as_nanos() as f64 / events as f64
        })
        .collect();
    per_event.sort_by(f64::total_cmp);
    Timing {
        median: per_event[per_event.len() / 2],
        best: per_event[0],
    }
}
