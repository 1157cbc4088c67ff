//! What a plugin written in JavaScript costs per event, next to the same rules in Rust: the
//! clickstream validator in both languages (`udfs/clickstream-validator`,
//! `udfs/js/clickstream-validator`) on the same generated events, in chunks of the same size,
//! through the same runtime. Two more JavaScript rows say where the time goes: the test guest
//! (`udfs/js/test-guest`) keeping every event without reading it (the chunk crossing and the
//! helper's loop), and parsing every value with `JSON.parse` before keeping it.
//!
//! Rounds are interleaved (Rust, JavaScript, keep, parse) so that a noisy neighbour slows
//! them alike. Nothing is judged: the numbers are printed, for the book's benchmarks chapter.
//!
//! Run with `cargo bench -p sluice-tests --bench js` (optionally `-- EVENTS ROUNDS CHUNK`).

use std::time::Instant;

use sluice::generate::{Generator, GeneratorConfig};
use sluice::plugin::config::{Grants, Limits, RuntimeConfig};
use sluice::plugin::{Chunk, Plugin, Verdict};
use sluice::units::ByteSize;
use sluice_tests::{chunks, load_with, plugins};

const WARM_UP_ROUNDS: usize = 3;
/// The JavaScript plugins' memory limit.
const JS_MEMORY_MIB: u64 = 512;

fn main() {
    let (validator_js, guest_js) = match (plugins::CLICKSTREAM_VALIDATOR_JS, plugins::JS_TEST_GUEST)
    {
        (Ok(validator), Ok(guest)) => (validator, guest),
        (Err(why), _) | (_, Err(why)) => {
            println!("JavaScript plugin benchmark skipped: {why}");
            return;
        }
    };
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let events: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let chunk: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(RuntimeConfig::default().chunk_size);

    let values: Vec<String> = Generator::new(GeneratorConfig::default())
        .take(events)
        .map(|e| e.value)
        .collect();
    let chunks = chunks(&values, chunk);

    // The JavaScript engine's heap settles above the default 64 MiB (see the book's chapter
    // on JavaScript plugins); the JavaScript plugins get more.
    let js_limits = Limits {
        memory: ByteSize::mib(JS_MEMORY_MIB),
        ..Limits::default()
    };
    let timed_load = |path: &str, params: &[(&str, &str)]| {
        let start = Instant::now();
        let limits = if path == plugins::CLICKSTREAM_VALIDATOR {
            Limits::default()
        } else {
            js_limits.clone()
        };
        let plugin = load_with(path, params, limits, Grants::default()).expect("plugin loads");
        (plugin, start.elapsed().as_secs_f64())
    };
    let (rust, rust_load) = timed_load(plugins::CLICKSTREAM_VALIDATOR, &[]);
    let (js, js_load) = timed_load(validator_js, &[]);
    let (keep, _) = timed_load(guest_js, &[("mode", "keep")]);
    let (parse, _) = timed_load(guest_js, &[("mode", "parse")]);

    let rejected = run(&rust, &chunks);
    assert_eq!(
        run(&js, &chunks),
        rejected,
        "JavaScript and Rust verdicts differ"
    );
    for _ in 0..WARM_UP_ROUNDS {
        std::hint::black_box((run(&rust, &chunks), run(&js, &chunks)));
        std::hint::black_box((run(&keep, &chunks), run(&parse, &chunks)));
    }
    let plugins = [&rust, &js, &keep, &parse];
    let mut times = vec![Vec::new(); plugins.len()];
    for _ in 0..rounds.max(1) {
        for (plugin, t) in plugins.iter().zip(&mut times) {
            let start = Instant::now();
            std::hint::black_box(run(plugin, &chunks));
            t.push(start.elapsed().as_nanos() as f64 / events as f64);
        }
    }
    let stats: Vec<(f64, f64)> = times.iter_mut().map(|t| median_best(t)).collect();
    let (rust_t, js_t, keep_t, parse_t) = (stats[0], stats[1], stats[2], stats[3]);

    println!(
        "JavaScript plugin benchmark: {events} generated clickstream events ({rejected} invalid), \
         chunks of {chunk}, {rounds} interleaved rounds"
    );
    println!("{:<60} {:>10} {:>10}", "ns per event", "median", "best");
    let row = |name: &str, (median, best): (f64, f64)| {
        println!("{name:<60} {median:>10.1} {best:>10.1}");
    };
    row("validator, Rust (Wasm)", rust_t);
    row("validator, JavaScript (Wasm)", js_t);
    row(
        "JavaScript, keep without reading (crossing + helper loop)",
        keep_t,
    );
    row("JavaScript, JSON.parse each value, keep", parse_t);
    println!(
        "JavaScript/Rust: {:.1}x (medians); of the JavaScript validator's {:.0} ns: crossing and \
         helper {:.0}, UTF-8 decoding and JSON.parse {:.0}, the rules {:.0}",
        js_t.0 / rust_t.0,
        js_t.0,
        keep_t.0,
        parse_t.0 - keep_t.0,
        js_t.0 - parse_t.0
    );
    println!(
        "loading (compile, instantiate, init): Rust {:.2} s ({} KiB), JavaScript {:.2} s ({} KiB)",
        rust_load,
        file_kib(plugins::CLICKSTREAM_VALIDATOR),
        js_load,
        file_kib(validator_js)
    );
}

fn file_kib(path: &str) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len() / 1024)
}

fn run(plugin: &Plugin, chunks: &[Chunk]) -> usize {
    let mut rejected = 0;
    for chunk in chunks {
        let verdicts = plugin.process(chunk).expect("plugin call");
        rejected += verdicts
            .iter()
            .filter(|v| matches!(v, Verdict::Reject(_)))
            .count();
    }
    rejected
}

fn median_best(values: &mut [f64]) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    (values[values.len() / 2], values[0])
}
