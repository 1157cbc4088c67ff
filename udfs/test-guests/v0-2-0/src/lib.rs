//! A plugin built against `sluice:plugin@0.2.0`, the contract as it was before `0.2.1`
//! added `lookup-fields` (frozen in `wit/v0.2.0/plugin.wit`). A host speaking `0.2.1` must
//! load it unchanged and run it: it imports `lookup@0.2.0` and `host@0.2.0`, and exports
//! `processor@0.2.0`.
//!
//! It patches every event with `"length"` (its value's length) and `"lookup"` (the code of
//! the error its `lookup-many` of table `profiles` got, or `"answered"`), so a test sees
//! that it ran and that its imports were answered.

wit_bindgen::generate!({ path: "../../../wit/v0.2.0", world: "event-processor" });

use exports::sluice::plugin::processor::{EventChunk, Guest, PluginInfo, Verdicts};
use sluice::plugin::host::{Level, log};
use sluice::plugin::lookup::lookup_many;
use sluice::plugin::types::{Action, Patches};

struct V020;

impl Guest for V020 {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "v0-2-0".into(),
            version: "0.2.0".into(),
        }
    }

    fn init(_params: Vec<(String, String)>) -> Result<(), String> {
        Ok(())
    }

    fn process(chunk: EventChunk) -> Result<Verdicts, String> {
        let events = chunk.value_lengths.len();
        log(Level::Debug, &format!("{events} events"));
        let lookup = match lookup_many("profiles", &[b"u1".to_vec()]) {
            Ok(_) => "answered".to_string(),
            Err(e) => e.code,
        };
        let mut patches = Patches {
            events: vec![],
            name_lengths: vec![],
            names: String::new(),
            value_lengths: vec![],
            values: vec![],
        };
        for (event, len) in (0..).zip(&chunk.value_lengths) {
            for (name, value) in [
                ("length", len.to_string()),
                ("lookup", format!("{lookup:?}")),
            ] {
                patches.events.push(event);
                patches.name_lengths.push(name.len() as u32);
                patches.names.push_str(name);
                patches.value_lengths.push(value.len() as u32);
                patches.values.extend_from_slice(value.as_bytes());
            }
        }
        Ok(Verdicts {
            actions: vec![Action::Patch; events],
            rewrites: vec![],
            rejections: vec![],
            patches,
        })
    }
}

export!(V020);
