//! What the operators read from one event ([`Fields`]) and what a batch did
//! ([`EventTimeOutcome`]), with each operator's inputs and outputs; what became of one
//! event and the size of an operator's state are in [`super::verdict`], below the
//! operators.

pub use super::verdict::{Arrival, StateSize};

use super::join::{JoinInput, JoinRow};
use super::window::{WindowInput, WindowRow};
use crate::units::Micros;

/// What the operators read from one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Fields {
    /// Event time.
    pub time: Micros,
    /// The dedup key, when deduplicating.
    pub dedup_key: Option<Box<str>>,
    /// Its hash (see [`shard`]); 0 without a key.
    pub dedup_hash: u64,
    /// One input per window.
    pub windows: Vec<WindowInput>,
    /// One input per join.
    pub joins: Vec<JoinInput>,
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
