//! What became of one event ([`Arrival`]) and the size of an operator's state
//! ([`StateSize`]): the types every operator shares, below them all.

use serde::Serialize;

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

/// Size of one operator's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StateSize {
    /// Keys (dedup) or open (window, group) pairs.
    pub rows: u64,
    /// Estimated bytes in memory.
    pub bytes: u64,
}
