//! Plugin cost per event: the clickstream validator through Wasm vs the same rules compiled
//! natively, on the same events, in one run; and the boundary overhead of a plugin that
//! keeps everything.
//!
//! Plugins are called on chunks, the columnar layout in which the pipeline's batches are
//! built, so a call costs the copy into the plugin, the plugin's loop and the decoding of
//! its answer. Laying out records that arrive one by one as chunks is measured on its own
//! line: a source that builds chunks directly does not pay it. So is the host's one
//! reading of each event's fields (contract `0.2.2`), which a pipeline makes once for all
//! its stages and its encoder (the encoder would read the fields anyway): the plugins'
//! lines include handing it over, not making it.
//!
//! The measurements are interleaved round by round (native, Wasm, keep-all), so that
//! a noisy neighbour slows all of them alike. The Wasm/native ratio is judged on the best
//! times (noise only adds time) and shown as the median of per-round ratios too.
//!
//! Run with `cargo bench -p sluice-tests --bench plugins` (optionally `-- EVENTS ROUNDS CHUNK`).
//! Targets: Wasm ≤ 1.2× native per event (issue 16); boundary overhead < 100 ns per event.

use std::path::Path;
use std::time::Instant;

use clickstream_validator::Rules;
use sluice::encode::index_fields;
use sluice::generate::{Generator, GeneratorConfig};
use sluice::plugin::config::{Grants, Limits, RuntimeConfig};
use sluice::plugin::{Chunk, Plugin, Runtime, Verdict};
use sluice::record::Record;
use sluice_tests::{chunks, load, plugins, records};

const WARM_UP_ROUNDS: usize = 5;
/// Target: the Wasm validator costs at most this many times the native one per event.
const WASM_TARGET: f64 = 1.2;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let events: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(30);
    // The pipeline's chunk size unless given.
    let chunk: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(RuntimeConfig::default().chunk_size);

    let values: Vec<String> = Generator::new(GeneratorConfig::default())
        .take(events)
        .map(|e| e.value)
        .collect();
    // As in a pipeline: the host reads each event's fields once (for every stage and the
    // encoder), then lays the records out as chunks.
    let chunks = chunks(&values, chunk);
    let records = records(&values);
    let refs: Vec<&Record> = records.iter().collect();
    let mut plain = records.clone();
    // The host's one reading of the fields, chunk by chunk, as a pipeline's piece.
    let mut read_fields = || -> usize {
        let mut read = 0;
        for piece in plain.chunks_mut(chunk) {
            index_fields(piece);
            read += piece.iter().filter(|r| r.spans.is_some()).count();
        }
        read
    };
    // Lays out the batch chunk by chunk, each dropped after use, as a pipeline does.
    let layout = || -> usize {
        refs.chunks(chunk)
            .map(|c| Chunk::laid_out(c.iter().copied(), false).0.len())
            .sum()
    };

    let rules = Rules::default();
    let native = || {
        values
            .iter()
            .filter(|v| {
                let event = sluice_guest::Event::new(std::hint::black_box(v.as_bytes()));
                rules.check(&event).is_err()
            })
            .count()
    };
    let validator = load(plugins::CLICKSTREAM_VALIDATOR, &[]).expect("validator loads");
    let keep_all = load(plugins::KEEP_ALL, &[]).expect("keep-all loads");
    // The same plugin on an engine without the call deadline (`enforce-call-timeout =
    // false`): shown to say what the deadline costs, not judged.
    let unchecked = Runtime::new(RuntimeConfig {
        enforce_call_timeout: false,
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let validator_unchecked = unchecked
        .load_file(
            "clickstream-validator",
            Path::new(plugins::CLICKSTREAM_VALIDATOR),
            Vec::new(),
            Limits::default(),
            Grants::default(),
        )
        .expect("validator loads");
    let invalid = native();
    assert_eq!(
        run_plugin(&validator, &chunks),
        invalid,
        "Wasm and native verdicts differ"
    );
    assert_eq!(run_plugin(&keep_all, &chunks), 0);
    assert_eq!(run_plugin(&validator_unchecked, &chunks), invalid);

    // Warm up until the steady state: the first hundreds of calls are slower.
    for _ in 0..WARM_UP_ROUNDS {
        std::hint::black_box((
            native(),
            run_plugin(&validator, &chunks),
            run_plugin(&keep_all, &chunks),
            run_plugin(&validator_unchecked, &chunks),
        ));
    }
    let per_event = |start: Instant| start.elapsed().as_nanos() as f64 / events as f64;
    let (mut t_native, mut t_wasm, mut t_boundary, mut t_layout, mut ratios) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut t_unchecked = Vec::new();
    for _ in 0..rounds.max(1) {
        let start = Instant::now();
        std::hint::black_box(native());
        t_native.push(per_event(start));
        let start = Instant::now();
        std::hint::black_box(run_plugin(&validator, &chunks));
        t_wasm.push(per_event(start));
        ratios.push(t_wasm[t_wasm.len() - 1] / t_native[t_native.len() - 1]);
        let start = Instant::now();
        std::hint::black_box(run_plugin(&keep_all, &chunks));
        t_boundary.push(per_event(start));
        let start = Instant::now();
        std::hint::black_box(run_plugin(&validator_unchecked, &chunks));
        t_unchecked.push(per_event(start));
    }
    // Measured apart: they allocate and free a chunk at a time.
    let mut t_fields = Vec::new();
    for _ in 0..rounds.max(1) {
        let start = Instant::now();
        std::hint::black_box(layout());
        t_layout.push(per_event(start));
        let start = Instant::now();
        std::hint::black_box(read_fields());
        t_fields.push(per_event(start));
    }

    println!(
        "plugin benchmark: {events} generated clickstream events ({invalid} invalid), chunks of {chunk}, {rounds} interleaved rounds"
    );
    println!("{:<46} {:>10} {:>10}", "ns per event", "median", "best");
    let row = |name: &str, t: &mut Vec<f64>| {
        let (median, best) = median_best(t);
        println!("{name:<46} {median:>10.1} {best:>10.1}");
        (median, best)
    };
    let (_, native_best) = row("validator, native (same rules, in the host)", &mut t_native);
    let (_, wasm_best) = row("validator, Wasm (call, plugin, decode)", &mut t_wasm);
    let (boundary, _) = row("keep-all plugin, Wasm (boundary overhead)", &mut t_boundary);
    let (_, unchecked_best) = row(
        "validator, Wasm, call timeout not enforced",
        &mut t_unchecked,
    );
    row("laying out records as chunks (host, once)", &mut t_layout);
    row(
        "reading the fields (host, once for all stages)",
        &mut t_fields,
    );
    // Noise only ever adds time, so the best times are the steadiest estimate; the median of
    // the per-round ratios is shown beside it.
    let (ratio_median, _) = median_best(&mut ratios);
    let ratio = wasm_best / native_best;
    println!(
        "Wasm/native: {ratio:.2}x of best times, {ratio_median:.2}x median of per-round ratios \
         (target <= {WASM_TARGET}x: {}); boundary: {boundary:.1} ns/event median (target < 100 ns: {})",
        verdict(ratio <= WASM_TARGET),
        verdict(boundary < 100.0)
    );
    println!(
        "(not judged) without enforced call timeouts ([runtime] enforce-call-timeout = false): \
         {:.2}x of best times; the deadline checks cost {:.0} ns/event",
        unchecked_best / native_best,
        wasm_best - unchecked_best
    );
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

fn run_plugin(plugin: &Plugin, chunks: &[Chunk]) -> usize {
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
