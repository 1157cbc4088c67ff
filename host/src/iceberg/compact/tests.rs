//! Compaction against a real table (the SQL catalog on SQLite, in a temporary folder).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use iceberg::spec::Operation;

use super::*;
use crate::checkpoint::CommitMark;
use crate::iceberg::{Fence, IcebergCatalog, IcebergSinkConfig};
use crate::record::Offsets;

struct Warehouse {
    dir: PathBuf,
    catalog: IcebergCatalog,
    config: IcebergSinkConfig,
}

impl Warehouse {
    fn new(name: &str) -> Warehouse {
        let dir =
            std::env::temp_dir().join(format!("sluice-compact-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config: IcebergSinkConfig = toml::from_str(&format!(
            r#"warehouse = {:?}
namespace = "n"
table = "t"
partition-by = ["identity(day)"]
columns = [{{ name = "id", type = "long" }}, {{ name = "day", type = "string" }}]"#,
            dir.display()
        ))
        .unwrap();
        let catalog = IcebergCatalog::open(&config, &dir).unwrap();
        Warehouse {
            dir,
            catalog,
            config,
        }
    }

    fn table(&self) -> IcebergTable {
        IcebergTable::open(&self.catalog, self.config.clone()).unwrap()
    }
}

impl Drop for Warehouse {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Appends batch `batch_id` of pipeline `p`: ids `from..to`, on two days by parity.
fn append(table: &mut IcebergTable, batch_id: u64, from: i64, to: i64) {
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(table.schema()).unwrap());
    let ids: Vec<i64> = (from..to).collect();
    let days: Vec<&str> = ids
        .iter()
        .map(|i| if i % 2 == 0 { "mon" } else { "tue" })
        .collect();
    let batch = RecordBatch::try_new(
        arrow,
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(days)),
        ],
    )
    .unwrap();
    let written = table.write(vec![batch], batch_id).unwrap();
    let mark = CommitMark {
        pipeline: "p".into(),
        batch_id,
        offsets: Offsets::default(),
    };
    let fence = Fence::Follows(Offsets::default());
    table
        .commit(written.files, &mark, HashMap::new(), &fence)
        .unwrap();
}

/// Appends batches `1..=count` (ids `10 * batch` to `10 * batch + 9`).
fn append_batches(table: &mut IcebergTable, count: u64) {
    for batch in 1..=count {
        let first = batch as i64 * 10;
        append(table, batch, first, first + 10);
    }
}

/// Plans a compaction of `table` and rewrites its files (run `run`), committing nothing.
fn rewritten(table: &mut IcebergTable, run: &str) -> Replace {
    let config = config();
    let plan = table.plan_compaction(&config).unwrap();
    table
        .rewrite_groups(&config, &plan, run, &AtomicBool::new(false))
        .unwrap()
}

fn ids(table: &IcebergTable) -> Vec<i64> {
    let mut ids: Vec<i64> = table
        .read_rows()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

fn data_files(table: &mut IcebergTable) -> usize {
    table.refresh().unwrap();
    let manifests = table
        .catalog
        .block_on(Manifests::current(&table.table, &mut Default::default()))
        .unwrap();
    manifests
        .data
        .iter()
        .flat_map(|(_, entries)| entries.iter())
        .filter(|e| e.is_alive())
        .count()
}

fn config() -> CompactConfig {
    CompactConfig {
        min_input_files: 2,
        target_file_size: Some(crate::units::ByteSize::mib(1)),
        ..CompactConfig::default()
    }
}

#[test]
fn small_files_become_one_per_partition_and_the_rows_and_marks_stay() {
    let warehouse = Warehouse::new("once");
    let mut table = warehouse.table();
    append_batches(&mut table, 12);
    assert_eq!(data_files(&mut table), 24);
    let before = ids(&table);
    let stop = AtomicBool::new(false);

    let compacted = table.compact(&config(), &stop).unwrap();

    assert_eq!(compacted.counts.runs, 1);
    assert_eq!(compacted.counts.files_rewritten, 24);
    assert_eq!(compacted.counts.files_written, 2);
    assert_eq!(data_files(&mut table), 2);
    assert_eq!(ids(&table), before);
    let snapshot = table.table().metadata().current_snapshot().unwrap().clone();
    assert_eq!(snapshot.summary().operation, Operation::Replace);
    let props = &snapshot.summary().additional_properties;
    assert_eq!(props["total-data-files"], "2");
    assert_eq!(props["total-records"], "120");
    assert_eq!(props["deleted-data-files"], "24");
    // Nothing left to do: two files, each alone in its partition.
    let again = table.compact(&config(), &stop).unwrap();
    assert!(again.plan.groups.is_empty());
    assert_eq!(again.counts, Compaction::default());
    // The pipeline's mark is where it was, and its next batch's fence holds.
    assert_eq!(table.last_mark("p").unwrap().unwrap().batch_id, 12);
    append(&mut table, 13, 130, 140);
    assert_eq!(ids(&table), (10..140).collect::<Vec<_>>());
}

#[test]
fn an_append_that_lands_before_the_replace_is_kept() {
    let warehouse = Warehouse::new("append");
    let mut compactor = warehouse.table();
    let mut writer = warehouse.table();
    append_batches(&mut writer, 4);
    let mut replace = rewritten(&mut compactor, "compact-test");
    // An append lands between the rewrite and the replace.
    append(&mut writer, 5, 50, 60);
    let mut compacted = Compacted::default();
    compactor
        .commit_replace(
            &mut replace,
            "compact-test",
            &AtomicBool::new(false),
            &mut compacted,
        )
        .unwrap();

    assert_eq!(compacted.counts.runs, 1);
    assert_eq!(ids(&compactor), (10..60).collect::<Vec<_>>());
    // The 8 small files became 2; the append's 2 files are there as they were.
    assert_eq!(data_files(&mut compactor), 4);
}

#[test]
fn a_run_whose_files_another_compaction_took_is_abandoned_and_cleans_up() {
    let warehouse = Warehouse::new("twice");
    let mut first = warehouse.table();
    let mut second = warehouse.table();
    append_batches(&mut first, 3);
    let config = config();
    let stop = AtomicBool::new(false);
    let plan = second.plan_compaction(&config).unwrap();
    let mut replace = second
        .rewrite_groups(&config, &plan, "compact-second", &stop)
        .unwrap();
    first.compact(&config, &stop).unwrap();

    let mut compacted = Compacted::default();
    second
        .commit_replace(
            &mut replace,
            "compact-second",
            &AtomicBool::new(false),
            &mut compacted,
        )
        .unwrap();

    assert_eq!(compacted.counts.abandoned, 1);
    assert_eq!(compacted.counts.runs, 0);
    assert!(
        compacted
            .abandoned
            .unwrap()
            .contains("no longer in the table")
    );
    assert_eq!(ids(&second), (10..40).collect::<Vec<_>>());
    for (_, file) in &replace.added {
        let path = file.file_path().trim_start_matches("file://");
        assert!(!std::path::Path::new(path).exists(), "{path} was left");
    }
}

#[test]
fn sort_by_orders_the_rows_of_each_file_written() {
    let warehouse = Warehouse::new("sorted");
    let mut table = warehouse.table();
    append_batches(&mut table, 5);
    let config = CompactConfig {
        sort_by: vec!["id desc".into()],
        ..config()
    };
    let stop = AtomicBool::new(false);
    table.compact(&config, &stop).unwrap();

    table.refresh().unwrap();
    let manifests = table
        .catalog
        .block_on(Manifests::current(&table.table, &mut Default::default()))
        .unwrap();
    let files: Vec<DataFile> = manifests
        .data
        .iter()
        .flat_map(|(_, entries)| entries.iter())
        .filter(|e| e.is_alive())
        .map(|e| e.data_file().clone())
        .collect();
    assert_eq!(files.len(), 2);
    for file in &files {
        let batches = table
            .catalog
            .block_on(rewrite::read_back(&table.table, std::slice::from_ref(file)));
        let ids: Vec<i64> = batches
            .iter()
            .flat_map(|b| {
                let column = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                column.values().to_vec()
            })
            .collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(ids, sorted);
        assert_eq!(ids.len(), 25);
    }
}

#[test]
fn a_sort_column_the_table_lacks_is_a_clear_error() {
    let warehouse = Warehouse::new("nosort");
    let mut table = warehouse.table();
    append_batches(&mut table, 2);
    let config = CompactConfig {
        sort_by: vec!["amount".into()],
        ..config()
    };
    let error = table.compact(&config, &AtomicBool::new(false)).unwrap_err();
    assert!(error.to_string().contains("no column `amount`"), "{error}");
    assert_eq!(data_files(&mut table), 4);
}

#[test]
fn a_file_left_alone_in_a_rewritten_manifest_stays_in_the_table() {
    let warehouse = Warehouse::new("mixed");
    let mut table = warehouse.table();
    // Batch 1's manifest lists a Monday and a Tuesday file; later batches only Mondays.
    append(&mut table, 1, 0, 2);
    for batch in 2..=4 {
        append(&mut table, batch, batch as i64 * 10, batch as i64 * 10 + 1);
    }
    assert_eq!(data_files(&mut table), 5);

    let compacted = table.compact(&config(), &AtomicBool::new(false)).unwrap();

    // Monday's 4 files became 1; Tuesday's one file, too few to compact, is still there.
    assert_eq!(compacted.counts.files_rewritten, 4);
    assert_eq!(data_files(&mut table), 2);
    assert_eq!(ids(&table), vec![0, 1, 20, 30, 40]);
}

#[test]
fn a_replace_refused_because_an_append_landed_is_committed_again_on_its_manifests() {
    let warehouse = Warehouse::new("conflict");
    let mut compactor = warehouse.table();
    let mut writer = warehouse.table();
    append_batches(&mut writer, 4);
    let mut replace = rewritten(&mut compactor, "compact-conflict");
    compactor.refresh().unwrap();
    let prepared = compactor
        .catalog
        .block_on(replace.prepare(&compactor.table, "first"));
    let Ok(replace::Prepared::Ready(action)) = prepared else {
        panic!("not ready")
    };
    // The table moves under the prepared snapshot: the catalog refuses it.
    append(&mut writer, 5, 50, 60);
    let refused = compactor.catalog.block_on(replace::commit(
        compactor.catalog.catalog(),
        &compactor.table,
        action,
    ));
    assert_eq!(
        refused.unwrap_err().kind(),
        iceberg::ErrorKind::CatalogCommitConflicts
    );

    let mut compacted = Compacted::default();
    compactor
        .commit_replace(
            &mut replace,
            "compact-conflict",
            &AtomicBool::new(false),
            &mut compacted,
        )
        .unwrap();

    assert_eq!(compacted.counts.runs, 1);
    // Built again on the new table from the manifests written the first time.
    assert!(replace.stale.is_empty());
    assert_eq!(ids(&compactor), (10..60).collect::<Vec<_>>());
    assert_eq!(data_files(&mut compactor), 4);
}
