//! The Kafka source (rdkafka's `BaseConsumer`, with manual partition assignment).
//!
//! sluice assigns every partition of its topics to itself instead of letting the consumer
//! group balance them: where to read from is decided by the offsets in the table, not by
//! the group, so one process owns the whole pipeline. The group id is still used to commit
//! offsets after each table commit, so that the usual lag tools work.

mod chunks;
mod config;
mod fetch;
mod group;
mod identity;
mod read;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use self::chunks::Chunks;
pub use self::config::{KafkaSourceConfig, OnDataLoss, SourceMode, StartingOffsets};
use self::fetch::Fetch;
use self::group::SourceContext;
pub(crate) use self::identity::fingerprint;
use super::identity::{Fingerprints, Mismatch};
use super::{Loss, Offsets, Source, SourceError, TopicPartition};
use crate::batch::Caps;
use crate::record::Record;

/// The earliest and end offsets of partitions.
type Watermarks = std::collections::BTreeMap<TopicPartition, (i64, i64)>;

/// The consumer's prefetch is this share of a batch's byte cap (`[trigger] max-bytes`)...
const PREFETCH_SHARE: u64 = 16;
/// ... at least this much ...
const MIN_PREFETCH: u64 = 1 << 20;
/// ... and at most librdkafka's own default.
const MAX_PREFETCH: u64 = 64 << 20;

/// The consumer's prefetch, sized from the batch `caps`: librdkafka's defaults queue up to
/// 64 MiB of fetched records (and fetch up to 50 MiB per broker at once) whatever the
/// batch, which was more than half of sluice's memory at 100 000 records per batch. A
/// sixteenth of `max-bytes` (4 MiB by default), between 1 and 64 MiB, kept the ingest
/// benchmark's read rate: librdkafka lowers `fetch.max.bytes` to it, and a partition whose
/// queue is full is fetched again after 10 ms instead of librdkafka's 1 s (which made a
/// small queue slow). `[source] properties` still win.
fn prefetch(caps: Caps) -> [(&'static str, String); 2] {
    let bytes = (caps.bytes / PREFETCH_SHARE).clamp(MIN_PREFETCH, MAX_PREFETCH);
    [
        ("queued.max.messages.kbytes", (bytes / 1024).to_string()),
        ("fetch.queue.backoff.ms", "10".to_string()),
    ]
}

const METADATA_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);

/// Reads Kafka topics.
pub struct KafkaSource {
    config: KafkaSourceConfig,
    /// The consumer group.
    group: String,
    /// In `mode = "assign"`, the queue the assigned partitions' records are read from
    /// (see [`fetch`]). Declared before the consumer: it is dropped first.
    fetch: Option<Fetch>,
    consumer: BaseConsumer<SourceContext>,
    /// The caps of a batch, which size the consumer's prefetch (see [`prefetch`]).
    caps: Caps,
    /// Whether the consumer subscribed to the topics (`mode = "group"`).
    subscribed: bool,
    topics: Vec<Arc<str>>,
    /// The next offset to hand out, per owned partition.
    positions: Offsets,
    /// Records fetched but beyond the last batch's target or caps, in fetch order.
    stash: VecDeque<Record>,
    /// Where the keys and values of the records read are copied.
    chunks: Chunks,
    /// Data loss accepted (`on-data-loss = "continue"`), not yet taken by the pipeline.
    losses: Vec<Loss>,
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
    /// Creates the consumer. `group` is the default group id; `caps` are the caps of a
    /// batch, which size its prefetch.
    pub fn new(config: KafkaSourceConfig, group: &str, caps: Caps) -> Result<Self, SourceError> {
        let group = config.group_id.clone().unwrap_or_else(|| group.to_string());
        let consumer = Self::consumer(&config, &group, caps)?;
        let topics = config
            .topics
            .iter()
            .map(|t| Arc::from(t.as_str()))
            .collect();
        Ok(KafkaSource {
            config,
            group,
            fetch: None,
            consumer,
            caps,
            subscribed: false,
            topics,
            positions: Offsets::default(),
            stash: VecDeque::new(),
            chunks: Chunks::default(),
            losses: Vec::new(),
        })
    }

    fn consumer(
        config: &KafkaSourceConfig,
        group: &str,
        caps: Caps,
    ) -> Result<BaseConsumer<SourceContext>, SourceError> {
        Ok(Self::client_config(config, group, caps)
            .create_with_context(SourceContext::default())
            .map_err(|error| config.connection().client_error(error))?)
    }

    /// The consumer's configuration: sluice's defaults (no automatic commit, no automatic
    /// offset reset, a prefetch sized from the batch `caps`: see [`prefetch`]), then
    /// `[source] properties`.
    pub fn client_config(config: &KafkaSourceConfig, group: &str, caps: Caps) -> ClientConfig {
        let prefetch = prefetch(caps);
        let mut defaults = vec![
            ("group.id", group),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("enable.partition.eof", "false"),
            // Positions are always explicit: one out of range is data loss or another
            // topic, which the source handles (see `on-data-loss`), never a silent jump.
            ("auto.offset.reset", "error"),
        ];
        defaults.extend(prefetch.iter().map(|(k, v)| (*k, v.as_str())));
        if config.mode == SourceMode::Group {
            defaults.push(("partition.assignment.strategy", "cooperative-sticky"));
        }
        config.connection().client_config(&defaults)
    }

    /// Replaces the consumer with a fresh one (the old one closes, with its assignment and
    /// prefetched records). Replacing a live assignment instead and closing soon after trips
    /// an assertion in librdkafka (`rd_kafka_assignment_partition_stopped`).
    fn renew_consumer(&mut self) -> Result<(), SourceError> {
        self.fetch = None;
        self.consumer = Self::consumer(&self.config, &self.group, self.caps)?;
        self.stash.clear();
        Ok(())
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

    /// The end offsets of `partitions`, asked in one request per broker (ListOffsets for
    /// the latest offset) rather than one round trip per partition: with 24 partitions on
    /// loopback this took a batch's wait for its end offsets from ~2 s to milliseconds.
    fn end_offsets_of(&self, partitions: &[TopicPartition]) -> Result<Offsets, SourceError> {
        self.offsets_of(partitions, Offset::End)
    }

    /// The earliest and end offsets of `partitions`, in two requests per broker: a group
    /// member starting on 24 partitions asked each alone (48 round trips), ~6.5 s of
    /// every start and rebalance on librdkafka's mock cluster.
    fn watermarks_of(&self, partitions: &[TopicPartition]) -> Result<Watermarks, SourceError> {
        let lows = self.offsets_of(partitions, Offset::Beginning)?;
        let highs = self.offsets_of(partitions, Offset::End)?;
        let both =
            |(tp, &low): (&TopicPartition, &i64)| (tp.clone(), (low, highs.get(tp).unwrap_or(low)));
        Ok(lows.0.iter().map(both).collect())
    }

    /// The offsets `at` (the earliest or the end) of `partitions`, in one request per
    /// broker; a partition not answered is asked alone.
    fn offsets_of(
        &self,
        partitions: &[TopicPartition],
        at: Offset,
    ) -> Result<Offsets, SourceError> {
        let mut found = Offsets::default();
        if partitions.is_empty() {
            return Ok(found);
        }
        let mut tpl = TopicPartitionList::new();
        for tp in partitions {
            let added = tpl.add_partition_offset(&tp.topic, tp.partition, at);
            Self::request(|| format!("reading offsets of {tp}"), added)?;
        }
        let answered = self.consumer.offsets_for_times(tpl, METADATA_TIMEOUT);
        let answered = Self::request(|| "reading offsets".into(), answered)?;
        for tp in partitions {
            let offset = match answered.find_partition(&tp.topic, tp.partition) {
                Some(e) if e.error().is_ok() && matches!(e.offset(), Offset::Offset(_)) => {
                    e.offset().to_raw().unwrap_or_default()
                }
                // Not answered for this partition: ask it alone.
                _ => {
                    let (low, high) = self.watermarks(tp)?;
                    if at == Offset::End { high } else { low }
                }
            };
            found.set(tp.clone(), offset);
        }
        Ok(found)
    }

    /// `tp`'s earliest and end offsets: as `known` has them, else asked alone.
    fn watermark(
        &self,
        known: &Watermarks,
        tp: &TopicPartition,
    ) -> Result<(i64, i64), SourceError> {
        match known.get(tp) {
            Some(&both) => Ok(both),
            None => self.watermarks(tp),
        }
    }

    fn watermarks(&self, tp: &TopicPartition) -> Result<(i64, i64), SourceError> {
        Self::request(
            || format!("reading end offsets of {tp}"),
            self.consumer
                .fetch_watermarks(&tp.topic, tp.partition, METADATA_TIMEOUT),
        )
    }

    /// Assigns the owned partitions at the current positions (replacing any assignment).
    /// In `mode = "assign"` their records are forwarded to a [`Fetch`] first, on a consumer
    /// that had no assignment (a fresh one if it had: see [`fetch`]).
    fn assign(&mut self) -> Result<(), SourceError> {
        if self.config.mode == SourceMode::Assign {
            if self.fetch.is_some() {
                self.renew_consumer()?;
            }
            let fetch = Fetch::new(&self.consumer);
            for tp in self.positions.0.keys() {
                if !fetch.forward(&tp.topic, tp.partition) {
                    tracing::debug!(partition = %tp, "not forwarded: read with the consumer's poll");
                }
            }
            self.fetch = Some(fetch);
        }
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

    /// `mode = "assign"`: every partition of the topics, at the table's offsets.
    fn start_assigned(&mut self, resume: Option<&Offsets>) -> Result<Offsets, SourceError> {
        if !self.positions.0.is_empty() {
            // Started again (after a fenced batch).
            self.renew_consumer()?;
        }
        let partitions = self.partitions()?;
        let watermarks = self.watermarks_of(&partitions)?;
        let mut positions = Offsets::default();
        for tp in partitions {
            let next = self.start_position(&tp, resume, self.watermark(&watermarks, &tp)?)?;
            positions.set(tp, next);
        }
        self.positions = positions;
        self.assign()?;
        Ok(self.positions.clone())
    }

    /// Where a partition starts: where the table says (`resume`), or where a brand-new
    /// pipeline starts. A stored offset past the end (another topic) or before the
    /// earliest record (deleted by retention) is data loss: see [`Self::lost`].
    /// `(low, high)`: the partition's earliest and end offsets.
    fn start_position(
        &mut self,
        tp: &TopicPartition,
        resume: Option<&Offsets>,
        (low, high): (i64, i64),
    ) -> Result<i64, SourceError> {
        let Some(next) = resume.and_then(|r| r.get(tp)) else {
            return Ok(match (resume, self.config.starting_offsets) {
                (None, StartingOffsets::Latest) => high,
                _ => low,
            });
        };
        if next > high {
            let error = SourceError::OffsetBeyondEnd {
                partition: tp.to_string(),
                next,
                end: high,
            };
            return self.lost(tp, None, error).map(|()| low);
        }
        if next < low {
            let error = data_loss(tp, next, low);
            return self.lost(tp, Some(low - next), error).map(|()| low);
        }
        Ok(next)
    }

    /// Data loss on `tp`: `error` with `on-data-loss = "fail"`, else recorded for the next
    /// commit with a warning.
    fn lost(
        &mut self,
        tp: &TopicPartition,
        records: Option<i64>,
        error: SourceError,
    ) -> Result<(), SourceError> {
        if self.config.on_data_loss == OnDataLoss::Fail {
            return Err(error);
        }
        tracing::warn!(partition = %tp, lost = ?records, %error, "data loss accepted (on-data-loss = \"continue\"): reading on from the earliest offset");
        self.losses.push(Loss {
            partition: tp.clone(),
            records,
            why: error.to_string(),
        });
        Ok(())
    }

    /// The consumer met a position out of range while reading: finds the partitions whose
    /// position the broker no longer holds and handles each as data loss.
    fn out_of_range(&mut self) -> Result<(), SourceError> {
        let positions = self.positions.clone();
        let partitions: Vec<TopicPartition> = positions.0.keys().cloned().collect();
        let watermarks = self.watermarks_of(&partitions)?;
        for (tp, &next) in &positions.0 {
            let (low, high) = self.watermark(&watermarks, tp)?;
            let error = if next < low {
                data_loss(tp, next, low)
            } else if next > high {
                SourceError::NotTheSameTopic {
                    partition: tp.to_string(),
                    found: format!("it ends at offset {high}, before the position {next}"),
                }
            } else {
                continue;
            };
            let records = (next < low).then_some(low - next);
            self.lost(tp, records, error)?;
            self.positions.set(tp.clone(), low);
        }
        self.assign()
    }

    fn topic_arc(&self, name: &str) -> Option<Arc<str>> {
        self.topics.iter().find(|t| &***t == name).cloned()
    }
}

impl Source for KafkaSource {
    fn start(&mut self, resume: Option<&Offsets>) -> Result<Offsets, SourceError> {
        match self.config.mode {
            SourceMode::Assign => self.start_assigned(resume),
            SourceMode::Group => self.start_member(resume),
        }
    }

    fn end_offsets(&mut self) -> Result<Offsets, SourceError> {
        if self.config.mode == SourceMode::Group {
            return self.member_end_offsets();
        }
        let partitions = self.partitions()?;
        let ends = self.end_offsets_of(&partitions)?;
        let mut added = false;
        for tp in partitions {
            if self.positions.get(&tp).is_none() {
                let (low, _) = self.watermarks(&tp)?;
                tracing::info!(partition = %tp, offset = low, "new partition: reading from earliest");
                self.positions.set(tp, low);
                added = true;
            }
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
        self.read_batch(until, caps, stop)
    }

    fn idle(&mut self) {
        if self.config.mode == SourceMode::Group {
            self.serve_group();
        }
    }

    fn rebalances(&self) -> Option<u64> {
        (self.config.mode == SourceMode::Group).then(|| KafkaSource::rebalances(self))
    }

    fn verify(&mut self, last: &Fingerprints) -> Result<Vec<Mismatch>, SourceError> {
        self.verify_last_records(last)
    }

    fn take_losses(&mut self) -> Vec<Loss> {
        std::mem::take(&mut self.losses)
    }

    fn partition_counts(
        &mut self,
    ) -> Result<std::collections::BTreeMap<Arc<str>, i32>, SourceError> {
        Ok(crate::source::partition_counts(&self.partitions()?))
    }

    fn release(&mut self) {
        if let Err(error) = self.renew_consumer() {
            tracing::warn!(%error, "releasing the source's partitions failed");
        }
        self.positions = Offsets::default();
    }

    fn acknowledge(&mut self, committed: &Offsets) {
        let mut tpl = TopicPartitionList::new();
        let owned = self.consumer.context().membership().owned.clone();
        let grouped = self.config.mode == SourceMode::Group;
        for (tp, &next) in &committed.0 {
            if grouped && !owned.contains(&(tp.topic.to_string(), tp.partition)) {
                continue; // another member's
            }
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

fn data_loss(tp: &TopicPartition, next: i64, earliest: i64) -> SourceError {
    SourceError::DataLoss {
        partition: tp.to_string(),
        next,
        earliest,
        lost: earliest - next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(properties: &str) -> KafkaSourceConfig {
        toml::from_str(&format!(
            "bootstrap-servers = \"localhost:9092\"\ntopics = [\"t\"]\n{properties}"
        ))
        .unwrap()
    }

    fn caps(bytes: u64) -> Caps {
        Caps {
            records: 100_000,
            bytes,
        }
    }

    #[test]
    fn the_prefetch_follows_the_byte_cap_within_bounds() {
        let queued = |bytes| {
            KafkaSource::client_config(&config(""), "g", caps(bytes))
                .get("queued.max.messages.kbytes")
                .map(str::to_string)
        };
        assert_eq!(queued(64 << 20).as_deref(), Some("4096"));
        assert_eq!(queued(1 << 20).as_deref(), Some("1024"));
        assert_eq!(queued(u64::MAX).as_deref(), Some("65536"));
        let c = KafkaSource::client_config(&config(""), "g", caps(64 << 20));
        assert_eq!(c.get("fetch.queue.backoff.ms"), Some("10"));
    }

    #[test]
    fn properties_win_over_the_prefetch() {
        let properties = "properties = { \"queued.max.messages.kbytes\" = \"65536\", \"fetch.queue.backoff.ms\" = \"1000\" }";
        let c = KafkaSource::client_config(&config(properties), "g", caps(64 << 20));
        assert_eq!(c.get("queued.max.messages.kbytes"), Some("65536"));
        assert_eq!(c.get("fetch.queue.backoff.ms"), Some("1000"));
    }
}
