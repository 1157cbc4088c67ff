//! Schema evolution's costs, on the library (no broker): what one schema-changing commit
//! costs beside a plain one, what the per-batch reload of the table (how a running
//! pipeline sees a schema changed by someone else) costs, and what encoding nested events
//! costs beside flat ones.
//!
//! - **Commits**, on the SQL catalog on SQLite in a temporary warehouse: `COMMITS`
//!   snapshots of no files each, plain, then as many that each add one column (planned
//!   with [`plan`], committed with its snapshot), then as many table reloads. Prints the
//!   median and the 90th percentile of each, in milliseconds.
//! - **Encoding**, one thread: `EVENTS` events of the retail shape flat (12 columns), the
//!   same with nested columns (a list of 1 to 4 item structs, a context struct, a map of
//!   UTM tags), and the flat ones with `unknown-fields = "add"` (the steady state of an
//!   evolving pipeline: no new field), in five interleaved rounds. Prints the best events
//!   per second of each and MB of JSON per second.
//!
//! Then the targets and whether each is met: an evolution commit costs at most 3× a plain
//! one; a reload at most a plain commit; the steady state of `"add"` encodes at least 95%
//! as fast as `"drop"`.
//!
//! Run with `cargo bench -p sluice-tests --bench evolve` (optionally `-- EVENTS`, default
//! 200 000).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use iceberg::spec::{PrimitiveType, Schema, Type};
use sluice::checkpoint::CommitMark;
use sluice::encode::{Encoder, Evolving, UnknownFields, Wanted};
use sluice::iceberg::evolve::plan;
use sluice::iceberg::{Evolution, Fence, IcebergCatalog, IcebergSinkConfig, IcebergTable};
use sluice::record::Offsets;

const COMMITS: usize = 40;

fn main() {
    let events: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let (plain, evolving, reload) = commits();
    let encoding = encodings(events);
    println!("targets:");
    let targets = [
        (
            "an evolution commit ≤ 3 × a plain commit (medians)".to_string(),
            evolving <= plain * 3,
        ),
        (
            "a table reload ≤ a plain commit (medians)".to_string(),
            reload <= plain,
        ),
        (
            "\"add\" in the steady state ≥ 95% of \"drop\" (events/s)".to_string(),
            encoding.add >= 0.95 * encoding.drop,
        ),
    ];
    for (target, ok) in targets {
        println!("  {target}: {}", if ok { "met" } else { "NOT met" });
    }
}

/// The medians of plain commits, schema-changing commits and reloads.
fn commits() -> (Duration, Duration, Duration) {
    let dir = std::env::temp_dir().join(format!("sluice-bench-evolve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut table = open(&dir);
    let fence = Fence::Follows(Offsets::default());
    let plain: Vec<Duration> = (0..COMMITS)
        .map(|i| commit(&mut table, i as u64 + 1, &fence, None))
        .collect();
    let evolving: Vec<Duration> = (0..COMMITS)
        .map(|i| {
            let wanted = Wanted {
                added: BTreeMap::from([(
                    format!("c{i:03}"),
                    Type::Primitive(PrimitiveType::String),
                )]),
                ..Wanted::default()
            };
            let planned = plan(table.table().metadata(), None, &wanted, 1000);
            commit(
                &mut table,
                (COMMITS + i) as u64 + 1,
                &fence,
                planned.evolution.as_ref(),
            )
        })
        .collect();
    let reload: Vec<Duration> = (0..COMMITS)
        .map(|_| {
            let t = Instant::now();
            table.refresh().unwrap();
            t.elapsed()
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    let mut medians = Vec::new();
    for (what, mut times) in [
        ("plain commit", plain),
        ("evolution commit", evolving),
        ("table reload", reload),
    ] {
        times.sort();
        let (median, p90) = (times[times.len() / 2], times[times.len() * 9 / 10]);
        println!(
            "{what:<17} median {:>7.2} ms, p90 {:>7.2} ms ({COMMITS} in a row, SQLite catalog)",
            ms(median),
            ms(p90)
        );
        medians.push(median);
    }
    (medians[0], medians[1], medians[2])
}

/// The time of one commit of batch `batch_id`, of no files, with `evolution` if any.
fn commit(
    table: &mut IcebergTable,
    batch_id: u64,
    fence: &Fence,
    evolution: Option<&Evolution>,
) -> Duration {
    let t = Instant::now();
    table
        .commit_evolving(vec![], &mark(batch_id), HashMap::new(), fence, evolution)
        .unwrap();
    t.elapsed()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn open(dir: &Path) -> IcebergTable {
    let config: IcebergSinkConfig = toml::from_str(&format!(
        "warehouse = {:?}\nnamespace = \"bench\"\ntable = \"evolve\"\n\
         columns = [{{ name = \"id\", type = \"string\" }}]",
        dir.display()
    ))
    .unwrap();
    let catalog = IcebergCatalog::open(&config, dir).unwrap();
    IcebergTable::open(&catalog, config).unwrap()
}

fn mark(batch_id: u64) -> CommitMark {
    CommitMark {
        pipeline: "bench".into(),
        batch_id,
        offsets: Offsets::default(),
    }
}

/// Events per second of the encodings.
struct Encoding {
    drop: f64,
    add: f64,
}

fn encodings(events: usize) -> Encoding {
    let flat: Vec<String> = (0..events).map(flat_event).collect();
    let nested: Vec<String> = (0..events).map(nested_event).collect();
    let flat_schema = schema(FLAT);
    let nested_schema = schema(&format!("{FLAT}\n{NESTED}"));
    let adding = Encoder::new(&flat_schema, &[])
        .unwrap()
        .with_unknown_fields(UnknownFields::Add)
        .with_evolving(Evolving {
            max_depth: 5,
            ..Evolving::default()
        });
    let variants = [
        (
            "flat, unknown-fields = \"drop\"",
            &flat,
            Encoder::new(&flat_schema, &[]).unwrap(),
        ),
        ("flat, unknown-fields = \"add\"", &flat, adding),
        (
            "nested (list, struct, map)",
            &nested,
            Encoder::new(&nested_schema, &[]).unwrap(),
        ),
    ];
    // Rounds interleaved, so that a slower moment of the machine slows every variant.
    let mut best = [Duration::MAX; 3];
    for _ in 0..ROUNDS {
        for (i, (_, events, encoder)) in variants.iter().enumerate() {
            best[i] = best[i].min(encode(events, encoder));
        }
    }
    let mut rates = [0.0; 3];
    for (i, (what, events, _)) in variants.iter().enumerate() {
        let bytes: usize = events.iter().map(String::len).sum();
        rates[i] = events.len() as f64 / best[i].as_secs_f64();
        println!(
            "encode {what:<28} {:>10.0} events/s, {:>6.1} MB/s of JSON ({} bytes per event)",
            rates[i],
            bytes as f64 / best[i].as_secs_f64() / 1e6,
            bytes / events.len()
        );
    }
    Encoding {
        drop: rates[0],
        add: rates[1],
    }
}

/// Rounds of each encoding; the best counts.
const ROUNDS: usize = 5;

/// The time to encode `events` in batches of 10 000.
fn encode(events: &[String], encoder: &Encoder) -> Duration {
    let t = Instant::now();
    for chunk in events.chunks(10_000) {
        let encoded = encoder
            .encode(chunk.iter().map(|e| Some(e.as_bytes())), 0)
            .unwrap();
        assert_eq!(
            encoded.batch.num_rows(),
            chunk.len(),
            "{:?}",
            encoded.errors.first()
        );
    }
    t.elapsed()
}

const FLAT: &str = r#"{ name = "event_id", type = "string", required = true },
{ name = "event_time", type = "timestamptz" },
{ name = "user_id", type = "string" },
{ name = "session_id", type = "string" },
{ name = "event_type", type = "string" },
{ name = "page_url", type = "string" },
{ name = "product_id", type = "string" },
{ name = "category", type = "string" },
{ name = "price", type = "decimal(10,2)" },
{ name = "quantity", type = "int" },
{ name = "device_type", type = "string" },
{ name = "traffic_source", type = "string" },"#;

const NESTED: &str = r#"{ name = "items", type = "list<struct<sku: string, qty: int, price: decimal(10,2)>>" },
{ name = "context", type = "struct<device: string, os: string, app: string>" },
{ name = "utm", type = "map<string, string>" },"#;

/// The Iceberg schema of a table with `columns`, as sluice creates it.
fn schema(columns: &str) -> Schema {
    let config: IcebergSinkConfig = toml::from_str(&format!(
        "warehouse = \"w\"\nnamespace = \"n\"\ntable = \"t\"\ncolumns = [\n{columns}\n]"
    ))
    .unwrap();
    config.schema().unwrap()
}

fn flat_event(i: usize) -> String {
    format!(
        r#"{{"event_id":"evt_{i:09}","event_time":"2026-01-09T12:{:02}:00Z","user_id":"user_{}","session_id":"sess_{}","event_type":"product_view","page_url":"https://shop.example/p/{}","product_id":"prod_{}","category":"electronics","price":"{}.99","quantity":{},"device_type":"mobile","traffic_source":"search"}}"#,
        i % 60,
        i % 50_000,
        i % 700_000,
        i % 997,
        i % 997,
        i % 500,
        1 + i % 4
    )
}

fn nested_event(i: usize) -> String {
    let flat = flat_event(i);
    let items: Vec<String> = (0..1 + i % 4)
        .map(|j| {
            format!(
                r#"{{"sku":"sku_{j}_{}","qty":{},"price":"{}.50"}}"#,
                i % 997,
                1 + j,
                j * 7
            )
        })
        .collect();
    format!(
        r#"{},"items":[{}],"context":{{"device":"ios","os":"17.{}","app":"shop"}},"utm":{{"source":"news","campaign":"c{}"}}}}"#,
        &flat[..flat.len() - 1],
        items.join(","),
        i % 5,
        i % 30
    )
}
