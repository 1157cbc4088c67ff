//! A lookup table from a compacted topic: each record's key maps to its value (a JSON
//! object), a null value deletes the key; a record without a key is skipped, and a value
//! that is not a JSON object deletes its key (see [`Table::apply`]); both are counted.
//!
//! The consumer joins no group: it assigns every partition itself, from the beginning, and
//! reads to the high watermarks; a refresh reads only what is new since the table's
//! version (the next offset of every partition), assigning the partitions there again. A
//! replay reads from the beginning up to the recorded offsets. (Compaction may since have
//! removed a record that was read then and replaced later: that key then shows its later
//! value.)
//!
//! Like the source, the reader rides out a broker that goes away: a consumer error is
//! logged and reading goes on until records stop coming for [`STALL_TIMEOUT`] (then the
//! refresh fails as a transient fault, retried by the pipeline), and after any failure the
//! consumer is replaced by a fresh one, so nothing queued while the broker was away is
//! read by the next attempt.
//!
//! A topic deleted and created again keeps its name and restarts its offsets at 0, as for
//! the source (see [`crate::source::identity`]). A refresh tells it from the topic it read
//! by the end offsets (below what was read: truncated) and by the last record read from
//! each partition (read again and compared by its fingerprint). The table is then rebuilt
//! from the topic as it is, or the refresh fails, as `[source] on-data-loss` says.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::load::{Loader, LookupError, check_size};
use super::{Table, Version};
use crate::format::{Decoder, RegistryError};
use crate::kafka::Connection;
use crate::source::identity::Fingerprint;
use crate::source::kafka::OnDataLoss;
use crate::source::kafka::fingerprint;

/// How long a metadata or watermark request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long reading may go without a record before it is given up (a transient fault).
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a fetch of the lookup consumer may wait for new records at a partition's end
/// (`fetch.wait.max.ms`), holding the connection meanwhile. librdkafka's 500 ms made every
/// refresh wait twice (the end offsets behind a fetch the last refresh left waiting, then
/// the last record read again): ~0.75 s per table against tansu with nothing new. A
/// refresh reads to known offsets and stops, so it has nothing to wait for.
const FETCH_WAIT_MS: &str = "10";

/// The loader of a lookup table from a compacted topic.
pub struct TopicLoader {
    name: String,
    topic: String,
    max: u64,
    /// What a replaced or truncated topic does: fail, or rebuild the table (`continue`).
    on_data_loss: OnDataLoss,
    /// The consumer's configuration, to replace it after a failure.
    config: ClientConfig,
    consumer: BaseConsumer,
    /// The last record read from each partition into the table being refreshed (the table
    /// of the last successful load), to tell a replaced topic.
    marks: BTreeMap<i32, Fingerprint>,
    /// Records skipped since the process started: no key, or a value that is not a JSON
    /// object.
    skipped: u64,
    /// With an Avro or Protobuf topic: the schemas its values are read to JSON with.
    decoder: Option<Decoder>,
}

impl std::fmt::Debug for TopicLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicLoader")
            .field("name", &self.name)
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

/// What one poll brought.
enum Polled<'a> {
    /// A record.
    Record(BorrowedMessage<'a>),
    /// The end of a partition.
    End(i32),
    /// Nothing (or a consumer error, logged).
    Nothing,
}

/// How a read ended.
enum Read {
    /// Up to the targets; whether the table changed.
    Done(bool),
    /// A partition holds another record where the table read one: what was found.
    Replaced(String),
}

impl TopicLoader {
    /// A loader of the lookup table `name` from `topic`, on `connection` (the source's
    /// cluster and properties), capped at `max` bytes. A replaced topic fails refreshes
    /// unless [`TopicLoader::on_data_loss`] says otherwise.
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
            ("fetch.wait.max.ms", FETCH_WAIT_MS),
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
            on_data_loss: OnDataLoss::Fail,
            config,
            consumer,
            marks: BTreeMap::new(),
            skipped: 0,
            decoder: None,
        })
    }

    /// The same loader, reading Avro or Protobuf values to JSON with `decoder` (`None`:
    /// JSON values).
    pub fn with_decoder(self, decoder: Option<Decoder>) -> Self {
        TopicLoader { decoder, ..self }
    }

    /// What a replaced or truncated topic does (the pipeline's `[source] on-data-loss`):
    /// `Fail` (the default) fails the refresh, `Continue` rebuilds the table.
    pub fn on_data_loss(mut self, on_data_loss: OnDataLoss) -> Self {
        self.on_data_loss = on_data_loss;
        self
    }

    fn failed(&self, what: String) -> impl FnOnce(KafkaError) -> LookupError + '_ {
        move |error| LookupError::source(&self.name, what, error)
    }

    /// A fresh consumer, without what the old one queued (the errors of a broker that went
    /// away) nor its connections.
    fn renew(&mut self) {
        match self.config.create() {
            Ok(consumer) => self.consumer = consumer,
            Err(e) => {
                tracing::warn!(lookup = %self.name, error = %e, "could not replace the lookup topic's consumer")
            }
        }
    }

    /// Before a refresh: takes what the consumer queued since the last one. Errors there
    /// (connections lost: the broker went away meanwhile) replace the consumer, whose
    /// connections may be waiting out librdkafka's reconnection backoff.
    fn drain(&mut self) {
        let mut errors = 0;
        let mut last = None;
        for _ in 0..10_000 {
            match self.consumer.poll(Duration::ZERO) {
                None => break,
                Some(Err(error)) => {
                    errors += 1;
                    last = Some(error);
                }
                Some(Ok(_)) => {}
            }
        }
        if let Some(error) = last {
            tracing::info!(lookup = %self.name, errors, last = %error, "the lookup topic's consumer met errors since the last refresh (the broker went away?): replacing it");
            self.renew();
        }
    }

    /// After a transient failure, a fresh consumer.
    fn renew_after(&mut self, error: &LookupError) {
        if error.is_transient() {
            self.renew();
        }
    }

    /// The low and high watermarks of every partition of the topic.
    fn watermarks(&self) -> Result<BTreeMap<i32, (i64, i64)>, LookupError> {
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
        let mut marks = BTreeMap::new();
        for p in partitions {
            let watermarks = self
                .consumer
                .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
                .map_err(self.failed(format!("reading end offsets of `{topic}`/{p}")))?;
            marks.insert(p, watermarks);
        }
        Ok(marks)
    }

    /// Assigns every partition of `targets` at `starts` (missing: the beginning).
    fn assign(
        &mut self,
        starts: &BTreeMap<i32, i64>,
        targets: &BTreeMap<i32, i64>,
    ) -> Result<(), LookupError> {
        let mut tpl = TopicPartitionList::new();
        for &p in targets.keys() {
            let offset = starts
                .get(&p)
                .map_or(Offset::Beginning, |&o| Offset::Offset(o));
            tpl.add_partition_offset(&self.topic, p, offset)
                .map_err(self.failed(format!("assigning partition {p}")))?;
        }
        self.consumer
            .assign(&tpl)
            .map_err(self.failed("assigning the topic's partitions".into()))
    }

    /// Stops fetching between refreshes: an assigned partition keeps librdkafka's threads
    /// fetching (and the process's CPU busy) while the pipeline runs its batches.
    fn unassign(&self) {
        if let Err(error) = self.consumer.unassign() {
            tracing::debug!(lookup = %self.name, %error, "could not unassign the lookup topic");
        }
    }

    /// Reads from `starts` up to `targets` (next offsets) into `table`, applying what is at
    /// or past `from` (the table holds what is before), and comparing the record at each
    /// mark on the way. Records past `targets` are left (the next read assigns the
    /// partitions again). The table is copied (`Arc::make_mut`) only if a record changes
    /// it or its version moves.
    fn read_to(
        &mut self,
        table: &mut Arc<Table>,
        starts: &BTreeMap<i32, i64>,
        from: &BTreeMap<i32, i64>,
        targets: &BTreeMap<i32, i64>,
    ) -> Result<Read, LookupError> {
        let unread = |(p, end): (&i32, &i64)| starts.get(p).copied().unwrap_or(0) < *end;
        let read = if targets.iter().any(unread) {
            self.assign(starts, targets)?;
            let read = self.poll_to(table, starts, from, targets);
            self.unassign();
            read
        } else {
            Ok(Ok((0, BTreeMap::new())))
        };
        let (skipped, marks) = match read? {
            Ok(done) => done,
            Err(found) => return Ok(Read::Replaced(found)),
        };
        self.marks.extend(marks);
        self.count_skipped(skipped);
        let moved = Version::Topic {
            offsets: targets.clone(),
        };
        let changed = *table.version() != moved;
        if changed {
            Arc::make_mut(table).set_version(moved);
        }
        Ok(Read::Done(changed))
    }

    /// The polling of [`Self::read_to`]: the records skipped and the new marks, or what
    /// was found instead of a marked record.
    #[allow(clippy::type_complexity)]
    fn poll_to(
        &self,
        table: &mut Arc<Table>,
        starts: &BTreeMap<i32, i64>,
        from: &BTreeMap<i32, i64>,
        targets: &BTreeMap<i32, i64>,
    ) -> Result<Result<(u64, BTreeMap<i32, Fingerprint>), String>, LookupError> {
        let mut pending: BTreeSet<i32> = targets
            .iter()
            .filter(|(p, end)| starts.get(p).copied().unwrap_or(0) < **end)
            .map(|(p, _)| *p)
            .collect();
        let (mut skipped, mut marks) = (0, BTreeMap::new());
        let mut progress = Instant::now();
        while !pending.is_empty() {
            let message = match self.poll(&pending, progress)? {
                Polled::Record(message) => message,
                Polled::End(p) => {
                    pending.remove(&p);
                    continue;
                }
                Polled::Nothing => continue,
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
            let mark = self.marks.get(&p).filter(|m| m.offset == offset);
            if mark.is_some_and(|m| *m != fingerprint(&message)) {
                return Ok(Err(format!(
                    "partition {p} holds another record at offset {offset} than the one the table read there"
                )));
            }
            if offset < from.get(&p).copied().unwrap_or(0) {
                continue; // in the table already: only read again to be compared
            }
            let applied = match message.key() {
                None => false,
                Some(key) => match self.json_of(message.payload())? {
                    Some(value) => Arc::make_mut(table).apply(key, value.as_deref()),
                    None => {
                        Arc::make_mut(table).remove(key);
                        false
                    }
                },
            };
            skipped += u64::from(!applied);
            check_size(&self.name, table, self.max)?;
            if offset + 1 == end {
                marks.insert(p, fingerprint(&message));
            }
        }
        Ok(Ok((skipped, marks)))
    }

    /// A record's value as JSON: itself for a JSON topic; read with its writer schema for
    /// an Avro or Protobuf one (`None` if it cannot be: the caller deletes the key and
    /// counts the record skipped, as for a value that is not JSON). A registry that cannot
    /// be reached is a transient fault, one that refuses a configuration fault.
    #[allow(clippy::option_option)] // `None`: unreadable; `Some(None)`: a tombstone
    fn json_of<'m>(
        &self,
        value: Option<&'m [u8]>,
    ) -> Result<Option<Option<Cow<'m, [u8]>>>, LookupError> {
        let (Some(decoder), Some(_)) = (&self.decoder, value) else {
            return Ok(Some(value.map(Cow::Borrowed)));
        };
        let known = decoder.prepare([value]).map_err(|e| match e {
            RegistryError::Unavailable { .. } => LookupError::Source {
                table: self.name.clone(),
                what: "fetching a schema".into(),
                error: Box::new(e),
            },
            e => LookupError::Invalid {
                table: self.name.clone(),
                message: e.to_string(),
            },
        })?;
        Ok(known.to_json(value).ok().map(|json| Some(Cow::Owned(json))))
    }

    /// Polls once. A consumer error is logged and reading goes on (the broker may be
    /// away) until [`STALL_TIMEOUT`] passes without a record since `progress`.
    fn poll(&self, pending: &BTreeSet<i32>, progress: Instant) -> Result<Polled<'_>, LookupError> {
        match self.consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => Ok(Polled::Record(message)),
            Some(Err(KafkaError::PartitionEOF(p))) => Ok(Polled::End(p)),
            Some(Err(error @ KafkaError::MessageConsumptionFatal(_))) => {
                Err(self.failed(format!("reading `{}`", self.topic))(error))
            }
            Some(Err(error)) if progress.elapsed() <= STALL_TIMEOUT => {
                tracing::debug!(lookup = %self.name, %error, "Kafka consumer error while reading a lookup topic (retrying)");
                Ok(Polled::Nothing)
            }
            None if progress.elapsed() <= STALL_TIMEOUT => Ok(Polled::Nothing),
            last => {
                let cause = match last {
                    Some(Err(error)) => error,
                    _ => KafkaError::NoMessageReceived,
                };
                let what = format!(
                    "reading `{}`: no record for {STALL_TIMEOUT:?} though the end offsets say there are more (partitions {pending:?})",
                    self.topic
                );
                Err(LookupError::source(&self.name, what, cause))
            }
        }
    }

    /// Counts records skipped by a read: the first time with a warning, then quietly (the
    /// count is `sluice_lookup_skipped_records`).
    fn count_skipped(&mut self, skipped: u64) {
        if skipped == 0 {
            return;
        }
        if self.skipped == 0 {
            tracing::warn!(lookup = %self.name, topic = %self.topic, skipped, "lookup records without a key were skipped, and keys whose value is not a JSON object deleted (counted in sluice_lookup_skipped_records; logged once per table)");
        } else {
            tracing::debug!(lookup = %self.name, skipped, total = self.skipped + skipped, "lookup records skipped");
        }
        self.skipped += skipped;
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

    /// Brings `table` to the topic's end (see [`Loader::refresh`]).
    fn refresh_from(&mut self, table: &mut Arc<Table>) -> Result<bool, LookupError> {
        let from = self.offsets(table.version())?.clone();
        if from.is_empty() {
            self.marks.clear();
        }
        let watermarks = self.watermarks()?;
        if let Some(found) = moved_back(&from, &watermarks) {
            return self.replaced(table, found);
        }
        let ends: BTreeMap<i32, i64> = watermarks.iter().map(|(&p, &(_, h))| (p, h)).collect();
        // Each partition is read from its last record read, to compare it.
        let mut starts = from.clone();
        for (p, mark) in &self.marks {
            if let Some(start) = starts.get_mut(p).filter(|s| mark.offset < **s) {
                *start = mark.offset;
            }
        }
        match self.read_to(table, &starts, &from, &ends)? {
            Read::Done(changed) => Ok(changed),
            Read::Replaced(found) => self.replaced(table, found),
        }
    }

    /// The topic is not the one `table` was read from: fails, or rebuilds the table from
    /// the topic as it is now, as `on-data-loss` says.
    fn replaced(&mut self, table: &mut Arc<Table>, found: String) -> Result<bool, LookupError> {
        self.data_loss(
            found,
            "rebuilding the lookup table from its topic as it is now",
        )?;
        // Batches that saw the old table keep it.
        *table = Arc::new(self.empty());
        self.refresh_from(table).map(|_| true)
    }

    /// The topic is not the one read (`found` says how): the error with `on-data-loss =
    /// "fail"`; otherwise a warning that `then` happens.
    fn data_loss(&self, found: String, then: &str) -> Result<(), LookupError> {
        let error = LookupError::Replaced {
            table: self.name.clone(),
            topic: self.topic.clone(),
            found,
        };
        if self.on_data_loss == OnDataLoss::Fail {
            return Err(error);
        }
        tracing::warn!(lookup = %self.name, %error, "on-data-loss = \"continue\": {then}");
        Ok(())
    }

    /// The table at `version` (see [`Loader::at`]).
    fn read_at(&mut self, version: &Version) -> Result<Table, LookupError> {
        let mut targets = self.offsets(version)?.clone();
        let watermarks = self.watermarks()?;
        if let Some(found) = moved_back(&targets, &watermarks) {
            self.data_loss(
                found,
                "the replayed batch sees the lookup table as the topic holds it now",
            )?;
            targets = watermarks.iter().map(|(&p, &(_, h))| (p, h)).collect();
        }
        self.marks.clear();
        let mut table = Arc::new(self.empty());
        self.read_to(&mut table, &BTreeMap::new(), &BTreeMap::new(), &targets)?;
        Ok(Arc::unwrap_or_clone(table))
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

/// Whether a partition went back since the table was read to `from`: gone, ending before
/// what was read, or starting past it (records deleted before they were read). What was
/// found, naming the partition.
fn moved_back(from: &BTreeMap<i32, i64>, watermarks: &BTreeMap<i32, (i64, i64)>) -> Option<String> {
    from.iter().find_map(|(p, &read)| match watermarks.get(p) {
        None => Some(format!("partition {p} is gone")),
        Some(&(_, high)) if high < read => Some(format!(
            "partition {p} ends at offset {high}, but the table was read to offset {read}"
        )),
        Some(&(low, _)) if low > read => Some(format!(
            "partition {p} starts at offset {low}, past offset {read} the table was read to (records deleted before they were read)"
        )),
        Some(_) => None,
    })
}

impl Loader for TopicLoader {
    fn empty(&self) -> Table {
        Table::new(Version::Topic {
            offsets: BTreeMap::new(),
        })
    }

    fn refresh(&mut self, table: &mut Arc<Table>) -> Result<bool, LookupError> {
        self.drain();
        self.refresh_from(table)
            .inspect_err(|e| self.renew_after(e))
    }

    fn at(&mut self, version: &Version) -> Result<Table, LookupError> {
        self.drain();
        self.read_at(version).inspect_err(|e| self.renew_after(e))
    }

    fn skipped(&self) -> u64 {
        self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_that_went_back_is_named() {
        let from = BTreeMap::from([(0, 4), (1, 2)]);
        let same = BTreeMap::from([(0, (0, 4)), (1, (0, 9)), (2, (0, 1))]);
        assert_eq!(moved_back(&from, &same), None);
        let found = |w: &[(i32, (i64, i64))]| moved_back(&from, &w.iter().copied().collect());
        assert_eq!(
            found(&[(0, (0, 3)), (1, (0, 2))]).unwrap(),
            "partition 0 ends at offset 3, but the table was read to offset 4"
        );
        assert_eq!(found(&[(0, (0, 4))]).unwrap(), "partition 1 is gone");
        assert!(
            found(&[(0, (5, 9)), (1, (0, 2))])
                .unwrap()
                .contains("records deleted")
        );
    }
}
