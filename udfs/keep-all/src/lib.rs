//! Keeps every event unchanged: the boundary cost of a plugin that does no work.

use sluice_guest::{Event, Verdict};

fn keep(_event: &Event<'_>) -> Verdict {
    Verdict::Keep
}

sluice_guest::export!(keep);
