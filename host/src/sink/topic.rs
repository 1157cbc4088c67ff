//! Output topics: writing keyed records to a topic and waiting for the acknowledgement,
//! behind the [`Topic`] trait (Kafka in production, memory in tests); reading a Kafka topic
//! back. Shared by the dead letters, the late-data topic and the window results.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

pub use crate::kafka::target::{PRODUCER_DEFAULTS, TopicTarget, producer_config};
use crate::kafka::{
    ClientKind, Connection, Deliveries, KafkaError, REACH_TIMEOUT, ensure_topic, partition_count,
    reach,
};

/// Writing to a topic failed.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// The producer could not be created or the topic could not be made.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// A record could not be queued.
    #[error("cannot send to topic `{topic}`: {error}")]
    Send {
        /// The topic.
        topic: String,
        /// What librdkafka said.
        error: rdkafka::error::KafkaError,
    },
    /// A topic that must have a partition count has another (a repartition topic made
    /// before, or by the broker's automatic creation).
    #[error(
        "topic `{topic}` has {found} partitions, and must have {wanted} (the source topic's): delete it, or make it with {wanted}"
    )]
    Partitions {
        /// The topic.
        topic: String,
        /// What it must have.
        wanted: i32,
        /// What the broker lists (0: none).
        found: i32,
    },
    /// Records were not acknowledged.
    #[error("{failed} records to `{topic}` were not acknowledged: {first}")]
    NotAcknowledged {
        /// The topic.
        topic: String,
        /// How many.
        failed: u64,
        /// The first error.
        first: String,
    },
}

/// One record to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing<'a> {
    /// The partition; `None`: the producer's partitioner places the record by its key.
    pub partition: Option<i32>,
    /// The key.
    pub key: Option<&'a [u8]>,
    /// The value.
    pub value: Option<&'a [u8]>,
    /// The headers, in order.
    pub headers: Vec<(&'a str, Option<&'a [u8]>)>,
}

/// A topic that records are delivered to, at least once: Kafka in production
/// ([`KafkaTopic`]), memory in tests ([`super::memory::MemoryTopics`]).
pub trait Topic: Send {
    /// The topic's name.
    fn name(&self) -> &str;

    /// Sends `records` and waits until every one is acknowledged. Returns how many were
    /// sent.
    fn send_all(&self, records: Vec<Outgoing<'_>>) -> Result<u64, TopicError>;
}

/// Opens output topics: [`KafkaTopics`] in production, [`super::memory::MemoryTopics`] in
/// tests.
pub trait Topics: Send + Sync {
    /// Opens `target` for sending, creating the topic (one partition) if absent.
    fn open(&self, target: &TopicTarget) -> Result<Box<dyn Topic>, TopicError> {
        self.open_partitioned(target, 1)
    }

    /// Opens `target` for sending, creating the topic with `partitions` partitions if
    /// absent (a repartition topic, whose records are sent to partitions of their own).
    fn open_partitioned(
        &self,
        target: &TopicTarget,
        partitions: i32,
    ) -> Result<Box<dyn Topic>, TopicError>;
}

/// Opens Kafka topics.
#[derive(Debug, Clone, Copy, Default)]
pub struct KafkaTopics;

impl Topics for KafkaTopics {
    fn open_partitioned(
        &self,
        target: &TopicTarget,
        partitions: i32,
    ) -> Result<Box<dyn Topic>, TopicError> {
        Ok(Box::new(KafkaTopic::new(target, partitions)?))
    }
}

/// Sends records to one Kafka topic, at least once.
pub struct KafkaTopic {
    topic: String,
    producer: ThreadedProducer<Deliveries>,
    ack_timeout: Duration,
}

impl std::fmt::Debug for KafkaTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaTopic")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl KafkaTopic {
    /// Connects to `target`, creating its topic (`partitions` partitions, the broker's
    /// default replication factor) if absent.
    pub fn new(target: &TopicTarget, partitions: i32) -> Result<Self, TopicError> {
        reach(&target.connection, ClientKind::Producer, REACH_TIMEOUT)?;
        let client = producer_config(&target.connection);
        ensure_topic(&client, &target.topic, partitions, Duration::from_secs(30))?;
        if partitions > 1 {
            let found = partition_count(&client, &target.topic, Duration::from_secs(30))?;
            if found != Some(partitions) {
                return Err(TopicError::Partitions {
                    topic: target.topic.clone(),
                    wanted: partitions,
                    found: found.unwrap_or(0),
                });
            }
        }
        let producer = client
            .create_with_context(Deliveries::default())
            .map_err(|error| target.connection.client_error(error))?;
        Ok(KafkaTopic {
            topic: target.topic.clone(),
            producer,
            ack_timeout: target.ack_timeout,
        })
    }

    /// Queues one record, waiting while librdkafka's queue is full.
    fn queue(&self, record: Outgoing<'_>) -> Result<(), TopicError> {
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for (key, value) in record.headers {
            headers = headers.insert(Header { key, value });
        }
        let mut message = BaseRecord::to(&self.topic).headers(headers);
        if let Some(partition) = record.partition {
            message = message.partition(partition);
        }
        if let Some(key) = record.key {
            message = message.key(key);
        }
        if let Some(value) = record.value {
            message = message.payload(value);
        }
        loop {
            match self.producer.send(message) {
                Ok(()) => return Ok(()),
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
                    return Err(TopicError::Send {
                        topic: self.topic.clone(),
                        error,
                    });
                }
            }
        }
    }
}

impl Topic for KafkaTopic {
    fn name(&self) -> &str {
        &self.topic
    }

    fn send_all(&self, records: Vec<Outgoing<'_>>) -> Result<u64, TopicError> {
        let context = self.producer.context();
        let before = (context.delivered(), context.failed());
        let sent = records.len() as u64;
        for record in records {
            self.queue(record)?;
        }
        if sent == 0 {
            return Ok(0);
        }
        self.producer
            .flush(self.ack_timeout)
            .map_err(|error| TopicError::Send {
                topic: self.topic.clone(),
                error,
            })?;
        let failed = context.failed() - before.1;
        let delivered = context.delivered() - before.0;
        if failed > 0 || delivered < sent {
            return Err(TopicError::NotAcknowledged {
                topic: self.topic.clone(),
                failed: failed.max(sent - delivered),
                first: context
                    .first_error()
                    .unwrap_or_else(|| "no acknowledgement".into()),
            });
        }
        Ok(sent)
    }
}

/// One record read back from a topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TopicRecord {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// The key, as text.
    pub key: Option<String>,
    /// The value, as text (invalid UTF-8 replaced).
    pub value: Option<String>,
    /// All headers, as text.
    pub headers: BTreeMap<String, String>,
}

/// Reads every record of `topic` on `connection` (from the earliest offset to the end seen
/// now), without committing. For `sluice show` and tests.
pub fn read_all(
    connection: &Connection,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<TopicRecord>, TopicError> {
    reach(connection, ClientKind::Consumer, REACH_TIMEOUT)?;
    let consumer = show_consumer(connection)?;
    let (assignment, mut ends) = ranges(&consumer, topic, timeout)?;
    let mut out = Vec::new();
    if ends.is_empty() {
        return Ok(out);
    }
    consumer.assign(&assignment).map_err(request(topic))?;
    let deadline = std::time::Instant::now() + timeout;
    while !ends.is_empty() && std::time::Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = message.map_err(request(topic))?;
        if ends
            .get(&m.partition())
            .is_some_and(|&end| m.offset() + 1 >= end)
        {
            ends.remove(&m.partition());
        }
        out.push(topic_record(&m));
    }
    out.sort_by_key(|d| (d.partition, d.offset));
    Ok(out)
}

/// What a failed request to read `topic` is.
fn request(topic: &str) -> impl Fn(rdkafka::error::KafkaError) -> TopicError + '_ {
    move |error| TopicError::Send {
        topic: topic.to_string(),
        error,
    }
}

/// A consumer that never commits, for reading a topic from its start.
fn show_consumer(connection: &Connection) -> Result<BaseConsumer, TopicError> {
    let consumer = connection
        .client_config(&[("group.id", "sluice-show"), ("enable.auto.commit", "false")])
        .create()
        .map_err(|error| connection.client_error(error))?;
    Ok(consumer)
}

/// The partitions of `topic` that hold records, each from its earliest offset, and the
/// offset each one ends at (its high watermark) now.
fn ranges(
    consumer: &BaseConsumer,
    topic: &str,
    timeout: Duration,
) -> Result<(rdkafka::TopicPartitionList, BTreeMap<i32, i64>), TopicError> {
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(request(topic))?;
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
                .map_err(request(topic))?;
            if high > low {
                ends.insert(p.id(), high);
                assignment
                    .add_partition_offset(topic, p.id(), rdkafka::Offset::Offset(low))
                    .map_err(request(topic))?;
            }
        }
    }
    Ok((assignment, ends))
}

/// A message as text (invalid UTF-8 replaced).
fn topic_record(m: &rdkafka::message::BorrowedMessage<'_>) -> TopicRecord {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let headers = crate::kafka::headers::headers_of(m)
        .into_iter()
        .map(|h| (h.name, h.value.as_deref().map(text).unwrap_or_default()))
        .collect();
    TopicRecord {
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(text),
        value: m.payload().map(text),
        headers,
    }
}
