//! What a window operator emits and saves: result rows, saved groups (owned, and
//! borrowed for writing), and the changes of one operator in a delta file (see
//! [`crate::event_time::delta`]).

use serde::{Deserialize, Serialize};

use super::accumulate::Accumulator;
use super::keys::{GroupKey, PackedKey};
use crate::units::Micros;

/// One emitted window result.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowRow {
    /// Window start.
    pub start: Micros,
    /// Window end (exclusive).
    pub end: Micros,
    /// The group-by values.
    pub key: GroupKey,
    /// The aggregate results, in configured order.
    pub values: Vec<serde_json::Value>,
}

/// Saved form of a window group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedGroup {
    /// Window start.
    pub start: Micros,
    /// Group-by values.
    pub key: GroupKey,
    /// Accumulators.
    pub acc: Vec<Accumulator>,
}

/// The rows of every shard together, in no particular order (sorting them cost more than
/// the windows themselves: a table sink does not need an order, and nor does a topic).
pub fn merge_rows(mut shards: Vec<Vec<WindowRow>>) -> Vec<WindowRow> {
    if shards.len() == 1 {
        return shards.pop().unwrap_or_default();
    }
    shards.concat()
}

/// Rows in one order, window start then key (for comparing them).
pub fn sort_rows(rows: &mut [WindowRow]) {
    rows.sort_unstable_by(|a, b| (a.start, &a.key).cmp(&(b.start, &b.key)));
}

/// A window group, borrowed (see [`SavedGroup`]).
#[derive(Debug, Serialize)]
pub struct SavedGroupRef<'a> {
    /// Window start.
    pub start: Micros,
    /// Group-by values.
    pub key: &'a PackedKey,
    /// Accumulators.
    pub acc: &'a [Accumulator],
}

/// The changes of one window operator.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WindowDelta {
    /// Groups added or changed, with their accumulators.
    pub upserted: Vec<SavedGroup>,
    /// Groups removed, applied before `upserted`: window start and group-by values.
    /// Listed by older versions of sluice for the groups closed; now the groups closed
    /// are those of the windows behind the delta's watermark, and this lists only the
    /// sessions of session windows merged into another, or whose start moved back, under
    /// their former start (see [`super::session`]).
    #[serde(default)]
    pub removed: Vec<(Micros, GroupKey)>,
}

/// The changes of one window operator, borrowed: serialised like [`WindowDelta`].
#[derive(Debug, Default, Serialize)]
pub struct WindowDeltaRef<'a> {
    /// Groups added or changed, with their accumulators.
    pub upserted: Vec<SavedGroupRef<'a>>,
    /// Sessions removed (see [`WindowDelta::removed`]); empty for tumbling and sliding
    /// windows.
    pub removed: Vec<(Micros, &'a PackedKey)>,
}
