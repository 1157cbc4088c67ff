//! Finding a pipeline's last commit mark, whatever maintenance did to the table's history.
//!
//! Each commit carries the mark twice, in one atomic metadata change: in the new
//! snapshot's summary, and as the table property `sluice.mark.<pipeline>` (the same
//! summary properties, as JSON). Snapshot expiry (sluice's, pyiceberg's, Spark's) may
//! remove the snapshot that carries the summary, say after a compaction or after another
//! writer committed many times; the property stays, and is carried by every later commit
//! of every engine. Tables written before the property existed are still read through
//! their history.
//!
//! A table whose history was cut (a snapshot's parent is gone) and that has no mark of the
//! pipeline cannot tell whether the pipeline committed before: [`IcebergTable::truncated_history`]
//! lets the pipeline refuse to start as new there.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::SnapshotRef;

use super::{IcebergError, IcebergTable};
use crate::checkpoint::{BATCH_ID, BATCH_KEYS, CommitMark, PIPELINE};

/// The table property that holds `pipeline`'s last mark.
pub fn mark_property(pipeline: &str) -> String {
    format!("sluice.mark.{pipeline}")
}

/// The property value for a commit's summary `properties`: the JSON of its `sluice.*`
/// entries, sorted.
pub fn mark_property_value(properties: &HashMap<String, String>) -> String {
    let sluice: BTreeMap<&str, &str> = properties
        .iter()
        .filter(|(k, _)| k.starts_with("sluice."))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    serde_json::to_string(&sluice).expect("a map of strings serialises")
}

impl IcebergTable {
    /// The snapshot that carries `pipeline`'s latest mark, walking back from the current
    /// snapshot as far as the history goes.
    fn last_mark_snapshot(&self, pipeline: &str) -> Option<&SnapshotRef> {
        let metadata = self.table.metadata();
        let mut next = metadata.current_snapshot();
        while let Some(snapshot) = next {
            let props = &snapshot.summary().additional_properties;
            if props.get(PIPELINE).map(String::as_str) == Some(pipeline) {
                return Some(snapshot);
            }
            next = snapshot
                .parent_snapshot_id()
                .and_then(|id| metadata.snapshot_by_id(id));
        }
        None
    }

    /// `pipeline`'s mark as the table property holds it.
    fn mark_in_property(
        &self,
        pipeline: &str,
    ) -> Result<Option<HashMap<String, String>>, IcebergError> {
        let properties = self.table.metadata().properties();
        let Some(text) = properties.get(&mark_property(pipeline)) else {
            return Ok(None);
        };
        serde_json::from_str(text).map(Some).map_err(|e| {
            IcebergError::Mark(crate::checkpoint::MarkError {
                pipeline: pipeline.to_string(),
                snapshot: self.current_snapshot_id(),
                reason: format!("table property `{}`: {e}", mark_property(pipeline)),
            })
        })
    }

    fn current_snapshot_id(&self) -> i64 {
        self.table.metadata().current_snapshot_id().unwrap_or(-1)
    }

    /// The summary properties of `pipeline`'s latest commit: from the table property or
    /// from the history, whichever has the later batch (a table written by an older
    /// sluice has only the history).
    pub fn last_mark_properties(
        &self,
        pipeline: &str,
    ) -> Result<Option<HashMap<String, String>>, IcebergError> {
        let from_history = self
            .last_mark_snapshot(pipeline)
            .map(|s| s.summary().additional_properties.clone());
        let from_property = self.mark_in_property(pipeline)?;
        let batch =
            |p: &HashMap<String, String>| p.get(BATCH_ID).and_then(|b| b.parse::<u64>().ok());
        Ok(match (from_history, from_property) {
            (Some(h), Some(p)) if batch(&p) > batch(&h) => Some(p),
            (Some(h), _) => Some(h),
            (None, p) => p,
        })
    }

    /// The latest commit mark of `pipeline`.
    pub fn last_mark(&self, pipeline: &str) -> Result<Option<CommitMark>, IcebergError> {
        let Some(props) = self.last_mark_properties(pipeline)? else {
            return Ok(None);
        };
        let snapshot = self
            .last_mark_snapshot(pipeline)
            .map_or_else(|| self.current_snapshot_id(), |s| s.snapshot_id());
        Ok(CommitMark::from_properties(pipeline, snapshot, &props).transpose()?)
    }

    /// Whether a commit of `pipeline` since `since_ms` (a snapshot's timestamp) recorded
    /// the batch keyed `key` for one of its partitions (`sluice.batch-keys`): `None` if
    /// the history is cut before reaching that time (it cannot tell).
    pub fn recorded_key_since(&self, pipeline: &str, key: &str, since_ms: i64) -> Option<bool> {
        let metadata = self.table.metadata();
        let ours = format!("{key}@");
        let mut next = metadata.current_snapshot();
        while let Some(snapshot) = next {
            if snapshot.timestamp_ms() < since_ms {
                return Some(false);
            }
            let props = &snapshot.summary().additional_properties;
            let keys: BTreeMap<String, String> = props
                .get(BATCH_KEYS)
                .filter(|_| props.get(PIPELINE).map(String::as_str) == Some(pipeline))
                .and_then(|k| serde_json::from_str(k).ok())
                .unwrap_or_default();
            if keys.values().any(|entry| entry.starts_with(&ours)) {
                return Some(true);
            }
            let Some(parent) = snapshot.parent_snapshot_id() else {
                return (snapshot.sequence_number() <= 1).then_some(false);
            };
            // A parent expired: the history is cut.
            next = Some(metadata.snapshot_by_id(parent)?);
        }
        Some(false)
    }

    /// The first snapshot, walking back from the current one, before which the history
    /// cannot be read: its parent is gone (expired), or it has no parent but commits came
    /// before it (its sequence number is above 1: an overwrite of the whole table, say,
    /// then expiry). `None` when the history is whole.
    pub fn truncated_history(&self) -> Option<i64> {
        let metadata = self.table.metadata();
        let mut next = metadata.current_snapshot();
        while let Some(snapshot) = next {
            match snapshot.parent_snapshot_id() {
                Some(parent) => match metadata.snapshot_by_id(parent) {
                    Some(p) => next = Some(p),
                    None => return Some(snapshot.snapshot_id()),
                },
                None => return (snapshot.sequence_number() > 1).then(|| snapshot.snapshot_id()),
            }
        }
        None
    }
}
