//! Windowed aggregates: tumbling and sliding windows (and session windows, see
//! [`session`]) grouped by key fields, with count, sum, min, max, avg and distinct
//! count.
//!
//! The rooms, lowest first: [`keys`] (group-by keys and hashes), [`accumulate`] (one
//! aggregate's running state), [`shape`] (what a window reads of its configuration and of
//! an event), [`rows`] (what it emits and saves), [`session`] (the open sessions of a
//! shard), [`shard`] (one shard's windows or sessions), and here the operator over its
//! shards.

pub mod accumulate;
pub mod keys;
pub mod rows;
pub mod session;
pub mod shape;
pub mod shard;

use hashbrown::HashTable;

pub use self::accumulate::{Accumulator, DistinctSet, FEW, Input};
pub use self::keys::{GroupKey, PackedKey, key_hash, stable_hash};
pub use self::rows::{
    SavedGroup, SavedGroupRef, WindowDelta, WindowDeltaRef, WindowRow, merge_rows, sort_rows,
};
pub use self::shape::{Shape, Slots, WindowInput};
use self::shard::Group;
pub use self::shard::WindowShard;
use super::config::WindowConfig;
use super::shard::shard_of;
use crate::units::Micros;

/// The state of one `[[windows]]` entry, in shards.
#[derive(Debug, Clone)]
pub struct WindowOperator {
    config: WindowConfig,
    shape: Shape,
    shards: Box<[WindowShard]>,
}

impl WindowOperator {
    /// An empty operator of one shard.
    pub fn new(config: WindowConfig) -> Self {
        Self::with_shards(config, 1)
    }

    /// An empty operator of `shards` shards.
    pub fn with_shards(config: WindowConfig, shards: usize) -> Self {
        WindowOperator {
            shape: Shape::new(&config),
            config,
            shards: (0..shards.max(1)).map(|_| WindowShard::default()).collect(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WindowConfig {
        &self.config
    }

    /// Its shape and shards, for the operators to run shards on threads of their own.
    pub fn shards_mut(&mut self) -> (&Shape, &mut [WindowShard]) {
        (&self.shape, &mut self.shards)
    }

    /// The starts of the windows that hold `t`, latest first.
    pub fn starts(&self, t: Micros) -> impl Iterator<Item = Micros> + use<> {
        self.shape.starts(t)
    }

    fn shard_mut(&mut self, hash: u64) -> &mut WindowShard {
        let n = self.shards.len();
        &mut self.shards[shard_of(hash, n)]
    }

    /// Adds one event at `t` to every window that holds it and is still open
    /// (`end > watermark`).
    pub fn add(&mut self, t: Micros, input: &WindowInput, watermark: Option<Micros>) {
        let n = self.shards.len();
        let shard = &mut self.shards[shard_of(input.hash, n)];
        shard.add(&self.shape, t, input, watermark);
    }

    /// Ends a batch on every shard (see [`WindowShard::finish_batch`]).
    pub fn finish_batch(&mut self, watermark: Option<Micros>) -> Vec<WindowRow> {
        let shape = &self.shape;
        let rows = self
            .shards
            .iter_mut()
            .map(|s| s.finish_batch(shape, watermark));
        merge_rows(rows.collect())
    }

    /// The end of the last open window.
    pub fn last_end(&self) -> Option<Micros> {
        if let Some(gap) = self.shape.gap {
            let ends = self.shards.iter().filter_map(|s| s.sessions.ends(gap));
            return ends.map(|(_, last)| last).max();
        }
        let last = self.shards.iter().filter_map(|s| s.windows.keys().last());
        last.max().map(|s| self.shape.end(*s))
    }

    /// Whether a watermark of `w` would close a window.
    pub fn closes_any(&self, w: Micros) -> bool {
        if let Some(gap) = self.shape.gap {
            let ends = self.shards.iter().filter_map(|s| s.sessions.ends(gap));
            return ends
                .map(|(first, _)| first)
                .min()
                .is_some_and(|end| end <= w);
        }
        let first = self.shards.iter().filter_map(|s| s.windows.keys().next());
        first.min().is_some_and(|s| self.shape.end(*s) <= w)
    }

    /// Open (window, key) groups, or open sessions.
    pub fn rows(&self) -> usize {
        let tables = self.shards.iter().flat_map(|s| s.windows.values());
        let sessions = self.shards.iter().map(|s| s.sessions.len());
        tables.map(HashTable::len).sum::<usize>() + sessions.sum::<usize>()
    }

    /// Groups added, changed or closed since [`WindowOperator::track`].
    pub fn changed(&self) -> usize {
        self.shards.iter().map(WindowShard::changed).sum()
    }

    /// Bytes of state in memory: the tables (a slot and a control byte per bucket) and
    /// what each group holds.
    pub fn bytes(&self) -> usize {
        let slot = std::mem::size_of::<Group>() + 1;
        let tables = self.shards.iter().flat_map(|s| s.windows.values());
        let groups =
            tables.map(|t| t.capacity() * slot + t.iter().map(Group::bytes).sum::<usize>());
        let sessions = self.shards.iter().map(|s| s.sessions.bytes());
        groups.sum::<usize>() + sessions.sum::<usize>()
    }

    /// The state, borrowed for saving, in no order.
    pub fn save_ref(&self) -> Vec<SavedGroupRef<'_>> {
        let groups = self.shards.iter().flat_map(WindowShard::groups);
        let groups = groups.map(|(start, g)| SavedGroupRef {
            start,
            key: &g.key,
            acc: &g.acc,
        });
        let sessions = self.shards.iter().flat_map(|s| s.sessions.saved());
        let sessions = sessions.map(|(start, key, acc, _)| SavedGroupRef { start, key, acc });
        groups.chain(sessions).collect()
    }

    /// Starts (afresh) recording the groups that change, for [`WindowOperator::delta`]:
    /// called after each save.
    pub fn track(&mut self) {
        self.shards.iter_mut().for_each(WindowShard::track);
    }

    /// The changes since [`WindowOperator::track`]: the groups added or changed, in no
    /// order. Groups closed are not listed: they are those of the windows behind the
    /// watermark (see [`WindowOperator::apply`]). Sessions merged away, or whose start
    /// moved, are listed as removed under their former start.
    pub fn delta(&self) -> WindowDeltaRef<'_> {
        let mut delta = WindowDeltaRef::default();
        for shard in self.shards.iter().filter(|s| s.tracking) {
            let sessions = shard.sessions.saved().filter(|s| s.3 == shard.save);
            let sessions = sessions.map(|(start, key, acc, _)| SavedGroupRef { start, key, acc });
            delta.upserted.extend(sessions);
            let removed = shard.sessions.removed().iter();
            delta
                .removed
                .extend(removed.map(|(start, key)| (*start, key)));
            let changed = shard
                .groups()
                .filter(|(_, g)| g.changed_in_save == shard.save);
            delta
                .upserted
                .extend(changed.map(|(start, g)| SavedGroupRef {
                    start,
                    key: &g.key,
                    acc: &g.acc,
                }));
        }
        delta
    }

    /// Applies saved changes: the groups `removed` (listed by older versions of sluice,
    /// and sessions merged away), the groups upserted (see [`WindowOperator::delta`]),
    /// then closes the windows behind the `watermark` the changes were saved with, as the
    /// batch that made them did.
    pub fn apply(&mut self, delta: WindowDelta, watermark: Option<Micros>) {
        for (start, key) in delta.removed {
            let key = PackedKey::of(&key);
            let shard = self.shard_mut(key_hash(&key));
            shard.remove(start, &key);
            shard.sessions.remove(start, &key);
        }
        for group in delta.upserted {
            self.insert(group);
        }
        if let Some(w) = watermark {
            let shape = &self.shape;
            self.shards
                .iter_mut()
                .for_each(|s| s.close_behind(shape, w));
        }
    }

    /// Restores saved state; changes are not recorded until [`WindowOperator::track`].
    pub fn restore(&mut self, saved: Vec<SavedGroup>) {
        self.shards = (0..self.shards.len())
            .map(|_| WindowShard::default())
            .collect();
        for group in saved {
            self.insert(group);
        }
    }

    /// Inserts (or replaces) a saved group or session. A saved group that does not fit
    /// the window (a session saved for a window that has a size now, or the reverse) is
    /// dropped.
    fn insert(&mut self, group: SavedGroup) {
        let key = PackedKey::of(&group.key);
        let session = matches!(group.acc.last(), Some(Accumulator::Last(_)));
        let gap = self.shape.gap;
        let shard = self.shard_mut(key_hash(&key));
        let kept = match gap {
            None if session => false,
            None => {
                shard.insert(group.start, key, group.acc);
                true
            }
            Some(gap) => {
                let marks = shard.marks();
                shard
                    .sessions
                    .insert(gap, group.start, key, group.acc, marks)
            }
        };
        if !kept {
            tracing::warn!(
                window = %self.config.name,
                "a saved window group that does not fit the window's configuration is dropped"
            );
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
