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

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header as KafkaHeader, Headers, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use serde::Deserialize;
use std::collections::BTreeMap;

use crate::kafka::{Deliveries, KafkaError, client_config, ensure_topic};
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

/// Sending dead-letter records failed.
#[derive(Debug, thiserror::Error)]
pub enum DeadLetterError {
    /// The producer could not be created or the topic could not be made.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// A record could not be queued.
    #[error("cannot send to dead-letter topic `{topic}`: {error}")]
    Send {
        /// The topic.
        topic: String,
        /// What librdkafka said.
        error: rdkafka::error::KafkaError,
    },
    /// Records were not acknowledged.
    #[error("{failed} dead-letter records to `{topic}` were not acknowledged: {first}")]
    NotAcknowledged {
        /// The topic.
        topic: String,
        /// How many.
        failed: u64,
        /// The first error.
        first: String,
    },
}

/// Sends dead-letter records to a Kafka topic.
pub struct DeadLetterSink {
    topic: String,
    producer: ThreadedProducer<Deliveries>,
    ack_timeout: Duration,
}

impl std::fmt::Debug for DeadLetterSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadLetterSink")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl DeadLetterSink {
    /// Connects, creating the topic if absent. `bootstrap` is the source's servers.
    pub fn new(config: &DeadLetterConfig, bootstrap: &str) -> Result<Self, DeadLetterError> {
        let bootstrap = config.bootstrap_servers.as_deref().unwrap_or(bootstrap);
        let mut client = client_config(bootstrap, &[]);
        client
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("enable.idempotence", "false");
        for (k, v) in &config.properties {
            client.set(k, v);
        }
        ensure_topic(&client, &config.topic, 1, Duration::from_secs(30))?;
        let producer = client
            .create_with_context(Deliveries::default())
            .map_err(|error| KafkaError::Client {
                bootstrap: bootstrap.to_string(),
                error,
            })?;
        Ok(DeadLetterSink {
            topic: config.topic.clone(),
            producer,
            ack_timeout: config.ack_timeout,
        })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Sends `records` with their reasons and waits until the broker acknowledged all.
    pub fn send_all<'a>(
        &self,
        records: impl IntoIterator<Item = (&'a Record, &'a Reason)>,
        pipeline: &str,
        batch_id: u64,
    ) -> Result<u64, DeadLetterError> {
        let before = (
            self.producer.context().delivered(),
            self.producer.context().failed(),
        );
        let mut sent = 0u64;
        let batch = batch_id.to_string();
        for (record, reason) in records {
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
            let mut message = BaseRecord::to(&self.topic).headers(headers);
            if let Some(key) = &record.key {
                message = message.key(key.as_slice());
            }
            if let Some(value) = &record.value {
                message = message.payload(value.as_slice());
            }
            loop {
                match self.producer.send(message) {
                    Ok(()) => break,
                    Err((
                        rdkafka::error::KafkaError::MessageProduction(
                            rdkafka::types::RDKafkaErrorCode::QueueFull,
                        ),
                        back,
                    )) => {
                        message = back;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err((error, _)) => {
                        return Err(DeadLetterError::Send {
                            topic: self.topic.clone(),
                            error,
                        });
                    }
                }
            }
            sent += 1;
        }
        if sent == 0 {
            return Ok(0);
        }
        self.producer
            .flush(self.ack_timeout)
            .map_err(|error| DeadLetterError::Send {
                topic: self.topic.clone(),
                error,
            })?;
        let context = self.producer.context();
        let failed = context.failed() - before.1;
        if failed > 0 || context.delivered() - before.0 < sent {
            return Err(DeadLetterError::NotAcknowledged {
                topic: self.topic.clone(),
                failed: failed.max(sent - (context.delivered() - before.0)),
                first: context
                    .first_error()
                    .unwrap_or_else(|| "no acknowledgement".into()),
            });
        }
        Ok(sent)
    }
}

/// One record read back from a dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeadLetter {
    /// Partition in the dead-letter topic.
    pub partition: i32,
    /// Offset in the dead-letter topic.
    pub offset: i64,
    /// The original key, as text.
    pub key: Option<String>,
    /// The original value, as text (invalid UTF-8 replaced).
    pub value: Option<String>,
    /// All headers, as text.
    pub headers: BTreeMap<String, String>,
}

/// Reads every record of `topic` (from the earliest offset to the end seen now), without
/// a consumer group. For `sluice show` and tests.
pub fn read_all(
    bootstrap: &str,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<DeadLetter>, DeadLetterError> {
    let request = |error| DeadLetterError::Send {
        topic: topic.to_string(),
        error,
    };
    let consumer: BaseConsumer = client_config(bootstrap, &[])
        .set("group.id", "sluice-show")
        .set("enable.auto.commit", "false")
        .create()
        .map_err(|error| KafkaError::Client {
            bootstrap: bootstrap.to_string(),
            error,
        })?;
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(request)?;
    let mut ends = BTreeMap::new();
    let mut assignment = rdkafka::TopicPartitionList::new();
    for t in metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
    {
        for p in t.partitions() {
            let (low, high) = consumer
                .fetch_watermarks(topic, p.id(), timeout)
                .map_err(request)?;
            if high > low {
                ends.insert(p.id(), high);
                assignment
                    .add_partition_offset(topic, p.id(), rdkafka::Offset::Offset(low))
                    .map_err(request)?;
            }
        }
    }
    let mut out = Vec::new();
    if ends.is_empty() {
        return Ok(out);
    }
    consumer.assign(&assignment).map_err(request)?;
    let deadline = std::time::Instant::now() + timeout;
    while !ends.is_empty() && std::time::Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = message.map_err(request)?;
        if ends
            .get(&m.partition())
            .is_some_and(|&end| m.offset() + 1 >= end)
        {
            ends.remove(&m.partition());
        }
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_string(), h.value.map(text).unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        out.push(DeadLetter {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(text),
            value: m.payload().map(text),
            headers,
        });
    }
    out.sort_by_key(|d| (d.partition, d.offset));
    Ok(out)
}
