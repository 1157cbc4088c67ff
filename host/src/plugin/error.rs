//! Errors of the plugin runtime. Loading errors refuse a plugin; call errors fail one chunk
//! of events and say which plugin, which limit and which events, so that the pipeline can
//! dead-letter exactly those events and go on.

use std::fmt;
use std::time::Duration;

use crate::units::ByteSize;

/// A plugin could not be loaded or called.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The plugin file could not be read.
    #[error("cannot read plugin `{plugin}` from {path}: {error}")]
    Read {
        /// Plugin (stage) name.
        plugin: String,
        /// The path that was read.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The bytes are not a valid WebAssembly component.
    #[error("plugin `{plugin}` is not a valid WebAssembly component: {message}")]
    Compile {
        /// Plugin name.
        plugin: String,
        /// What the compiler said.
        message: String,
    },
    /// The component does not implement the `sluice:plugin/event-processor` world of this
    /// host (another WIT version, another world, or imports the host does not offer).
    #[error(
        "plugin `{plugin}` does not fit this host, which speaks sluice:plugin@{version} \
         and loads plugins of sluice:plugin@0.1 too (world event-processor): {message}"
    )]
    Incompatible {
        /// Plugin name.
        plugin: String,
        /// The WIT package version this host speaks.
        version: &'static str,
        /// What did not fit.
        message: String,
    },
    /// The plugin's `init` refused to start, or failed.
    #[error("plugin `{plugin}` failed to initialise: {message}")]
    Init {
        /// Plugin name.
        plugin: String,
        /// The plugin's message, or the failure.
        message: String,
    },
    /// The engine could not be set up.
    #[error("the WebAssembly engine could not be set up: {0}")]
    Engine(String),
    /// A call failed on a chunk of events.
    #[error("plugin `{plugin}` failed on {events}: {failure}")]
    Call {
        /// Plugin name.
        plugin: String,
        /// What went wrong.
        failure: Failure,
        /// The events of the failed call.
        events: EventSpan,
    },
}

impl PluginError {
    /// The failure of a call, if this is a call error.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            PluginError::Call { failure, .. } => Some(failure),
            _ => None,
        }
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The call ran longer than its deadline and was interrupted.
    Deadline {
        /// The configured `call-timeout`.
        limit: Duration,
    },
    /// The plugin tried to grow its memory past the configured cap.
    Memory {
        /// The configured `memory` limit.
        limit: ByteSize,
    },
    /// The plugin's stack grew past the configured maximum.
    StackOverflow {
        /// The configured `max-stack`.
        limit: ByteSize,
    },
    /// The plugin trapped (a panic, `unreachable`, an out-of-bounds access…).
    Trap {
        /// The trap, with the plugin's last words on stderr (a panic message) if any.
        message: String,
    },
    /// The answer was larger than `max-output`.
    OutputTooLarge {
        /// Bytes returned.
        bytes: u64,
        /// The configured `max-output`.
        limit: ByteSize,
    },
    /// The answer broke the contract (wrong number of results, results for events that do
    /// not exist, rewrites or rejections that do not match the actions).
    BadAnswer {
        /// What was wrong.
        reason: String,
    },
    /// The plugin returned an error for the whole chunk.
    Plugin {
        /// The plugin's message.
        message: String,
    },
}

impl Failure {
    /// The name of the limit that was hit (`call-timeout`, `memory`, `max-stack`,
    /// `max-output`), if a limit caused the failure.
    pub fn limit(&self) -> Option<&'static str> {
        match self {
            Failure::Deadline { .. } => Some("call-timeout"),
            Failure::Memory { .. } => Some("memory"),
            Failure::StackOverflow { .. } => Some("max-stack"),
            Failure::OutputTooLarge { .. } => Some("max-output"),
            Failure::Trap { .. } | Failure::BadAnswer { .. } | Failure::Plugin { .. } => None,
        }
    }

    /// A stable `snake_case` code for dead-letter headers and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Failure::Deadline { .. } => "plugin_deadline_exceeded",
            Failure::Memory { .. } => "plugin_memory_exceeded",
            Failure::StackOverflow { .. } => "plugin_stack_overflow",
            Failure::Trap { .. } => "plugin_trapped",
            Failure::OutputTooLarge { .. } => "plugin_output_too_large",
            Failure::BadAnswer { .. } => "plugin_bad_answer",
            Failure::Plugin { .. } => "plugin_error",
        }
    }

    /// Whether the failure may depend on which events were in the chunk, so that calling
    /// again with fewer events can isolate the event that causes it.
    pub fn depends_on_events(&self) -> bool {
        matches!(
            self,
            Failure::Trap { .. }
                | Failure::Memory { .. }
                | Failure::StackOverflow { .. }
                | Failure::OutputTooLarge { .. }
        )
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Deadline { limit } => {
                write!(
                    f,
                    "exceeded its call-timeout of {}ms and was interrupted",
                    limit.as_millis()
                )
            }
            Failure::Memory { limit } => write!(f, "exceeded its memory limit of {limit}"),
            Failure::StackOverflow { limit } => {
                write!(f, "overflowed its stack (max-stack {limit})")
            }
            Failure::Trap { message } => write!(f, "trapped: {message}"),
            Failure::OutputTooLarge { bytes, limit } => {
                write!(
                    f,
                    "returned {bytes} bytes, more than its max-output of {limit}"
                )
            }
            Failure::BadAnswer { reason } => write!(f, "broke the plugin contract: {reason}"),
            Failure::Plugin { message } => write!(f, "returned an error: {message}"),
        }
    }
}

/// The events of one call, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpan {
    /// Number of events.
    pub count: usize,
    /// Position (`topic/partition@offset`) of the first event.
    pub first: Option<String>,
    /// Position of the last event.
    pub last: Option<String>,
}

impl fmt::Display for EventSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.count == 1 { "event" } else { "events" };
        match (&self.first, &self.last) {
            (Some(first), Some(last)) if first != last => {
                write!(f, "{} {plural} ({first} .. {last})", self.count)
            }
            (Some(first), _) => write!(f, "{} {plural} ({first})", self.count),
            _ => write!(f, "{} {plural}", self.count),
        }
    }
}
