//! Saved operator state: one file per batch, written to the table's location before any
//! commit of the batch and named in the table's snapshot summary (`sluice.state`).
//!
//! The file also holds the batch's *plan*: the offsets it read and the processing time
//! it ran at. After a crash between the state file and the table commit, the restarted
//! pipeline finds the file of the next batch and replays exactly that plan, so its
//! results are the same as they would have been without the crash: a window that an
//! output already holds is not emitted with different contents, and none is missed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::window::{Accumulator, GroupKey, SavedGroup};
use super::watermark::Watermark;

/// Snapshot summary key: the path of the state file after this commit.
pub const STATE: &str = "sluice.state";
/// Snapshot summary key: the watermark after this commit, RFC 3339.
pub const WATERMARK: &str = "sluice.watermark";

/// The operators' state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedState {
    /// The watermark and its partitions.
    pub watermark: Watermark,
    /// Dedup keys and the event time of their first copy, sorted.
    pub dedup: Vec<(String, i64)>,
    /// Open window groups, by window name.
    pub windows: BTreeMap<String, Vec<SavedGroup>>,
}

/// The operators' state, borrowed: serialised exactly like [`SavedState`], without copying
/// the state first.
#[derive(Debug, Serialize)]
pub struct SavedStateRef<'a> {
    /// The watermark and its partitions.
    pub watermark: &'a Watermark,
    /// Dedup keys and the event time of their first copy, sorted.
    pub dedup: Vec<(&'a str, i64)>,
    /// Open window groups, by window name.
    pub windows: BTreeMap<&'a str, Vec<SavedGroupRef<'a>>>,
}

/// A window group, borrowed (see [`SavedGroup`]).
#[derive(Debug, Serialize)]
pub struct SavedGroupRef<'a> {
    /// Window start.
    pub start: i64,
    /// Group-by values.
    pub key: &'a GroupKey,
    /// Accumulators.
    pub acc: &'a [Accumulator],
}

/// A state file being written (see [`StateFile`]).
#[derive(Debug, Serialize)]
pub struct StateFileRef<'a> {
    /// Format version, 1.
    pub version: u32,
    /// The pipeline.
    pub pipeline: &'a str,
    /// The batch this state follows.
    pub plan: &'a Plan,
    /// The state after the batch.
    pub state: SavedStateRef<'a>,
}

/// What a batch read and when it ran: enough to replay it exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The batch id.
    pub batch_id: u64,
    /// Offsets the batch starts from, as JSON (see [`crate::source::Offsets::to_json`]).
    pub start: String,
    /// Offsets the batch ends at.
    pub end: String,
    /// Processing time of the batch, milliseconds since 1970.
    pub now_ms: i64,
    /// When the run that planned the batch started (see
    /// [`super::watermark::Clock::session_start_ms`]).
    pub session_start_ms: i64,
    /// Whether the batch closed every open window (`at-end = "flush"`).
    pub flush: bool,
}

/// A state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateFile {
    /// Format version, 1.
    pub version: u32,
    /// The pipeline.
    pub pipeline: String,
    /// The batch this state follows.
    pub plan: Plan,
    /// The state after the batch.
    pub state: SavedState,
}

/// The path of the state file of `batch_id`, below a table's location.
pub fn path(table_location: &str, pipeline: &str, batch_id: u64) -> String {
    format!(
        "{}/sluice-state/{pipeline}/{batch_id:020}.json",
        table_location.trim_end_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_sort_by_batch() {
        let a = path("file:///w/ns/t/", "p", 9);
        let b = path("file:///w/ns/t", "p", 10);
        assert_eq!(a, "file:///w/ns/t/sluice-state/p/00000000000000000009.json");
        assert!(a < b);
    }
}
