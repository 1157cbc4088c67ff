//! Host bindings for the `sluice:plugin` WIT package, generated in this one place.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "event-processor",
});

/// The WIT package version this host speaks.
pub const WIT_VERSION: &str = "0.1.0";
