//! A plugin built against `sluice:plugin@0.2.0`. The host speaks 0.1.0 and must refuse it
//! at load time with a clear message, not crash.

wit_bindgen::generate!({ path: "wit", world: "event-processor" });

use exports::sluice::plugin::processor::{EventChunk, Guest, PluginInfo, Verdicts};
use sluice::plugin::types::Action;

struct Future;

impl Guest for Future {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "future-version".into(),
            version: "0.2.0".into(),
        }
    }

    fn init(_params: Vec<(String, String)>) -> Result<(), String> {
        Ok(())
    }

    fn process(chunk: EventChunk) -> Result<Verdicts, String> {
        Ok(Verdicts {
            actions: vec![Action::Keep; chunk.offsets.len()],
            rewrites: vec![],
            rejections: vec![],
        })
    }
}

export!(Future);
