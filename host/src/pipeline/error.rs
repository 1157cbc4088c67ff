//! How a pipeline fails: [`PipelineError`], and what its variants say of a batch (fenced
//! off the table, its schema moved, a refused event).

use super::crash::CrashPoint;
use super::stages::StageError;
use crate::admin::AdminError;
use crate::checkpoint::MarkError;
use crate::encode::SchemaError;
use crate::event_time::state::StateError;
use crate::format::RegistryError;
use crate::iceberg::IcebergError;
use crate::lookup::load::LookupError;
use crate::plugin::PluginError;
use crate::sink::OutputError;
use crate::source::SourceError;

/// The pipeline failed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A plugin could not be loaded.
    #[error("stage: {0}")]
    Udf(#[from] PluginError),
    /// A stage's plugin failed a check at start.
    #[error("{0}")]
    Stage(#[from] StageError),
    /// The admin API could not start.
    #[error("{0}")]
    Admin(#[from] AdminError),
    /// The source failed.
    #[error("source: {0}")]
    Source(#[from] SourceError),
    /// The table failed.
    #[error("sink: {0}")]
    Sink(#[from] IcebergError),
    /// An output failed.
    #[error("{0}")]
    Output(#[from] OutputError),
    /// The table's schema cannot be encoded.
    #[error("table schema: {0}")]
    Schema(#[from] SchemaError),
    /// The saved event-time state cannot be used.
    #[error("event-time state: {0}")]
    State(String),
    /// The table cannot say where the pipeline stands (its history was cut and it holds
    /// no mark of the pipeline), or what it records cannot be read.
    #[error("{0}")]
    Checkpoint(String),
    /// The saved event-time state cannot be read or written.
    #[error("event-time state: {0}")]
    StateFile(#[from] StateError),
    /// A commit mark in the table cannot be read.
    #[error(transparent)]
    Mark(#[from] MarkError),
    /// A lookup table cannot be loaded.
    #[error("{0}")]
    Lookup(#[from] LookupError),
    /// The source's format cannot be set up (`format`, `schema-registry`, `schema-file`).
    #[error("source format: {0}")]
    Format(String),
    /// The Schema Registry gave no schema.
    #[error("source: {0}")]
    Registry(#[from] RegistryError),
    /// An event was refused and `on-invalid = "fail"`.
    #[error(
        "event {position} refused by {stage} ({code}): {message}; nothing of this batch was committed (on-invalid = \"fail\")"
    )]
    Invalid {
        /// `topic/partition@offset`.
        position: String,
        /// The stage, or `encode`.
        stage: String,
        /// The code.
        code: String,
        /// The reason.
        message: String,
    },
    /// A source topic is not keyed by the field `[source] keyed-by` declares: a record
    /// sits in another partition than the producer's partitioner gives its key.
    #[error(
        "{what} `{topic}` is not keyed by `{field}` ({declared}): {verdict}; nothing of this batch was committed"
    )]
    NotKeyed {
        /// What the topic is to the pipeline: `source topic`, `join right topic`.
        what: &'static str,
        /// The topic.
        topic: String,
        /// Where its key is declared: `source.keyed-by`, or the join's key that holds it.
        declared: String,
        /// The declared field.
        field: String,
        /// What its records say ([`crate::event_time::keyed::Keyed`]).
        verdict: String,
    },
    /// With state by partition, a join's right topic is not partitioned as the source
    /// topic: another partition count, or the group gave this process partition `p` of
    /// one and not of the other.
    #[error(
        "join right topic `{right}` is not co-partitioned with source topic `{left}` (scale-out = \"partitions\" needs partition p of both in one process): {why}"
    )]
    NotCoPartitioned {
        /// The source topic.
        left: String,
        /// The join's right topic.
        right: String,
        /// What differs.
        why: String,
    },
    /// A repartition topic cannot be set up (stage one, see
    /// [`crate::event_time::repartition`]).
    #[error("repartition topic `{topic}`: {why}")]
    Repartition {
        /// The topic.
        topic: String,
        /// Why.
        why: String,
    },
    /// A crash was injected on purpose ([`crash::Crash::Fail`]).
    #[error("crash injected at {} of batch {batch_id}", .point.name())]
    Crashed {
        /// Where.
        point: CrashPoint,
        /// The batch.
        batch_id: u64,
    },
}

impl PipelineError {
    /// `on-invalid = "fail"` met `record`, refused for `reason`.
    pub(crate) fn invalid(record: &crate::record::Record, reason: &crate::record::Reason) -> Self {
        PipelineError::Invalid {
            position: record.position(),
            stage: reason.stage.clone(),
            code: reason.code.clone(),
            message: reason.message.to_string(),
        }
    }

    /// Whether the batch's schema change was planned against a schema that is no longer
    /// the table's.
    pub fn is_schema_moved(&self) -> bool {
        matches!(
            self,
            PipelineError::Output(OutputError::Table { error, .. })
                if matches!(**error, IcebergError::SchemaMoved { .. })
        )
    }

    /// A table refused the batch's commit because another commit came in between (not a
    /// schema that moved).
    pub fn is_fenced_off(&self) -> bool {
        matches!(
            self,
            PipelineError::Output(OutputError::Table { error, .. })
                if matches!(**error, IcebergError::Fenced { .. })
        )
    }

    /// A batch whose schema change was planned against a schema that moved since is
    /// fenced off too: it is read and encoded again.
    pub fn is_fenced(&self) -> bool {
        matches!(
            self,
            PipelineError::Output(OutputError::Table { error, .. })
                if matches!(**error, IcebergError::Fenced { .. } | IcebergError::SchemaMoved { .. })
        )
    }
}
