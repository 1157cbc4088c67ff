//! The contracts a plugin may speak: a component is checked against the current one, then
//! against `0.1`, and called through the one it speaks (see `bindings.rs`).

use wasmtime::component::{HasSelf, InstancePre, Linker};
use wasmtime::{Engine, Store};

use super::bindings::sluice::plugin::types::{EventChunk, Verdicts};
use super::bindings::{EventProcessor, EventProcessorPre, v0_1};
use super::sandbox::StoreState;

/// A component checked against one of the contracts, ready to instantiate.
pub(crate) enum Pre {
    /// It speaks the current contract; `bool`: it imports `scan` (`0.2.2` on).
    Current(EventProcessorPre<StoreState>, bool),
    /// It speaks `0.1`.
    V0_1(v0_1::EventProcessorPre<StoreState>),
}

impl Pre {
    /// Checks `pre`'s exports against the current contract, then against `0.1`; the error
    /// is the current contract's.
    pub(crate) fn new(pre: InstancePre<StoreState>) -> wasmtime::Result<Self> {
        let scans = pre
            .component()
            .component_type()
            .imports(pre.component().engine())
            .any(|(name, _)| name.starts_with("sluice:plugin/scan@"));
        match EventProcessorPre::new(pre.clone()) {
            Ok(current) => Ok(Pre::Current(current, scans)),
            Err(error) => v0_1::EventProcessorPre::new(pre)
                .map(Pre::V0_1)
                .map_err(|_| error),
        }
    }

    /// Whether the plugin reads the host's `scan` of its events (so the host makes one).
    pub(crate) fn scans(&self) -> bool {
        matches!(self, Pre::Current(_, true))
    }

    pub(crate) fn engine(&self) -> &Engine {
        match self {
            Pre::Current(pre, _) => pre.engine(),
            Pre::V0_1(pre) => pre.engine(),
        }
    }

    pub(crate) fn instantiate(&self, store: &mut Store<StoreState>) -> wasmtime::Result<Processor> {
        Ok(match self {
            Pre::Current(pre, _) => Processor::Current(pre.instantiate(store)?),
            Pre::V0_1(pre) => Processor::V0_1(pre.instantiate(store)?),
        })
    }
}

/// The `processor` export of one instance, through the contract its plugin speaks.
pub(crate) enum Processor {
    Current(EventProcessor),
    V0_1(v0_1::EventProcessor),
}

impl Processor {
    /// `describe`: the plugin's name and version.
    pub(crate) fn describe(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<(String, String)> {
        Ok(match self {
            Processor::Current(p) => {
                let info = p.sluice_plugin_processor().call_describe(store)?;
                (info.name, info.version)
            }
            Processor::V0_1(p) => {
                let info = p.sluice_plugin_processor().call_describe(store)?;
                (info.name, info.version)
            }
        })
    }

    /// `init`, with the stage's parameters.
    pub(crate) fn init(
        &self,
        store: &mut Store<StoreState>,
        params: &[(String, String)],
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            Processor::Current(p) => p.sluice_plugin_processor().call_init(store, params),
            Processor::V0_1(p) => p.sluice_plugin_processor().call_init(store, params),
        }
    }

    /// `process`: a `0.1` plugin gets a copy of the chunk in its own types, and its answer
    /// is converted.
    pub(crate) fn process(
        &self,
        store: &mut Store<StoreState>,
        chunk: &EventChunk,
    ) -> wasmtime::Result<Result<Verdicts, String>> {
        match self {
            Processor::Current(p) => p.sluice_plugin_processor().call_process(store, chunk),
            Processor::V0_1(p) => Ok(p
                .sluice_plugin_processor()
                .call_process(store, &v0_1::chunk(chunk))?
                .map(v0_1::verdicts)),
        }
    }
}

/// Adds the host's side of both contracts to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    EventProcessor::add_to_linker::<_, HasSelf<StoreState>>(linker, |s| s)?;
    v0_1::EventProcessor::add_to_linker::<_, HasSelf<StoreState>>(linker, |s| s)
}
