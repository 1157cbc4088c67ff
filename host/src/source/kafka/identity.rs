//! Checking, at start-up, that each partition still holds the last record the pipeline
//! read from it (see [`crate::source::identity`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::message::BorrowedMessage;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::KafkaSource;
use crate::source::identity::{Fingerprint, Fingerprints, Mismatch};
use crate::source::{SourceError, TopicPartition};

/// Longest wait for the recorded records to arrive.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(15);

impl KafkaSource {
    /// Reads the record at each recorded offset, with a consumer of its own, and compares.
    pub(super) fn verify_last_records(
        &mut self,
        last: &Fingerprints,
    ) -> Result<Vec<Mismatch>, SourceError> {
        let mut mismatches = Vec::new();
        let mut wanted: BTreeMap<TopicPartition, Fingerprint> = BTreeMap::new();
        let ours: Vec<TopicPartition> = last
            .0
            .keys()
            .filter(|tp| self.topics.contains(&tp.topic))
            .cloned()
            .collect();
        let watermarks = self.watermarks_of(&ours)?;
        for (tp, f) in &last.0 {
            if !self.topics.contains(&tp.topic) {
                continue;
            }
            let (low, high) = self.watermark(&watermarks, tp)?;
            if f.offset >= high {
                mismatches.push(Mismatch {
                    partition: tp.clone(),
                    found: format!(
                        "it ends at offset {high}, but the pipeline read offset {} there",
                        f.offset
                    ),
                });
            } else if f.offset >= low {
                wanted.insert(tp.clone(), *f);
            } // else deleted by retention: nothing to compare
        }
        if !wanted.is_empty() {
            mismatches.extend(self.compare_records(wanted)?);
        }
        Ok(mismatches)
    }

    /// Fetches the record at each wanted offset and compares its fingerprint. A record
    /// that does not come (compacted away, a control record) proves nothing.
    fn compare_records(
        &self,
        mut wanted: BTreeMap<TopicPartition, Fingerprint>,
    ) -> Result<Vec<Mismatch>, SourceError> {
        let consumer = Self::consumer(&self.config, &self.group, self.caps)?;
        let mut tpl = TopicPartitionList::new();
        for (tp, f) in &wanted {
            let added = tpl.add_partition_offset(&tp.topic, tp.partition, Offset::Offset(f.offset));
            Self::request(|| format!("assigning {tp}"), added)?;
        }
        Self::request(|| "assigning partitions".into(), consumer.assign(&tpl))?;
        let mut mismatches = Vec::new();
        let started = Instant::now();
        while !wanted.is_empty() && started.elapsed() < VERIFY_TIMEOUT {
            let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            let Some(topic) = self.topic_arc(message.topic()) else {
                continue;
            };
            let tp = TopicPartition {
                topic: topic.clone(),
                partition: message.partition(),
            };
            let Some(expected) = wanted.remove(&tp) else {
                continue;
            };
            if message.offset() != expected.offset {
                continue; // the record itself is gone
            }
            let found = fingerprint(&message);
            if found != expected {
                mismatches.push(Mismatch {
                    partition: tp,
                    found: format!(
                        "the record at offset {} is another one than the pipeline read there",
                        expected.offset
                    ),
                });
            }
        }
        for tp in wanted.keys() {
            tracing::warn!(partition = %tp, "the last record read could not be fetched again within {}s: not checked", VERIFY_TIMEOUT.as_secs());
        }
        Ok(mismatches)
    }
}

/// The fingerprint of `message`, as the source takes it (its timestamp, key and value).
pub(crate) fn fingerprint(message: &BorrowedMessage<'_>) -> Fingerprint {
    Fingerprint::of_parts(
        message.offset(),
        message.timestamp().to_millis(),
        message.key(),
        message.payload(),
    )
}
