//! Windowed aggregates: tumbling and sliding windows (and session windows, see
//! [`super::session`]) grouped by key fields, with count, sum, min, max, avg and distinct
//! count.

use std::collections::{BTreeMap, HashSet};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use serde::{Deserialize, Serialize};

use super::config::{EmitMode, Function, WindowConfig};
use super::extract::Scalar;
use super::session::{Marks, SessionShard};
use super::shard::{Keyed, hash_bytes, shard_of};
use crate::units::Micros;

/// The group-by values of a row (`None`: missing or null).
pub type GroupKey = Vec<Option<String>>;

/// Group-by values packed in one allocation: per value, 0 for none, or 1, the length of
/// its text (4 bytes, little-endian) and the text. Compared and hashed as bytes; saved
/// like a [`GroupKey`].
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackedKey(Box<[u8]>);

impl PackedKey {
    /// Packs group-by values.
    pub fn pack<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> Self {
        let mut bytes = Vec::new();
        for value in values {
            match value {
                None => bytes.push(0),
                Some(text) => {
                    bytes.push(1);
                    let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
                    bytes.extend_from_slice(&len.to_le_bytes());
                    bytes.extend_from_slice(&text.as_bytes()[..len as usize]);
                }
            }
        }
        PackedKey(bytes.into_boxed_slice())
    }

    /// Packs a [`GroupKey`].
    pub fn of(key: &GroupKey) -> Self {
        Self::pack(key.iter().map(Option::as_deref))
    }

    /// The packed bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The values, in order.
    pub fn values(&self) -> impl Iterator<Item = Option<&str>> {
        let mut rest = &self.0[..];
        std::iter::from_fn(move || {
            let (&tag, after) = rest.split_first()?;
            if tag == 0 {
                rest = after;
                return Some(None);
            }
            let (len, after) = after.split_at_checked(4)?;
            let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
            let (text, after) = after.split_at_checked(len)?;
            rest = after;
            // Packed from `str`s, cut at their length: always UTF-8.
            Some(Some(std::str::from_utf8(text).unwrap_or_default()))
        })
    }

    /// The values, unpacked.
    pub fn unpack(&self) -> GroupKey {
        self.values().map(|v| v.map(String::from)).collect()
    }
}

impl Serialize for PackedKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        // Binary formats need the length first.
        let mut seq = serializer.serialize_seq(Some(self.values().count()))?;
        for value in self.values() {
            seq.serialize_element(&value)?;
        }
        seq.end()
    }
}

/// The distinct values of a distinct count (their 64-bit hashes): the first few in
/// place, more in a table. Most groups of a window see a value or two (a user's pages in
/// a minute), which then costs no allocation and no hashing. Saved as a list.
#[derive(Debug, Clone)]
pub enum DistinctSet {
    /// Up to [`FEW`] values (the first `.0` of `.1`).
    Few(u8, [u64; FEW]),
    /// More.
    Many(HashSet<u64, Keyed>),
}

/// How many distinct values are held in place.
pub const FEW: usize = 2;

impl Default for DistinctSet {
    fn default() -> Self {
        DistinctSet::Few(0, [0; FEW])
    }
}

impl DistinctSet {
    /// Adds a value.
    pub fn insert(&mut self, value: u64) {
        match self {
            DistinctSet::Few(n, values) => {
                let held = &values[..usize::from(*n)];
                if held.contains(&value) {
                    return;
                }
                if let Some(slot) = values.get_mut(usize::from(*n)) {
                    *slot = value;
                    *n += 1;
                    return;
                }
                let mut set = HashSet::with_capacity_and_hasher(FEW * 4, Keyed);
                set.extend(values.iter().copied());
                set.insert(value);
                *self = DistinctSet::Many(set);
            }
            DistinctSet::Many(set) => {
                set.insert(value);
            }
        }
    }

    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            DistinctSet::Few(n, _) => usize::from(*n),
            DistinctSet::Many(set) => set.len(),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values, in no order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            DistinctSet::Few(n, values) => Box::new(values[..usize::from(*n)].iter().copied()),
            DistinctSet::Many(set) => Box::new(set.iter().copied()),
        }
    }

    /// Bytes held beyond itself: a table's buckets (8 bytes and a control byte each; a
    /// power of two, at most 7/8 full).
    fn heap_bytes(&self) -> usize {
        match self {
            DistinctSet::Many(set) => (set.capacity() * 8 / 7).next_power_of_two() * 9 + 16,
            DistinctSet::Few(..) => 0,
        }
    }
}

impl FromIterator<u64> for DistinctSet {
    fn from_iter<I: IntoIterator<Item = u64>>(values: I) -> Self {
        let mut set = DistinctSet::default();
        values.into_iter().for_each(|v| set.insert(v));
        set
    }
}

impl PartialEq for DistinctSet {
    fn eq(&self, other: &Self) -> bool {
        let theirs: HashSet<u64> = other.iter().collect();
        self.len() == other.len() && self.iter().all(|v| theirs.contains(&v))
    }
}

impl Serialize for DistinctSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for DistinctSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<u64>::deserialize(deserializer).map(|values| values.into_iter().collect())
    }
}

/// One aggregate's input from one event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Input {
    /// Nothing to aggregate (null, missing or not a number).
    None,
    /// A value is present (for `count` of a field).
    Present,
    /// A number.
    Number(f64),
    /// The hash of a value (for distinct counts).
    Hash(u64),
}

/// One aggregate's running state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accumulator {
    /// count
    Count(u64),
    /// sum (and how many values)
    Sum(f64, u64),
    /// min
    Min(Option<f64>),
    /// max
    Max(Option<f64>),
    /// avg: sum and count
    Avg(f64, u64),
    /// distinct count: 64-bit hashes of the distinct values
    Distinct(DistinctSet),
    /// Not an aggregate: the time of a session's last event, saved after the
    /// accumulators of a session window (see [`super::session`]).
    Last(Micros),
}

impl Accumulator {
    pub(super) fn new(function: Function) -> Self {
        match function {
            Function::Count => Accumulator::Count(0),
            Function::Sum => Accumulator::Sum(0.0, 0),
            Function::Min => Accumulator::Min(None),
            Function::Max => Accumulator::Max(None),
            Function::Avg => Accumulator::Avg(0.0, 0),
            Function::DistinctCount => Accumulator::Distinct(DistinctSet::default()),
        }
    }

    pub(super) fn add(&mut self, input: Input) {
        match (self, input) {
            (Accumulator::Count(n), Input::Present | Input::Number(_) | Input::Hash(_)) => *n += 1,
            (Accumulator::Sum(s, n) | Accumulator::Avg(s, n), Input::Number(x)) => {
                *s += x;
                *n += 1;
            }
            (Accumulator::Min(m), Input::Number(x)) => *m = Some(m.map_or(x, |m| m.min(x))),
            (Accumulator::Max(m), Input::Number(x)) => *m = Some(m.map_or(x, |m| m.max(x))),
            (Accumulator::Distinct(set), Input::Hash(h)) => {
                set.insert(h);
            }
            _ => {}
        }
    }

    /// Merges in the partial state of the same aggregate over other events (sessions
    /// merged): counts and sums added, extremes compared, distinct values united.
    pub(super) fn merge(&mut self, other: &Accumulator) {
        match (self, other) {
            (Accumulator::Count(n), Accumulator::Count(m)) => *n += m,
            (Accumulator::Sum(s, n), Accumulator::Sum(t, m))
            | (Accumulator::Avg(s, n), Accumulator::Avg(t, m)) => {
                *s += t;
                *n += m;
            }
            (Accumulator::Min(a), Accumulator::Min(b)) => {
                *a = match (*a, *b) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                }
            }
            (Accumulator::Max(a), Accumulator::Max(b)) => {
                *a = match (*a, *b) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    (x, y) => x.or(y),
                }
            }
            (Accumulator::Distinct(a), Accumulator::Distinct(b)) => {
                b.iter().for_each(|v| a.insert(v));
            }
            (Accumulator::Last(a), Accumulator::Last(b)) => *a = (*a).max(*b),
            _ => {}
        }
    }

    /// The result as JSON.
    pub fn value(&self) -> serde_json::Value {
        use serde_json::Value;
        let float = |x: f64| serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number);
        match self {
            Accumulator::Count(n) => Value::from(*n),
            Accumulator::Sum(s, n) if *n > 0 => float(*s),
            Accumulator::Min(m) | Accumulator::Max(m) => m.map_or(Value::Null, float),
            Accumulator::Avg(s, n) if *n > 0 => float(*s / *n as f64),
            Accumulator::Sum(..) | Accumulator::Avg(..) => Value::Null,
            Accumulator::Distinct(set) => Value::from(set.len() as u64),
            Accumulator::Last(_) => Value::Null,
        }
    }

    /// Bytes it holds beyond itself.
    pub(super) fn heap_bytes(&self) -> usize {
        match self {
            Accumulator::Distinct(set) => set.heap_bytes(),
            _ => 0,
        }
    }
}

/// What one event brings to one window operator.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowInput {
    /// The group-by values.
    pub key: PackedKey,
    /// Their hash (see [`key_hash`]).
    pub hash: u64,
    /// One input per aggregate.
    pub inputs: Vec<Input>,
}

/// The slots (in the extractor) of the fields a window reads.
#[derive(Debug, Clone)]
pub struct Slots {
    group_by: Vec<usize>,
    aggregates: Vec<(Function, Option<usize>)>,
}

impl Slots {
    /// Slots for `config`, assigned by `slot`.
    pub fn new(config: &WindowConfig, mut slot: impl FnMut(&str) -> usize) -> Self {
        Slots {
            group_by: config.group_by.iter().map(|f| slot(f)).collect(),
            aggregates: config
                .aggregates
                .iter()
                .map(|a| (a.function, a.field.as_deref().map(&mut slot)))
                .collect(),
        }
    }

    /// The window input of an event whose fields are `values`.
    pub fn input(&self, values: &[Option<Scalar>]) -> WindowInput {
        let key = PackedKey::pack(
            self.group_by
                .iter()
                .map(|&i| values[i].as_ref().map(Scalar::text)),
        );
        WindowInput {
            hash: key_hash(&key),
            key,
            inputs: self
                .aggregates
                .iter()
                .map(|&(function, slot)| {
                    let Some(slot) = slot else {
                        return Input::Present; // count of events
                    };
                    let Some(value) = &values[slot] else {
                        return Input::None;
                    };
                    match function {
                        Function::Count => Input::Present,
                        Function::DistinctCount => Input::Hash(stable_hash(value.text())),
                        _ => value.number().map_or(Input::None, Input::Number),
                    }
                })
                .collect(),
        }
    }
}

/// The hash of group-by values, in the process (see [`super::shard`]).
pub fn key_hash(key: &PackedKey) -> u64 {
    hash_bytes(key.as_bytes())
}

/// FNV-1a, 64 bits, with a final mix: stable across runs and builds, so saved state stays
/// valid.
pub fn stable_hash(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

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

/// What every shard of a window operator needs of its configuration.
#[derive(Debug, Clone)]
pub struct Shape {
    size: Micros,
    slide: Micros,
    /// The gap of session windows.
    gap: Option<Micros>,
    emit: EmitMode,
    functions: Box<[Function]>,
}

impl Shape {
    fn new(config: &WindowConfig) -> Self {
        Shape {
            size: Micros(config.size_micros()),
            slide: Micros(config.slide_micros()),
            gap: config.gap_micros().map(Micros),
            emit: config.emit,
            functions: config.aggregates.iter().map(|a| a.function).collect(),
        }
    }

    /// The aggregate functions, in order.
    pub(super) fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// The starts of the windows that hold `t`, latest first.
    fn starts(&self, t: Micros) -> impl Iterator<Item = Micros> + use<> {
        let (size, slide, t) = (self.size.0, self.slide.0, t.0);
        let last = t.div_euclid(slide) * slide;
        (0..)
            .map(move |k| last - k * slide)
            .take_while(move |s| s + size > t)
            .map(Micros)
    }

    /// The end of the window that starts at `start`.
    fn end(&self, start: Micros) -> Micros {
        start.saturating_add(self.size)
    }
}

/// One open group: a window (by its start, outside) and a key.
#[derive(Debug, Clone)]
struct Group {
    key: PackedKey,
    acc: Box<[Accumulator]>,
    /// The save in which it last changed (see [`WindowShard::save`]).
    changed_in_save: u32,
    /// The batch in which it last changed (see [`WindowShard::batch`]).
    changed_in_batch: u32,
}

impl Group {
    fn bytes(&self) -> usize {
        let key = self.key.as_bytes().len();
        let acc = std::mem::size_of_val(&*self.acc)
            + self.acc.iter().map(Accumulator::heap_bytes).sum::<usize>();
        key + acc
    }
}

/// One shard of a window operator's groups (see [`super::shard`]).
#[derive(Debug, Clone, Default)]
pub struct WindowShard {
    /// Open windows by start, each with a table of its groups.
    windows: BTreeMap<Micros, HashTable<Group>>,
    /// Open sessions, for session windows.
    sessions: SessionShard,
    tracking: bool,
    /// Counts saves: a group changed since the last save has `changed_in_save == save`.
    save: u32,
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

    fn marks(&self) -> Marks {
        Marks {
            save: self.save,
            batch: self.batch,
            tracking: self.tracking,
        }
    }

    fn groups(&self) -> impl Iterator<Item = (Micros, &Group)> {
        self.windows
            .iter()
            .flat_map(|(start, table)| table.iter().map(|g| (*start, g)))
    }

    fn insert(&mut self, start: Micros, key: PackedKey, acc: Vec<Accumulator>) {
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

    fn remove(&mut self, start: Micros, key: &PackedKey) {
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

    fn track(&mut self) {
        self.tracking = true;
        self.save = self.save.wrapping_add(1);
        self.sessions.track();
    }

    fn changed(&self) -> usize {
        if !self.tracking {
            return 0;
        }
        let open = self
            .groups()
            .filter(|(_, g)| g.changed_in_save == self.save);
        open.count() + self.sessions.changed(self.save)
    }

    /// Drops the windows that a watermark of `w` closed.
    fn close_behind(&mut self, shape: &Shape, w: Micros) {
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
    pub fn save_ref(&self) -> Vec<super::state::SavedGroupRef<'_>> {
        let groups = self.shards.iter().flat_map(WindowShard::groups);
        let groups = groups.map(|(start, g)| super::state::SavedGroupRef {
            start,
            key: &g.key,
            acc: &g.acc,
        });
        let sessions = self.shards.iter().flat_map(|s| s.sessions.saved());
        let sessions =
            sessions.map(|(start, key, acc, _)| super::state::SavedGroupRef { start, key, acc });
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
    pub fn delta(&self) -> super::delta::WindowDeltaRef<'_> {
        let mut delta = super::delta::WindowDeltaRef::default();
        for shard in self.shards.iter().filter(|s| s.tracking) {
            let sessions = shard.sessions.saved().filter(|s| s.3 == shard.save);
            let sessions = sessions.map(|(start, key, acc, _)| super::state::SavedGroupRef {
                start,
                key,
                acc,
            });
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
                .extend(changed.map(|(start, g)| super::state::SavedGroupRef {
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
    pub fn apply(&mut self, delta: super::delta::WindowDelta, watermark: Option<Micros>) {
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
pub(crate) mod tests {
    use super::*;
    use crate::event_time::config::AggregateConfig;

    const S: i64 = 1_000_000;

    /// `n` seconds of event time.
    fn s(n: i64) -> Micros {
        Micros(n * S)
    }

    /// A window on `k` with every kind of aggregate (of `x`, distinct `u`).
    pub(crate) fn config(size: u64, slide: Option<u64>, emit: EmitMode) -> WindowConfig {
        let agg = |name: &str, function, field: Option<&str>| AggregateConfig {
            name: name.into(),
            function,
            field: field.map(String::from),
        };
        WindowConfig {
            name: "w".into(),
            size: Some(std::time::Duration::from_secs(size)),
            gap: None,
            slide: slide.map(std::time::Duration::from_secs),
            group_by: vec!["k".into()],
            aggregates: vec![
                agg("n", Function::Count, None),
                agg("sum", Function::Sum, Some("x")),
                agg("min", Function::Min, Some("x")),
                agg("max", Function::Max, Some("x")),
                agg("avg", Function::Avg, Some("x")),
                agg("users", Function::DistinctCount, Some("u")),
            ],
            emit,
            kafka: None,
            iceberg: None,
        }
    }

    fn input(key: &str, x: Option<f64>, user: &str) -> WindowInput {
        let x = x.map_or(Input::None, Input::Number);
        let key = PackedKey::pack([Some(key)]);
        WindowInput {
            hash: key_hash(&key),
            key,
            inputs: vec![Input::Present, x, x, x, x, Input::Hash(stable_hash(user))],
        }
    }

    #[test]
    fn tumbling_windows_close_on_the_watermark() {
        let mut op = WindowOperator::new(config(60, None, EmitMode::OnWindowClose));
        assert_eq!(op.starts(s(61)).collect::<Vec<_>>(), vec![s(60)]);
        assert_eq!(op.starts(s(-1)).collect::<Vec<_>>(), vec![s(-60)]);
        op.add(s(10), &input("a", Some(2.0), "u1"), None);
        op.add(s(59), &input("a", Some(5.0), "u1"), None);
        op.add(s(30), &input("a", None, "u2"), None);
        op.add(s(20), &input("b", Some(1.5), "u1"), None);
        op.add(s(60), &input("a", Some(1.0), "u1"), None);
        assert!(op.finish_batch(Some(s(59))).is_empty());
        assert!(op.closes_any(s(60)));
        let mut rows = op.finish_batch(Some(s(60)));
        sort_rows(&mut rows);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].start, rows[0].end), (s(0), s(60)));
        assert_eq!(rows[0].key, vec![Some("a".to_string())]);
        assert_eq!(
            rows[0].values,
            serde_json::json!([3, 7.0, 2.0, 5.0, 3.5, 2])
                .as_array()
                .unwrap()
                .clone()
        );
        assert_eq!(
            rows[1].values,
            serde_json::json!([1, 1.5, 1.5, 1.5, 1.5, 1])
                .as_array()
                .unwrap()
                .clone()
        );
        assert_eq!(op.rows(), 1);
        // An event of a closed window is not added.
        op.add(s(5), &input("a", Some(1.0), "u1"), Some(s(60)));
        assert_eq!(op.rows(), 1);
        let saved = serde_json::to_string(&op.save_ref()).unwrap();
        let mut again = WindowOperator::new(config(60, None, EmitMode::OnWindowClose));
        again.restore(serde_json::from_str(&saved).unwrap());
        assert_eq!(again.last_end(), Some(s(120)));
        let rows = again.finish_batch(Some(s(200)));
        assert_eq!(rows[0].values[0], serde_json::json!(1));
        assert_eq!(rows[0].values[5], serde_json::json!(1));
        assert_eq!(rows[0].values[1], serde_json::json!(1.0));
    }

    #[test]
    fn sliding_windows_and_update_mode() {
        let mut op = WindowOperator::new(config(60, Some(20), EmitMode::Update));
        assert_eq!(
            op.starts(s(65)).collect::<Vec<_>>(),
            vec![s(60), s(40), s(20)]
        );
        op.add(s(65), &input("a", Some(1.0), "u"), None);
        let mut rows = op.finish_batch(None);
        sort_rows(&mut rows);
        assert_eq!(
            rows.iter().map(|r| r.start.0 / S).collect::<Vec<_>>(),
            vec![20, 40, 60]
        );
        // Only the windows that change are emitted again.
        op.add(s(70), &input("a", Some(1.0), "u"), Some(s(81)));
        let mut rows = op.finish_batch(Some(s(81)));
        sort_rows(&mut rows);
        assert_eq!(
            rows.iter()
                .map(|r| (r.start.0 / S, r.values[0].clone()))
                .collect::<Vec<_>>(),
            vec![(40, serde_json::json!(2)), (60, serde_json::json!(2))]
        );
        assert_eq!(op.rows(), 2);
        // Closing emits nothing more in update mode.
        assert!(op.finish_batch(Some(s(1000))).is_empty());
        assert_eq!(op.rows(), 0);
    }

    #[test]
    fn packed_keys_unpack_and_save_like_group_keys() {
        let keys: [GroupKey; 5] = [
            vec![Some("a".into()), None],
            vec![None, Some("a".into())],
            vec![Some("ab".into())],
            vec![Some("a".into()), Some("b".into())],
            vec![Some(String::new()), Some("Zoë \u{1f}\0".into()), None],
        ];
        let packed: Vec<PackedKey> = keys.iter().map(PackedKey::of).collect();
        for (key, p) in keys.iter().zip(&packed) {
            assert_eq!(&p.unpack(), key);
            assert_eq!(
                serde_json::to_string(p).unwrap(),
                serde_json::to_string(key).unwrap()
            );
            let binary = postcard::to_allocvec(p).unwrap();
            assert_eq!(binary, postcard::to_allocvec(key).unwrap());
        }
        for (i, a) in packed.iter().enumerate() {
            for b in &packed[i + 1..] {
                assert_ne!(a, b, "keys pack apart");
            }
        }
    }

    #[test]
    fn distinct_sets_hold_a_few_in_place_then_a_table() {
        let mut set = DistinctSet::default();
        for v in [7, 7, 9, 7] {
            set.insert(v);
        }
        assert!(matches!(set, DistinctSet::Few(2, _)));
        assert_eq!(set.len(), 2);
        for v in [1, 9, 2, 3, 2] {
            set.insert(v);
        }
        assert!(matches!(set, DistinctSet::Many(_)));
        assert_eq!(set.len(), 5);
        let mut values: Vec<u64> = set.iter().collect();
        values.sort_unstable();
        assert_eq!(values, [1, 2, 3, 7, 9]);
        // Saved as a list, read back into either form.
        let json = serde_json::to_string(&set).unwrap();
        let again: DistinctSet = serde_json::from_str(&json).unwrap();
        assert_eq!(again, set);
        let few: DistinctSet = serde_json::from_str("[4]").unwrap();
        assert!(matches!(few, DistinctSet::Few(1, _)));
        assert_ne!(few, set);
        assert_eq!(few, [4].into_iter().collect());
    }

    /// The hashes are saved in state files: a change to the function would make saved
    /// distinct counts wrong after an upgrade. These values were computed once, by this
    /// function and by an independent FNV-1a in Python; they must never change.
    #[test]
    fn hash_is_stable() {
        for (text, hash) in [
            ("", 0xecba_3df2_c338_3c52_u64),
            ("user_1", 0x5053_5a53_7379_1212),
            ("user_2", 0xc237_1a9e_1841_72ad),
            ("u_00042", 0x1550_0a9b_2525_d4fc),
            ("Zoë", 0x2c8b_0eb8_69f8_1c5e),
        ] {
            assert_eq!(stable_hash(text), hash, "stable_hash({text:?})");
        }
    }
}
