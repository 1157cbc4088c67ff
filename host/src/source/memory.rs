//! An in-memory source, the twin of Kafka for fast tests: topics of partitions of records,
//! read with the same contract as [`super::kafka::KafkaSource`] (positions from the table,
//! caps, partitions added while running, a stale position refused).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use super::identity::{Fingerprint, Fingerprints, Mismatch};
use super::kafka::StartingOffsets;
use super::{Offsets, Source, SourceError, TopicPartition};
use crate::batch::Caps;
use crate::record::{Header, Record};

/// The records of every partition. Clones share them, so a test can append records while a
/// pipeline runs, or between two runs (as a broker outlives a crash).
#[derive(Debug, Clone, Default)]
pub struct MemoryLog(Arc<Mutex<BTreeMap<TopicPartition, Vec<Record>>>>);

impl MemoryLog {
    /// Creates `partitions` empty partitions of `topic` (more are added, fewer kept).
    pub fn create(&self, topic: &str, partitions: i32) {
        let mut log = self.log();
        for partition in 0..partitions {
            log.entry(tp(topic, partition)).or_default();
        }
    }

    /// Appends a record with `value` (and `key`) to a partition, creating it if needed;
    /// returns its offset.
    pub fn append(&self, topic: &str, partition: i32, key: Option<&[u8]>, value: &[u8]) -> i64 {
        let mut log = self.log();
        let records = log.entry(tp(topic, partition)).or_default();
        let offset = records.len() as i64;
        let mut record = Record::with_value(topic.into(), offset, value.to_vec());
        record.partition = partition;
        record.key = key.map(Bytes::copy_from_slice);
        record.timestamp_ms = Some(offset);
        records.push(record);
        offset
    }

    /// Appends a record of `key`, `value` (`None`: a tombstone) and `headers` to a
    /// partition, creating it if needed; returns its offset.
    pub fn append_with(
        &self,
        topic: &str,
        partition: i32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: impl IntoIterator<Item = Header>,
    ) -> i64 {
        let offset = self.append(topic, partition, key, value.unwrap_or_default());
        let mut log = self.log();
        if let Some(record) = log
            .get_mut(&tp(topic, partition))
            .and_then(|r| r.last_mut())
        {
            if value.is_none() {
                record.value = None;
            }
            record.headers = headers.into_iter().collect();
        }
        offset
    }

    /// The records of a partition, in order.
    pub fn records(&self, topic: &str, partition: i32) -> Vec<Record> {
        let log = self.log();
        log.get(&tp(topic, partition)).cloned().unwrap_or_default()
    }

    /// Drops every record of `topic` and recreates it with `partitions` empty partitions
    /// (a recreated topic: offsets start again at 0).
    pub fn recreate(&self, topic: &str, partitions: i32) {
        self.log().retain(|tp, _| &*tp.topic != topic);
        self.create(topic, partitions);
    }

    fn log(&self) -> MutexGuard<'_, BTreeMap<TopicPartition, Vec<Record>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn partitions(&self, topics: &[String]) -> Vec<TopicPartition> {
        self.log()
            .keys()
            .filter(|tp| topics.iter().any(|t| **t == *tp.topic))
            .cloned()
            .collect()
    }

    fn end(&self, tp: &TopicPartition) -> i64 {
        self.log().get(tp).map_or(0, |r| r.len() as i64)
    }
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

/// Reads topics of a [`MemoryLog`].
#[derive(Debug)]
pub struct MemorySource {
    log: MemoryLog,
    topics: Vec<String>,
    starting: StartingOffsets,
    positions: Offsets,
    /// What the pipeline acknowledged last (as Kafka's group offsets).
    acknowledged: Arc<Mutex<Offsets>>,
    /// As a member of a group: the partitions it owns, and the assignment's generation
    /// when it last started.
    member: Option<(Assignment, u64)>,
}

/// A consumer group's assignment of one member, the twin of Kafka's: the partition
/// numbers it owns (of every topic, as Kafka's range assignor gives topics of equal
/// partition counts), changed by the test ([`Assignment::set`]); the member's source then
/// reports a rebalance ([`SourceError::Rebalanced`]) once, as Kafka's does. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct Assignment(
    Arc<Mutex<(BTreeSet<i32>, u64)>>,
    Arc<Mutex<BTreeSet<TopicPartition>>>,
);

impl Assignment {
    /// Owning `partitions`.
    pub fn new(partitions: &[i32]) -> Self {
        let assignment = Assignment::default();
        assignment.set(partitions);
        assignment
    }

    /// Now owning `partitions` (a rebalance).
    pub fn set(&self, partitions: &[i32]) {
        let mut now = self.0.lock().unwrap_or_else(|e| e.into_inner());
        now.0 = partitions.iter().copied().collect();
        now.1 += 1;
    }

    /// Not owning `partition` of `topic` though owning its number (an assignor that does
    /// not keep topics' partitions together).
    pub fn withhold(&self, topic: &str, partition: i32) {
        let mut withheld = self.1.lock().unwrap_or_else(|e| e.into_inner());
        withheld.insert(tp(topic, partition));
    }

    fn owns(&self, tp: &TopicPartition) -> bool {
        let withheld = self.1.lock().unwrap_or_else(|e| e.into_inner());
        self.get().0.contains(&tp.partition) && !withheld.contains(tp)
    }

    fn get(&self) -> (BTreeSet<i32>, u64) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl MemorySource {
    /// A source of `topics` in `log`; a brand-new pipeline starts at `starting`.
    pub fn new(log: &MemoryLog, topics: &[&str], starting: StartingOffsets) -> Self {
        MemorySource {
            log: log.clone(),
            topics: topics.iter().map(ToString::to_string).collect(),
            starting,
            positions: Offsets::default(),
            acknowledged: Arc::default(),
            member: None,
        }
    }

    /// The same, as a member of a group owning what `assignment` says.
    pub fn member(mut self, assignment: &Assignment) -> Self {
        self.member = Some((assignment.clone(), 0));
        self
    }

    /// What the pipeline acknowledged last; the handle stays valid after the source moves.
    pub fn acknowledged(&self) -> Arc<Mutex<Offsets>> {
        self.acknowledged.clone()
    }

    /// Every partition of the topics.
    fn all_partitions(&self) -> Result<Vec<TopicPartition>, SourceError> {
        let all = self.log.partitions(&self.topics);
        match self
            .topics
            .iter()
            .find(|t| !all.iter().any(|tp| *tp.topic == ***t))
        {
            Some(missing) => Err(SourceError::NoSuchTopic(missing.clone())),
            None => Ok(all),
        }
    }

    /// The partitions this source reads: every one, or a member's.
    fn partitions(&self) -> Result<Vec<TopicPartition>, SourceError> {
        let mut all = self.all_partitions()?;
        if let Some((assignment, _)) = &self.member {
            all.retain(|tp| assignment.owns(tp));
        }
        Ok(all)
    }

    /// Whether the member's assignment changed since it last started.
    fn rebalanced(&self) -> bool {
        self.member
            .as_ref()
            .is_some_and(|(assignment, seen)| assignment.get().1 != *seen)
    }
}

impl Source for MemorySource {
    fn partition_counts(
        &mut self,
    ) -> Result<std::collections::BTreeMap<std::sync::Arc<str>, i32>, SourceError> {
        Ok(super::partition_counts(&self.all_partitions()?))
    }

    fn start(&mut self, resume: Option<&Offsets>) -> Result<Offsets, SourceError> {
        if let Some((assignment, seen)) = &mut self.member {
            *seen = assignment.get().1;
        }
        let mut positions = Offsets::default();
        for tp in self.partitions()? {
            let end = self.log.end(&tp);
            let next = match resume.and_then(|r| r.get(&tp)) {
                Some(next) if next > end => {
                    return Err(SourceError::OffsetBeyondEnd {
                        partition: tp.to_string(),
                        next,
                        end,
                    });
                }
                Some(next) => next,
                None if resume.is_none() && self.starting == StartingOffsets::Latest => end,
                None => 0,
            };
            positions.set(tp, next);
        }
        self.positions = positions;
        Ok(self.positions.clone())
    }

    fn end_offsets(&mut self) -> Result<Offsets, SourceError> {
        if self.rebalanced() {
            return Err(SourceError::Rebalanced);
        }
        let mut ends = Offsets::default();
        for tp in self.partitions()? {
            if self.positions.get(&tp).is_none() {
                self.positions.set(tp.clone(), 0);
            }
            let end = self.log.end(&tp);
            ends.set(tp, end);
        }
        Ok(ends)
    }

    fn read(
        &mut self,
        until: &Offsets,
        caps: Caps,
        stop: &AtomicBool,
    ) -> Result<(Vec<Record>, Offsets), SourceError> {
        if stop.load(Ordering::Relaxed) {
            return Err(SourceError::Stopped);
        }
        let log = self.log.log();
        let (mut records, mut bytes) = (Vec::new(), 0u64);
        for (tp, &end) in &until.0 {
            let Some(mut next) = self.positions.get(tp) else {
                continue;
            };
            let held = log.get(tp).map_or(&[][..], Vec::as_slice);
            while next < end && !caps.full(records.len(), bytes) {
                let Some(record) = held.get(next as usize) else {
                    break;
                };
                bytes += record.bytes();
                records.push(record.clone());
                next += 1;
            }
            self.positions.set(tp.clone(), next);
        }
        Ok((records, self.positions.clone()))
    }

    fn acknowledge(&mut self, committed: &Offsets) {
        *self.acknowledged.lock().unwrap_or_else(|e| e.into_inner()) = committed.clone();
    }

    fn verify(&mut self, last: &Fingerprints) -> Result<Vec<Mismatch>, SourceError> {
        let log = self.log.log();
        let mismatches = last.0.iter().filter_map(|(tp, expected)| {
            let held = log
                .get(tp)
                .and_then(|r| r.get(usize::try_from(expected.offset).ok()?));
            let found = match held {
                None => format!("it holds no record at offset {}", expected.offset),
                Some(r) if Fingerprint::of(r) != *expected => {
                    format!("the record at offset {} is another one", expected.offset)
                }
                Some(_) => return None,
            };
            Some(Mismatch {
                partition: tp.clone(),
                found,
            })
        });
        Ok(mismatches.collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(records: usize) -> Caps {
        Caps {
            records,
            bytes: u64::MAX,
        }
    }

    #[test]
    fn reads_up_to_the_target_and_the_caps() {
        let log = MemoryLog::default();
        log.create("t", 2);
        for i in 0..5 {
            log.append("t", i % 2, None, format!("{i}").as_bytes());
        }
        let mut source = MemorySource::new(&log, &["t"], StartingOffsets::Earliest);
        let start = source.start(None).unwrap();
        assert_eq!(start.to_json(), r#"{"t":{"0":0,"1":0}}"#);
        let ends = source.end_offsets().unwrap();
        let stop = AtomicBool::new(false);
        let (records, next) = source.read(&ends, caps(2), &stop).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(next.to_json(), r#"{"t":{"0":2,"1":0}}"#);
        let (records, next) = source.read(&ends, caps(10), &stop).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(next, ends);
        stop.store(true, Ordering::Relaxed);
        assert!(matches!(
            source.read(&ends, caps(10), &stop),
            Err(SourceError::Stopped)
        ));
    }

    #[test]
    fn a_stale_position_is_refused_and_latest_starts_at_the_end() {
        let log = MemoryLog::default();
        log.append("t", 0, None, b"x");
        let mut resume = Offsets::default();
        resume.set(tp("t", 0), 5);
        let mut source = MemorySource::new(&log, &["t"], StartingOffsets::Earliest);
        assert!(matches!(
            source.start(Some(&resume)),
            Err(SourceError::OffsetBeyondEnd {
                next: 5,
                end: 1,
                ..
            })
        ));
        let mut source = MemorySource::new(&log, &["t"], StartingOffsets::Latest);
        assert_eq!(source.start(None).unwrap().get(&tp("t", 0)), Some(1));
        let mut source = MemorySource::new(&log, &["nope"], StartingOffsets::Latest);
        assert!(matches!(
            source.start(None),
            Err(SourceError::NoSuchTopic(_))
        ));
    }
}
