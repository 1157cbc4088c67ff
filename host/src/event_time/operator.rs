//! The event-time operators behind one trait, and what they share above their own
//! state: what they read from an event ([`Fields`]), the batch they see ([`Batch`]) and
//! what it did ([`EventTimeOutcome`]).
//!
//! The operators behind one trait: [`EventTime`](super::EventTime) holds a list
//! of them (dedup first, then the windows, then the joins) and runs every hook over the
//! list in order, so adding an operator is its own file (its state, and its
//! [`Operator`] implementation in [`operator`](self)'s folder) and one line where the
//! list is built.
//!
//! Per batch, [`Operator::process`] runs on every operator in list order (after the
//! verdicts that depend on event time alone), then the watermark advances (to
//! [`Operator::flush_to`] at most, with `flush`), then [`Operator::advance`] runs on
//! every operator in list order. An operator that emits rows pushes them onto the
//! batch's [`EventTimeOutcome`], one entry per operator of its kind, in list order.
//!
//! Saving goes through the saved forms of the whole state ([`SavedStateRef`],
//! [`StateDeltaRef`]): each operator fills its own part, so the files keep their layout.
//! Every hook has a default for an operator with nothing to do.
//!
//! The implementations sit in this module's folder, above the saved forms they fill, so
//! that the operators' own files ([`super::dedup`], [`super::window`], [`super::join`])
//! import nothing of the files that save them.

pub mod dedup;
pub mod join;
pub mod window;

use std::collections::BTreeMap;

use super::delta::{StateDelta, StateDeltaRef};
use super::extract::Scalar;
use super::join::{JoinInput, JoinOperator, JoinRow, RightFields};
use super::outcome::{Arrival, StateSize};
use super::state::{SavedState, SavedStateRef};
use super::window::{WindowInput, WindowRow};
use crate::units::{Micros, Millis};

/// What the operators read from one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Fields {
    /// Event time.
    pub time: Micros,
    /// The event's id from its position ([`super::join::row_id`]), for join rows; 0 when
    /// the event was read without one (a join then numbers its rows itself).
    pub id: u64,
    /// The dedup key, when deduplicating.
    pub dedup_key: Option<Box<str>>,
    /// Its hash (see [`super::shard`]); 0 without a key.
    pub dedup_hash: u64,
    /// One input per window.
    pub windows: Vec<WindowInput>,
    /// One input per join.
    pub joins: Vec<JoinInput>,
    /// Where each producer partitioner ([`crate::kafka::partitioner::Partitioner::ALL`])
    /// puts the event's value of the source's key (`[source] keyed-by`), read with its
    /// record's topic when the source declares one and the event has a value.
    pub placed: Option<[i32; 2]>,
}

/// What a batch did to the operators.
#[derive(Debug, Clone, PartialEq)]
pub struct EventTimeOutcome {
    /// One verdict per event, in input order.
    pub verdicts: Vec<Arrival>,
    /// The watermark events were judged against.
    pub watermark_before: Option<Micros>,
    /// The watermark after the batch.
    pub watermark: Option<Micros>,
    /// Rows emitted, per window (in configured order).
    pub emitted: Vec<Vec<WindowRow>>,
    /// Late events.
    pub late: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Events too far in the future.
    pub future: u64,
    /// Rows joined, per join (in configured order).
    pub joined: Vec<Vec<JoinRow>>,
    /// Per join, one verdict per right record, in input order.
    pub right_verdicts: Vec<Vec<Arrival>>,
    /// Per join, the right watermark its records were judged against.
    pub right_watermarks_before: Vec<Option<Micros>>,
}

/// One batch, as every operator sees it.
#[derive(Debug)]
pub struct Batch<'b> {
    /// The events, in batch order.
    pub fields: &'b [&'b Fields],
    /// Per join, its right records as `(partition, fields)`, in batch order (missing
    /// ones: none).
    pub right: &'b [Vec<(&'b str, &'b RightFields)>],
    /// Processing time.
    pub now: Millis,
    /// Whether every open window closes at the end of the batch.
    pub flush: bool,
    /// Whether shards run on threads of their own.
    pub parallel: bool,
}

/// One event-time operator: a stage of the event-time part of a pipeline, with state.
pub trait Operator: std::fmt::Debug + Send + Sync {
    /// Reads what it needs from an event whose extracted fields are `values` into
    /// `fields`. Safe to call from many threads.
    fn read(&self, _values: &[Option<Scalar>], _fields: &mut Fields) {}

    /// Runs over a batch's events, before the watermark moves: may turn on-time verdicts
    /// into others (dedup), add events to the state, and push what it emits.
    fn process(&mut self, _batch: &Batch<'_>, _outcome: &mut EventTimeOutcome) {}

    /// With `flush`, where the watermark must go for this operator to close everything:
    /// the end of its last open window.
    fn flush_to(&self) -> Option<Micros> {
        None
    }

    /// Ends the batch once the watermark moved to `outcome.watermark`: forgets or closes
    /// what the watermark passed, and pushes what it emits.
    fn advance(&mut self, _batch: &Batch<'_>, _outcome: &mut EventTimeOutcome) {}

    /// Whether a batch without events at `now` would emit something (the left watermark
    /// being `left`), or, with `flush`, whether anything is open.
    fn due(&self, _now: Millis, _flush: bool, _left: Option<Micros>) -> bool {
        false
    }

    /// Sets when this run started (see [`super::watermark::Clock::session_start`]).
    fn set_session_start(&mut self, _start: Millis) {}

    /// Empties the state into `shards` shards (see [`super::shard`]).
    fn set_shards(&mut self, _shards: usize) {}

    /// Its name in state sizes and metrics (`dedup`, `window:<name>`, `join:<name>`), and
    /// the size of its state; `None` when there is nothing to report.
    fn size(&self) -> Option<(String, StateSize)> {
        None
    }

    /// Rows of state (dedup keys, open groups, join rows), for choosing between a delta
    /// and a snapshot.
    fn rows(&self) -> usize {
        0
    }

    /// Rows changed since [`Operator::track`].
    fn changed(&self) -> usize {
        0
    }

    /// Starts recording changes afresh: called after each save.
    fn track(&mut self) {}

    /// Puts its state, borrowed, into the whole state being saved.
    fn save<'a>(&'a self, _into: &mut SavedStateRef<'a>) {}

    /// Puts its changes since [`Operator::track`], borrowed, into the delta being saved.
    fn delta<'a>(&'a self, _into: &mut StateDeltaRef<'a>) {}

    /// Takes its state out of a saved whole state (what is left afterwards is of
    /// operators no longer configured).
    fn restore(&mut self, _saved: &mut SavedState) {}

    /// Takes its changes out of a saved delta and applies them; `watermark` is the one
    /// the changes were saved with.
    fn apply(&mut self, _delta: &mut StateDelta, _watermark: Option<Micros>) {}

    /// The join, if it is one (for the right side's records and metrics).
    fn as_join(&self) -> Option<&JoinOperator> {
        None
    }

    /// The join, if it is one, to change.
    fn as_join_mut(&mut self) -> Option<&mut JoinOperator> {
        None
    }

    /// A copy of it, boxed.
    fn clone_box(&self) -> Box<dyn Operator>;
}

impl Clone for Box<dyn Operator> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// The sizes of every operator that has one, by name.
pub fn sizes(operators: &[Box<dyn Operator>]) -> BTreeMap<String, StateSize> {
    operators.iter().filter_map(|op| op.size()).collect()
}
