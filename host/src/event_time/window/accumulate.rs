//! Accumulators: the running state of one aggregate (count, sum, min, max, avg,
//! distinct count) of one group, and what one event brings to it.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::event_time::config::Function;
use crate::event_time::shard::Keyed;
use crate::units::Micros;

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
    pub(in crate::event_time) fn new(function: Function) -> Self {
        match function {
            Function::Count => Accumulator::Count(0),
            Function::Sum => Accumulator::Sum(0.0, 0),
            Function::Min => Accumulator::Min(None),
            Function::Max => Accumulator::Max(None),
            Function::Avg => Accumulator::Avg(0.0, 0),
            Function::DistinctCount => Accumulator::Distinct(DistinctSet::default()),
        }
    }

    pub(in crate::event_time) fn add(&mut self, input: Input) {
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
    pub(in crate::event_time) fn merge(&mut self, other: &Accumulator) {
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
    pub(in crate::event_time) fn heap_bytes(&self) -> usize {
        match self {
            Accumulator::Distinct(set) => set.heap_bytes(),
            _ => 0,
        }
    }
}
