//! Compaction: its rate, its memory against the partition's size, and what it does for a
//! reader.
//!
//! Each case writes a table (the SQL catalog on SQLite, in a temporary folder) of small
//! Parquet files in one partition, through sluice's own writer (20 files a commit), then
//! runs `sluice maintain --compact-only` on it as a process of its own and measures it:
//! wall time, MB/s of small files rewritten (process start and catalog included), and
//! peak resident memory (`wait4`'s `ru_maxrss`). The cases:
//!
//! - `400 files` and `1600 files` of about 280 KB (random text, which zstd barely
//!   shrinks): 110 and 440 MB, both past the 32 MiB row group that bounds compaction's
//!   memory. Target: the peak memory of the larger is within 1.25x the smaller's (memory
//!   does not grow with the partition).
//! - `a day of minutes`: 1 440 files of about 50 KB, a day partition written by a
//!   one-minute trigger. DuckDB runs an aggregate query on the table before and after
//!   (`tests/py/duckdb_query.py`, best of 5). Target: the query is faster after.
//!
//! Run with `cargo bench -p sluice-tests --bench compaction`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use serde_json::Value;
use sluice::checkpoint::CommitMark;
use sluice::iceberg::{Fence, IcebergCatalog, IcebergSinkConfig, IcebergTable};
use sluice::record::Offsets;
use sluice_tests::measure::wait_peak_rss;
use sluice_tests::{pyiceberg, repo_root};

const BIN: &str = env!("CARGO_BIN_EXE_sluice-under-test");
const TABLE: &str = "bench.events";
/// Bytes of one row's note (random letters: they do not compress away).
const NOTE: usize = 96;
/// Files per commit while the table is written.
const FILES_PER_COMMIT: usize = 20;

/// One case: `files` files of about `file_kb` KiB.
struct Case {
    name: &'static str,
    files: usize,
    file_kb: usize,
}

/// What compacting a case measured.
struct Measured {
    seconds: f64,
    bytes_rewritten: u64,
    files_before: u64,
    files_after: u64,
    peak_mib: f64,
}

fn main() {
    let cases = [
        Case {
            name: "400 files",
            files: 400,
            file_kb: 500,
        },
        Case {
            name: "1600 files",
            files: 1600,
            file_kb: 500,
        },
        Case {
            name: "a day of minutes",
            files: 1440,
            file_kb: 50,
        },
    ];
    let mut peaks = Vec::new();
    for case in &cases {
        let dir = std::env::temp_dir().join(format!("sluice-bench-compaction-{}", case.files));
        let _ = std::fs::remove_dir_all(&dir);
        let config = write_table(&dir, case);
        let before = duckdb_query(&dir);
        let m = compact(&dir, &config);
        let after = duckdb_query(&dir);
        println!(
            "{}: {} files ({:.1} MB) -> {} in {:.2} s: {:.1} MB/s, peak memory {:.0} MiB; DuckDB aggregate {:.1} ms -> {:.1} ms",
            case.name,
            m.files_before,
            m.bytes_rewritten as f64 / 1e6,
            m.files_after,
            m.seconds,
            m.bytes_rewritten as f64 / 1e6 / m.seconds,
            m.peak_mib,
            before,
            after
        );
        if case.file_kb == 50 {
            verdict(
                "the DuckDB query is faster after compaction",
                after < before,
            );
        }
        peaks.push(m.peak_mib);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let ratio = peaks[1] / peaks[0];
    println!("peak memory, 1600 files against 400: {ratio:.2}x");
    verdict(
        "memory does not grow with the partition (within 1.25x at 4x the bytes)",
        ratio <= 1.25,
    );
}

fn verdict(target: &str, met: bool) {
    println!("target: {target}: {}", if met { "met" } else { "NOT met" });
}

/// Writes the case's table; returns the pipeline file `sluice maintain` reads.
fn write_table(dir: &Path, case: &Case) -> PathBuf {
    let text = format!(
        r#"[pipeline]
name = "bench"
on-invalid = "fail"
[source]
bootstrap-servers = "localhost:9"
topics = ["unused"]
[sink]
warehouse = {dir:?}
namespace = "bench"
table = "events"
partition-by = ["identity(day)"]
columns = [
  {{ name = "id", type = "long" }},
  {{ name = "day", type = "string" }},
  {{ name = "customer", type = "string" }},
  {{ name = "amount", type = "double" }},
  {{ name = "note", type = "string" }},
]
[sink.compact]
min-input-files = 2
max-bytes-per-run = "1GiB"
[sink.catalog]
type = "sql"
name = "sluice"
"#
    );
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, &text).unwrap();
    let sink: IcebergSinkConfig = toml::from_str::<toml::Table>(&text).unwrap()["sink"]
        .clone()
        .try_into()
        .unwrap();
    let catalog = IcebergCatalog::open(&sink, dir).unwrap();
    let mut table = IcebergTable::open(&catalog, sink).unwrap();
    let rows_per_file = case.file_kb * 1024 / (NOTE + 40);
    let t = Instant::now();
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut pending = Vec::new();
    for file in 0..case.files {
        let batch = rows(&table, file * rows_per_file, rows_per_file, &mut rng);
        pending.extend(table.write(vec![batch], file as u64).unwrap().files);
        if (file + 1) % FILES_PER_COMMIT == 0 || file + 1 == case.files {
            let mark = CommitMark {
                pipeline: "bench".into(),
                batch_id: (file / FILES_PER_COMMIT + 1) as u64,
                offsets: Offsets::default(),
            };
            let fence = Fence::Follows(Offsets::default());
            let files = std::mem::take(&mut pending);
            table.commit(files, &mark, HashMap::new(), &fence).unwrap();
        }
    }
    println!(
        "{}: wrote {} files of {rows_per_file} rows in {:.1} s",
        case.name,
        case.files,
        t.elapsed().as_secs_f64()
    );
    path
}

/// `count` rows from id `first`, one day, random notes.
fn rows(table: &IcebergTable, first: usize, count: usize, rng: &mut u64) -> RecordBatch {
    let mut next = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng
    };
    let ids: Vec<i64> = (first..first + count).map(|i| i as i64).collect();
    let customers: Vec<String> = (0..count)
        .map(|_| format!("c{:05}", next() % 20_000))
        .collect();
    let amounts: Vec<f64> = (0..count)
        .map(|_| (next() % 100_000) as f64 / 100.0)
        .collect();
    let notes: Vec<String> = (0..count)
        .map(|_| {
            (0..NOTE)
                .map(|_| char::from(b'a' + (next() % 26) as u8))
                .collect()
        })
        .collect();
    let schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(table.schema()).unwrap());
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(vec!["2026-12-01"; count])),
            Arc::new(StringArray::from(customers)),
            Arc::new(Float64Array::from(amounts)),
            Arc::new(StringArray::from(notes)),
        ],
    )
    .unwrap()
}

/// Runs `sluice maintain --compact-only` on the table and measures it.
fn compact(dir: &Path, config: &Path) -> Measured {
    let files_before = data_files(dir);
    let t = Instant::now();
    let mut child = Command::new(BIN)
        .args(["maintain", "--compact-only", "--config"])
        .arg(config)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    let (status, peak_kib) = wait_peak_rss(child);
    let seconds = t.elapsed().as_secs_f64();
    assert!(status.success(), "{stdout}");
    let bytes_rewritten = stdout
        .split_once("small files (")
        .and_then(|(_, rest)| rest.split_once(" bytes)"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no compaction said: {stdout}"));
    Measured {
        seconds,
        bytes_rewritten,
        files_before,
        files_after: data_files(dir),
        peak_mib: peak_kib as f64 / 1024.0,
    }
}

fn data_files(dir: &Path) -> u64 {
    let files = pyiceberg::table_files(dir, TABLE);
    files["data_files"].as_u64().unwrap()
}

/// DuckDB's best time (ms) for an aggregate over the table.
fn duckdb_query(dir: &Path) -> f64 {
    let out = Command::new(pyiceberg::python())
        .arg(repo_root().join("tests/py/duckdb_query.py"))
        .arg("--catalog-db")
        .arg(dir.join("catalog.db"))
        .args(["--table", TABLE])
        .args([
            "--query",
            "SELECT count(*), count(DISTINCT customer), sum(amount) FROM {table}",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["best_ms"].as_f64().unwrap()
}
