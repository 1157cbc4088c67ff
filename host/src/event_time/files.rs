//! The event-time state files on a table's storage: the [`StateStore`] that keeps them
//! beside the table's data, and their retention (`sluice maintain` deletes the state files
//! of batches long committed that no commit mark names: those of fenced or crashed
//! processes).
//!
//! The Iceberg adapter ([`crate::iceberg`]) only reads and writes files; what a state file
//! is, and which ones a pipeline still needs, is known here.

use std::collections::HashSet;
use std::time::SystemTime;

use super::state::{KEEP_STATE_FILES, StateError, StateStore, chain_files, state_root};
use crate::checkpoint::{BATCH_ID, STATE};
use crate::iceberg::listing::normalize;
use crate::iceberg::{IcebergTable, TableFiles};

impl StateStore for TableFiles {
    fn put(&self, path: &str, bytes: Vec<u8>) -> Result<(), StateError> {
        TableFiles::put(self, path, bytes).map_err(StateError::store)
    }

    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, StateError> {
        TableFiles::get(self, path).map_err(StateError::store)
    }

    fn delete(&self, path: &str) -> Result<(), StateError> {
        TableFiles::delete(self, path).map_err(StateError::store)
    }
}

/// The state files of each pipeline that left a mark in `table`, below its latest mark's
/// batch by more than sluice keeps ([`KEEP_STATE_FILES`]), that the mark does not name,
/// that the state it names does not build on (the snapshot and deltas of its chain) and
/// that were last modified before `cutoff`; their locations.
pub fn old_state_files(
    table: &IcebergTable,
    cutoff: SystemTime,
) -> Result<Vec<String>, StateError> {
    let root = state_root(table.location());
    let mut old = Vec::new();
    for pipeline in table.mark_snapshots().map_err(StateError::store)?.keys() {
        let props = table
            .last_mark_properties(pipeline)
            .map_err(StateError::store)?
            .unwrap_or_default();
        // The named file and, for a delta, the snapshot and deltas it builds on.
        let live: HashSet<String> = match props.get(STATE) {
            Some(named) => chain_files(&table.files(), named)?
                .iter()
                .map(|f| normalize(f))
                .collect(),
            None => HashSet::new(),
        };
        let batch = props
            .get(BATCH_ID)
            .and_then(|b| b.parse::<u64>().ok())
            .unwrap_or(0);
        let keep_from = batch.saturating_sub(KEEP_STATE_FILES);
        let listed = table
            .files_below(&format!("{root}/{pipeline}"))
            .map_err(StateError::store)?;
        for file in listed {
            let file_batch = file
                .location
                .rsplit('/')
                .next()
                .and_then(|n| n.get(..20))
                .and_then(|b| b.parse::<u64>().ok());
            if file_batch.is_some_and(|b| b < keep_from)
                && !live.contains(&file.location)
                && file.older_than(cutoff)
            {
                old.push(file.location);
            }
        }
    }
    Ok(old)
}
