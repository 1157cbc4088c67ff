//! Windowed aggregates: tumbling and sliding windows grouped by key fields, with count,
//! sum, min, max, avg and distinct count.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use super::config::{EmitMode, Function, WindowConfig};
use super::extract::Scalar;
use crate::units::Micros;

/// The group-by values of a row (`None`: missing or null).
pub type GroupKey = Vec<Option<String>>;

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
    /// distinct count: 64-bit hashes of the distinct values, sorted when saved
    Distinct(HashSet<u64>),
}

impl Accumulator {
    fn new(function: Function) -> Self {
        match function {
            Function::Count => Accumulator::Count(0),
            Function::Sum => Accumulator::Sum(0.0, 0),
            Function::Min => Accumulator::Min(None),
            Function::Max => Accumulator::Max(None),
            Function::Avg => Accumulator::Avg(0.0, 0),
            Function::DistinctCount => Accumulator::Distinct(HashSet::new()),
        }
    }

    fn add(&mut self, input: Input) {
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
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Accumulator::Distinct(set) => 48 + set.capacity() * 9,
            _ => 24,
        }
    }
}

/// What one event brings to one window operator.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowInput {
    /// The group-by values.
    pub key: GroupKey,
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
        WindowInput {
            key: self
                .group_by
                .iter()
                .map(|&i| values[i].as_ref().map(|v| v.text().to_string()))
                .collect(),
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

/// The state of one `[[windows]]` entry.
#[derive(Debug, Clone)]
pub struct WindowOperator {
    config: WindowConfig,
    size: Micros,
    slide: Micros,
    /// Open groups by window start and key.
    groups: BTreeMap<(Micros, GroupKey), Vec<Accumulator>>,
    changed: BTreeSet<(Micros, GroupKey)>,
    /// Groups added, changed or closed since the last save, while [`WindowOperator::track`]
    /// is on.
    dirty: HashSet<(Micros, GroupKey)>,
    tracking: bool,
}

impl WindowOperator {
    /// An empty operator.
    pub fn new(config: WindowConfig) -> Self {
        WindowOperator {
            size: Micros(config.size_micros()),
            slide: Micros(config.slide_micros()),
            config,
            groups: BTreeMap::new(),
            changed: BTreeSet::new(),
            dirty: HashSet::new(),
            tracking: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WindowConfig {
        &self.config
    }

    /// The starts of the windows that hold `t`, latest first.
    pub fn starts(&self, t: Micros) -> impl Iterator<Item = Micros> + use<> {
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

    /// Adds one event at `t` to every window that holds it and is still open
    /// (`end > watermark`).
    pub fn add(&mut self, t: Micros, input: &WindowInput, watermark: Option<Micros>) {
        for start in self.starts(t) {
            if watermark.is_some_and(|w| self.end(start) <= w) {
                continue;
            }
            let id = (start, input.key.clone());
            let accs = self.groups.entry(id.clone()).or_insert_with(|| {
                self.config
                    .aggregates
                    .iter()
                    .map(|a| Accumulator::new(a.function))
                    .collect()
            });
            for (acc, &x) in accs.iter_mut().zip(&input.inputs) {
                acc.add(x);
            }
            if self.config.emit == EmitMode::Update && !self.changed.contains(&id) {
                self.changed.insert(id.clone());
            }
            self.touch(id);
        }
    }

    /// Records that a group changed, when tracking.
    fn touch(&mut self, id: (Micros, GroupKey)) {
        if self.tracking && !self.dirty.contains(&id) {
            self.dirty.insert(id);
        }
    }

    fn row(&self, (start, key): &(Micros, GroupKey), accs: &[Accumulator]) -> WindowRow {
        WindowRow {
            start: *start,
            end: self.end(*start),
            key: key.clone(),
            values: accs.iter().map(Accumulator::value).collect(),
        }
    }

    /// Ends a batch: returns the rows to emit and drops the windows that the watermark
    /// closed. `on-window-close` emits the closed windows; `update` emits the windows that
    /// changed in the batch.
    pub fn finish_batch(&mut self, watermark: Option<Micros>) -> Vec<WindowRow> {
        let mut rows = Vec::new();
        if self.config.emit == EmitMode::Update {
            for id in std::mem::take(&mut self.changed) {
                if let Some(accs) = self.groups.get(&id) {
                    rows.push(self.row(&id, accs));
                }
            }
        }
        let Some(w) = watermark else {
            return rows;
        };
        // Windows are ordered by start, and all have the same size.
        let size = self.size;
        while let Some(entry) = self.groups.first_entry() {
            if entry.key().0.saturating_add(size) > w {
                break;
            }
            let (id, accs) = entry.remove_entry();
            if self.config.emit == EmitMode::OnWindowClose {
                rows.push(self.row(&id, &accs));
            }
            self.touch(id);
        }
        rows
    }

    /// The end of the last open window.
    pub fn last_end(&self) -> Option<Micros> {
        self.groups.last_key_value().map(|((s, _), _)| self.end(*s))
    }

    /// Whether a watermark of `w` would close a window.
    pub fn closes_any(&self, w: Micros) -> bool {
        self.groups
            .first_key_value()
            .is_some_and(|((s, _), _)| self.end(*s) <= w)
    }

    /// Open (window, key) groups.
    pub fn rows(&self) -> usize {
        self.groups.len()
    }

    /// Groups added, changed or closed since [`WindowOperator::track`].
    pub fn changed(&self) -> usize {
        self.dirty.len()
    }

    /// Estimated bytes of state.
    pub fn bytes(&self) -> usize {
        self.groups
            .iter()
            .map(|((_, key), accs)| {
                64 + key
                    .iter()
                    .map(|k| 24 + k.as_ref().map_or(0, String::len))
                    .sum::<usize>()
                    + accs.iter().map(Accumulator::bytes).sum::<usize>()
            })
            .sum()
    }

    /// The state, borrowed for saving.
    pub fn save_ref(&self) -> Vec<super::state::SavedGroupRef<'_>> {
        self.groups
            .iter()
            .map(|((start, key), acc)| super::state::SavedGroupRef {
                start: *start,
                key,
                acc,
            })
            .collect()
    }

    /// Starts (afresh) recording the groups that change, for [`WindowOperator::delta`]:
    /// called after each save.
    pub fn track(&mut self) {
        self.tracking = true;
        self.dirty.clear();
    }

    /// The changes since [`WindowOperator::track`]: the groups added or changed, and those
    /// closed, in no order.
    pub fn delta(&self) -> super::delta::WindowDeltaRef<'_> {
        let mut delta = super::delta::WindowDeltaRef::default();
        for id in &self.dirty {
            match self.groups.get_key_value(id) {
                Some(((start, key), acc)) => {
                    delta.upserted.push(super::state::SavedGroupRef {
                        start: *start,
                        key,
                        acc,
                    });
                }
                None => delta.removed.push((id.0, &id.1)),
            }
        }
        delta
    }

    /// Applies saved changes (see [`WindowOperator::delta`]).
    pub fn apply(&mut self, delta: super::delta::WindowDelta) {
        for id in delta.removed {
            self.groups.remove(&id);
        }
        self.groups.extend(
            delta
                .upserted
                .into_iter()
                .map(|g| ((g.start, g.key), g.acc)),
        );
    }

    /// Restores saved state; changes are not recorded until [`WindowOperator::track`].
    pub fn restore(&mut self, saved: Vec<SavedGroup>) {
        self.tracking = false;
        self.dirty.clear();
        self.changed.clear();
        self.groups = saved
            .into_iter()
            .map(|g| ((g.start, g.key), g.acc))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_time::config::AggregateConfig;

    const S: i64 = 1_000_000;

    /// `n` seconds of event time.
    fn s(n: i64) -> Micros {
        Micros(n * S)
    }

    fn config(size: u64, slide: Option<u64>, emit: EmitMode) -> WindowConfig {
        let agg = |name: &str, function, field: Option<&str>| AggregateConfig {
            name: name.into(),
            function,
            field: field.map(String::from),
        };
        WindowConfig {
            name: "w".into(),
            size: std::time::Duration::from_secs(size),
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
        WindowInput {
            key: vec![Some(key.into())],
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
        let rows = op.finish_batch(Some(s(60)));
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
        let rows = op.finish_batch(None);
        assert_eq!(
            rows.iter().map(|r| r.start.0 / S).collect::<Vec<_>>(),
            vec![20, 40, 60]
        );
        // Only the windows that change are emitted again.
        op.add(s(70), &input("a", Some(1.0), "u"), Some(s(81)));
        let rows = op.finish_batch(Some(s(81)));
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
