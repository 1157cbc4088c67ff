//! Micro-batches: when one is cut (the trigger) and how large it may grow (the caps).

pub mod trigger;

use std::time::Duration;

use serde::Deserialize;

use crate::units::ByteSize;

/// When batches run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerMode {
    /// Start a batch every `interval` (Spark's `processingTime`). A batch takes what has
    /// arrived, up to the caps; an interval with no new data commits nothing.
    Interval,
    /// Read everything up to the end offsets seen at start, in capped batches, commit each,
    /// then exit (Spark's `availableNow`).
    AvailableNow,
}

/// The trigger and per-batch caps.
///
/// ```toml
/// [trigger]
/// mode = "interval"
/// interval = "1m"
/// max-records = 100000
/// max-bytes = "64MiB"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TriggerConfig {
    /// `interval` (run every `interval`, forever) or `available-now` (drain what is there,
    /// then exit 0).
    #[serde(default = "default_mode")]
    pub mode: TriggerMode,
    /// Time between the starts of two batches in `interval` mode, e.g. `"10s"`, `"1m"`. A
    /// batch that takes longer delays the next one; batches never overlap.
    #[serde(default = "default_interval", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub interval: Duration,
    /// Most records in one batch (Spark's `maxOffsetsPerTrigger`). Whatever is left waits
    /// for the next batch.
    #[serde(default = "default_max_records")]
    pub max_records: usize,
    /// Most bytes (keys plus values) in one batch. Memory use follows this cap, not the
    /// size of the topic. A single record larger than the cap still makes a batch alone.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: ByteSize,
    /// Set on a stage that reads a repartition topic (not configurable): in `interval`
    /// mode a batch starts as soon as records have arrived and stopped arriving for a
    /// moment, not at the next interval (what the stage before sent waits a poll, not an
    /// interval, per hop); the interval still bounds the time between two batches.
    #[serde(skip)]
    #[schemars(skip)]
    pub follows: bool,
}

const fn default_mode() -> TriggerMode {
    TriggerMode::Interval
}

const fn default_interval() -> Duration {
    Duration::from_secs(10)
}

const fn default_max_records() -> usize {
    100_000
}

const fn default_max_bytes() -> ByteSize {
    ByteSize::mib(64)
}

impl Default for TriggerConfig {
    fn default() -> Self {
        TriggerConfig {
            mode: default_mode(),
            interval: default_interval(),
            max_records: default_max_records(),
            max_bytes: default_max_bytes(),
            follows: false,
        }
    }
}

/// The caps of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Most records.
    pub records: usize,
    /// Most bytes of keys and values.
    pub bytes: u64,
}

impl Caps {
    /// Whether a batch holding `records` records of `bytes` bytes is full.
    pub fn full(&self, records: usize, bytes: u64) -> bool {
        records >= self.records || bytes >= self.bytes
    }
}

impl TriggerConfig {
    /// The caps of each batch.
    pub fn caps(&self) -> Caps {
        Caps {
            records: self.max_records.max(1),
            bytes: self.max_bytes.0.max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_defaults() {
        let t: TriggerConfig = toml::from_str("mode = \"available-now\"\nmax-records = 5").unwrap();
        assert_eq!(t.mode, TriggerMode::AvailableNow);
        assert_eq!(t.interval, Duration::from_secs(10));
        assert_eq!(t.caps().records, 5);
        assert!(t.caps().full(5, 0));
        assert!(!t.caps().full(4, 1));
        assert!(toml::from_str::<TriggerConfig>("mode = \"sometimes\"").is_err());
        assert!(toml::from_str::<TriggerConfig>("max-recrods = 1").is_err());
    }
}
