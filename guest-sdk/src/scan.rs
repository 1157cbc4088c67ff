//! The host's reading of a chunk's events (the `scan` import, contract `0.2.2`): where the
//! fields of each flat JSON object lie, so that [`Event::json`](crate::Event::json) need
//! not find them again.

use crate::event::Scanned;

/// The host's reading of the chunk being judged, which has `events` events; `None` where
/// there is none (natively, before `0.2.2`, or a broken answer).
#[cfg(all(target_arch = "wasm32", not(feature = "wit-0-1")))]
pub(crate) fn fields(events: usize) -> Option<Scanned> {
    let answer = crate::bindings::sluice::plugin::scan::fields();
    Scanned::new(&answer.counts, answer.spans, events)
}

/// The host's reading of the chunk being judged: none natively (unit tests read values
/// themselves) nor with the `0.1` contract.
#[cfg(not(all(target_arch = "wasm32", not(feature = "wit-0-1"))))]
pub(crate) fn fields(_events: usize) -> Option<Scanned> {
    None
}
