//! Traps on every event: a plugin release gone wrong. sluice must roll it back by itself.

use sluice_guest::{Event, Verdict};

fn judge(event: &Event<'_>) -> Verdict {
    panic!("deliberate trap on the event at offset {}", event.offset())
}

sluice_guest::export!(judge);
