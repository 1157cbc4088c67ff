//! The Kafka source (rdkafka's `BaseConsumer`, with manual partition assignment).
//!
//! sluice assigns every partition of its topics to itself instead of letting the consumer
//! group balance them: where to read from is decided by the offsets in the table, not by
//! the group, so one process owns the whole pipeline. The group id is still used to commit
//! offsets after each table commit, so that the usual lag tools work.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde::Deserialize;

use super::{Offsets, Source, SourceError, TopicPartition};
use crate::batch::Caps;
use crate::kafka::{KafkaError, client_config};
use crate::record::{Header, Record};

/// Where a brand-new pipeline starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartingOffsets {
    /// The earliest record still in each partition.
    Earliest,
    /// Only records produced after the pipeline first starts.
    Latest,
}

/// The Kafka source.
///
/// ```toml
/// [source]
/// bootstrap-servers = "${KAFKA_BOOTSTRAP:-localhost:9092}"
/// topics = ["retail-clickstream-events"]
/// group-id = "sluice-retail-clickstream"
/// starting-offsets = "earliest"
/// properties = { "client.id" = "sluice" }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KafkaSourceConfig {
    /// Kafka bootstrap servers, `host:port[,host:port...]`.
    pub bootstrap_servers: String,
    /// Topics to read. Every partition of each is read, including partitions added while
    /// the pipeline runs (from their earliest offset).
    pub topics: Vec<String>,
    /// Consumer group to which offsets are committed after each table commit, for lag
    /// monitoring. Defaults to `sluice-<pipeline name>`. It never decides where reading
    /// resumes: the table does.
    #[serde(default)]
    pub group_id: Option<String>,
    /// Where a brand-new pipeline (one that never committed to its table) starts:
    /// `earliest` or `latest`. Ignored once the table holds the pipeline's offsets.
    #[serde(default = "default_starting")]
    pub starting_offsets: StartingOffsets,
    /// Longest time to wait for records that the end offsets say exist, e.g. `"60s"`.
    #[serde(default = "default_fetch_timeout", with = "crate::units::duration")]
    pub fetch_timeout: Duration,
    /// Extra librdkafka consumer properties (`security.protocol`, `sasl.*`...). They
    /// override sluice's defaults.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

const fn default_starting() -> StartingOffsets {
    StartingOffsets::Earliest
}

const fn default_fetch_timeout() -> Duration {
    Duration::from_secs(60)
}

const METADATA_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);

/// A batch being read.
struct Reading {
    /// The target of each partition not done yet.
    pending: HashMap<TopicPartition, i64>,
    records: Vec<Record>,
    /// Bytes of keys and values in `records`.
    bytes: u64,
    /// Records fetched for an earlier batch, not looked at yet.
    stash: VecDeque<Record>,
    /// When the last record arrived.
    progress: Instant,
}

/// Reads Kafka topics.
pub struct KafkaSource {
    config: KafkaSourceConfig,
    /// The consumer group (lag monitoring only).
    group: String,
    consumer: BaseConsumer,
    topics: Vec<Arc<str>>,
    /// The next offset to hand out, per owned partition.
    positions: Offsets,
    /// Records fetched but beyond the last batch's target or caps, in fetch order.
    stash: VecDeque<Record>,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("topics", &self.config.topics)
            .field("positions", &self.positions)
            .finish_non_exhaustive()
    }
}

impl KafkaSource {
    /// Creates the consumer. `group` is the default group id.
    pub fn new(config: KafkaSourceConfig, group: &str) -> Result<Self, SourceError> {
        let group = config.group_id.clone().unwrap_or_else(|| group.to_string());
        let consumer = Self::consumer(&config, &group)?;
        let topics = config
            .topics
            .iter()
            .map(|t| Arc::from(t.as_str()))
            .collect();
        Ok(KafkaSource {
            config,
            group,
            consumer,
            topics,
            positions: Offsets::default(),
            stash: VecDeque::new(),
        })
    }

    fn consumer(config: &KafkaSourceConfig, group: &str) -> Result<BaseConsumer, SourceError> {
        let mut client = client_config(&config.bootstrap_servers, &[]);
        client
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("auto.offset.reset", "earliest");
        for (k, v) in &config.properties {
            client.set(k, v);
        }
        Ok(client.create().map_err(|error| KafkaError::Client {
            bootstrap: config.bootstrap_servers.clone(),
            error,
        })?)
    }

    fn request<T>(
        what: impl FnOnce() -> String,
        r: Result<T, rdkafka::error::KafkaError>,
    ) -> Result<T, SourceError> {
        r.map_err(|error| SourceError::Request {
            what: what(),
            error,
        })
    }

    /// Every partition of the configured topics, as the broker sees them now.
    fn partitions(&self) -> Result<Vec<TopicPartition>, SourceError> {
        let mut all = Vec::new();
        for topic in &self.topics {
            let metadata = Self::request(
                || format!("reading metadata of topic `{topic}`"),
                self.consumer.fetch_metadata(Some(topic), METADATA_TIMEOUT),
            )?;
            let found = metadata
                .topics()
                .iter()
                .find(|t| t.name() == &**topic)
                .filter(|t| t.error().is_none() && !t.partitions().is_empty())
                .ok_or_else(|| SourceError::NoSuchTopic(topic.to_string()))?;
            for p in found.partitions() {
                all.push(TopicPartition {
                    topic: topic.clone(),
                    partition: p.id(),
                });
            }
        }
        Ok(all)
    }

    fn watermarks(&self, tp: &TopicPartition) -> Result<(i64, i64), SourceError> {
        Self::request(
            || format!("reading end offsets of {tp}"),
            self.consumer
                .fetch_watermarks(&tp.topic, tp.partition, METADATA_TIMEOUT),
        )
    }

    /// Assigns the owned partitions at the current positions (replacing any assignment).
    fn assign(&mut self) -> Result<(), SourceError> {
        let mut tpl = TopicPartitionList::new();
        for (tp, &next) in &self.positions.0 {
            tpl.add_partition_offset(&tp.topic, tp.partition, Offset::Offset(next))
                .map_err(|error| SourceError::Request {
                    what: format!("assigning {tp}"),
                    error,
                })?;
        }
        self.stash.clear();
        Self::request(|| "assigning partitions".into(), self.consumer.assign(&tpl))
    }

    fn record(message: &rdkafka::message::BorrowedMessage<'_>, topic: &Arc<str>) -> Record {
        let headers = message
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| Header {
                        name: h.key.to_string(),
                        value: h.value.map(<[u8]>::to_vec),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Record {
            topic: topic.clone(),
            partition: message.partition(),
            offset: message.offset(),
            timestamp_ms: message.timestamp().to_millis(),
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers,
        }
    }

    /// Polls the consumer once. `None` when nothing usable arrived: partitions whose
    /// position passed their target meanwhile are then done, and a read that made no
    /// progress for `fetch-timeout` fails.
    fn poll(
        &mut self,
        batch: &mut Reading,
        stop: &AtomicBool,
    ) -> Result<Option<Record>, SourceError> {
        if stop.load(Ordering::Relaxed) {
            return Err(SourceError::Stopped);
        }
        match self.consumer.poll(POLL) {
            Some(Ok(message)) => Ok(self
                .topic_arc(message.topic())
                .map(|topic| Self::record(&message, &topic))),
            Some(Err(error)) => {
                tracing::warn!(%error, "Kafka consumer error (retrying)");
                Ok(None)
            }
            None => {
                self.settle_gaps(batch)?;
                if batch.progress.elapsed() > self.config.fetch_timeout {
                    let mut behind: Vec<String> =
                        batch.pending.keys().map(ToString::to_string).collect();
                    behind.sort();
                    return Err(SourceError::Stalled {
                        partitions: behind.join(", "),
                        seconds: self.config.fetch_timeout.as_secs(),
                    });
                }
                Ok(None)
            }
        }
    }

    /// Nothing fetched: partitions whose consumer position passed the target (a gap of
    /// control or compacted records) are done.
    fn settle_gaps(&mut self, batch: &mut Reading) -> Result<(), SourceError> {
        let positions = Self::request(
            || "reading consumer positions".into(),
            self.consumer.position(),
        )?;
        for e in positions.elements() {
            let (Offset::Offset(at), Some(topic)) = (e.offset(), self.topic_arc(e.topic())) else {
                continue;
            };
            let tp = TopicPartition {
                topic,
                partition: e.partition(),
            };
            if let Some(&end) = batch.pending.get(&tp)
                && at >= end
                && !batch
                    .stash
                    .iter()
                    .any(|r| r.partition == tp.partition && r.topic == tp.topic)
            {
                self.positions.set(tp.clone(), end);
                batch.pending.remove(&tp);
            }
        }
        Ok(())
    }

    /// Takes a fetched record into the batch, or stashes it for a later one.
    fn place(&mut self, record: Record, batch: &mut Reading) {
        let tp = TopicPartition {
            topic: record.topic.clone(),
            partition: record.partition,
        };
        let Some(position) = self.positions.get(&tp) else {
            return;
        };
        if record.offset < position {
            return; // already handed out (a re-fetch after re-assignment)
        }
        match batch.pending.get(&tp) {
            Some(&end) if record.offset < end => {
                batch.bytes += record.key.as_ref().map_or(0, |k| k.len() as u64)
                    + record.value.as_ref().map_or(0, |v| v.len() as u64);
                self.positions.set(tp.clone(), record.offset + 1);
                if record.offset + 1 >= end {
                    batch.pending.remove(&tp);
                }
                batch.records.push(record);
            }
            Some(&end) => {
                // Past the target with a gap before it (control or compacted records):
                // the partition is done for this batch.
                self.positions.set(tp.clone(), end);
                batch.pending.remove(&tp);
                self.stash.push_back(record);
            }
            None => self.stash.push_back(record), // beyond this batch's target
        }
    }

    fn topic_arc(&self, name: &str) -> Option<Arc<str>> {
        self.topics.iter().find(|t| &***t == name).cloned()
    }
}

impl Source for KafkaSource {
    fn start(&mut self, resume: Option<&Offsets>) -> Result<Offsets, SourceError> {
        if !self.positions.0.is_empty() {
            // Started again (after a fenced batch): a fresh consumer. Replacing a live
            // assignment and closing soon after trips an assertion in librdkafka
            // (`rd_kafka_assignment_partition_stopped`).
            self.consumer = Self::consumer(&self.config, &self.group)?;
            self.stash.clear();
        }
        let mut positions = Offsets::default();
        for tp in self.partitions()? {
            let next = match resume.and_then(|r| r.get(&tp)) {
                Some(next) => {
                    let (low, high) = self.watermarks(&tp)?;
                    if next > high {
                        return Err(SourceError::OffsetBeyondEnd {
                            partition: tp.to_string(),
                            next,
                            end: high,
                        });
                    }
                    if next < low {
                        tracing::warn!(partition = %tp, stored = next, earliest = low, lost = low - next,
                            "records between the stored offset and the earliest offset were deleted by retention before they were read");
                        low
                    } else {
                        next
                    }
                }
                None => {
                    let (low, high) = self.watermarks(&tp)?;
                    match (resume, self.config.starting_offsets) {
                        (None, StartingOffsets::Latest) => high,
                        _ => low,
                    }
                }
            };
            positions.set(tp, next);
        }
        self.positions = positions;
        self.assign()?;
        Ok(self.positions.clone())
    }

    fn end_offsets(&mut self) -> Result<Offsets, SourceError> {
        let mut ends = Offsets::default();
        let mut added = false;
        for tp in self.partitions()? {
            let (low, high) = self.watermarks(&tp)?;
            if self.positions.get(&tp).is_none() {
                tracing::info!(partition = %tp, offset = low, "new partition: reading from earliest");
                self.positions.set(tp.clone(), low);
                added = true;
            }
            ends.set(tp, high);
        }
        if added {
            // Re-assigning drops prefetched records: reading restarts at the positions.
            self.assign()?;
        }
        Ok(ends)
    }

    fn read(
        &mut self,
        until: &Offsets,
        caps: Caps,
        stop: &AtomicBool,
    ) -> Result<(Vec<Record>, Offsets), SourceError> {
        let mut batch = Reading {
            pending: until
                .0
                .iter()
                .filter(|(tp, end)| self.positions.get(tp).is_some_and(|p| p < **end))
                .map(|(tp, &end)| (tp.clone(), end))
                .collect(),
            records: Vec::new(),
            bytes: 0,
            stash: std::mem::take(&mut self.stash),
            progress: Instant::now(),
        };
        while !batch.pending.is_empty() && !caps.full(batch.records.len(), batch.bytes) {
            let record = match batch.stash.pop_front() {
                Some(record) => record,
                None => match self.poll(&mut batch, stop)? {
                    Some(record) => record,
                    None => continue,
                },
            };
            batch.progress = Instant::now();
            self.place(record, &mut batch);
        }
        // What was not looked at stays for the next batch, before what was fetched later.
        let mut stash = batch.stash;
        stash.extend(self.stash.drain(..));
        self.stash = stash;
        Ok((batch.records, self.positions.clone()))
    }
    fn acknowledge(&mut self, committed: &Offsets) {
        let mut tpl = TopicPartitionList::new();
        for (tp, &next) in &committed.0 {
            if tpl
                .add_partition_offset(&tp.topic, tp.partition, Offset::Offset(next))
                .is_err()
            {
                return;
            }
        }
        if let Err(error) = self.consumer.commit(&tpl, CommitMode::Async) {
            tracing::debug!(%error, "committing group offsets (monitoring only) failed");
        }
    }
}
