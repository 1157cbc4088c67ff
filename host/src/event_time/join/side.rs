//! One side of a join in the state: its rows by key, with an index by time for leaving
//! the state (expiry and `max-rows` eviction), the changes since the last save, and the
//! saved forms of a join's state.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::event_time::watermark::Watermark;
use crate::event_time::window::{GroupKey, PackedKey};
use crate::units::Micros;

/// One row held in a side's state.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) id: u64,
    pub(super) time: Micros,
    pub(super) values: PackedKey,
    /// A left row of a left-outer join that matched a right record.
    pub(super) matched: bool,
    /// The save it last changed in (see [`Side::save`]).
    pub(super) changed_in: u64,
}

/// The rows of one side, by key, with an index by time for leaving the state.
#[derive(Debug, Clone, Default)]
pub(super) struct Side {
    pub(super) rows: HashMap<PackedKey, Vec<Row>>,
    /// `(time, key)` of every row held (some may have left: see [`Side::expire`]).
    by_time: BTreeSet<(Micros, PackedKey)>,
    pub(super) len: usize,
    /// Keys with rows changed since the last save.
    pub(super) changed: HashSet<PackedKey>,
    /// The saves so far: a row with `changed_in == save` changed since the last one.
    pub(super) save: u64,
    /// The bytes of the keys and values held (for [`Side::bytes`]).
    heap: usize,
}

impl Side {
    pub(super) fn insert(&mut self, key: PackedKey, mut row: Row) {
        row.changed_in = self.save;
        self.changed.insert(key.clone());
        self.by_time.insert((row.time, key.clone()));
        self.heap += row.values.as_bytes().len();
        let rows = self.rows.entry(key).or_default();
        match rows.iter_mut().find(|r| r.id == row.id) {
            Some(held) => {
                self.heap -= held.values.as_bytes().len();
                *held = row;
            }
            None => {
                rows.push(row);
                self.len += 1;
            }
        }
    }

    /// Removes the oldest rows (all those of the oldest time at once) until at most `max`
    /// are held, handing each to `gone`; returns how many left.
    pub(super) fn evict(&mut self, max: usize, mut gone: impl FnMut(&PackedKey, Row)) -> u64 {
        let mut evicted = 0;
        while self.len > max
            && let Some(&(time, _)) = self.by_time.first()
        {
            self.expire(time.saturating_add(Micros(1)), |key, row| {
                evicted += 1;
                gone(key, row);
            });
        }
        evicted
    }

    /// Removes the rows with a time before `until`, oldest first, handing each to `gone`.
    pub(super) fn expire(&mut self, until: Micros, mut gone: impl FnMut(&PackedKey, Row)) {
        while let Some((time, _)) = self.by_time.first()
            && *time < until
        {
            let Some((_, key)) = self.by_time.pop_first() else {
                break;
            };
            let Some(rows) = self.rows.get_mut(&key) else {
                continue;
            };
            let mut kept = Vec::with_capacity(rows.len());
            for row in rows.drain(..) {
                if row.time < until {
                    self.len -= 1;
                    self.heap -= row.values.as_bytes().len();
                    gone(&key, row);
                } else {
                    kept.push(row);
                }
            }
            if kept.is_empty() {
                self.rows.remove(&key);
                self.changed.remove(&key);
            } else {
                *rows = kept;
            }
        }
    }

    /// The earliest time held.
    pub(super) fn first_time(&self) -> Option<Micros> {
        self.by_time.first().map(|(t, _)| *t)
    }

    /// The latest time held.
    pub(super) fn last_time(&self) -> Option<Micros> {
        self.by_time.last().map(|(t, _)| *t)
    }

    /// Starts recording changes afresh.
    pub(super) fn track(&mut self) {
        self.save += 1;
        self.changed.clear();
    }

    /// Estimated bytes in memory: per key a map slot and its text (twice with the time
    /// index), per row the row and its values, per index entry a B-tree slot.
    pub(super) fn bytes(&self) -> usize {
        let slot = std::mem::size_of::<(PackedKey, Vec<Row>)>() + 1;
        let keys: usize = self.rows.keys().map(|k| k.as_bytes().len()).sum();
        let index_entry = std::mem::size_of::<(Micros, PackedKey)>() + 8;
        let index_keys: usize = self.by_time.iter().map(|(_, k)| k.as_bytes().len()).sum();
        self.rows.capacity() * slot
            + keys
            + self.len * std::mem::size_of::<Row>()
            + self.heap
            + self.by_time.len() * index_entry
            + index_keys
    }

    pub(super) fn saved(&self) -> impl Iterator<Item = SavedJoinRowRef<'_>> {
        self.rows.iter().flat_map(|(key, rows)| {
            rows.iter().map(move |r| SavedJoinRowRef {
                id: r.id,
                time: r.time,
                key,
                values: &r.values,
                matched: r.matched,
            })
        })
    }

    pub(super) fn delta(&self) -> impl Iterator<Item = SavedJoinRowRef<'_>> {
        self.changed.iter().flat_map(|key| {
            let rows = self.rows.get_key_value(key);
            rows.into_iter().flat_map(|(key, rows)| {
                rows.iter()
                    .filter(|r| r.changed_in == self.save)
                    .map(move |r| SavedJoinRowRef {
                        id: r.id,
                        time: r.time,
                        key,
                        values: &r.values,
                        matched: r.matched,
                    })
            })
        })
    }

    pub(super) fn changed_rows(&self) -> usize {
        self.delta().count()
    }

    pub(super) fn restore(&mut self, rows: Vec<SavedJoinRow>) {
        for row in rows {
            self.insert(
                PackedKey::of(&row.key),
                Row {
                    id: row.id,
                    time: row.time,
                    values: PackedKey::of(&row.values),
                    matched: row.matched,
                    changed_in: 0,
                },
            );
        }
    }
}

/// A saved row of a join side.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SavedJoinRow {
    /// Its id.
    pub id: u64,
    /// Its event time.
    pub time: Micros,
    /// The key values.
    pub key: GroupKey,
    /// The output fields' JSON texts.
    pub values: GroupKey,
    /// A left row of a left-outer join that matched.
    pub matched: bool,
}

/// A saved row, borrowed: serialised like [`SavedJoinRow`].
#[derive(Debug, Serialize)]
pub struct SavedJoinRowRef<'a> {
    /// Its id.
    pub id: u64,
    /// Its event time.
    pub time: Micros,
    /// The key values.
    pub key: &'a PackedKey,
    /// The output fields' JSON texts.
    pub values: &'a PackedKey,
    /// A left row of a left-outer join that matched.
    pub matched: bool,
}

/// The saved state of a join (in a snapshot: all of it; in a delta: the rows added or
/// changed since the previous file, the rows gone being those the watermarks are past).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedJoin {
    /// The right side's watermark and its partitions.
    pub right_watermark: Watermark,
    /// The next number for a row whose record came without a position ([`super::row_id`]).
    pub next_id: u64,
    /// Left rows, in no order.
    pub left: Vec<SavedJoinRow>,
    /// Right rows, in no order.
    pub right: Vec<SavedJoinRow>,
}

impl SavedJoin {
    /// The same state in one order, to compare states.
    pub fn sorted(mut self) -> Self {
        self.left.sort_unstable();
        self.right.sort_unstable();
        self
    }
}

/// The saved state of a join, borrowed: serialised like [`SavedJoin`].
#[derive(Debug, Serialize)]
pub struct SavedJoinRef<'a> {
    /// The right side's watermark.
    pub right_watermark: &'a Watermark,
    /// The next number for a row whose record came without a position ([`super::row_id`]).
    pub next_id: u64,
    /// Left rows.
    pub left: Vec<SavedJoinRowRef<'a>>,
    /// Right rows.
    pub right: Vec<SavedJoinRowRef<'a>>,
}
