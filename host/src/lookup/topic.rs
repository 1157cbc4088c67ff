//! A lookup table from a compacted topic: each record's key maps to its value (a JSON
//! object), a null value deletes the key, a record without a key is skipped and counted.
//!
//! The consumer joins no group: it assigns every partition itself, from the beginning, and
//! reads to the high watermarks; a refresh reads only what is new since the table's
//! version (the next offset of every partition), assigning the partitions there again. A
//! replay reads from the beginning up to
//! the recorded offsets. (Compaction may since have removed a record that was read then
//! and replaced later: that key then shows its later value.)

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::load::{Loader, LookupError, check_size};
use super::{Table, Version};
use crate::kafka::Connection;

/// How long a metadata or watermark request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long reading may go without a record before it is given up (a transient fault).
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The loader of a lookup table from a compacted topic.
pub struct TopicLoader {
    name: String,
    topic: String,
    max: u64,
    consumer: BaseConsumer,
    /// Records skipped since the process started: no key, or a value that is not a JSON
    /// object.
    skipped: u64,
}

impl std::fmt::Debug for TopicLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicLoader")
            .field("name", &self.name)
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl TopicLoader {
    /// A loader of the lookup table `name` from `topic`, on `connection` (the source's
    /// cluster and properties), capped at `max` bytes.
    pub fn new(
        name: &str,
        topic: &str,
        connection: &Connection,
        max: u64,
    ) -> Result<Self, LookupError> {
        // librdkafka refuses `assign` without a group id; the group is never joined (the
        // partitions are assigned, not subscribed) and nothing is committed to it.
        let group = format!("sluice-lookup-{name}");
        let config = connection.client_config(&[
            ("group.id", &group),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("enable.partition.eof", "true"),
            ("auto.offset.reset", "earliest"),
        ]);
        let consumer = config.create().map_err(|error| {
            LookupError::source(
                name,
                "creating its consumer",
                connection.client_error(error),
            )
        })?;
        Ok(TopicLoader {
            name: name.to_string(),
            topic: topic.to_string(),
            max,
            consumer,
            skipped: 0,
        })
    }

    fn failed(&self, what: String) -> impl FnOnce(KafkaError) -> LookupError + '_ {
        move |error| LookupError::source(&self.name, what, error)
    }

    /// The high watermark of every partition of the topic.
    fn ends(&self) -> Result<BTreeMap<i32, i64>, LookupError> {
        let topic = &self.topic;
        let metadata = self
            .consumer
            .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
            .map_err(self.failed(format!("reading metadata of topic `{topic}`")))?;
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic && t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        if unknown(&metadata, topic) {
            return Err(LookupError::NoSuchTopic {
                table: self.name.clone(),
                topic: topic.clone(),
            });
        }
        if partitions.is_empty() {
            return Err(LookupError::source(
                &self.name,
                format!("reading topic `{topic}`"),
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such topic"),
            ));
        }
        let mut ends = BTreeMap::new();
        for p in partitions {
            let (_, high) = self
                .consumer
                .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
                .map_err(self.failed(format!("reading end offsets of `{topic}`/{p}")))?;
            ends.insert(p, high);
        }
        Ok(ends)
    }

    /// Assigns every partition of `targets` at `from` (missing: the beginning).
    fn assign(
        &mut self,
        from: &BTreeMap<i32, i64>,
        targets: &BTreeMap<i32, i64>,
    ) -> Result<(), LookupError> {
        let mut tpl = TopicPartitionList::new();
        for &p in targets.keys() {
            let offset = from
                .get(&p)
                .map_or(Offset::Beginning, |&o| Offset::Offset(o));
            tpl.add_partition_offset(&self.topic, p, offset)
                .map_err(self.failed(format!("assigning partition {p}")))?;
        }
        self.consumer
            .assign(&tpl)
            .map_err(self.failed("assigning the topic's partitions".into()))
    }

    /// Reads from where the consumer is assigned up to `targets` (next offsets), into
    /// `table`; `from` says where each partition starts. Records past `targets` are left
    /// (the next read assigns the partitions again, which also drops any end-of-partition
    /// event of this one).
    /// Stops fetching between refreshes: an assigned partition keeps librdkafka's threads
    /// fetching (and the process's CPU busy) while the pipeline runs its batches.
    fn unassign(&self) {
        if let Err(error) = self.consumer.unassign() {
            tracing::debug!(lookup = %self.name, %error, "could not unassign the lookup topic");
        }
    }

    fn read_to(
        &mut self,
        table: &mut Table,
        from: &BTreeMap<i32, i64>,
        targets: &BTreeMap<i32, i64>,
    ) -> Result<(), LookupError> {
        let mut pending: BTreeSet<i32> = targets
            .iter()
            .filter(|(p, end)| from.get(p).copied().unwrap_or(0) < **end)
            .map(|(p, _)| *p)
            .collect();
        let mut skipped = 0;
        let mut progress = Instant::now();
        while !pending.is_empty() {
            let message = match self.consumer.poll(Duration::from_millis(100)) {
                None if progress.elapsed() > STALL_TIMEOUT => {
                    let what = format!(
                        "reading `{}`: no record for {STALL_TIMEOUT:?} though the end offsets say there are more (partitions {pending:?})",
                        self.topic
                    );
                    return Err(LookupError::source(
                        &self.name,
                        what,
                        KafkaError::NoMessageReceived,
                    ));
                }
                None => continue,
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    pending.remove(&p);
                    continue;
                }
                Some(Err(error)) => {
                    return Err(self.failed(format!("reading `{}`", self.topic))(error));
                }
                Some(Ok(message)) => message,
            };
            progress = Instant::now();
            let (p, offset) = (message.partition(), message.offset());
            let end = targets.get(&p).copied().unwrap_or(0);
            if offset >= end {
                pending.remove(&p);
                continue;
            }
            if offset + 1 >= end {
                pending.remove(&p);
            }
            match (message.key(), message.payload()) {
                (None, _) => skipped += 1,
                (Some(key), None) => table.remove(key),
                (Some(key), Some(value)) if is_json_object(value) => table.insert(key, value),
                (Some(_), Some(_)) => skipped += 1,
            }
            check_size(&self.name, table, self.max)?;
        }
        if skipped > 0 {
            self.skipped += skipped;
            tracing::warn!(lookup = %self.name, topic = %self.topic, skipped, total = self.skipped, "skipped lookup records without a key or whose value is not a JSON object");
        }
        table.set_version(Version::Topic {
            offsets: targets.clone(),
        });
        Ok(())
    }

    fn offsets<'a>(&self, version: &'a Version) -> Result<&'a BTreeMap<i32, i64>, LookupError> {
        match version {
            Version::Topic { offsets } => Ok(offsets),
            other => Err(LookupError::Invalid {
                table: self.name.clone(),
                message: format!(
                    "its source is now topic `{}`, which cannot be read at {other:?}",
                    self.topic
                ),
            }),
        }
    }
}

/// Whether the broker answered that `topic` does not exist (as the source's check does: a
/// topic absent from the answer, or unknown to the broker); another error of the topic
/// (no leader yet, say) may pass.
fn unknown(metadata: &rdkafka::metadata::Metadata, topic: &str) -> bool {
    match metadata.topics().iter().find(|t| t.name() == topic) {
        None => true,
        Some(t) => t.error().is_some_and(|e| {
            rdkafka::error::RDKafkaErrorCode::from(e)
                == rdkafka::error::RDKafkaErrorCode::UnknownTopicOrPartition
        }),
    }
}

/// Whether `value` is a JSON object.
fn is_json_object(value: &[u8]) -> bool {
    value.trim_ascii_start().first() == Some(&b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(value).is_ok()
}

impl Loader for TopicLoader {
    fn empty(&self) -> Table {
        Table::new(Version::Topic {
            offsets: BTreeMap::new(),
        })
    }

    fn refresh(&mut self, table: &mut Arc<Table>) -> Result<bool, LookupError> {
        let from = self.offsets(table.version())?.clone();
        let mut ends = self.ends()?;
        for (p, end) in &mut ends {
            // A partition never goes back: the table keeps what it read.
            *end = (*end).max(from.get(p).copied().unwrap_or(0));
        }
        if ends
            .iter()
            .all(|(p, end)| from.get(p).copied().unwrap_or(0) >= *end)
        {
            let changed = ends != from;
            if changed {
                Arc::make_mut(table).set_version(Version::Topic { offsets: ends });
            }
            return Ok(changed);
        }
        self.assign(&from, &ends)?;
        let read = self.read_to(Arc::make_mut(table), &from, &ends);
        self.unassign();
        read.map(|()| true)
    }

    fn at(&mut self, version: &Version) -> Result<Table, LookupError> {
        let targets = self.offsets(version)?.clone();
        let mut table = self.empty();
        self.assign(&BTreeMap::new(), &targets)?;
        let read = self.read_to(&mut table, &BTreeMap::new(), &targets);
        self.unassign();
        read.map(|()| table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_objects_are_values() {
        assert!(is_json_object(br#" {"tier":"gold"}"#));
        assert!(!is_json_object(b"[1]"));
        assert!(!is_json_object(b"{\"open\":"));
        assert!(!is_json_object(b"gold"));
    }
}
