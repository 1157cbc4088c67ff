//! A plugin built against the next minor version of the WIT contract (`sluice:plugin@0.3.0`
//! while `wit/plugin.wit` says 0.2.x). The host speaks 0.2.x and must refuse it at load
//! time with a clear message, not crash.
//!
//! Its WIT is `wit/plugin.wit` with only the version changed, derived by `build.rs`.

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

use exports::sluice::plugin::processor::{EventChunk, Guest, PluginInfo, Verdicts};
use sluice::plugin::types::{Action, Patches};

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
            patches: Patches {
                events: vec![],
                name_lengths: vec![],
                names: String::new(),
                value_lengths: vec![],
                values: vec![],
            },
        })
    }
}

export!(Future);
