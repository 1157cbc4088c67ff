//! Table maintenance that knows sluice (`sluice maintain`): snapshot expiry that always
//! keeps the snapshot carrying each pipeline's latest commit mark, and orphan-file cleanup
//! that knows which files sluice writes beside the data.
//!
//! Local and S3 warehouses alike. Expiry commits like any engine's (Iceberg's `RemoveSnapshots`), so Spark, pyiceberg and
//! DuckDB read the table as before. Orphan cleanup then deletes, below the table's `data/`
//! and `metadata/` folders, the files that no snapshot left and no metadata file names
//! (the files the expired snapshots held, and those of batches abandoned by a crash),
//! if older than a grace period that keeps a writer's not-yet-committed files safe.
//! [`IcebergTable::files_below`] lists other folders of the warehouse, for the engine's
//! own files beside the data (its old state files).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, SystemTime};

use iceberg::spec::TableMetadata;
use iceberg::transaction::{ApplyTransactionAction, Transaction};

use super::listing::{Listed, Lister, normalize};
use super::marks::mark_property;
use super::{IcebergError, IcebergTable, iceberg_err};
use crate::checkpoint::{COMMIT_ID, PIPELINE};

/// What expiry removed and kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expiry {
    /// Snapshots removed (or that would be, in a dry run).
    pub removed: Vec<i64>,
    /// Snapshots left.
    pub kept: usize,
    /// The snapshot that carries each pipeline's latest mark, kept whatever its age.
    pub marks: BTreeMap<String, i64>,
}

/// The expiry cutoff for snapshots older than `older_than` at `now`: milliseconds since
/// the epoch, as [`IcebergTable::expire_snapshots`] takes it.
pub fn cutoff_ms(now: SystemTime, older_than: Duration) -> i64 {
    now.checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH)
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl IcebergTable {
    /// The snapshot carrying each pipeline's latest mark, for every pipeline that left a
    /// mark (in the history or as a table property).
    pub fn mark_snapshots(&self) -> Result<BTreeMap<String, i64>, IcebergError> {
        let metadata = self.table.metadata();
        let mut pipelines: BTreeSet<String> = metadata
            .snapshots()
            .filter_map(|s| s.summary().additional_properties.get(PIPELINE).cloned())
            .collect();
        let prefix = mark_property("");
        pipelines.extend(
            metadata
                .properties()
                .keys()
                .filter_map(|k| k.strip_prefix(&prefix).map(String::from)),
        );
        let mut marks = BTreeMap::new();
        for pipeline in pipelines {
            let Some(props) = self.last_mark_properties(&pipeline)? else {
                continue;
            };
            let commit = props.get(COMMIT_ID);
            let carrier = metadata.snapshots().find(|s| {
                let summary = &s.summary().additional_properties;
                summary.get(PIPELINE) == Some(&pipeline) && summary.get(COMMIT_ID) == commit
            });
            if let Some(s) = carrier {
                marks.insert(pipeline, s.snapshot_id());
            }
        }
        Ok(marks)
    }

    /// Expires the snapshots older than `cutoff_ms` (milliseconds since the epoch), except
    /// the newest `retain_last` of the current history, every branch or tag head, and the
    /// snapshots of [`IcebergTable::mark_snapshots`]. With `dry_run`, says what it would do.
    pub fn expire_snapshots(
        &mut self,
        cutoff_ms: i64,
        retain_last: usize,
        dry_run: bool,
    ) -> Result<Expiry, IcebergError> {
        self.refresh()?;
        let marks = self.mark_snapshots()?;
        let metadata = self.table.metadata();
        let mut keep: HashSet<i64> = marks.values().copied().collect();
        keep.extend(ref_heads(metadata));
        let mut next = metadata.current_snapshot();
        for _ in 0..retain_last.max(1) {
            let Some(s) = next else { break };
            keep.insert(s.snapshot_id());
            next = s
                .parent_snapshot_id()
                .and_then(|p| metadata.snapshot_by_id(p));
        }
        let removed: Vec<i64> = metadata
            .snapshots()
            .filter(|s| s.timestamp_ms() < cutoff_ms && !keep.contains(&s.snapshot_id()))
            .map(|s| s.snapshot_id())
            .collect();
        let kept = metadata.snapshots().count() - removed.len();
        if !dry_run && !removed.is_empty() {
            let tx = Transaction::new(&self.table);
            let action = tx
                .expire_snapshots()
                .expire_snapshot_ids(removed.clone())
                // Only these: no other default retention applies.
                .expire_older_than_ms(i64::MIN);
            let catalog = self.catalog.catalog();
            self.catalog
                .block_on(async { action.apply(tx)?.commit(catalog).await })
                .map_err(iceberg_err(format!("expiring snapshots of {}", self.ident)))?;
            self.refresh()?;
        }
        Ok(Expiry {
            removed,
            kept,
            marks,
        })
    }

    /// Every file the table's metadata names: metadata files (current and logged),
    /// manifest lists, manifests, data and delete files, statistics files.
    /// Spelled as [`normalize`] spells them.
    pub fn referenced_files(&self) -> Result<HashSet<String>, IcebergError> {
        let table = &self.table;
        let metadata = table.metadata();
        let mut named: Vec<String> = metadata
            .metadata_log()
            .iter()
            .map(|m| m.metadata_file.clone())
            .chain(table.metadata_location().map(String::from))
            .chain(
                metadata
                    .statistics_iter()
                    .map(|s| s.statistics_path.clone()),
            )
            .chain(
                metadata
                    .partition_statistics_iter()
                    .map(|s| s.statistics_path.clone()),
            )
            .collect();
        self.catalog
            .block_on(async {
                for snapshot in metadata.snapshots() {
                    named.push(snapshot.manifest_list().to_string());
                    let list = table.manifest_list_reader(snapshot).load().await?;
                    for manifest in list.entries() {
                        named.push(manifest.manifest_path.clone());
                        let entries = manifest.load_manifest(table.file_io()).await?;
                        named.extend(entries.entries().iter().map(|e| e.file_path().to_string()));
                    }
                }
                Ok::<_, iceberg::Error>(())
            })
            .map_err(iceberg_err(format!(
                "reading the manifests of {}",
                self.ident
            )))?;
        Ok(named.iter().map(|p| normalize(p)).collect())
    }

    /// Files below the table's `data/` and `metadata/` folders that nothing names, last
    /// modified before `cutoff`; their locations, sorted. (The engine's old state files are
    /// found by `event_time::files::old_state_files`.)
    pub fn orphan_files(&self, cutoff: SystemTime) -> Result<Vec<String>, IcebergError> {
        let location = self.location().trim_end_matches('/');
        let s3 = self.config.s3.properties(|name| std::env::var(name).ok());
        let lister = Lister::new(location, &s3)?;
        let referenced = self.referenced_files()?;
        let mut orphans = Vec::new();
        for folder in ["data", "metadata"] {
            let listed = self
                .catalog
                .block_on(lister.files_below(&format!("{location}/{folder}")))?;
            orphans.extend(
                listed
                    .into_iter()
                    .filter(|f| !referenced.contains(&f.location) && f.older_than(cutoff))
                    .map(|f| f.location),
            );
        }
        orphans.sort();
        Ok(orphans)
    }

    /// Every file below `folder` (a location inside the warehouse), with its age: for the
    /// engine's own files beside the data (see `event_time::files`).
    pub fn files_below(&self, folder: &str) -> Result<Vec<Listed>, IcebergError> {
        let s3 = self.config.s3.properties(|name| std::env::var(name).ok());
        let lister = Lister::new(self.location().trim_end_matches('/'), &s3)?;
        self.catalog.block_on(lister.files_below(folder))
    }

    /// Removes `files` (locations) through the table's storage; returns how many.
    pub fn delete_files(&self, files: &[String]) -> Result<usize, IcebergError> {
        let io = self.table.file_io();
        self.catalog.block_on(async {
            for file in files {
                match io.delete(file).await {
                    Ok(()) => {}
                    Err(e) if !io.exists(file).await.unwrap_or(true) => {
                        tracing::debug!(file, error = %e, "already gone");
                    }
                    Err(e) => return Err(iceberg_err(format!("deleting {file}"))(e)),
                }
            }
            Ok(files.len())
        })
    }
}

/// The snapshots that branches and tags point to. iceberg-rust does not list a table's
/// refs, but its metadata serialises them (`refs` in the metadata JSON).
fn ref_heads(metadata: &TableMetadata) -> HashSet<i64> {
    let json = serde_json::to_value(metadata).unwrap_or_default();
    json.get("refs")
        .and_then(|r| r.as_object())
        .map(|refs| {
            refs.values()
                .filter_map(|r| r.get("snapshot-id").and_then(serde_json::Value::as_i64))
                .collect()
        })
        .unwrap_or_default()
}
