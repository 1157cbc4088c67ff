//! Compaction (`[sink.compact]`, `sluice maintain --compact`) against real parts: a table
//! written in hundreds of small batches while compaction runs beside it, in the pipeline's
//! process and in another, read back by pyiceberg, DuckDB and Spark; and compactions
//! killed at each point of their run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use sluice_tests::fixture::{Setup, progress_lines, text};
use sluice_tests::{pyiceberg, spark};

use crate::hardening::{assert_rows_once, ok, produce_valid};

const TABLE: &str = "tutorial.retail_clickstream_events";

/// A partition with two small files is compacted; with `in_process`, by the pipeline too,
/// every second.
fn compacting(s: &mut Setup, in_process: bool) {
    s.edit_example_config(|c| {
        format!(
            "{c}\n[sink.compact]\nenabled = {in_process}\nevery = \"1s\"\nmin-input-files = 2\n"
        )
    });
}

/// Every row's event id, as `rows` (JSON rows of a reader) give them, checked unique.
fn ids_once(rows: &[Value]) -> BTreeSet<String> {
    let ids: Vec<String> = rows
        .iter()
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect();
    let unique: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(unique.len(), ids.len(), "duplicated rows");
    unique
}

/// The data files a compaction wrote (`compact-…`) under the table's data folder.
fn compaction_files(warehouse: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("compact-"))
            {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &warehouse.join("tutorial/retail_clickstream_events/data"),
        &mut files,
    );
    files
}

#[test]
fn compaction_beside_a_writer_keeps_every_row_once_and_cuts_the_files() {
    let mut s = Setup::new("compaction");
    compacting(&mut s, true);
    produce_valid(&s, 1000, 1);

    // 200 batches of 5 events; beside them, the pipeline's own compaction every second and
    // `sluice maintain --compact-only` from another process, as fast as it goes.
    let running = s.start(&["run", "--available-now"], &[("SLUICE_MAX_RECORDS", "5")]);
    let done = Arc::new(AtomicBool::new(false));
    let outside = std::thread::scope(|scope| {
        let beside = scope.spawn(|| {
            let mut said = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let out = s.command(&["maintain", "--compact-only"]).output().unwrap();
                said.push(ok(&out));
            }
            said
        });
        let (status, _, log) = running.wait();
        done.store(true, Ordering::Relaxed);
        assert!(status.success(), "{log}");
        let progress = progress_lines(&log);
        assert_eq!(progress.len(), 200, "{log}");
        let runs: u64 = progress
            .iter()
            .map(|p| p["compaction"]["runs"].as_u64().unwrap())
            .sum();
        assert!(
            runs >= 1,
            "the pipeline's compaction never committed: {log}"
        );
        beside.join().unwrap()
    });
    let compacted_outside = outside.iter().filter(|o| o.contains("compacted ")).count();
    ok(&s.command(&["maintain", "--compact-only"]).output().unwrap());

    // Every event once, as three independent readers see the table.
    let by_pyiceberg = ids_once(&pyiceberg::read_table(&s.warehouse, TABLE));
    assert_eq!(by_pyiceberg.len(), 1000);
    assert_eq!(
        ids_once(&pyiceberg::read_duckdb(&s.warehouse, TABLE)),
        by_pyiceberg
    );
    assert_eq!(
        ids_once(&spark::read_table(&s.warehouse, TABLE)),
        by_pyiceberg
    );
    // Hundreds of appends, compacted to one file per partition (all far under the target).
    let files = pyiceberg::table_files(&s.warehouse, TABLE);
    let operations: Vec<&str> = files["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(operations.iter().filter(|o| **o == "append").count(), 200);
    // Compaction kept up while the batches landed (conflicts with appends are built
    // again, not given up): replaces between the appends, not only after the last.
    let last_append = operations.iter().rposition(|o| *o == "append").unwrap();
    let during = operations[..last_append]
        .iter()
        .filter(|o| **o == "replace")
        .count();
    assert!(during >= 5, "{during} replaces during the run: {files}");
    assert_eq!(files["data_files"], files["partitions"], "{files}");
    assert_eq!(files["records"], 1000);
    eprintln!("compactions from outside that committed: {compacted_outside}; {files}");

    // The pipeline's mark is where its last batch left it.
    produce_valid(&s, 10, 2);
    let log = ok(&s.run(&[]));
    assert!(log.contains("10 records read"), "{log}");
    assert_rows_once(&s, 1010);
}

#[test]
fn a_compaction_killed_anywhere_leaves_the_rows_and_what_it_wrote_to_the_orphan_cleanup() {
    let mut s = Setup::new("compaction-crash");
    compacting(&mut s, false);
    produce_valid(&s, 60, 3);
    ok(&s.run(&[("SLUICE_MAX_RECORDS", "5")]));
    let ids = ids_once(&pyiceberg::read_table(&s.warehouse, TABLE));
    let before = pyiceberg::table_files(&s.warehouse, TABLE);
    assert_eq!(before["operations"].as_array().unwrap().len(), 12);

    for point in ["after-rewrite", "before-commit"] {
        let out = s
            .command(&["maintain", "--compact-only"])
            .env("SLUICE_COMPACT_CRASH_AT", point)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{}", text(&out));
        assert!(
            text(&out).contains(&format!("aborting at {point}")),
            "{}",
            text(&out)
        );
        assert_eq!(pyiceberg::table_files(&s.warehouse, TABLE), before);
        assert_eq!(ids_once(&pyiceberg::read_table(&s.warehouse, TABLE)), ids);
    }
    // What the killed runs wrote is referenced by nothing: the orphan cleanup deletes it.
    assert!(!compaction_files(&s.warehouse).is_empty());
    ok(&s.maintain("0s"));
    assert_eq!(compaction_files(&s.warehouse), Vec::<PathBuf>::new());
    assert_eq!(ids_once(&pyiceberg::read_table(&s.warehouse, TABLE)), ids);

    // Killed after its commit: the replace stands, the rows are the same.
    let out = s
        .command(&["maintain", "--compact-only"])
        .env("SLUICE_COMPACT_CRASH_AT", "after-commit")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    let after = pyiceberg::table_files(&s.warehouse, TABLE);
    assert_eq!(after["data_files"], after["partitions"], "{after}");
    assert_eq!(ids_once(&pyiceberg::read_table(&s.warehouse, TABLE)), ids);

    // And the pipeline goes on from its mark.
    produce_valid(&s, 5, 4);
    let log = ok(&s.run(&[]));
    assert!(log.contains("5 records read"), "{log}");
    assert_rows_once(&s, 65);
}

/// The window table is compacted beside the main table, and no output changes: the rows
/// of both, and a second run that reads nothing again.
#[test]
fn maintain_compacts_the_window_table_and_changes_no_output() {
    use crate::event_time::{
        a_second_run_changes_nothing, analytics, analytics_config, event_ids, events_file,
        expected_windows, show_window, table_windows,
    };
    let mut s = analytics("compact-windows");
    let example = std::fs::read_to_string(analytics_config()).unwrap();
    let compact = "[sink.compact]\nenabled = false\nmin-input-files = 2\n";
    s.write_config("pipeline.toml", &format!("{example}\n{compact}"));
    let events = events_file();
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
    let env = [("SLUICE_MAX_RECORDS", "4"), ("SLUICE_AT_END", "flush")];
    ok(&s.run(&env));
    let ids = event_ids(&s.show());

    let said = ok(&s.command(&["maintain", "--compact-only"]).output().unwrap());

    assert!(
        said.contains("analytics.clickstream_events: compacted"),
        "{said}"
    );
    assert!(
        said.contains("analytics.event_type_counts: compacted"),
        "{said}"
    );
    let windows = pyiceberg::table_files(&s.warehouse, "analytics.event_type_counts");
    assert_eq!(windows["data_files"], windows["partitions"], "{windows}");
    assert_eq!(event_ids(&s.show()), ids);
    assert_eq!(table_windows(&show_window(&s)), expected_windows());
    a_second_run_changes_nothing(&s, &env);
}

/// A compaction that fails (here: `sort-by` a column the table lacks) is logged and
/// counted in the progress line; the batches go on.
#[test]
fn a_failing_compaction_is_counted_and_never_fails_a_batch() {
    let mut s = Setup::new("compaction-fails");
    s.edit_example_config(|c| {
        format!("{c}\n[sink.compact]\nevery = \"1s\"\nmin-input-files = 2\nsort-by = [\"no_such_column\"]\n")
    });
    produce_valid(&s, 120, 5);
    let out = s.run(&[("SLUICE_MAX_RECORDS", "2")]);
    let log = ok(&out);
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(progress.len(), 60, "{log}");
    let failures: u64 = progress
        .iter()
        .map(|p| p["compaction"]["failures"].as_u64().unwrap())
        .sum();
    assert!(failures >= 1, "{log}");
    assert!(
        log.contains("compaction failed; the pipeline goes on"),
        "{log}"
    );
    assert!(log.contains("no column `no_such_column`"), "{log}");
    assert_rows_once(&s, 120);
}

/// Files written under three schemas (columns added, a struct, widened types) compact into
/// one file of the current schema, and every reader sees the rows they saw before.
#[test]
fn files_of_every_schema_compact_into_one_of_the_current_schema() {
    use crate::evolution::{ADD, TABLE, add_and_widen, check_added_and_widened, config};
    let mut s = Setup::new("compact-evolved");
    let compact = "[sink.compact]\nenabled = false\nmin-input-files = 2";
    s.write_config("pipeline.toml", &config(&format!("{ADD}\n{compact}")));
    add_and_widen(&s, pyiceberg::CatalogAt::Warehouse(&s.warehouse));
    assert_eq!(pyiceberg::table_files(&s.warehouse, TABLE)["data_files"], 3);

    let said = ok(&s.command(&["maintain", "--compact-only"]).output().unwrap());

    assert!(said.contains("compacted 3 small files"), "{said}");
    assert_eq!(pyiceberg::table_files(&s.warehouse, TABLE)["data_files"], 1);
    check_added_and_widened(&s, pyiceberg::CatalogAt::Warehouse(&s.warehouse));
}
