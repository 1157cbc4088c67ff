//! Reading one batch: polling the consumer, placing each record in the batch or keeping it
//! for a later one, and settling partitions whose target lies in a gap.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rdkafka::Offset;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;

use super::{KafkaSource, POLL};
use crate::batch::Caps;
use crate::record::Record;
use crate::source::{Offsets, SourceError, TopicPartition};

/// The most records room is made for before a batch is read (more grow the batch as usual).
const MAX_RESERVED: usize = 1 << 20;

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

impl KafkaSource {
    /// Reads records from the current positions up to `until` or the caps (see
    /// [`crate::source::Source::read`]).
    pub(super) fn read_batch(
        &mut self,
        until: &Offsets,
        caps: Caps,
        stop: &AtomicBool,
    ) -> Result<(Vec<Record>, Offsets), SourceError> {
        let pending: HashMap<TopicPartition, i64> = until
            .0
            .iter()
            .filter(|(tp, end)| self.positions.get(tp).is_some_and(|p| p < **end))
            .map(|(tp, &end)| (tp.clone(), end))
            .collect();
        let expected = self.expected_records(&pending).min(caps.records);
        let mut batch = Reading {
            pending,
            records: Vec::with_capacity(expected),
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

    /// The records between the positions and the targets of `pending` (fewer if there are
    /// gaps), at most [`MAX_RESERVED`]: room for the batch made once, rather than doubled
    /// as it fills (a doubling holds both buffers, and a third of the last one is unused).
    fn expected_records(&self, pending: &HashMap<TopicPartition, i64>) -> usize {
        let offsets: i64 = pending
            .iter()
            .map(|(tp, end)| end - self.positions.get(tp).unwrap_or(*end))
            .sum();
        usize::try_from(offsets).unwrap_or(0).min(MAX_RESERVED)
    }

    pub(super) fn record(
        message: &rdkafka::message::BorrowedMessage<'_>,
        topic: &Arc<str>,
    ) -> Record {
        let headers = crate::kafka::headers::headers_of(message);
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
        if self.rebalanced() {
            return Err(SourceError::Rebalanced);
        }
        match self.consumer.poll(POLL) {
            Some(Ok(message)) => Ok(self
                .topic_arc(message.topic())
                .map(|topic| Self::record(&message, &topic))),
            Some(Err(error)) if out_of_range(&error) => {
                self.out_of_range()?;
                Ok(None)
            }
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
