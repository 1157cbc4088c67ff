//! Host bindings for the `sluice:plugin` WIT package, generated in this one place: the
//! current contract (`wit/plugin.wit`), and the `0.1` contract (frozen in
//! `wit/v0.1.1/plugin.wit`) that plugins built before `0.2` speak.
//!
//! A `0.1` plugin runs through [`v0_1`]: its imports are answered by the same host code
//! (`sandbox.rs` converts the few types that differ only by package), its chunks are the
//! current chunks with the same fields, and its verdicts become current verdicts without
//! patches (below). `contract.rs` picks the contract a component speaks; nothing else in
//! the host knows which one it is.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "event-processor",
});

/// The WIT package version this host speaks. Plugins built against an earlier version of
/// the same minor version load too (wasmtime matches imports and exports across
/// compatible versions, `0.2.x`), and so do plugins of the `0.1` minor version, through
/// [`v0_1`].
pub const WIT_VERSION: &str = "0.2.2";

/// The `0.1` contract (`0.1.0` and `0.1.1` plugins), and its conversions to the current one.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.1",
        world: "event-processor",
    });

    use self::sluice::plugin::types;
    use super::sluice::plugin as current;

    /// The current chunk as a `0.1` chunk: the same fields, copied.
    pub(crate) fn chunk(wire: &current::types::EventChunk) -> types::EventChunk {
        types::EventChunk {
            topics: wire.topics.clone(),
            topic_index: wire.topic_index.clone(),
            partitions: wire.partitions.clone(),
            offsets: wire.offsets.clone(),
            timestamps: wire.timestamps.clone(),
            key_lengths: wire.key_lengths.clone(),
            keys: wire.keys.clone(),
            value_lengths: wire.value_lengths.clone(),
            values: wire.values.clone(),
            headers: wire
                .headers
                .iter()
                .map(|h| types::Header {
                    event: h.event,
                    name: h.name.clone(),
                    value: h.value.clone(),
                })
                .collect(),
        }
    }

    /// A `0.1` answer as a current one: the same actions, no patches.
    pub(crate) fn verdicts(old: types::Verdicts) -> current::types::Verdicts {
        use current::types::{Action, Patches, Rejection, Rewrite, Verdicts};
        Verdicts {
            actions: old
                .actions
                .into_iter()
                .map(|a| match a {
                    types::Action::Keep => Action::Keep,
                    types::Action::Rewrite => Action::Rewrite,
                    types::Action::Reject => Action::Reject,
                })
                .collect(),
            rewrites: old
                .rewrites
                .into_iter()
                .map(|r| Rewrite {
                    event: r.event,
                    value: r.value,
                })
                .collect(),
            rejections: old
                .rejections
                .into_iter()
                .map(|r| Rejection {
                    event: r.event,
                    code: r.code,
                    message: r.message,
                    field: r.field,
                })
                .collect(),
            patches: Patches {
                events: Vec::new(),
                name_lengths: Vec::new(),
                names: String::new(),
                value_lengths: Vec::new(),
                values: Vec::new(),
            },
        }
    }
}
