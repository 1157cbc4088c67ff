//! The dead-letter sink: records that a plugin rejected, that failed in a plugin, or that
//! do not fit the table, sent to a Kafka topic with the reason in headers.
//!
//! Each dead-letter record keeps the original key and value and headers, and adds:
//!
//! | header | value |
//! |---|---|
//! | `sluice.error.stage` | the stage that refused it (`encode` for the table's schema) |
//! | `sluice.error.code` | machine-readable code (`invalid_event_type`, `type_mismatch`...) |
//! | `sluice.error.message` | the reason, for people |
//! | `sluice.error.field` | the offending field, when one is to blame |
//! | `sluice.stage.digest` | sha256 of the plugin that refused it (plugin stages only) |
//! | `sluice.source.topic`, `.partition`, `.offset`, `.timestamp` | where it came from |
//! | `sluice.pipeline`, `sluice.batch-id` | which pipeline and batch |
//!
//! Dead-letter delivery is at least once: a batch's records are acknowledged before its
//! table commit, so a crash between the two re-sends them on restart. `sluice.source.*`
//! identify a record uniquely, so a consumer can drop repeats.

use std::time::Duration;

use std::collections::BTreeMap;

use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use serde::Deserialize;

use super::topic::{Outgoing, TopicSink};
pub use super::topic::{TopicError as DeadLetterError, TopicRecord as DeadLetter, read_all};
use crate::record::Record;

/// The dead-letter topic.
///
/// ```toml
/// [dead-letter]
/// topic = "retail-clickstream-dead-letter"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DeadLetterConfig {
    /// The topic. Created (one partition) if absent.
    pub topic: String,
    /// Bootstrap servers of the dead-letter cluster; default: the source's.
    #[serde(default)]
    pub bootstrap_servers: Option<String>,
    /// Longest wait for the broker to acknowledge a batch's dead-letter records.
    #[serde(default = "default_ack_timeout", with = "crate::units::duration")]
    pub ack_timeout: Duration,
    /// Extra librdkafka producer properties.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

const fn default_ack_timeout() -> Duration {
    Duration::from_secs(60)
}

/// Why a record is dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// Stage name, or `encode`.
    pub stage: String,
    /// The stage's plugin digest, if a plugin refused it.
    pub digest: Option<String>,
    /// Machine-readable code.
    pub code: String,
    /// Message for people.
    pub message: String,
    /// Offending field.
    pub field: Option<String>,
}

/// Sends dead-letter records to a Kafka topic.
#[derive(Debug)]
pub struct DeadLetterSink {
    topic: TopicSink,
}

impl DeadLetterSink {
    /// Connects, creating the topic if absent. `bootstrap` is the source's servers.
    pub fn new(config: &DeadLetterConfig, bootstrap: &str) -> Result<Self, DeadLetterError> {
        let bootstrap = config.bootstrap_servers.as_deref().unwrap_or(bootstrap);
        Ok(DeadLetterSink {
            topic: TopicSink::new(
                bootstrap,
                &config.topic,
                &config.properties,
                config.ack_timeout,
            )?,
        })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        self.topic.topic()
    }

    /// Sends `records` with their reasons and waits until the broker acknowledged all.
    pub fn send_all<'a>(
        &self,
        records: impl IntoIterator<Item = (&'a Record, &'a Reason)>,
        pipeline: &str,
        batch_id: u64,
    ) -> Result<u64, DeadLetterError> {
        let batch = batch_id.to_string();
        let outgoing = records.into_iter().map(|(record, reason)| {
            let partition = record.partition.to_string();
            let offset = record.offset.to_string();
            let timestamp = record.timestamp_ms.map(|t| t.to_string());
            let mut headers = OwnedHeaders::new_with_capacity(record.headers.len() + 12);
            for h in &record.headers {
                headers = headers.insert(KafkaHeader {
                    key: &h.name,
                    value: h.value.as_deref(),
                });
            }
            let added = [
                ("sluice.error.stage", Some(reason.stage.as_str())),
                ("sluice.error.code", Some(&reason.code)),
                ("sluice.error.message", Some(&reason.message)),
                ("sluice.error.field", reason.field.as_deref()),
                ("sluice.stage.digest", reason.digest.as_deref()),
                ("sluice.source.topic", Some(&record.topic)),
                ("sluice.source.partition", Some(&partition)),
                ("sluice.source.offset", Some(&offset)),
                ("sluice.source.timestamp", timestamp.as_deref()),
                ("sluice.pipeline", Some(pipeline)),
                ("sluice.batch-id", Some(&batch)),
            ];
            for (key, value) in added {
                if let Some(value) = value {
                    headers = headers.insert(KafkaHeader {
                        key,
                        value: Some(value.as_bytes()),
                    });
                }
            }
            Outgoing {
                key: record.key.as_deref(),
                value: record.value.as_deref(),
                headers,
            }
        });
        self.topic.send_all(outgoing)
    }
}
