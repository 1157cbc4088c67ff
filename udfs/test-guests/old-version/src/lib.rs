//! A plugin built against `sluice:plugin@0.1.0`, the contract as it was before `0.1.1`
//! added lookups (frozen in `wit/v0.1.0/plugin.wit`). A host speaking `0.1.1` must load it
//! unchanged and run it: it imports `host@0.1.0` (it logs once per chunk) and exports
//! `processor@0.1.0`.
//!
//! It rewrites every event's value to `{"old-version":N}`, where `N` is the length of the
//! original value, so a test sees that it really ran.

wit_bindgen::generate!({ path: "../../../wit/v0.1.0", world: "event-processor" });

use exports::sluice::plugin::processor::{EventChunk, Guest, PluginInfo, Verdicts};
use sluice::plugin::host::{Level, log};
use sluice::plugin::types::{Action, Rewrite};

struct Old;

impl Guest for Old {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "old-version".into(),
            version: "0.1.0".into(),
        }
    }

    fn init(_params: Vec<(String, String)>) -> Result<(), String> {
        Ok(())
    }

    fn process(chunk: EventChunk) -> Result<Verdicts, String> {
        log(
            Level::Debug,
            &format!("{} events", chunk.value_lengths.len()),
        );
        let rewrites = (0..)
            .zip(&chunk.value_lengths)
            .map(|(event, len)| Rewrite {
                event,
                value: format!("{{\"old-version\":{len}}}").into_bytes(),
            })
            .collect();
        Ok(Verdicts {
            actions: vec![Action::Rewrite; chunk.value_lengths.len()],
            rewrites,
            rejections: vec![],
        })
    }
}

export!(Old);
