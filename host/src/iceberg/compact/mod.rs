//! Compaction: the small data files of a partition rewritten into files of about a target
//! size, committed as one Iceberg `replace` snapshot, while pipelines keep appending.
//!
//! A run goes:
//!
//! 1. **plan** ([`plan`]): the live data files of the current snapshot under three
//!    quarters of the target size, grouped by partition; partitions with fewer than
//!    `min-input-files` are left alone, and at most `max-bytes-per-run` bytes are taken.
//!    Only committed files are listed, so the files a batch is writing are never taken.
//!    A table with delete files (rows deleted by another engine) is not compacted.
//! 2. **rewrite** ([`rewrite`]): each group's files streamed, a record batch at a time,
//!    through the writer stack (see [`super`]) into files named `compact-<run>-…`, invisible
//!    until committed. The rows written are counted against the rows the manifests list.
//! 3. **replace** ([`replace`]): one snapshot, built on the table as it is at commit time,
//!    removes the rewritten files and adds the new ones. It carries no commit mark:
//!    pipelines find theirs (offsets, state pointers, lookup versions) in the table
//!    property and in their own snapshots, as after any other engine's commit
//!    ([`super::marks`]). A conflict with an append (the table moved) builds the snapshot
//!    again on the new table; an append that meets the compaction's commit retries against
//!    its fence and lands its own files, never reading its batch again. If another
//!    compaction took a rewritten file, the run is abandoned and its files deleted.
//!
//! A crash at any point leaves the table as it was: the replace is one catalog commit,
//! and what the run wrote before it is unreferenced, deleted by `sluice maintain`'s orphan
//! cleanup.
//!
//! Why not iceberg-rust's own rewrite or the `iceberg-compaction` crate: iceberg-rust 0.10
//! has no rewrite action (its `RewriteFilesAction` is an open pull request), and
//! `iceberg-compaction` runs on DataFusion (a query engine in the binary) over its own
//! fork of iceberg-rust, not on the release sluice uses. The replace here is committed as
//! a `TransactionAction` of iceberg-rust's (see `vendor/README.md`).

pub mod config;
mod orphan;
mod plan;
mod project;
mod replace;
mod rewrite;
#[cfg(test)]
mod tests;
mod undo;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use iceberg::ErrorKind;
use iceberg::spec::DataFile;
use serde::Serialize;

pub use self::config::{CompactConfig, SortKey};
pub use self::orphan::KeyedCommit;
pub use self::plan::{Group, Limits, Plan};
use self::plan::{Manifests, ManifestsRead};
use self::replace::{Prepared, Replace};
use self::rewrite::{Rewrite, Rewritten};
use super::{IcebergError, IcebergTable, iceberg_err};
use crate::retry::Backoff;

/// The summary property of a compaction's snapshot: the process that committed it.
pub const COMPACTED_BY: &str = "sluice.compacted-by";

/// Commits refused because the table moved are built again this many times.
const MAX_CONFLICTS: u32 = 10;

/// The waits between attempts after a conflict: 100 ms doubling to 2 s.
const BACKOFF: Backoff = Backoff::doubling(Duration::from_millis(100), Duration::from_secs(2));

/// The row groups of the files compaction writes close at about this many encoded bytes
/// unless the table's `write.parquet.row-group-size-bytes` says otherwise (Parquet's
/// default closes them at a million rows): the one being written is held in memory, so
/// this bounds compaction's memory whatever the partition's size.
const ROW_GROUP_BYTES: usize = 32 << 20;

/// The table property Iceberg's writers take the row-group size from.
const ROW_GROUP_PROPERTY: &str = "write.parquet.row-group-size-bytes";

/// Numbers the runs of this process, for the names of the files they write.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// What compaction did: one run on one table, or added up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Compaction {
    /// Runs that committed a replace snapshot.
    pub runs: u64,
    /// Small files rewritten (removed from the table).
    pub files_rewritten: u64,
    /// Bytes of those files.
    pub bytes_rewritten: u64,
    /// Files written in their place.
    pub files_written: u64,
    /// Bytes of those files.
    pub bytes_written: u64,
    /// Commits refused because the table moved (an append landed), then built again.
    pub conflicts: u64,
    /// Runs abandoned because another compaction took some of their files.
    pub abandoned: u64,
    /// Runs that failed (logged).
    pub failures: u64,
}

impl Compaction {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Compaction) {
        self.runs += other.runs;
        self.files_rewritten += other.files_rewritten;
        self.bytes_rewritten += other.bytes_rewritten;
        self.files_written += other.files_written;
        self.bytes_written += other.bytes_written;
        self.conflicts += other.conflicts;
        self.abandoned += other.abandoned;
        self.failures += other.failures;
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == Compaction::default()
    }
}

/// What one run on one table did.
#[derive(Debug, Clone, Default)]
pub struct Compacted {
    /// What was planned.
    pub plan: Plan,
    /// The counts (`runs` is 1 if a snapshot was committed).
    pub counts: Compaction,
    /// The replace snapshot committed.
    pub snapshot_id: Option<i64>,
    /// Why the run was abandoned, if it was.
    pub abandoned: Option<String>,
}

impl IcebergTable {
    /// Plans a compaction of the table as it is now, with `config`'s limits.
    pub fn plan_compaction(&mut self, config: &CompactConfig) -> Result<Plan, IcebergError> {
        self.plan_reading(config, &mut ManifestsRead::new())
    }

    /// [`IcebergTable::plan_compaction`], reading the manifests not in `read`.
    fn plan_reading(
        &mut self,
        config: &CompactConfig,
        read: &mut ManifestsRead,
    ) -> Result<Plan, IcebergError> {
        self.refresh()?;
        let target = config.target(self.config.target_file_size);
        let limits = Limits {
            small: target / 4 * 3,
            min_files: config.min_input_files,
            max_bytes: config.max_bytes_per_run.0,
        };
        let manifests = self.current_manifests(read)?;
        let snapshot = self.table.metadata().current_snapshot_id();
        Ok(plan::plan(&manifests, snapshot, limits))
    }

    /// The live entries of the table's current manifests, reading those not in `read`.
    fn current_manifests(&self, read: &mut ManifestsRead) -> Result<Manifests, IcebergError> {
        self.catalog
            .block_on(Manifests::current(&self.table, read))
            .map_err(iceberg_err(format!(
                "reading the manifests of {}",
                self.ident
            )))
    }

    /// Compacts the table once (see the module documentation). `stop` set makes the run
    /// give up between two record batches, deleting what it wrote.
    pub fn compact(
        &mut self,
        config: &CompactConfig,
        stop: &AtomicBool,
    ) -> Result<Compacted, IcebergError> {
        let mut read = ManifestsRead::new();
        let plan = self.plan_reading(config, &mut read)?;
        let mut compacted = Compacted {
            plan,
            ..Compacted::default()
        };
        if compacted.plan.groups.is_empty() {
            return Ok(compacted);
        }
        let run = format!(
            "compact-{}-{}",
            self.run_id,
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        let mut replace = self.rewrite_groups(config, &compacted.plan, &run, stop)?;
        replace.read = read;
        crash_point("after-rewrite");
        self.commit_replace(&mut replace, &run, stop, &mut compacted)?;
        Ok(compacted)
    }

    /// Step 2: the groups' files rewritten; the rows written checked against the rows read
    /// and the rows the manifests list.
    fn rewrite_groups(
        &self,
        config: &CompactConfig,
        plan: &Plan,
        run: &str,
        stop: &AtomicBool,
    ) -> Result<Replace, IcebergError> {
        let sort = config.sort_keys().map_err(IcebergError::Config)?;
        self.check_sort_columns(&sort)?;
        let properties = self
            .writer_properties()?
            .into_builder()
            .set_max_row_group_bytes(Some(self.row_group_bytes()))
            .build();
        let how = Rewrite {
            table: &self.table,
            properties,
            target: config.target(self.config.target_file_size),
            sort: &sort,
            prefix: run.to_string(),
            stop,
        };
        let mut replace = Replace {
            removed: Vec::new(),
            added: Vec::new(),
            properties: HashMap::from([(COMPACTED_BY.to_string(), self.run_id.clone())]),
            table_properties: HashMap::new(),
            built: None,
            stale: Vec::new(),
            read: ManifestsRead::new(),
        };
        for (index, group) in plan.groups.iter().enumerate() {
            let result = self.catalog.block_on(how.group(group, index));
            let rewritten = match result {
                Ok(rewritten) => rewritten,
                Err(error) => {
                    self.delete_written(replace.added.iter().map(|(_, f)| f.file_path()));
                    return Err(iceberg_err(format!("rewriting files of {}", self.ident))(
                        error,
                    ));
                }
            };
            let expected = rewrite::rows(&group.files);
            let written = rewrite::rows(&rewritten.files);
            replace
                .added
                .extend(rewritten.files.iter().map(|f| (group.spec_id, f.clone())));
            if written != expected || rewritten.rows_read != expected {
                self.delete_written(replace.added.iter().map(|(_, f)| f.file_path()));
                return Err(rows_differ(self, &rewritten, expected, written));
            }
            replace
                .removed
                .extend(group.files.iter().map(|f| (group.spec_id, f.clone())));
        }
        Ok(replace)
    }

    /// The row-group size of the files compaction writes (see [`ROW_GROUP_BYTES`]).
    fn row_group_bytes(&self) -> usize {
        let properties = self.table.metadata().properties();
        properties
            .get(ROW_GROUP_PROPERTY)
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .unwrap_or(ROW_GROUP_BYTES)
    }

    /// Every `sort-by` column is in the table.
    fn check_sort_columns(&self, sort: &[SortKey]) -> Result<(), IcebergError> {
        match sort
            .iter()
            .find(|k| self.schema().field_by_name(&k.column).is_none())
        {
            Some(key) => Err(IcebergError::Config(format!(
                "sink.compact.sort-by: table {} has no column `{}`",
                self.ident, key.column
            ))),
            None => Ok(()),
        }
    }

    /// Step 3: the replace committed, built again after each conflict (unless `stop` is
    /// set meanwhile).
    fn commit_replace(
        &mut self,
        replace: &mut Replace,
        run: &str,
        stop: &AtomicBool,
        compacted: &mut Compacted,
    ) -> Result<(), IcebergError> {
        for attempt in 0..=MAX_CONFLICTS {
            if attempt > 0 && stop.load(Ordering::Relaxed) {
                self.abandon(replace, "the process is stopping".into(), compacted);
                return Ok(());
            }
            self.refresh()?;
            let prefix = format!("{run}-{attempt}");
            let prepared = self
                .catalog
                .block_on(replace.prepare(&self.table, &prefix))
                .map_err(iceberg_err(format!(
                    "building the replace of {}",
                    self.ident
                )))?;
            let action = match prepared {
                Prepared::Ready(action) => action,
                Prepared::Gone(why) => {
                    self.abandon(replace, why, compacted);
                    return Ok(());
                }
            };
            let (snapshot_id, written) = (action.snapshot_id, action.written.clone());
            crash_point("before-commit");
            let result =
                self.catalog
                    .block_on(replace::commit(self.catalog.catalog(), &self.table, action));
            crash_point("after-commit");
            match result {
                Ok(()) => return self.landed(replace, snapshot_id, compacted),
                Err(error) if error.kind() == ErrorKind::CatalogCommitConflicts => {
                    compacted.counts.conflicts += 1;
                    self.delete_written(written.iter().map(String::as_str));
                    tracing::info!(table = %self.ident, attempt, "the table moved: building the compaction's snapshot again");
                    std::thread::sleep(BACKOFF.wait(attempt + 1));
                }
                Err(error) => {
                    self.refresh()?;
                    if self.table.metadata().snapshot_by_id(snapshot_id).is_some() {
                        return self.landed(replace, snapshot_id, compacted);
                    }
                    // Not deleted: a commit that failed this way may still land.
                    return Err(iceberg_err(format!(
                        "committing the compaction of {}",
                        self.ident
                    ))(error));
                }
            }
        }
        let why = format!("the table moved at each of {} attempts", MAX_CONFLICTS + 1);
        self.abandon(replace, why, compacted);
        Ok(())
    }

    /// Gives the run up: deletes the files it wrote, counts and says why.
    fn abandon(&self, replace: &Replace, why: String, compacted: &mut Compacted) {
        self.delete_written(replace.added.iter().map(|(_, f)| f.file_path()));
        self.delete_written(replace.own_manifests().iter().map(String::as_str));
        tracing::info!(table = %self.ident, %why, "compaction abandoned");
        compacted.counts.abandoned = 1;
        compacted.abandoned = Some(why);
    }

    /// After the commit: the snapshot is in the table (iceberg-rust can report success for
    /// a commit that did not land), and the counts.
    fn landed(
        &mut self,
        replace: &Replace,
        snapshot_id: i64,
        compacted: &mut Compacted,
    ) -> Result<(), IcebergError> {
        self.refresh()?;
        if self.table.metadata().snapshot_by_id(snapshot_id).is_none() {
            return Err(IcebergError::NotCommitted {
                table: self.name(),
                commit_id: format!("compaction snapshot {snapshot_id}"),
                cause: None,
            });
        }
        let size = |files: &mut dyn Iterator<Item = &DataFile>| {
            files.map(DataFile::file_size_in_bytes).sum::<u64>()
        };
        let counts = &mut compacted.counts;
        counts.runs = 1;
        counts.files_rewritten = replace.removed.len() as u64;
        counts.bytes_rewritten = size(&mut replace.removed.iter().map(|(_, f)| f));
        counts.files_written = replace.added.len() as u64;
        counts.bytes_written = size(&mut replace.added.iter().map(|(_, f)| f));
        compacted.snapshot_id = Some(snapshot_id);
        tracing::info!(table = %self.ident, snapshot_id, files_rewritten = counts.files_rewritten, files_written = counts.files_written, bytes_rewritten = counts.bytes_rewritten, conflicts = counts.conflicts, "compacted");
        Ok(())
    }

    /// Deletes files this run wrote and will not commit (failures are left to the orphan
    /// cleanup).
    fn delete_written<'a>(&self, files: impl Iterator<Item = &'a str>) {
        let files: Vec<String> = files.map(String::from).collect();
        if let Err(error) = self.delete_files(&files) {
            tracing::warn!(table = %self.ident, %error, "cannot delete the files of an abandoned compaction: the orphan cleanup will");
        }
    }
}

/// `SLUICE_COMPACT_CRASH_AT=<point>` aborts the process there, as `kill -9` would, for the
/// tests that prove a crash anywhere in a run leaves the table's rows as they were:
/// `after-rewrite` (data files written), `before-commit` (manifests written too),
/// `after-commit` (the replace committed, nothing reported).
fn crash_point(point: &str) {
    if std::env::var("SLUICE_COMPACT_CRASH_AT").as_deref() == Ok(point) {
        eprintln!("SLUICE_COMPACT_CRASH_AT: aborting at {point}");
        std::process::abort();
    }
}

fn rows_differ(
    table: &IcebergTable,
    rewritten: &Rewritten,
    expected: u64,
    written: u64,
) -> IcebergError {
    IcebergError::Config(format!(
        "compaction of {} refused: the manifests list {expected} rows, {} were read and {written} written; nothing was committed",
        table.ident, rewritten.rows_read
    ))
}
