//! What the operators read from one event ([`Fields`]), what became of it
//! ([`Arrival`]), what a batch did ([`EventTimeOutcome`]) and the size of an operator's
//! state ([`StateSize`]): the types every operator shares, below them all.

use serde::Serialize;

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

/// What became of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// On time and new: it goes on.
    OnTime,
    /// Behind the watermark.
    Late,
    /// A repeat of an event seen within the watermark.
    Duplicate,
    /// Further past processing time than `max-future`: it does not touch the watermark.
    Future,
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

/// Size of one operator's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StateSize {
    /// Keys (dedup) or open (window, group) pairs.
    pub rows: u64,
    /// Estimated bytes in memory.
    pub bytes: u64,
}
