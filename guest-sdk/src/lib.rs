//! Write sluice plugins in plain Rust.
//!
//! A sluice plugin judges Kafka events one at a time: it keeps an event, keeps it with a
//! rewritten value (enrichment), or rejects it with a machine-readable code. You write one
//! function over one [`Event`], export it with [`export!`], and build the crate for
//! `wasm32-wasip2`; the result is a WebAssembly component that the sluice host loads.
//!
//! The SDK owns everything else: the WIT bindings, the columnar chunk layout that crosses
//! the boundary, batching, and the mapping of your answers back to the host.
//!
//! # Example
//!
//! ```
//! use serde::Deserialize;
//! use sluice_guest::{Event, Rejection, Verdict};
//!
//! #[derive(Deserialize)]
//! struct Click {
//!     user_id: Option<String>,
//! }
//!
//! /// Rejects clicks without a user.
//! fn require_user(event: &Event<'_>) -> Result<Verdict, Rejection> {
//!     let click: Click = event.json()?; // malformed JSON becomes a `malformed_json` rejection
//!     match click.user_id {
//!         Some(user) if !user.trim().is_empty() => Ok(Verdict::Keep),
//!         _ => Err(Rejection::new("missing_user", "user_id is required").with_field("user_id")),
//!     }
//! }
//!
//! sluice_guest::export!(require_user);
//!
//! // The same function runs natively, which is how plugin authors unit-test their rules.
//! let ok = Event::new(br#"{"user_id": "u1"}"#);
//! assert_eq!(require_user(&ok).unwrap(), Verdict::Keep);
//! let bad = Event::new(br#"{"user_id": " "}"#);
//! assert_eq!(require_user(&bad).unwrap_err().code(), "missing_user");
//! let broken = Event::new(b"{not json");
//! assert_eq!(require_user(&broken).unwrap_err().code(), sluice_guest::codes::MALFORMED_JSON);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` (with `crate-type =
//! ["cdylib"]` in `Cargo.toml`) and try it with `sluice try --plugin
//! target/wasm32-wasip2/release/NAME.wasm --input events.jsonl`.
//!
//! A plugin that needs parameters from the pipeline configuration implements
//! [`Processor`] instead and is exported with `export!(processor MyType)`.
//!
//! # Lookups
//!
//! A plugin enriches events from the pipeline's lookup tables with [`lookup`] (one key,
//! parsed), [`lookup_many`] (many keys, one host call) or [`lookup_raw`] (bytes). The stage
//! must be granted each table (`[stages.grants] lookups = ["profiles"]`); in unit tests,
//! [`testing::lookups`] sets the tables natively.
#![deny(missing_docs)]

mod event;
mod fields;
mod json;
mod keys;
mod lookup;
mod params;
mod patch;
mod same;
mod scan;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
mod verdict;

#[doc(hidden)]
pub mod __private;

pub use event::{Event, Header};
pub use fields::{Field, Fields, lookup_fields};
pub use lookup::codes as lookup_codes;
pub use lookup::{
    LOOKUP_FAILED, LookupError, Lookups, lookup, lookup_many, lookup_many_raw, lookup_raw,
    lookup_with, malformed_value,
};
pub use params::Params;
pub use patch::Patch;
pub use verdict::{IntoVerdict, Rejection, Verdict};

/// Generated bindings for the `sluice:plugin` WIT package. Plugin authors do not need them;
/// they are public for the SDK's macros and for tests that speak the raw ABI.
#[doc(hidden)]
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    #[cfg(not(feature = "wit-0-1"))]
    wit_bindgen::generate!({
        // `wit` links to the repository's `wit/` folder; `cargo package` copies the file.
        path: "wit/plugin.wit",
        world: "event-processor",
        pub_export_macro: true,
        export_macro_name: "__export_event_processor",
        default_bindings_module: "::sluice_guest::bindings",
    });
    // The `wit-0-1` feature: the frozen `0.1` contract.
    #[cfg(feature = "wit-0-1")]
    wit_bindgen::generate!({
        path: "wit/v0.1.1/plugin.wit",
        world: "event-processor",
        pub_export_macro: true,
        export_macro_name: "__export_event_processor",
        default_bindings_module: "::sluice_guest::bindings",
    });
}

/// The version of the `sluice:plugin` WIT package this SDK speaks. A host loads a plugin
/// built against any `0.2.x` version up to its own (and hosts from `0.2` on load `0.1`
/// plugins too); a host that speaks only `0.1` refuses it at load with a message naming
/// both versions.
#[cfg(not(feature = "wit-0-1"))]
pub const WIT_VERSION: &str = "0.2.2";
/// The version of the `sluice:plugin` WIT package this SDK speaks: with the `wit-0-1`
/// feature, the `0.1` contract, which every host loads; patches are applied in the plugin.
#[cfg(feature = "wit-0-1")]
pub const WIT_VERSION: &str = "0.1.1";

/// Rejection codes that the SDK itself produces.
pub mod codes {
    /// The value is not well-formed JSON, or not the JSON shape the plugin expects
    /// (for example an array where an object is expected).
    pub const MALFORMED_JSON: &str = "malformed_json";
    /// A JSON field has the wrong type (for example a string where a number is expected);
    /// the rejection names the field.
    pub const INVALID_FIELD_TYPE: &str = "invalid_field_type";
    /// The event has a null value (a Kafka tombstone) where the plugin needs one.
    pub const NULL_VALUE: &str = "null_value";
    /// The value is not valid UTF-8 where the plugin needs text.
    pub const INVALID_UTF8: &str = "invalid_utf8";
}

/// A plugin that is set up once with parameters and then judges events.
///
/// Implement this when the plugin reads parameters from the pipeline configuration or
/// keeps state between events; otherwise a plain function and [`export!`] are simpler.
///
/// ```
/// use sluice_guest::{Event, Params, Processor, Rejection, Verdict};
///
/// struct MaxSize {
///     limit: usize,
/// }
///
/// impl Processor for MaxSize {
///     fn init(params: &Params) -> Result<Self, String> {
///         params.only(&["limit"])?;
///         let limit = params.parse_or("limit", 1024)?;
///         Ok(MaxSize { limit })
///     }
///
///     fn process(&mut self, event: &Event<'_>) -> Verdict {
///         let size = event.value().map_or(0, <[u8]>::len);
///         if size > self.limit {
///             Rejection::new("too_large", format!("{size} bytes, limit {}", self.limit)).into()
///         } else {
///             Verdict::Keep
///         }
///     }
/// }
///
/// sluice_guest::export!(processor MaxSize);
/// ```
pub trait Processor: Sized + 'static {
    /// Builds the plugin from its parameters. An `Err` refuses the plugin at load time
    /// with the message shown to the user.
    fn init(params: &Params) -> Result<Self, String>;

    /// Judges one event.
    fn process(&mut self, event: &Event<'_>) -> Verdict;

    /// Says which lookups [`Processor::process`] will make for `event`, before any event of
    /// its chunk is processed. The SDK asks the host for all the keys of a chunk at once (one
    /// call per table, each key once), and [`lookup`] in `process` answers from those
    /// answers; a lookup not announced still works, with a host call of its own. The
    /// default announces nothing.
    ///
    /// `prefetch` sees a chunk's events in order, then `process` sees them in the same
    /// order, so a plugin may keep what it read of an event for `process` rather than read
    /// it twice (`udfs/retail-enricher` does).
    ///
    /// ```
    /// use sluice_guest::{Event, Lookups, Params, Processor, Verdict};
    ///
    /// struct Tier;
    ///
    /// impl Processor for Tier {
    ///     fn init(_: &Params) -> Result<Self, String> {
    ///         Ok(Tier)
    ///     }
    ///
    ///     fn prefetch(&mut self, event: &Event<'_>, lookups: &mut Lookups) {
    ///         if let Some(user) = event.key() {
    ///             lookups.want("profiles", user);
    ///         }
    ///     }
    ///
    ///     fn process(&mut self, event: &Event<'_>) -> Verdict {
    ///         // Answered from the chunk's prefetched keys.
    ///         let _ = sluice_guest::lookup_raw("profiles", event.key().unwrap_or_default());
    ///         Verdict::Keep
    ///     }
    /// }
    /// ```
    fn prefetch(&mut self, event: &Event<'_>, lookups: &mut Lookups) {
        let _ = (event, lookups);
    }
}

/// Exports a plugin from this crate. Use it once, at the crate root.
///
/// - `export!(my_function)` exports a function `fn(&Event<'_>) -> R` where `R` is a
///   [`Verdict`], a `Result<Verdict, Rejection>` or a `Result<(), Rejection>` (`Ok(())`
///   keeps the event). Such a plugin takes no parameters and refuses any it is given.
/// - `export!(processor MyType)` exports a type that implements [`Processor`].
///
/// Outside `wasm32` the macro only checks the types, so the crate also builds natively
/// for unit tests and benchmarks.
#[macro_export]
macro_rules! export {
    (processor $ty:ty) => {
        $crate::__export_processor!($ty);
    };
    ($func:path) => {
        #[doc(hidden)]
        struct __SluiceFunctionPlugin;

        impl $crate::Processor for __SluiceFunctionPlugin {
            fn init(
                params: &$crate::Params,
            ) -> ::core::result::Result<Self, ::std::string::String> {
                params.only(&[])?;
                Ok(__SluiceFunctionPlugin)
            }

            fn process(&mut self, event: &$crate::Event<'_>) -> $crate::Verdict {
                $crate::IntoVerdict::into_verdict($func(event))
            }
        }

        $crate::__export_processor!(__SluiceFunctionPlugin);
    };
}

/// Implementation detail of [`export!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __export_processor {
    ($ty:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            use $crate::bindings::exports::sluice::plugin::processor as __processor;

            struct __SluiceGlue;

            impl __processor::Guest for __SluiceGlue {
                fn describe() -> __processor::PluginInfo {
                    __processor::PluginInfo {
                        name: ::core::env!("CARGO_PKG_NAME").into(),
                        version: ::core::env!("CARGO_PKG_VERSION").into(),
                    }
                }

                fn init(
                    params: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    $crate::__private::init::<$ty>(params)
                }

                fn process(
                    chunk: __processor::EventChunk,
                ) -> ::core::result::Result<__processor::Verdicts, ::std::string::String> {
                    $crate::__private::process::<$ty>(chunk)
                }
            }

            $crate::bindings::__export_event_processor!(__SluiceGlue with_types_in $crate::bindings);
        };
    };
}

/// Writes to the host's log, tagged with the plugin's name.
///
/// Outside `wasm32` (native unit tests) messages go to standard error.
pub mod log {
    use crate::bindings::sluice::plugin::host::{self, Level};

    fn emit(level: Level, message: &str) {
        #[cfg(target_arch = "wasm32")]
        host::log(level, message);
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = host::log; // the import exists only inside a component
            eprintln!("[{level:?}] {message}");
        }
    }

    /// Logs at trace level.
    pub fn trace(message: impl AsRef<str>) {
        emit(Level::Trace, message.as_ref());
    }
    /// Logs at debug level.
    pub fn debug(message: impl AsRef<str>) {
        emit(Level::Debug, message.as_ref());
    }
    /// Logs at info level.
    pub fn info(message: impl AsRef<str>) {
        emit(Level::Info, message.as_ref());
    }
    /// Logs at warn level.
    pub fn warn(message: impl AsRef<str>) {
        emit(Level::Warn, message.as_ref());
    }
    /// Logs at error level.
    pub fn error(message: impl AsRef<str>) {
        emit(Level::Error, message.as_ref());
    }
}

#[cfg(test)]
mod version_tests {
    /// The constant says what the bindings were generated from.
    #[test]
    fn wit_version_is_the_package_version() {
        #[cfg(not(feature = "wit-0-1"))]
        let wit = include_str!("../wit/plugin.wit");
        #[cfg(feature = "wit-0-1")]
        let wit = include_str!("../wit/v0.1.1/plugin.wit");
        let line = format!("package sluice:plugin@{};", super::WIT_VERSION);
        assert!(
            wit.lines().any(|l| l.trim() == line),
            "no `{line}` in wit/plugin.wit"
        );
    }
}
