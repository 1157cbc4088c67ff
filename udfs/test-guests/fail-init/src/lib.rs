//! A plugin whose `init` always fails: sluice refuses it at load, with this message.

use sluice_guest::{Event, Params, Processor, Verdict};

/// Never built.
pub struct FailInit;

impl Processor for FailInit {
    fn init(_params: &Params) -> Result<Self, String> {
        Err("deliberately refusing to start (fail-init test guest)".into())
    }

    fn process(&mut self, _event: &Event<'_>) -> Verdict {
        Verdict::Keep
    }
}

sluice_guest::export!(processor FailInit);
