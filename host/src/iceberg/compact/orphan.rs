//! A window commit left behind by a member killed before it could take it back.
//!
//! A member whose batch is fenced off after some of its window commits landed takes them
//! back itself (see [`super::undo`]); killed in between, it leaves them, and their entries
//! in `sluice.batch-keys` fence every later batch of those partitions off the table. The
//! partitions' next owner finds the commit whose entry fences it off
//! ([`IcebergTable::fencing_commit`]) and, once the pipeline has made sure that batch can
//! never count, takes it back ([`IcebergTable::take_back`]): the files that commit added,
//! still live, and the entries it replaced.

use std::collections::BTreeMap;

use super::plan::ManifestsRead;
use crate::checkpoint::{BATCH_KEYS, BATCH_PLAN, BATCH_RANGE, COMMIT_ID, PIPELINE, PLANNED_BATCH};
use crate::iceberg::fence::BatchEntry;
use crate::iceberg::{Fence, IcebergError, IcebergTable};

/// A keyed window commit, as the table's history records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedCommit {
    /// Its batch's key.
    pub key: String,
    /// Its commit id.
    pub commit_id: String,
    /// Its snapshot.
    pub snapshot_id: i64,
    /// When it was committed (the committing process's clock).
    pub timestamp_ms: i64,
    /// The id its batch was planned with (`sluice.planned-batch`), if recorded.
    pub planned_batch: Option<u64>,
    /// Where its batch read each of its partitions from and to.
    pub range: BTreeMap<String, (i64, i64)>,
    /// Its batch's plan (`sluice.batch-plan`, JSON), if recorded.
    pub plan: Option<String>,
    /// The generation of the state its batch built on, for each partition its entry
    /// records one for (see [`crate::iceberg::fence::BatchEntry`]).
    pub bases: BTreeMap<String, u64>,
}

impl IcebergTable {
    /// For a batch fenced off this table by `fence` ([`Fence::Keyed`]): the commit of
    /// `pipeline` whose entry did it (another batch's, past where this one starts on one
    /// of its partitions), if the history still holds it with its range.
    pub fn fencing_commit(
        &self,
        pipeline: &str,
        fence: &Fence,
    ) -> Result<Option<KeyedCommit>, IcebergError> {
        let last = self.last_mark_properties(pipeline)?.unwrap_or_default();
        let Some((partition, key, entry)) =
            fence.fenced_by(last.get(BATCH_KEYS).map(String::as_str))
        else {
            return Ok(None);
        };
        let metadata = self.table.metadata();
        let mut next = metadata.current_snapshot();
        while let Some(snapshot) = next {
            let props = &snapshot.summary().additional_properties;
            let ours = props.get(PIPELINE).map(String::as_str) == Some(pipeline);
            let range: Option<BTreeMap<String, (i64, i64)>> = props
                .get(BATCH_RANGE)
                .filter(|_| ours)
                .and_then(|r| serde_json::from_str(r).ok());
            let keys: BTreeMap<String, String> = props
                .get(BATCH_KEYS)
                .and_then(|k| serde_json::from_str(k).ok())
                .unwrap_or_default();
            if let Some(range) = range.filter(|r| r.contains_key(&partition))
                && keys.get(&partition) == Some(&entry)
            {
                return Ok(Some(KeyedCommit {
                    bases: bases_of(&keys, &key),
                    key,
                    commit_id: props.get(COMMIT_ID).cloned().unwrap_or_default(),
                    snapshot_id: snapshot.snapshot_id(),
                    timestamp_ms: snapshot.timestamp_ms(),
                    planned_batch: props.get(PLANNED_BATCH).and_then(|b| b.parse().ok()),
                    range,
                    plan: props.get(BATCH_PLAN).cloned(),
                }));
            }
            next = snapshot
                .parent_snapshot_id()
                .and_then(|id| metadata.snapshot_by_id(id));
        }
        Ok(None)
    }

    /// Takes back `commit` of `pipeline` (see [`IcebergTable::fencing_commit`]): the data
    /// files it added that are still live, and its partitions' entries. Returns whether it
    /// did (`false`, with a warning: its files were compacted away meanwhile, or it left
    /// the history).
    pub fn take_back(
        &mut self,
        pipeline: &str,
        commit: &KeyedCommit,
    ) -> Result<bool, IcebergError> {
        let manifests = self.current_manifests(&mut ManifestsRead::new())?;
        let files = manifests.added_by(commit.snapshot_id);
        if files.is_empty() {
            tracing::warn!(table = %self.name(), commit_id = %commit.commit_id, "cannot take back a window commit left by a member: none of its files is live (compacted?)");
            return Ok(false);
        }
        self.undo_commit(pipeline, &commit.commit_id, &commit.key, &files)
    }
}

/// The generations of the states the batch keyed `key` built on, from a commit's entries.
fn bases_of(keys: &BTreeMap<String, String>, key: &str) -> BTreeMap<String, u64> {
    let entries = keys
        .iter()
        .filter_map(|(p, e)| Some((p, BatchEntry::parse(e)?)));
    entries
        .filter(|(_, e)| e.key == key)
        .filter_map(|(p, e)| Some((p.clone(), e.base?)))
        .collect()
}
