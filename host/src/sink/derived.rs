//! What the outputs derived from a batch (window results, join rows) share: keyed JSON
//! records to a topic, at least once, and a table that takes each batch exactly once, in
//! one commit carrying the pipeline's commit mark (a batch it already holds is not written
//! again: its files, if written, stay unreferenced).

use std::collections::HashMap;

use arrow_array::RecordBatch;

use super::topic::{Outgoing, Topic};
use super::{Delivered, OutputError, Results, send_to};
use crate::checkpoint::CommitMark;
use crate::iceberg::{Fence, IcebergError, IcebergTable, Landed};

/// Sends `records` (key, value) to `topic`, each with the pipeline's and batch's headers
/// and `tag` (`("sluice.window", name)`, for example).
pub(super) fn send_json(
    topic: &dyn Topic,
    output: String,
    results: &Results,
    tag: (&str, &str),
    records: &[(String, String)],
) -> Result<Delivered, OutputError> {
    let batch = results.batch_id.to_string();
    let headers = [
        ("sluice.pipeline", results.pipeline.as_str()),
        ("sluice.batch-id", batch.as_str()),
        tag,
    ];
    let outgoing = records
        .iter()
        .map(|(key, value)| Outgoing {
            key: Some(key.as_bytes()),
            value: Some(value.as_bytes()),
            headers: headers
                .iter()
                .map(|(k, v)| (*k, Some(v.as_bytes())))
                .collect(),
        })
        .collect();
    send_to(topic, output, outgoing)
}

/// A derived output's table, named for logs and errors as `KIND `NAME``.
pub(super) struct DerivedTable<'a> {
    /// What the table holds: `window` or `join`.
    pub(super) kind: &'static str,
    /// The window's or join's name.
    pub(super) name: &'a str,
    /// The table.
    pub(super) table: &'a mut IcebergTable,
}

impl DerivedTable<'_> {
    /// Appends `batch` in one commit carrying `mark` (a table that turns out to hold the
    /// batch already, committed by another attempt, is left as it is).
    pub(super) fn commit(
        self,
        batch: RecordBatch,
        mark: &CommitMark,
    ) -> Result<Delivered, OutputError> {
        let error = |e| table_error(self.kind, self.name, e);
        let written = self
            .table
            .write(vec![batch], mark.batch_id)
            .map_err(error)?;
        let delivered = Delivered {
            records: written.rows,
            files: written.files.len() as u64,
            bytes: written.bytes,
            retries: 0,
        };
        let landed = self
            .table
            .commit(written.files, mark, HashMap::new(), &Fence::NotHeld)
            .map_err(error)?;
        Ok(match landed {
            Landed::Committed { retries, .. } => Delivered {
                retries: u64::from(retries),
                ..delivered
            },
            Landed::AlreadyHeld => held(self.kind, self.name, mark.batch_id),
        })
    }

    /// Expires snapshots older than `cutoff_ms` beyond the last `retain_last`; returns how
    /// many went.
    pub(super) fn expire(self, cutoff_ms: i64, retain_last: usize) -> Result<u64, OutputError> {
        let expiry = self
            .table
            .expire_snapshots(cutoff_ms, retain_last, false)
            .map_err(|e| table_error(self.kind, self.name, e))?;
        Ok(expiry.removed.len() as u64)
    }
}

/// Whether `table` holds the batch of `mark` already (a replay after a crash): then what
/// the batch delivered there, nothing, logged.
pub(super) fn holds(
    table: Option<&IcebergTable>,
    kind: &'static str,
    name: &str,
    mark: &CommitMark,
) -> Result<Option<Delivered>, OutputError> {
    let last = held_batch(table, kind, name, &mark.pipeline)?;
    Ok(last
        .is_some_and(|b| b >= mark.batch_id)
        .then(|| held(kind, name, mark.batch_id)))
}

/// The last batch of `pipeline` that `table` holds, if it has one.
pub(super) fn held_batch(
    table: Option<&IcebergTable>,
    kind: &'static str,
    name: &str,
    pipeline: &str,
) -> Result<Option<u64>, OutputError> {
    match table {
        Some(table) => table
            .last_mark(pipeline)
            .map(|m| m.map(|m: CommitMark| m.batch_id))
            .map_err(|e| table_error(kind, name, e)),
        None => Ok(None),
    }
}

/// A batch the table holds already: nothing delivered.
fn held(kind: &str, name: &str, batch_id: u64) -> Delivered {
    tracing::info!(
        kind,
        name,
        batch_id,
        "the {kind} table holds this batch already"
    );
    Delivered::default()
}

/// An error of the table of `KIND `NAME``.
pub(super) fn table_error(kind: &str, name: &str, error: IcebergError) -> OutputError {
    OutputError::Table {
        output: format!("{kind} `{name}`"),
        error: Box::new(error),
    }
}
