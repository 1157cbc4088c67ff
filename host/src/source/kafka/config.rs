//! The `[source]` section: the Kafka topics, and how the pipeline starts on them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::format::{Format, RegistryConfig};
use crate::kafka::Connection;

/// Where a brand-new pipeline starts reading.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum StartingOffsets {
    /// The earliest record still in each partition.
    Earliest,
    /// Only records produced after the pipeline first starts.
    Latest,
}

/// What the source does when unread records are gone (see
/// [`KafkaSourceConfig::on_data_loss`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum OnDataLoss {
    /// Stop with a message.
    Fail,
    /// Read on from the earliest record; record the loss in the commit.
    Continue,
}

const fn default_on_data_loss() -> OnDataLoss {
    OnDataLoss::Fail
}

/// How the source gets its partitions.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SourceMode {
    /// Every partition of the topics, assigned by sluice itself: one process runs the
    /// pipeline (a second one is fenced off the table).
    Assign,
    /// A share of the partitions, given by Kafka's consumer group (`group-id`) with
    /// cooperative-sticky assignment: several processes run the pipeline, each reading and
    /// committing the partitions it owns. An event-time pipeline is not split: one process
    /// is active and reads every partition, the others stand by ([`crate::election`]).
    Group,
}

/// The Kafka source.
///
/// ```toml
/// [source]
/// bootstrap-servers = "${KAFKA_BOOTSTRAP:-localhost:9092}"
/// topics = ["retail-clickstream-events"]
/// group-id = "sluice-retail-clickstream"
/// mode = "assign"
/// starting-offsets = "earliest"
/// properties = { "client.id" = "sluice" }
/// format = "json"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KafkaSourceConfig {
    /// Kafka bootstrap servers, `host:port[,host:port...]`.
    pub bootstrap_servers: String,
    /// Topics to read. Every partition of each is read, including partitions added while
    /// the pipeline runs (from their earliest offset).
    pub topics: Vec<String>,
    /// Consumer group: with `mode = "group"`, the processes of the pipeline share its
    /// partitions through it; in both modes offsets are committed to it after each table
    /// commit, for lag monitoring. Defaults to `sluice-<pipeline name>`. It never decides
    /// where reading resumes: the table does.
    #[serde(default)]
    pub group_id: Option<String>,
    /// `assign` (default: one process reads every partition) or `group` (several
    /// processes share the partitions through the consumer group; for an event-time
    /// pipeline, one active process and standbys).
    #[serde(default = "default_mode")]
    pub mode: SourceMode,
    /// Where a brand-new pipeline (one that never committed to its table) starts:
    /// `earliest` or `latest`. Ignored once the table holds the pipeline's offsets.
    #[serde(default = "default_starting")]
    pub starting_offsets: StartingOffsets,
    /// What to do when records the pipeline has not read are gone: deleted by retention
    /// first, or in a topic deleted and created again (or on a replaced broker) since the
    /// last commit. `fail` (default) stops with a message naming the partition; `continue`
    /// reads on from the earliest record there is and records the loss in the next
    /// commit's summary (`sluice.data-loss`). Spark's `failOnDataLoss`.
    #[serde(default = "default_on_data_loss")]
    pub on_data_loss: OnDataLoss,
    /// Longest time to wait for records that the end offsets say exist, e.g. `"60s"`.
    #[serde(default = "default_fetch_timeout", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub fetch_timeout: Duration,
    /// librdkafka properties (`security.protocol`, `ssl.ca.location`, `sasl.*`...) of
    /// every Kafka client the pipeline makes: the source's consumer, the election's, the
    /// producers of the dead letters, the late topic and the window topics (each output's
    /// own `properties` win over these), and `sluice show`'s readers. They override
    /// sluice's defaults.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    /// How record values are encoded: `json` (default: a JSON object per record),
    /// `avro` or `protobuf` (with `[source.schema-registry]`, in the Confluent wire
    /// format; with `schema-file`, bare datums or messages of that schema).
    #[serde(default)]
    pub format: Format,
    /// The Schema Registry of an Avro or Protobuf topic's writer schemas (Confluent REST
    /// API). With it, a new pipeline may omit `[sink] columns`: the table is created from
    /// the latest schema of the subject `<first topic>-value`.
    #[serde(default)]
    pub schema_registry: Option<RegistryConfig>,
    /// A schema file (`.avsc` or `.proto`, relative to the configuration file) that every
    /// record value was written with, as a bare datum or message (no wire-format header),
    /// for topics without a registry. A new pipeline may then omit `[sink] columns`.
    #[serde(default)]
    pub schema_file: Option<std::path::PathBuf>,
    /// Protobuf: the records' message type (its full name, or relative to the file's
    /// package), in `schema-file`; with a registry, the message a new table is made from
    /// (records name their own). Default: the file's first message.
    #[serde(default)]
    pub message: Option<String>,
    /// The field of the event (a path, like the event-time fields) that the topics'
    /// producers keyed their records by: every record of one value of it sits in one
    /// partition, where the producer's partitioner puts the value's text. Event-time
    /// state keyed by this field can then be split by partition. Every record is checked
    /// against it, and a record in another partition stops the pipeline before its batch
    /// commits, naming the record (see the docs' "Scale-out").
    #[serde(default)]
    pub keyed_by: Option<String>,
    /// The producers' partitioner with `keyed-by`: `"murmur2"` (Kafka's Java client,
    /// librdkafka's `murmur2_random`) or `"crc32"` (librdkafka's default, and clients built
    /// on it). Default: whichever places every record read so far.
    #[serde(default)]
    pub partitioner: Option<crate::kafka::partitioner::Partitioner>,
}

impl KafkaSourceConfig {
    /// How every client of the pipeline reaches the cluster: the bootstrap servers and
    /// `properties`.
    pub fn connection(&self) -> Connection {
        Connection::new(self.bootstrap_servers.clone(), self.properties.clone())
    }

    /// The subject of the first topic's value schemas (the registry's default
    /// `TopicNameStrategy`).
    pub fn value_subject(&self) -> String {
        format!("{}-value", self.topics.first().map_or("", String::as_str))
    }
}

const fn default_mode() -> SourceMode {
    SourceMode::Assign
}

const fn default_starting() -> StartingOffsets {
    StartingOffsets::Earliest
}

const fn default_fetch_timeout() -> Duration {
    Duration::from_secs(60)
}
