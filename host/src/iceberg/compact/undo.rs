//! Taking back a window commit whose batch never reaches the main table.
//!
//! A group member commits a batch's window tables before the main table (see
//! [`crate::sink`]). If the main table, or a later window table, then fences the batch off
//! (another member took its partitions meanwhile), the rows already committed belong to a
//! batch that will never count: the member removes them again, with a replace snapshot
//! that deletes the commit's data files and puts back what `sluice.batch-keys` recorded
//! for the batch's partitions before it (the commit recorded that, as
//! `sluice.batch-keys-before`). Left in place, they would be emitted again by the
//! partitions' new owner, and their recorded offsets would fence its batches off the
//! table for good.

use std::collections::{BTreeMap, HashMap};

use iceberg::ErrorKind;
use iceberg::spec::DataFile;

use super::replace::{self, Prepared, Replace};
use super::{BACKOFF, MAX_CONFLICTS};
use crate::checkpoint::{BATCH_ID, BATCH_KEYS, BATCH_KEYS_BEFORE, COMMIT_ID, CommitMark, UNDONE};
use crate::iceberg::fence::BatchEntry;
use crate::iceberg::marks::{mark_property, mark_property_value};
use crate::iceberg::{IcebergError, IcebergTable, iceberg_err};

impl IcebergTable {
    /// Takes back the commit of `landed` (a batch keyed `key`) that added `files`: returns
    /// whether it did (`false`: the commit is not in the table's history any more, or its
    /// files were compacted away meanwhile; a warning says which).
    pub fn undo_keyed(
        &mut self,
        landed: &CommitMark,
        key: &str,
        files: &[DataFile],
    ) -> Result<bool, IcebergError> {
        self.undo_commit(&landed.pipeline, &landed.commit_id(), key, files)
    }

    /// Takes back `pipeline`'s commit `commit_id` (a batch keyed `key`) that added `files`
    /// (see [`IcebergTable::undo_keyed`]).
    pub(super) fn undo_commit(
        &mut self,
        pipeline: &str,
        commit_id: &str,
        key: &str,
        files: &[DataFile],
    ) -> Result<bool, IcebergError> {
        for attempt in 0..=MAX_CONFLICTS {
            self.refresh()?;
            let Some(before) = self.keys_before(commit_id) else {
                tracing::warn!(table = %self.name(), %commit_id, "cannot take back a window commit: it is no longer in the table's history");
                return Ok(false);
            };
            let last = self.last_mark_properties(pipeline)?.unwrap_or_default();
            let mut properties = taken_back(&last, &before, key, commit_id);
            // A commit id of its own (the mark's: the next batch id, the same offsets).
            if let Some(Ok(mark)) = CommitMark::from_properties(pipeline, 0, &properties) {
                properties.insert(COMMIT_ID.to_string(), mark.commit_id());
            }
            let spec = self.table.metadata().default_partition_spec_id();
            let mut replace = Replace {
                removed: files.iter().map(|f| (spec, f.clone())).collect(),
                added: Vec::new(),
                table_properties: HashMap::from([(
                    mark_property(pipeline),
                    mark_property_value(&properties),
                )]),
                properties,
                built: None,
                stale: Vec::new(),
                read: super::ManifestsRead::new(),
            };
            let prefix = format!("undo-{commit_id}-{attempt}");
            let prepared = self
                .catalog
                .block_on(replace.prepare(&self.table, &prefix))
                .map_err(iceberg_err(format!("building the undo of {commit_id}")))?;
            let action = match prepared {
                Prepared::Ready(action) => action,
                Prepared::Gone(why) => {
                    tracing::warn!(table = %self.name(), %commit_id, %why, "cannot take back a window commit");
                    return Ok(false);
                }
            };
            let result =
                self.catalog
                    .block_on(replace::commit(self.catalog.catalog(), &self.table, action));
            match result {
                Ok(()) => return Ok(true),
                Err(error) if error.kind() == ErrorKind::CatalogCommitConflicts => {
                    std::thread::sleep(BACKOFF.wait(attempt + 1));
                }
                Err(error) => {
                    return Err(iceberg_err(format!("taking back {commit_id}"))(error));
                }
            }
        }
        Err(IcebergError::NotCommitted {
            table: self.name(),
            commit_id: format!("the undo of {commit_id}"),
            cause: Some(format!(
                "the table moved at each of {} attempts",
                MAX_CONFLICTS + 1
            )),
        })
    }

    /// What the commit `commit_id` recorded as its partitions' entries before it.
    fn keys_before(&self, commit_id: &str) -> Option<BTreeMap<String, Option<String>>> {
        let metadata = self.table.metadata();
        let ours = metadata.snapshots().find(|s| {
            s.summary()
                .additional_properties
                .get(COMMIT_ID)
                .map(String::as_str)
                == Some(commit_id)
        })?;
        let text = ours
            .summary()
            .additional_properties
            .get(BATCH_KEYS_BEFORE)?;
        serde_json::from_str(text).ok()
    }
}

/// The summary properties of the snapshot that takes back `commit_id`: the pipeline's last
/// mark (`last`) with the next batch id, its partitions' batch keys put back as `before`
/// says wherever they still name `key`.
fn taken_back(
    last: &HashMap<String, String>,
    before: &BTreeMap<String, Option<String>>,
    key: &str,
    commit_id: &str,
) -> HashMap<String, String> {
    let mut properties = last.clone();
    properties.remove(BATCH_KEYS_BEFORE);
    let mut keys: BTreeMap<String, String> = last
        .get(BATCH_KEYS)
        .and_then(|k| serde_json::from_str(k).ok())
        .unwrap_or_default();
    for (partition, entry) in before {
        let ours = keys
            .get(partition)
            .and_then(|e| BatchEntry::parse(e))
            .is_some_and(|e| e.key == key);
        if !ours {
            continue;
        }
        match entry {
            Some(entry) => keys.insert(partition.clone(), entry.clone()),
            None => keys.remove(partition),
        };
    }
    let keys = serde_json::to_string(&keys).expect("a map of strings serialises");
    properties.insert(BATCH_KEYS.to_string(), keys);
    let batch = last
        .get(BATCH_ID)
        .and_then(|b| b.parse::<u64>().ok())
        .unwrap_or(0);
    properties.insert(BATCH_ID.to_string(), (batch + 1).to_string());
    properties.insert(UNDONE.to_string(), commit_id.to_string());
    properties
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_still_naming_the_batch_are_put_back_and_others_kept() {
        let last = HashMap::from([
            (BATCH_ID.to_string(), "7".to_string()),
            (
                BATCH_KEYS.to_string(),
                r#"{"t/0":"k9@16","t/1":"k8@20","t/2":"k9@5"}"#.to_string(),
            ),
            (BATCH_KEYS_BEFORE.to_string(), "{}".to_string()),
        ]);
        let before = BTreeMap::from([
            ("t/0".to_string(), Some("k4@12".to_string())),
            ("t/1".to_string(), Some("k3@18".to_string())),
            ("t/2".to_string(), None),
        ]);
        let p = taken_back(&last, &before, "k9", "c9");
        assert_eq!(p[BATCH_KEYS], r#"{"t/0":"k4@12","t/1":"k8@20"}"#);
        assert_eq!(p[BATCH_ID], "8");
        assert_eq!(p[UNDONE], "c9");
        assert!(!p.contains_key(BATCH_KEYS_BEFORE));
    }
}
