//! The pipeline file read by `sluice run --config FILE`: source, trigger, stages, sink,
//! dead-letter output. See `examples/retail-clickstream/pipeline.toml`.

mod consistency;
mod names;
pub mod reference;
pub mod repartition;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::env::{SubstError, substitute_env};
use crate::admin::AdminConfig;
use crate::batch::TriggerConfig;
use crate::event_time::config::{DedupConfig, EventTimeConfig, ScaleOut, WindowConfig};
use crate::event_time::join::config::JoinConfig;
use crate::iceberg::IcebergSinkConfig;
use crate::lookup::config::LookupConfig;
use crate::plugin::config::{RuntimeConfig, StageConfig};
use crate::sink::deadletter::DeadLetterConfig;
use crate::source::kafka::{KafkaSourceConfig, SourceMode};

/// The librdkafka property naming the consumer group's assignor.
pub const ASSIGNMENT_STRATEGY: &str = "partition.assignment.strategy";

/// What happens to an event that a plugin rejects, that fails in a plugin, or that does
/// not fit the table.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum OnInvalid {
    /// Send it to the dead-letter topic with the reason, and go on.
    DeadLetter,
    /// Stop the pipeline without committing the batch (Spark's FAILFAST). A restart
    /// meets the same event again.
    Fail,
}

/// The `[pipeline]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PipelineSection {
    /// Name of the pipeline. It keys the offsets stored in the table, so two pipelines
    /// writing one table must have different names; renaming a pipeline starts it anew.
    pub name: String,
    /// `dead-letter` (default) or `fail`.
    #[serde(default = "default_on_invalid")]
    pub on_invalid: OnInvalid,
    /// Threads that run plugins and encoding; default: the machine's cores.
    #[serde(default)]
    pub threads: Option<usize>,
    /// How long a transient fault (broker unreachable, acknowledgement timeout, catalog
    /// busy, disk full) is retried, with backoff from 1 s doubling to 30 s, before the run
    /// ends with the error: the time since the first fault with no batch committed since.
    /// `"0s"` retries nothing. Default `"5m"`.
    #[serde(default = "default_fault_budget", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub fault_budget: std::time::Duration,
    /// Not in the file: set by `sluice run --new-pipeline`, which starts the pipeline as
    /// new on a table that has no mark of it even though the table's history was cut
    /// (where sluice cannot tell whether the pipeline committed before, and refuses).
    #[serde(skip)]
    pub assume_new: bool,
}

const fn default_fault_budget() -> std::time::Duration {
    std::time::Duration::from_secs(300)
}

const fn default_on_invalid() -> OnInvalid {
    OnInvalid::DeadLetter
}

/// A whole pipeline file.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PipelineConfig {
    /// Name and behaviour of the pipeline.
    pub pipeline: PipelineSection,
    /// Where records come from.
    pub source: KafkaSourceConfig,
    /// When batches run and how large they may be.
    #[serde(default)]
    pub trigger: TriggerConfig,
    /// Engine-wide plugin settings.
    #[serde(default)]
    pub runtime: RuntimeConfig,
    /// Plugin stages, run in order on every batch.
    #[serde(default)]
    pub stages: Vec<StageConfig>,
    /// The Iceberg table.
    pub sink: IcebergSinkConfig,
    /// The dead-letter topic; required unless `pipeline.on-invalid = "fail"`.
    #[serde(default)]
    pub dead_letter: Option<DeadLetterConfig>,
    /// Event time: the watermark and what becomes of late events. Required by `[dedup]`
    /// and `[[windows]]`.
    #[serde(default)]
    pub event_time: Option<EventTimeConfig>,
    /// Drop repeated events within the watermark.
    #[serde(default)]
    pub dedup: Option<DedupConfig>,
    /// Windowed aggregates of the on-time, deduplicated events.
    #[serde(default)]
    pub windows: Vec<WindowConfig>,
    /// Stream-stream joins of the on-time, deduplicated events with the records of other
    /// topics. Each join's `right-topic` is added to the topics the source reads (after
    /// parsing: `source.topics` then lists it), its records going to the join alone.
    #[serde(default)]
    pub joins: Vec<JoinConfig>,
    /// The admin HTTP API (status, metrics, plugin uploads and swaps); off by default.
    #[serde(default)]
    pub admin: Option<AdminConfig>,
    /// Lookup tables plugins read by key, refreshed between batches (see
    /// [`crate::lookup`]).
    #[serde(default)]
    pub lookups: Vec<LookupConfig>,
}

/// A pipeline file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A `${VAR}` could not be substituted.
    #[error("{path}: {error}")]
    Env {
        /// The file.
        path: PathBuf,
        /// Why.
        error: SubstError,
    },
    /// The file is not valid TOML, or a key is unknown, missing or of the wrong type.
    #[error("{path}:{line}: {}{message}", if key.is_empty() { String::new() } else { format!("`{key}`: ") })]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line (after substitution, which never adds lines).
        line: usize,
        /// Dotted path of the key, when known.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The values do not make sense together.
    #[error("{path}: {message}")]
    Inconsistent {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Kafka client properties that this build cannot honour (`sluice run --check`).
    #[error("{path}: {error}")]
    Kafka {
        /// The file.
        path: PathBuf,
        /// Every problem found.
        error: crate::kafka::check::CheckError,
    },
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl PipelineConfig {
    /// Every table the pipeline writes: the main table, then the window and join tables
    /// (whose compaction sorts nothing: `sort-by` names the main table's columns).
    pub fn tables(&self) -> Vec<IcebergSinkConfig> {
        let windows = self
            .windows
            .iter()
            .filter_map(|w| crate::sink::window::table_config(w, &self.sink));
        let joins = self
            .joins
            .iter()
            .filter_map(|j| crate::sink::join::table_config(j, &self.sink));
        let derived = windows.chain(joins).map(|mut table| {
            if let Some(compact) = &mut table.compact {
                compact.sort_by.clear();
            }
            table
        });
        std::iter::once(self.sink.clone()).chain(derived).collect()
    }

    /// Reads, substitutes and parses `path`; plugin paths become relative to its folder.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        let mut config = Self::parse(&text, path)?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.runtime.resolve_paths(base);
        if let Some(file) = &mut config.source.schema_file
            && file.is_relative()
        {
            *file = base.join(&*file);
        }
        for stage in &mut config.stages {
            if stage.plugin.is_relative() {
                stage.plugin = base.join(&stage.plugin);
            }
            for path in [&mut stage.samples, &mut stage.shadow]
                .into_iter()
                .flatten()
            {
                if path.is_relative() {
                    *path = base.join(&*path);
                }
            }
        }
        Ok(config)
    }

    /// Substitutes and parses `text`; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let substituted = substitute_env(text).map_err(|error| ConfigError::Env {
            path: path.to_owned(),
            error,
        })?;
        let text = substituted.text.as_str();
        // Messages never show a value that came from the environment (a secret), in any
        // form: see `Substituted::hide`.
        let invalid = |span: Option<std::ops::Range<usize>>, key: String, message: &str| {
            ConfigError::Invalid {
                path: path.to_owned(),
                line: span.as_ref().map_or(1, |s| line_of(text, s.start)),
                key: substituted.redact(&key),
                message: substituted.hide(message, span),
            }
        };
        let de = toml::Deserializer::parse(text)
            .map_err(|e| invalid(e.span(), String::new(), e.message()))?;
        let config: PipelineConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let key = if key == "." { String::new() } else { key };
            invalid(inner.span(), key, inner.message())
        })?;
        config
            .check()
            .map_err(|message| ConfigError::Inconsistent {
                path: path.to_owned(),
                message: substituted.redact(&message),
            })?;
        let mut config = config;
        for join in &config.joins {
            config.source.topics.push(join.right_topic.clone());
        }
        Ok(config)
    }

    /// The topics read for the joins' right sides: their records go to the joins alone.
    pub fn right_topics(&self) -> impl Iterator<Item = &str> {
        self.joins.iter().map(|j| j.right_topic.as_str())
    }

    /// Whether processes share this pipeline as one active and standbys: an event-time
    /// pipeline (its windows and dedup need every partition in one place) in `mode =
    /// "group"`, unless its state is split by partition (`scale-out = "partitions"`).
    pub fn active_standby(&self) -> bool {
        self.event_time
            .as_ref()
            .is_some_and(|et| et.scale_out == ScaleOut::Standby)
            && self.source.mode == SourceMode::Group
    }

    /// Whether every process of a group runs the event-time pipeline on its partitions,
    /// each partition's state its own (`scale-out = "partitions"`).
    pub fn partitioned_state(&self) -> bool {
        self.event_time
            .as_ref()
            .is_some_and(|et| et.scale_out == ScaleOut::Partitions)
            && self.source.mode == SourceMode::Group
    }

    /// The source's consumer as `sluice run` makes it: with active and standby processes
    /// the active one assigns itself every partition (`mode = "assign"`); with state by
    /// partition and joins, the group assigns partitions by range (unless `[source]
    /// properties` name a strategy), which gives one member partition `p` of every topic
    /// of equal partition counts: a join's right partition with its left one.
    pub fn source_client(&self) -> KafkaSourceConfig {
        let mut source = self.source.clone();
        if self.active_standby() {
            source.mode = SourceMode::Assign;
        }
        if self.partitioned_state() && !self.joins.is_empty() {
            source
                .properties
                .entry(ASSIGNMENT_STRATEGY.into())
                .or_insert_with(|| "range".into());
        }
        source
    }

    /// Threads for plugins and encoding.
    pub fn threads(&self) -> usize {
        self.pipeline
            .threads
            .unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
            })
            .max(1)
    }
}
