//! One shard of a window operator (see [`crate::event_time::shard`]): its open
//! windows, each a table of groups, or its open sessions; adding events, ending a batch
//! (the rows to emit) and closing the windows behind the watermark.

use std::collections::BTreeMap;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::accumulate::Accumulator;
use super::keys::{PackedKey, key_hash};
use super::rows::WindowRow;
use super::session::{Marks, SessionShard};
use super::shape::{Shape, WindowInput};
use crate::event_time::config::EmitMode;
use crate::units::Micros;

/// One open group: a window (by its start, outside) and a key.
#[derive(Debug, Clone)]
pub(super) struct Group {
    pub(super) key: PackedKey,
    pub(super) acc: Box<[Accumulator]>,
    /// The save in which it last changed (see [`WindowShard::save`]).
    pub(super) changed_in_save: u32,
    /// The batch in which it last changed (see [`WindowShard::batch`]).
    changed_in_batch: u32,
}

impl Group {
    pub(super) fn bytes(&self) -> usize {
        let key = self.key.as_bytes().len();
        let acc = std::mem::size_of_val(&*self.acc)
            + self.acc.iter().map(Accumulator::heap_bytes).sum::<usize>();
        key + acc
    }
}

/// One shard of a window operator's groups (see [`crate::event_time::shard`]).
#[derive(Debug, Clone, Default)]
pub struct WindowShard {
    /// Open windows by start, each with a table of its groups.
    pub(super) windows: BTreeMap<Micros, HashTable<Group>>,
    /// Open sessions, for session windows.
    pub(super) sessions: SessionShard,
    pub(super) tracking: bool,
    /// Counts saves: a group changed since the last save has `changed_in_save == save`.
    pub(super) save: u32,
    /// Counts batches, likewise, for `update` mode.
    batch: u32,
}

impl WindowShard {
    /// Adds one event at `t` to every window that holds it and is still open
    /// (`end > watermark`).
    pub fn add(&mut self, shape: &Shape, t: Micros, input: &WindowInput, w: Option<Micros>) {
        if let Some(gap) = shape.gap {
            if w.is_none_or(|w| t.saturating_add(gap) > w) {
                let marks = self.marks();
                self.sessions.add(shape, gap, t, input, marks);
            }
            return;
        }
        for start in shape.starts(t) {
            if w.is_some_and(|w| shape.end(start) <= w) {
                continue;
            }
            let table = self.windows.entry(start).or_default();
            let group = match table.entry(input.hash, |g| g.key == input.key, |g| key_hash(&g.key))
            {
                Entry::Occupied(found) => found.into_mut(),
                Entry::Vacant(vacant) => vacant
                    .insert(Group {
                        key: input.key.clone(),
                        acc: shape
                            .functions
                            .iter()
                            .map(|f| Accumulator::new(*f))
                            .collect(),
                        changed_in_save: self.save,
                        changed_in_batch: self.batch,
                    })
                    .into_mut(),
            };
            for (acc, &x) in group.acc.iter_mut().zip(&input.inputs) {
                acc.add(x);
            }
            group.changed_in_save = self.save;
            group.changed_in_batch = self.batch;
        }
    }

    /// Ends a batch: returns the rows to emit, in no particular order, and drops the
    /// windows that the watermark closed. `on-window-close` emits the closed windows;
    /// `update` emits the windows that changed in the batch.
    pub fn finish_batch(&mut self, shape: &Shape, watermark: Option<Micros>) -> Vec<WindowRow> {
        if let Some(gap) = shape.gap {
            return self.finish_sessions(shape, gap, watermark);
        }
        let mut rows = Vec::new();
        if shape.emit == EmitMode::Update {
            for (start, table) in &self.windows {
                let changed = table.iter().filter(|g| g.changed_in_batch == self.batch);
                rows.extend(changed.map(|g| row(shape, *start, g)));
            }
        }
        self.batch = self.batch.wrapping_add(1);
        if let Some(w) = watermark {
            while let Some(entry) = self.windows.first_entry() {
                if shape.end(*entry.key()) > w {
                    break;
                }
                let (start, table) = entry.remove_entry();
                if shape.emit == EmitMode::OnWindowClose {
                    rows.extend(table.iter().map(|group| row(shape, start, group)));
                }
            }
        }
        rows
    }

    /// [`WindowShard::finish_batch`] of session windows: `update` emits the sessions
    /// that changed in the batch (a session merged into another is not emitted again:
    /// the merged one is, from the earliest start); `on-window-close` emits the sessions
    /// that the watermark closed.
    fn finish_sessions(&mut self, shape: &Shape, gap: Micros, w: Option<Micros>) -> Vec<WindowRow> {
        let mut rows = Vec::new();
        let update = shape.emit == EmitMode::Update;
        if update {
            self.sessions.updated(gap, self.batch, &mut rows);
        }
        self.batch = self.batch.wrapping_add(1);
        if let Some(w) = w {
            let emit = (!update).then_some(&mut rows);
            self.sessions.close_behind(gap, w, emit);
        }
        rows
    }

    pub(super) fn marks(&self) -> Marks {
        Marks {
            save: self.save,
            batch: self.batch,
            tracking: self.tracking,
        }
    }

    pub(super) fn groups(&self) -> impl Iterator<Item = (Micros, &Group)> {
        self.windows
            .iter()
            .flat_map(|(start, table)| table.iter().map(|g| (*start, g)))
    }

    pub(super) fn insert(&mut self, start: Micros, key: PackedKey, acc: Vec<Accumulator>) {
        let hash = key_hash(&key);
        let group = Group {
            key,
            acc: acc.into(),
            changed_in_save: self.save,
            changed_in_batch: self.batch.wrapping_sub(1),
        };
        let table = self.windows.entry(start).or_default();
        match table.entry(hash, |g| g.key == group.key, |g| key_hash(&g.key)) {
            Entry::Occupied(mut found) => *found.get_mut() = group,
            Entry::Vacant(vacant) => {
                vacant.insert(group);
            }
        }
    }

    pub(super) fn remove(&mut self, start: Micros, key: &PackedKey) {
        let Some(table) = self.windows.get_mut(&start) else {
            return;
        };
        if let Ok(found) = table.find_entry(key_hash(key), |g| g.key == *key) {
            found.remove();
        }
        if table.is_empty() {
            self.windows.remove(&start);
        }
    }

    pub(super) fn track(&mut self) {
        self.tracking = true;
        self.save = self.save.wrapping_add(1);
        self.sessions.track();
    }

    pub(super) fn changed(&self) -> usize {
        if !self.tracking {
            return 0;
        }
        let open = self
            .groups()
            .filter(|(_, g)| g.changed_in_save == self.save);
        open.count() + self.sessions.changed(self.save)
    }

    /// Drops the windows that a watermark of `w` closed.
    pub(super) fn close_behind(&mut self, shape: &Shape, w: Micros) {
        if let Some(gap) = shape.gap {
            self.sessions.close_behind(gap, w, None);
            return;
        }
        while let Some(entry) = self.windows.first_entry() {
            if shape.end(*entry.key()) > w {
                break;
            }
            entry.remove();
        }
    }
}

fn row(shape: &Shape, start: Micros, group: &Group) -> WindowRow {
    WindowRow {
        start,
        end: shape.end(start),
        key: group.key.unpack(),
        values: group.acc.iter().map(Accumulator::value).collect(),
    }
}
