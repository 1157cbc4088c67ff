//! Host bindings for the `sluice:plugin` WIT package, generated in this one place.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "event-processor",
});

/// The WIT package version this host speaks. Plugins built against an earlier patch
/// version of the same minor version (`0.1.0`) load too: wasmtime matches imports and
/// exports across compatible versions (`0.1.x`), and `0.1.1` only added an import.
pub const WIT_VERSION: &str = "0.1.1";
