//! Session windows: per group, the events closer in event time than the window's gap.
//!
//! An event at `t` spans `[t, t + gap)`. A session spans `[first event, last event + gap)`;
//! an event whose span overlaps a session's joins it (extending it either way), and one
//! that overlaps two sessions of its group merges them, their aggregates merged through
//! their partial state (sums and counts added, sets of distinct values united). The
//! sessions of a group never overlap: kept sorted by start in a small vector, they are
//! also sorted by end. A session closes when the watermark reaches its end.
//!
//! Saved like a window group ([`super::SavedGroup`]): its start, its group-by
//! values and its accumulators, followed by one more, [`Accumulator::Last`], the time of
//! its last event. A session merged away, or whose start moved back, is listed in a
//! delta's `removed` under its former start (see [`super::WindowDelta`]).

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::accumulate::Accumulator;
use super::keys::{PackedKey, key_hash};
use super::rows::WindowRow;
use super::shape::{Shape, WindowInput};
use crate::units::Micros;

/// One open session of a group.
#[derive(Debug, Clone)]
struct Session {
    /// The time of its first event.
    start: Micros,
    /// The aggregates' accumulators, then [`Accumulator::Last`] (its last event's time).
    acc: Box<[Accumulator]>,
    /// The save in which it last changed.
    changed_in_save: u32,
    /// The batch in which it last changed.
    changed_in_batch: u32,
}

impl Session {
    fn last(&self) -> Micros {
        match self.acc.last() {
            Some(Accumulator::Last(t)) => *t,
            _ => self.start,
        }
    }

    fn end(&self, gap: Micros) -> Micros {
        self.last().saturating_add(gap)
    }

    fn set_last(&mut self, t: Micros) {
        if let Some(last) = self.acc.last_mut() {
            *last = Accumulator::Last(t);
        }
    }

    /// Its aggregates' accumulators (without the last event's time).
    fn aggregates(&self) -> &[Accumulator] {
        &self.acc[..self.acc.len().saturating_sub(1)]
    }

    fn bytes(&self) -> usize {
        std::mem::size_of::<Session>()
            + std::mem::size_of_val(&*self.acc)
            + self.acc.iter().map(Accumulator::heap_bytes).sum::<usize>()
    }
}

/// The open sessions of one group, sorted by start (and so by end).
#[derive(Debug, Clone)]
struct Group {
    key: PackedKey,
    sessions: Vec<Session>,
}

/// Counters of the shard a session shard belongs to (see [`super::WindowShard`]).
#[derive(Debug, Clone, Copy)]
pub struct Marks {
    /// The current save.
    pub save: u32,
    /// The current batch.
    pub batch: u32,
    /// Whether changes are recorded for a delta.
    pub tracking: bool,
}

/// One shard of a session window operator's sessions.
#[derive(Debug, Clone, Default)]
pub struct SessionShard {
    groups: HashTable<Group>,
    /// Open sessions.
    count: usize,
    /// At most the earliest end of an open session (ends only grow): no need to look for
    /// sessions to close before the watermark reaches it.
    min_end: Option<Micros>,
    /// Sessions removed since the last save (merged away, or moved to an earlier start),
    /// by their start then, when tracking.
    removed: Vec<(Micros, PackedKey)>,
}

impl SessionShard {
    /// Adds one event at `t` to its group's sessions.
    pub fn add(&mut self, shape: &Shape, gap: Micros, t: Micros, input: &WindowInput, m: Marks) {
        let group =
            match self
                .groups
                .entry(input.hash, |g| g.key == input.key, |g| key_hash(&g.key))
            {
                Entry::Occupied(found) => found.into_mut(),
                Entry::Vacant(vacant) => vacant
                    .insert(Group {
                        key: input.key.clone(),
                        sessions: Vec::with_capacity(1),
                    })
                    .into_mut(),
            };
        // The sessions that the event's span [t, t + gap) overlaps: from the first that
        // ends after t, while they start before t + gap.
        let first = group.sessions.partition_point(|s| s.end(gap) <= t);
        let reach = t.saturating_add(gap);
        let after = group.sessions[first..].partition_point(|s| s.start < reach);
        let at = match after {
            0 => {
                let session = new_session(shape, t, m);
                group.sessions.insert(first, session);
                self.count += 1;
                first
            }
            n => {
                merge_into(group, first, n, t, m, &mut self.removed);
                self.count -= n - 1;
                first
            }
        };
        let session = &mut group.sessions[at];
        for (acc, &x) in session.acc.iter_mut().zip(&input.inputs) {
            acc.add(x);
        }
        session.changed_in_save = m.save;
        session.changed_in_batch = m.batch;
        let end = session.end(gap);
        self.min_end = Some(self.min_end.map_or(end, |e| e.min(end)));
    }

    /// The sessions that changed in batch `batch`, as rows.
    pub fn updated(&self, gap: Micros, batch: u32, rows: &mut Vec<WindowRow>) {
        for group in &self.groups {
            let changed = group.sessions.iter();
            let changed = changed.filter(|s| s.changed_in_batch == batch);
            rows.extend(changed.map(|s| row(gap, &group.key, s)));
        }
    }

    /// Drops the sessions that a watermark of `w` closed; with `rows`, emits them.
    pub fn close_behind(&mut self, gap: Micros, w: Micros, mut rows: Option<&mut Vec<WindowRow>>) {
        if self.min_end.is_none_or(|end| end > w) {
            return;
        }
        let mut min_end: Option<Micros> = None;
        let mut closed = 0;
        self.groups.retain(|group| {
            let n = group.sessions.partition_point(|s| s.end(gap) <= w);
            if let Some(rows) = rows.as_deref_mut() {
                let sessions = &group.sessions[..n];
                rows.extend(sessions.iter().map(|s| row(gap, &group.key, s)));
            }
            group.sessions.drain(..n);
            closed += n;
            if let Some(end) = group.sessions.first().map(|s| s.end(gap)) {
                min_end = Some(min_end.map_or(end, |e| e.min(end)));
            }
            !group.sessions.is_empty()
        });
        self.count -= closed;
        self.min_end = min_end;
    }

    /// The open sessions, saved: start, group-by values, accumulators (the last one the
    /// time of the last event).
    pub fn saved(&self) -> impl Iterator<Item = (Micros, &PackedKey, &[Accumulator], u32)> {
        self.groups.iter().flat_map(|g| {
            let sessions = g.sessions.iter();
            sessions.map(|s| (s.start, &g.key, &*s.acc, s.changed_in_save))
        })
    }

    /// The sessions removed since the last save, by their start then.
    pub fn removed(&self) -> &[(Micros, PackedKey)] {
        &self.removed
    }

    /// Starts recording changes afresh (after a save).
    pub fn track(&mut self) {
        self.removed.clear();
    }

    /// Open sessions.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there is no open session.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Sessions changed or removed since the last save.
    pub fn changed(&self, save: u32) -> usize {
        let changed = self.saved().filter(|s| s.3 == save).count();
        changed + self.removed.len()
    }

    /// The earliest and the latest end of an open session.
    pub fn ends(&self, gap: Micros) -> Option<(Micros, Micros)> {
        let ends = self.groups.iter().filter_map(|g| {
            let first = g.sessions.first()?.end(gap);
            Some((first, g.sessions.last()?.end(gap)))
        });
        ends.reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
    }

    /// Bytes in memory: the table (a slot and a control byte per bucket) and what each
    /// group holds.
    pub fn bytes(&self) -> usize {
        let slot = std::mem::size_of::<Group>() + 1;
        let held = self.groups.iter().map(|g| {
            let sessions = g.sessions.iter().map(Session::bytes).sum::<usize>();
            g.key.as_bytes().len() + sessions
        });
        self.groups.capacity() * slot + held.sum::<usize>()
    }

    /// Restores (or replaces) the session of `key` that starts at `start`; `acc` ends with
    /// the time of its last event. Returns false (and keeps nothing) if it does not.
    pub fn insert(
        &mut self,
        gap: Micros,
        start: Micros,
        key: PackedKey,
        acc: Vec<Accumulator>,
        m: Marks,
    ) -> bool {
        if !matches!(acc.last(), Some(Accumulator::Last(_))) {
            return false;
        }
        let session = Session {
            start,
            acc: acc.into(),
            changed_in_save: m.save,
            changed_in_batch: m.batch.wrapping_sub(1),
        };
        let end = session.end(gap);
        let hash = key_hash(&key);
        let group = match self
            .groups
            .entry(hash, |g| g.key == key, |g| key_hash(&g.key))
        {
            Entry::Occupied(found) => found.into_mut(),
            Entry::Vacant(vacant) => vacant
                .insert(Group {
                    key,
                    sessions: Vec::with_capacity(1),
                })
                .into_mut(),
        };
        match group.sessions.binary_search_by_key(&start, |s| s.start) {
            Ok(i) => group.sessions[i] = session,
            Err(i) => {
                group.sessions.insert(i, session);
                self.count += 1;
            }
        }
        self.min_end = Some(self.min_end.map_or(end, |e| e.min(end)));
        true
    }

    /// Removes the session of `key` that starts at `start`, if open.
    pub fn remove(&mut self, start: Micros, key: &PackedKey) {
        let Ok(found) = self.groups.find_entry(key_hash(key), |g| g.key == *key) else {
            return;
        };
        let sessions = &mut found.into_mut().sessions;
        if let Ok(i) = sessions.binary_search_by_key(&start, |s| s.start) {
            sessions.remove(i);
            self.count -= 1;
        }
        if sessions.is_empty()
            && let Ok(found) = self.groups.find_entry(key_hash(key), |g| g.key == *key)
        {
            found.remove();
        }
    }
}

fn new_session(shape: &Shape, t: Micros, m: Marks) -> Session {
    let functions = shape.functions();
    let acc = functions.iter().map(|f| Accumulator::new(*f));
    Session {
        start: t,
        acc: acc.chain([Accumulator::Last(t)]).collect(),
        changed_in_save: m.save,
        changed_in_batch: m.batch,
    }
}

/// Merges the `n` sessions of `group` from `first` into the first of them, which then
/// also spans `t` (its start and last event time moved as needed). The sessions merged
/// away, and the first one's former start if it moved, are recorded in `removed`.
fn merge_into(
    group: &mut Group,
    first: usize,
    n: usize,
    t: Micros,
    m: Marks,
    removed: &mut Vec<(Micros, PackedKey)>,
) {
    let mut last = group.sessions[first].last().max(t);
    for other in group
        .sessions
        .drain(first + 1..first + n)
        .collect::<Vec<_>>()
    {
        last = last.max(other.last());
        if m.tracking {
            removed.push((other.start, group.key.clone()));
        }
        let into = &mut group.sessions[first];
        for (acc, theirs) in into.acc.iter_mut().zip(other.aggregates()) {
            acc.merge(theirs);
        }
    }
    let session = &mut group.sessions[first];
    if t < session.start {
        if m.tracking {
            removed.push((session.start, group.key.clone()));
        }
        session.start = t;
    }
    session.set_last(last);
}

fn row(gap: Micros, key: &PackedKey, session: &Session) -> WindowRow {
    WindowRow {
        start: session.start,
        end: session.end(gap),
        key: key.unpack(),
        values: session
            .aggregates()
            .iter()
            .map(Accumulator::value)
            .collect(),
    }
}

#[cfg(test)]
mod tests;
