//! The main table as an output: its data files are staged, then committed with the
//! pipeline's commit mark, which makes the table the pipeline's checkpoint.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::DataFile;

use super::{Commit, Delivered, Output, OutputError, Results};
use crate::checkpoint::{CommitMark, RUN};
use crate::encode::conform;
use crate::iceberg::{Fence, IcebergError, IcebergTable, Landed, iceberg_err};

/// The main table.
#[derive(Debug)]
pub struct TableOutput {
    table: IcebergTable,
    /// Files staged for the batch being committed.
    staged: Vec<DataFile>,
    /// The mark of the last commit.
    landed: Option<CommitMark>,
}

impl TableOutput {
    /// The output of `table`.
    pub fn new(table: IcebergTable) -> Self {
        TableOutput {
            table,
            staged: Vec::new(),
            landed: None,
        }
    }

    /// The mark of the last batch this output committed (for [`Fence::Owns`], built at
    /// commit time).
    pub fn landed(&self) -> Option<&CommitMark> {
        self.landed.as_ref()
    }

    /// The table.
    pub fn table(&self) -> &IcebergTable {
        &self.table
    }

    /// Reloads the table from the catalog.
    pub fn refresh(&mut self) -> Result<(), OutputError> {
        self.table.refresh().map_err(|e| self.error(e))
    }

    /// Reloads the table from the catalog, giving up after `limit`.
    pub fn refresh_within(&mut self, limit: std::time::Duration) -> Result<(), OutputError> {
        self.table.refresh_within(limit).map_err(|e| self.error(e))
    }

    /// The latest commit mark of `pipeline`.
    pub fn last_mark(&self, pipeline: &str) -> Result<Option<CommitMark>, IcebergError> {
        self.table.last_mark(pipeline)
    }

    /// Commits an empty snapshot that records `mark` (batch 0: where a new pipeline
    /// starts), unless the table holds a mark of the pipeline by then (another process
    /// anchored it first; the caller reads the mark again either way).
    pub fn anchor(&mut self, mark: &CommitMark, run: &str) -> Result<(), OutputError> {
        let extra = HashMap::from([(RUN.to_string(), run.to_string())]);
        self.table
            .commit(Vec::new(), mark, extra, &Fence::NotHeld)
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Commits a snapshot without data files carrying `mark` behind `fence`, with `extra`
    /// summary properties (a group member's claim of partitions, see
    /// [`crate::checkpoint::CLAIMS`]).
    pub fn commit_empty(
        &mut self,
        mark: &CommitMark,
        fence: &Fence,
        extra: HashMap<String, String>,
    ) -> Result<(), OutputError> {
        self.table
            .commit(Vec::new(), mark, extra, fence)
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Forgets the staged batch (after a fault), deleting its data files: nothing will
    /// commit them. A file already gone is fine; one that cannot be deleted stays for
    /// `sluice maintain`.
    pub fn abandon(&mut self) {
        let files = self.table.files();
        for file in std::mem::take(&mut self.staged) {
            if let Err(error) = files.delete(file.file_path()) {
                tracing::debug!(%error, file = file.file_path(), "cannot delete an abandoned data file");
            }
        }
    }

    /// Whether `fence` holds on the table as it is now (it is checked again at the
    /// commit): a group member with state by partition asks before its window tables take
    /// a batch, so that a member frozen past its session does not add rows for
    /// partitions that moved on meanwhile.
    pub fn check_fence(&mut self, mark: &CommitMark, fence: &Fence) -> Result<(), OutputError> {
        self.refresh()?;
        self.table
            .check_fence(mark, fence)
            .map_err(|e| self.error(e))
    }

    fn error(&self, error: IcebergError) -> OutputError {
        OutputError::Table {
            output: self.name(),
            error: Box::new(error),
        }
    }
}

impl Output for TableOutput {
    fn name(&self) -> String {
        format!("table {}", self.table.name())
    }

    /// The rows are written with the schema the commit leaves current: the table's, or
    /// the one its schema change makes (rows encoded before the change fit it, see
    /// [`conform`]).
    fn stage(&mut self, results: &Results) -> Result<Delivered, OutputError> {
        let schema = match &results.evolution {
            Some(evolution) => Arc::new(evolution.schema.clone()),
            None => self.table.table().metadata().current_schema().clone(),
        };
        let arrow = iceberg::arrow::schema_to_arrow_schema(&schema)
            .map_err(|e| self.error(iceberg_err("the table's schema")(e)))?;
        let arrow = Arc::new(arrow);
        let rows = results
            .rows
            .iter()
            .map(|batch| conform(batch.clone(), &arrow))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| OutputError::Schema {
                output: self.name(),
                message: e.to_string(),
            })?;
        let written = self
            .table
            .write_as(rows, results.batch_id, schema)
            .map_err(|e| self.error(e))?;
        self.staged = written.files;
        Ok(Delivered {
            records: written.rows,
            files: self.staged.len() as u64,
            bytes: written.bytes,
            retries: 0,
        })
    }

    fn commit(&mut self, results: &Results, commit: Commit<'_>) -> Result<Delivered, OutputError> {
        let files = std::mem::take(&mut self.staged);
        let properties = commit.properties.clone();
        let evolution = results.evolution.as_ref();
        let landed = self
            .table
            .commit_evolving(files, commit.mark, properties, commit.fence, evolution)
            .map_err(|e| self.error(e))?;
        let retries = match landed {
            Landed::Committed { retries, mark } => {
                self.landed = Some(mark);
                u64::from(retries)
            }
            Landed::AlreadyHeld => 0,
        };
        Ok(Delivered {
            retries,
            ..Delivered::default()
        })
    }

    fn expire_snapshots(&mut self, cutoff_ms: i64, retain_last: usize) -> Result<u64, OutputError> {
        let expiry = self
            .table
            .expire_snapshots(cutoff_ms, retain_last, false)
            .map_err(|e| self.error(e))?;
        Ok(expiry.removed.len() as u64)
    }

    fn held_batch(&self, pipeline: &str) -> Result<Option<u64>, OutputError> {
        Ok(self
            .last_mark(pipeline)
            .map_err(|e| self.error(e))?
            .map(|m| m.batch_id))
    }
}
