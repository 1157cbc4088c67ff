//! Saved state that costs what a batch changed: most batches write a *delta* file (the
//! dedup keys added, the window groups changed, the watermark; the keys forgotten and the
//! windows closed are those behind the watermark, so applying a delta forgets and closes
//! them as the batch did),
//! and every [`SNAPSHOT_EVERY`] batches, or once the deltas together outweigh the last
//! snapshot, a *snapshot* file holds the whole state again (the compaction).
//!
//! A snapshot is a whole-state file ([`super::state::StateFile`]) in postcard, a compact
//! binary encoding (its name ends in [`SNAPSHOT_SUFFIX`]); the whole-state JSON files of
//! older versions of sluice are read as snapshots too. A delta names its *chain*:
//! the snapshot it builds on and the deltas between, in order. Recovering from a delta
//! loads the snapshot and applies the chain's deltas, then its own, and gives exactly the
//! state that was saved. Delta files end in [`DELTA_SUFFIX`]; the chain a delta names is
//! what cleanup must keep (see [`super::state::forget_old`], [`super::state::chain_files`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::EventTime;
use super::join::{SavedJoin, SavedJoinRef};
use super::plan::Plan;
use super::watermark::Watermark;
pub use super::window::{WindowDelta, WindowDeltaRef};
use crate::units::Micros;

/// A snapshot is written at least once in this many state files (the chain of a delta
/// holds at most this many files, the snapshot included), so recovery reads a bounded
/// number of files.
pub const SNAPSHOT_EVERY: usize = 32;

/// The deltas of a chain may always weigh this much together, however small its snapshot:
/// a small state is not worth a snapshot every few batches.
pub const MIN_CHAIN_BYTES: u64 = 256 * 1024;

/// How many times a row weighs more in a delta (JSON) than in a snapshot (binary), about:
/// the estimate of a delta's size, so that a batch that changed most of the state goes
/// straight to a snapshot instead of encoding a delta it would throw away.
pub const DELTA_ROW_WEIGHT: u64 = 3;

/// How the name of a delta file ends.
pub const DELTA_SUFFIX: &str = ".delta.json";

/// How the name of a snapshot ends (whole-state files of older versions end in `.json`).
pub const SNAPSHOT_SUFFIX: &str = ".snapshot.bin";

/// The files a delta builds on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainPaths {
    /// The snapshot (a whole-state file).
    pub base: String,
    /// The deltas after the snapshot and before this one, oldest first.
    pub deltas: Vec<String>,
}

/// The chain the next delta extends, in memory: its files and their sizes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain {
    /// The files.
    pub paths: ChainPaths,
    /// The snapshot's size in bytes.
    pub base_bytes: u64,
    /// The rows (dedup keys, window groups) the snapshot holds.
    pub base_rows: u64,
    /// The deltas' sizes in bytes, together.
    pub delta_bytes: u64,
}

impl Chain {
    /// A chain that starts at the snapshot `base` of `base_bytes` holding `base_rows`.
    pub fn new(base: String, base_bytes: u64, base_rows: u64) -> Self {
        Chain {
            paths: ChainPaths {
                base,
                deltas: Vec::new(),
            },
            base_bytes,
            base_rows,
            delta_bytes: 0,
        }
    }

    /// Whether a delta of `rows` changed rows may extend the chain, or a snapshot is due:
    /// the chain is long enough, or its deltas would outweigh its snapshot (and
    /// [`MIN_CHAIN_BYTES`]). The delta's size is estimated from the snapshot's bytes per
    /// row, so that a batch that changed most of the state is not encoded twice.
    pub fn takes(&self, rows: u64) -> bool {
        let per_row = self.base_bytes / self.base_rows.max(1);
        let estimate = rows.saturating_mul(per_row.max(1) * DELTA_ROW_WEIGHT);
        self.paths.deltas.len() + 2 <= SNAPSHOT_EVERY && self.takes_bytes(estimate)
    }

    /// Whether a delta of `bytes` keeps the deltas within their snapshot's weight (and
    /// [`MIN_CHAIN_BYTES`]).
    pub fn takes_bytes(&self, bytes: u64) -> bool {
        self.delta_bytes.saturating_add(bytes) <= self.base_bytes.max(MIN_CHAIN_BYTES)
    }

    /// The chain's last file: the state it holds.
    pub fn tip(&self) -> &str {
        self.paths.deltas.last().unwrap_or(&self.paths.base)
    }

    /// The batch of the chain's snapshot (from its name), where the files it needs start;
    /// 0 if the name does not say.
    pub fn first_batch(&self) -> u64 {
        batch_of(&self.paths.base).unwrap_or(0)
    }
}

/// The batch a state file's name starts with (`<batch:020>…`).
pub fn batch_of(path: &str) -> Option<u64> {
    path.rsplit('/').next()?.get(..20)?.parse().ok()
}

/// What changed in the operators' state since the previous file of the chain.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct StateDelta {
    /// The watermark after the batch, whole (it is small).
    pub watermark: Watermark,
    /// Dedup keys added, with the event time of their first copy.
    pub dedup_added: Vec<(String, Micros)>,
    /// Dedup keys forgotten. Listed by older versions of sluice; now always empty, as
    /// the keys forgotten are those behind the delta's watermark.
    #[serde(default)]
    pub dedup_removed: Vec<String>,
    /// Changes per window, by window name.
    pub windows: BTreeMap<String, WindowDelta>,
    /// Changes per join, by join name: its right watermark and row counter, and the rows
    /// added or changed (those gone are the ones the watermarks are past).
    #[serde(default)]
    pub joins: BTreeMap<String, SavedJoin>,
}

/// What changed, borrowed: serialised like [`StateDelta`].
#[derive(Debug, Serialize)]
pub struct StateDeltaRef<'a> {
    /// The watermark after the batch.
    pub watermark: &'a Watermark,
    /// Dedup keys added.
    pub dedup_added: Vec<(&'a str, Micros)>,
    /// Dedup keys forgotten: always empty (see [`StateDelta::dedup_removed`]).
    pub dedup_removed: Vec<&'a str>,
    /// Changes per window, by window name.
    pub windows: BTreeMap<&'a str, WindowDeltaRef<'a>>,
    /// Changes per join, by join name; not written when there is none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub joins: BTreeMap<&'a str, SavedJoinRef<'a>>,
}

/// A delta file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DeltaFile {
    /// Format version, 2.
    pub version: u32,
    /// The pipeline.
    pub pipeline: String,
    /// The batch this state follows.
    pub plan: Plan,
    /// The files this delta applies after.
    pub chain: ChainPaths,
    /// The changes.
    pub delta: StateDelta,
}

/// A delta file being written (see [`DeltaFile`]).
#[derive(Debug, Serialize)]
pub struct DeltaFileRef<'a> {
    /// Format version, 2.
    pub version: u32,
    /// The pipeline.
    pub pipeline: &'a str,
    /// The batch this state follows.
    pub plan: &'a Plan,
    /// The files this delta applies after.
    pub chain: &'a ChainPaths,
    /// The changes.
    pub delta: StateDeltaRef<'a>,
}

/// The file version of deltas.
pub const DELTA_VERSION: u32 = 2;

impl EventTime {
    /// The changes since the last save (or recovery), borrowed for saving.
    pub fn delta_ref(&self) -> StateDeltaRef<'_> {
        let mut delta = StateDeltaRef {
            watermark: &self.watermark,
            dedup_added: Vec::new(),
            dedup_removed: Vec::new(),
            windows: BTreeMap::new(),
            joins: BTreeMap::new(),
        };
        for op in &self.operators {
            op.delta(&mut delta);
        }
        delta
    }

    /// The rows of the state: dedup keys, open window groups and join rows.
    pub fn state_rows(&self) -> u64 {
        self.operators.iter().map(|op| op.rows()).sum::<usize>() as u64
    }

    /// The rows changed since the last save: dedup keys added or forgotten, window groups
    /// changed or closed, join rows added or changed.
    pub fn changed_rows(&self) -> u64 {
        self.operators.iter().map(|op| op.changed()).sum::<usize>() as u64
    }

    /// Applies saved changes to the state (windows no longer configured are skipped).
    pub fn apply_delta(&mut self, mut delta: StateDelta) {
        self.watermark = std::mem::take(&mut delta.watermark);
        let w = self.watermark.current;
        for op in &mut self.operators {
            op.apply(&mut delta, w);
        }
    }

    /// Starts recording changes afresh for the next delta, which extends `chain`.
    pub(super) fn track(&mut self, chain: Chain) {
        self.chain = Some(chain);
        for op in &mut self.operators {
            op.track();
        }
    }

    /// The chain the next delta would extend; `None` when the next save is a snapshot.
    pub fn chain(&self) -> Option<&Chain> {
        self.chain.as_ref()
    }
}

#[cfg(test)]
pub(crate) mod tests;
