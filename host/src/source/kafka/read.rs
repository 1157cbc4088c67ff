//! Reading one batch: polling the consumer, placing each record in the batch or keeping it
//! for a later one, and settling partitions whose target lies in a gap.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::Offset;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rustc_hash::FxHashMap;

use super::chunks::Chunks;
use super::fetch::{Fetched, Message as FetchedMessage};
use super::{KafkaSource, POLL};
use crate::batch::Caps;
use crate::record::{Header, Record};
use crate::source::{Offsets, SourceError, TopicPartition};

/// The most records room is made for before a batch is read (more grow the batch as usual).
const MAX_RESERVED: usize = 1 << 20;

/// Where a partition not done yet stands in the batch being read.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    /// The next offset to hand out: the source's position, kept here while the batch is
    /// read (written back by [`Reading::settle`]) so that a record costs no ordered-map
    /// update.
    next: i64,
    /// The batch's target for the partition.
    end: i64,
}

/// A batch being read.
struct Reading {
    /// The partitions not done yet (FxHash: the keys are the source's own partitions).
    pending: FxHashMap<TopicPartition, Cursor>,
    records: Vec<Record>,
    /// Bytes of keys and values in `records`.
    bytes: u64,
    /// Records fetched for an earlier batch, not looked at yet.
    stash: VecDeque<Record>,
    /// Records read through the [`super::fetch::Fetch`] for this batch, not looked at yet
    /// (fetched after everything this batch stashed for later).
    fetched: VecDeque<Record>,
    /// Records that arrived, and how many had when `progress` was last set: the clock is
    /// read when a poll comes back empty, not once per record.
    arrived: u64,
    arrived_seen: u64,
    /// When records were last seen arriving.
    progress: Instant,
}

impl Reading {
    /// Writes the pending partitions' next offsets back into `positions`.
    fn settle(&self, positions: &mut Offsets) {
        for (tp, cursor) in &self.pending {
            positions.set(tp.clone(), cursor.next);
        }
    }

    /// Takes the pending partitions' next offsets from `positions` (after the source moved
    /// them).
    fn reload(&mut self, positions: &Offsets) {
        for (tp, cursor) in &mut self.pending {
            if let Some(next) = positions.get(tp) {
                cursor.next = next;
            }
        }
    }

    /// Whether no record arrived for longer than `timeout`, seen from a poll that came
    /// back empty.
    fn stalled(&mut self, timeout: std::time::Duration) -> bool {
        if self.arrived != self.arrived_seen {
            self.arrived_seen = self.arrived;
            self.progress = Instant::now();
        }
        self.progress.elapsed() > timeout
    }
}

impl KafkaSource {
    /// Reads records from the current positions up to `until` or the caps (see
    /// [`crate::source::Source::read`]).
    pub(super) fn read_batch(
        &mut self,
        until: &Offsets,
        caps: Caps,
        stop: &AtomicBool,
    ) -> Result<(Vec<Record>, Offsets), SourceError> {
        let pending: FxHashMap<TopicPartition, Cursor> = until
            .0
            .iter()
            .filter_map(|(tp, &end)| {
                let next = self.positions.get(tp).filter(|&next| next < end)?;
                Some((tp.clone(), Cursor { next, end }))
            })
            .collect();
        let expected = expected_records(&pending).min(caps.records);
        let mut batch = Reading {
            pending,
            records: Vec::with_capacity(expected),
            bytes: 0,
            stash: std::mem::take(&mut self.stash),
            fetched: VecDeque::new(),
            arrived: 0,
            arrived_seen: 0,
            progress: Instant::now(),
        };
        let read = self.fill(&mut batch, caps, stop);
        batch.settle(&mut self.positions);
        // What stays for the next batch, in the order it arrived: the records looked at and
        // kept for later (from the stash's front, or fetched once the stash was empty:
        // `place`), then what was not looked at: the rest of the stash, then of the fetch.
        let mut stash = std::mem::take(&mut self.stash);
        stash.extend(batch.stash);
        stash.extend(batch.fetched);
        self.stash = stash;
        read?;
        Ok((batch.records, self.positions.clone()))
    }

    /// Reads records into `batch` until its partitions are done or the caps are reached.
    fn fill(
        &mut self,
        batch: &mut Reading,
        caps: Caps,
        stop: &AtomicBool,
    ) -> Result<(), SourceError> {
        while !batch.pending.is_empty() && !caps.full(batch.records.len(), batch.bytes) {
            let record = match batch
                .stash
                .pop_front()
                .or_else(|| batch.fetched.pop_front())
            {
                Some(record) => record,
                None if self.fetch.is_some() => {
                    let wanted = caps.records.saturating_sub(batch.records.len());
                    self.fetch_into(batch, wanted, stop)?;
                    continue;
                }
                None => match self.poll(batch, stop)? {
                    Some(record) => record,
                    None => continue,
                },
            };
            batch.arrived += 1;
            self.place(record, batch);
        }
        Ok(())
    }

    /// `message` (polled, or read in an array) as a record, its key and value copied into
    /// `chunks`.
    pub(super) fn record(message: &impl Incoming, topic: &Arc<str>, chunks: &mut Chunks) -> Record {
        Record {
            topic: topic.clone(),
            partition: message.partition(),
            offset: message.offset(),
            timestamp_ms: message.timestamp_ms(),
            key: message.key().map(|k| chunks.copy(k)),
            value: message.payload().map(|v| chunks.copy(v)),
            headers: message.headers(),
            spans: None,
        }
    }

    /// Reads up to `wanted` records from the [`Fetch`] into `batch.fetched` (serving the
    /// consumer's own queue too, as [`Self::poll`] does); when none has arrived, waits for
    /// one, then handles an empty read as an empty poll.
    fn fetch_into(
        &mut self,
        batch: &mut Reading,
        wanted: usize,
        stop: &AtomicBool,
    ) -> Result<(), SourceError> {
        // The consumer's queue: commit replies and client errors (and a record, should one
        // have been fetched before its partition was forwarded).
        if let Some(record) = self.poll_events(batch)? {
            batch.fetched.push_back(record);
        }
        let mut errors = Vec::new();
        if self.fetch_read(batch, Duration::ZERO, wanted, &mut errors) == 0 && errors.is_empty() {
            if stop.load(Ordering::Relaxed) {
                return Err(SourceError::Stopped);
            }
            // Nothing queued: wait for one record (a read of one returns as soon as it
            // comes; a larger one would wait the whole timeout to fill up).
            if self.fetch_read(batch, POLL, 1, &mut errors) == 0 && errors.is_empty() {
                return self.nothing_polled(batch);
            }
        }
        for error in errors {
            self.consumer_error(batch, error)?;
        }
        Ok(())
    }

    /// One read of the [`Fetch`]: its records into `batch.fetched`, its errors into `errors`.
    fn fetch_read(
        &mut self,
        batch: &mut Reading,
        timeout: Duration,
        most: usize,
        errors: &mut Vec<rdkafka::error::KafkaError>,
    ) -> usize {
        let Self {
            fetch,
            topics,
            chunks,
            ..
        } = self;
        let fetch = fetch.as_mut().expect("reading needs a fetch");
        fetch.read(timeout, most, |fetched| match fetched {
            Fetched::Record { topic, message } => {
                if let Some(topic) = topics.iter().find(|t| t.as_bytes() == topic) {
                    batch
                        .fetched
                        .push_back(Self::record(&message, topic, chunks));
                }
            }
            Fetched::Error(error) => errors.push(error),
        })
    }

    /// Serves the consumer's own queue without waiting.
    fn poll_events(&mut self, batch: &mut Reading) -> Result<Option<Record>, SourceError> {
        match self.consumer.poll(Duration::ZERO) {
            Some(Ok(message)) => Ok(self
                .topic_arc(message.topic())
                .map(|topic| Self::record(&message, &topic, &mut self.chunks))),
            Some(Err(error)) => self.consumer_error(batch, error).map(|()| None),
            None => Ok(None),
        }
    }

    /// Handles a consumer error: a position out of range is data loss or another topic
    /// (see [`Self::out_of_range`]); others are retried.
    fn consumer_error(
        &mut self,
        batch: &mut Reading,
        error: rdkafka::error::KafkaError,
    ) -> Result<(), SourceError> {
        if out_of_range(&error) {
            batch.settle(&mut self.positions);
            self.out_of_range()?;
            batch.reload(&self.positions);
            // Re-assigned: what was read ahead is fetched again from the new positions.
            batch.fetched.clear();
        } else {
            tracing::warn!(%error, "Kafka consumer error (retrying)");
        }
        Ok(())
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
        if self.rebalanced() {
            return Err(SourceError::Rebalanced);
        }
        match self.consumer.poll(POLL) {
            Some(Ok(message)) => Ok(self
                .topic_arc(message.topic())
                .map(|topic| Self::record(&message, &topic, &mut self.chunks))),
            Some(Err(error)) => self.consumer_error(batch, error).map(|()| None),
            None => self.nothing_polled(batch).map(|()| None),
        }
    }

    /// A poll that came back empty: partitions whose position passed their target are done,
    /// and a read that made no progress for `fetch-timeout` fails.
    fn nothing_polled(&mut self, batch: &mut Reading) -> Result<(), SourceError> {
        self.settle_gaps(batch)?;
        if batch.stalled(self.config.fetch_timeout) {
            let mut behind: Vec<String> = batch.pending.keys().map(ToString::to_string).collect();
            behind.sort();
            return Err(SourceError::Stalled {
                partitions: behind.join(", "),
                seconds: self.config.fetch_timeout.as_secs(),
            });
        }
        Ok(())
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
            if let Some(&Cursor { end, .. }) = batch.pending.get(&tp)
                && at >= end
                && !batch
                    .stash
                    .iter()
                    .chain(&batch.fetched)
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
        let Some(cursor) = batch.pending.get_mut(&tp) else {
            // Not in this batch: beyond its target, or a partition the source no longer has.
            if self
                .positions
                .get(&tp)
                .is_some_and(|at| record.offset >= at)
            {
                self.stash.push_back(record);
            }
            return;
        };
        if record.offset < cursor.next {
            return; // already handed out (a re-fetch after re-assignment)
        }
        if record.offset < cursor.end {
            batch.bytes += record.bytes();
            cursor.next = record.offset + 1;
            if cursor.next >= cursor.end {
                self.positions.set(tp.clone(), cursor.next);
                batch.pending.remove(&tp);
            }
            batch.records.push(record);
        } else {
            // Past the target with a gap before it (control or compacted records): the
            // partition is done for this batch.
            self.positions.set(tp.clone(), cursor.end);
            batch.pending.remove(&tp);
            self.stash.push_back(record);
        }
    }
}

/// The records between the pending partitions' positions and targets (fewer if there are
/// gaps), at most [`MAX_RESERVED`]: room for the batch made once, rather than doubled as it
/// fills (a doubling holds both buffers, and a third of the last one is unused).
fn expected_records(pending: &FxHashMap<TopicPartition, Cursor>) -> usize {
    let offsets: i64 = pending.values().map(|c| c.end - c.next).sum();
    usize::try_from(offsets).unwrap_or(0).min(MAX_RESERVED)
}

/// Whether the consumer says a position is out of range (with `auto.offset.reset =
/// "error"`).
fn out_of_range(error: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode::{AutoOffsetReset, OffsetOutOfRange};
    matches!(
        error.rdkafka_error_code(),
        Some(AutoOffsetReset | OffsetOutOfRange)
    )
}

/// A message as librdkafka hands it over, whichever way it was read: polled through
/// rdkafka, or read in an array ([`FetchedMessage`]).
pub(super) trait Incoming {
    fn partition(&self) -> i32;
    fn offset(&self) -> i64;
    /// Its timestamp in milliseconds since the Unix epoch, if it has one.
    fn timestamp_ms(&self) -> Option<i64>;
    fn key(&self) -> Option<&[u8]>;
    fn payload(&self) -> Option<&[u8]>;
    fn headers(&self) -> Vec<Header>;
}

impl Incoming for rdkafka::message::BorrowedMessage<'_> {
    fn partition(&self) -> i32 {
        Message::partition(self)
    }
    fn offset(&self) -> i64 {
        Message::offset(self)
    }
    fn timestamp_ms(&self) -> Option<i64> {
        Message::timestamp(self).to_millis()
    }
    fn key(&self) -> Option<&[u8]> {
        Message::key(self)
    }
    fn payload(&self) -> Option<&[u8]> {
        Message::payload(self)
    }
    fn headers(&self) -> Vec<Header> {
        crate::kafka::headers::headers_of(self)
    }
}

impl Incoming for FetchedMessage<'_> {
    fn partition(&self) -> i32 {
        FetchedMessage::partition(self)
    }
    fn offset(&self) -> i64 {
        FetchedMessage::offset(self)
    }
    fn timestamp_ms(&self) -> Option<i64> {
        FetchedMessage::timestamp_ms(self)
    }
    fn key(&self) -> Option<&[u8]> {
        FetchedMessage::key(self)
    }
    fn payload(&self) -> Option<&[u8]> {
        FetchedMessage::payload(self)
    }
    fn headers(&self) -> Vec<Header> {
        FetchedMessage::headers(self)
    }
}
