//! Committing a batch's files with the pipeline's commit mark, and finding the last mark.

use std::collections::HashMap;

use iceberg::spec::{DataFile, SnapshotRef};
use iceberg::transaction::{ApplyTransactionAction, Transaction};

use super::{IcebergTable, SinkError};
use crate::commit::CommitMark;

impl IcebergTable {
    /// Appends `files` in one snapshot carrying `mark` (and `extra` summary properties),
    /// then reloads the table and checks that the commit is there. A commit that returned
    /// an error but did land is accepted.
    pub fn commit(
        &mut self,
        files: Vec<DataFile>,
        mark: &CommitMark,
        extra: HashMap<String, String>,
    ) -> Result<(), SinkError> {
        let mut properties = mark.to_properties();
        properties.extend(extra);
        let tx = Transaction::new(&self.table);
        let action = tx
            .fast_append()
            .add_data_files(files)
            .set_snapshot_properties(properties);
        let result = self.catalog.block_on(async {
            let tx = action.apply(tx)?;
            tx.commit(self.catalog.catalog()).await
        });
        let cause = result.as_ref().err().map(ToString::to_string);
        self.refresh()?;
        let landed = self.last_mark(&mark.pipeline)?;
        if landed.as_ref().map(CommitMark::commit_id) != Some(mark.commit_id()) {
            return Err(SinkError::NotCommitted {
                table: self.name(),
                commit_id: mark.commit_id(),
                cause,
            });
        }
        if let Some(cause) = cause {
            tracing::warn!(%cause, commit_id = %mark.commit_id(), "the commit reported an error but landed");
        }
        Ok(())
    }

    /// The snapshot that carries `pipeline`'s latest mark, walking back from the current
    /// snapshot.
    fn last_mark_snapshot(&self, pipeline: &str) -> Option<&SnapshotRef> {
        let metadata = self.table.metadata();
        let mut next = metadata.current_snapshot();
        while let Some(snapshot) = next {
            let props = &snapshot.summary().additional_properties;
            if props.get(crate::commit::PIPELINE).map(String::as_str) == Some(pipeline) {
                return Some(snapshot);
            }
            next = snapshot
                .parent_snapshot_id()
                .and_then(|id| metadata.snapshot_by_id(id));
        }
        None
    }

    /// The summary properties of the snapshot that carries `pipeline`'s latest mark.
    pub fn last_mark_properties(&self, pipeline: &str) -> Option<&HashMap<String, String>> {
        self.last_mark_snapshot(pipeline)
            .map(|s| &s.summary().additional_properties)
    }

    /// The latest commit mark of `pipeline`.
    pub fn last_mark(&self, pipeline: &str) -> Result<Option<CommitMark>, SinkError> {
        let Some(snapshot) = self.last_mark_snapshot(pipeline) else {
            return Ok(None);
        };
        let props = &snapshot.summary().additional_properties;
        Ok(CommitMark::from_properties(pipeline, snapshot.snapshot_id(), props).transpose()?)
    }
}
