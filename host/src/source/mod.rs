//! Sources: where records come from. A source owns a set of topic-partitions, knows their
//! end offsets, and reads records from a position up to a target, in capped batches.
//!
//! Positions are the pipeline's, not the broker's: the pipeline tells the source where to
//! start (from the offsets stored in the sink's last commit), and the source never commits
//! anything that matters for correctness.

pub mod identity;
pub mod kafka;
pub mod memory;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use self::identity::{Fingerprints, Mismatch};
use crate::batch::Caps;
use crate::record::Record;
pub use crate::record::{Offsets, TopicPartition};

/// A source failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A Kafka client could not be created or a request failed.
    #[error("Kafka: {0}")]
    Kafka(#[from] crate::kafka::KafkaError),
    /// A topic to read does not exist.
    #[error("topic `{0}` does not exist (create it, or check `source.topics`)")]
    NoSuchTopic(String),
    /// A broker request failed.
    #[error("{what}: {error}")]
    Request {
        /// What was asked.
        what: String,
        /// What the client said.
        error: rdkafka::error::KafkaError,
    },
    /// No record arrived for too long while records were known to be there.
    #[error(
        "no progress reading {partitions} for {seconds}s although end offsets say more records exist"
    )]
    Stalled {
        /// The partitions still behind.
        partitions: String,
        /// How long we waited.
        seconds: u64,
    },
    /// The table says to resume past the end of a partition: the topic was recreated or
    /// the broker replaced since the last commit (Spark's stale-checkpoint pitfall).
    #[error(
        "the table's last commit says to resume {partition} at offset {next}, but the partition ends at {end}: was the topic recreated or the broker replaced? Rename the pipeline (pipeline.name) to start anew"
    )]
    OffsetBeyondEnd {
        /// The partition.
        partition: String,
        /// The stored next offset.
        next: i64,
        /// The partition's end offset.
        end: i64,
    },
    /// Records the pipeline had not read were deleted (retention) before it read them,
    /// and `on-data-loss = "fail"`.
    #[error(
        "records {next}..{earliest} of {partition} were deleted (retention) before the pipeline read them: {lost} records lost. Set `[source] on-data-loss = \"continue\"` to go on from offset {earliest} (the loss is then recorded in the commit)"
    )]
    DataLoss {
        /// The partition.
        partition: String,
        /// Where the pipeline was to read next.
        next: i64,
        /// The earliest offset the partition still holds.
        earliest: i64,
        /// Records lost.
        lost: i64,
    },
    /// The record at an offset the pipeline read before is another one now: the topic was
    /// deleted and created again, or the broker replaced, since the last commit.
    #[error(
        "{partition} is not the partition the pipeline read before: {found}. Was the topic recreated or the broker replaced? Rename the pipeline (pipeline.name) to start anew, or set `[source] on-data-loss = \"continue\"` to read it from its earliest offset"
    )]
    NotTheSameTopic {
        /// The partition.
        partition: String,
        /// What is there now.
        found: String,
    },
    /// The stop flag was raised while reading.
    #[error("stopped while reading")]
    Stopped,
    /// The consumer group moved partitions to or from this process while it was reading:
    /// the batch is abandoned, and the pipeline positions what it owns now.
    #[error("the consumer group moved partitions while reading")]
    Rebalanced,
    /// The consumer group did not answer.
    #[error("the consumer group `{group}` gave no assignment within {seconds}s")]
    NoAssignment {
        /// The group.
        group: String,
        /// How long we waited.
        seconds: u64,
    },
}

/// A source of records.
pub trait Source: Send {
    /// Assigns the source's partitions. `resume` holds the positions stored by the last
    /// commit (`None` for a brand-new pipeline, which starts where its configuration says).
    /// Partitions missing from `resume` start at their earliest offset. Returns the
    /// starting positions.
    fn start(&mut self, resume: Option<&Offsets>) -> Result<Offsets, SourceError>;

    /// The current end offsets of every partition the source owns, discovering partitions
    /// added since the last call (which then start at earliest).
    fn end_offsets(&mut self) -> Result<Offsets, SourceError>;

    /// Reads records from the current positions, stopping at `until` (exclusive) or when
    /// the batch is full, whichever comes first. Returns the records in read order and the
    /// positions after them.
    fn read(
        &mut self,
        until: &Offsets,
        caps: Caps,
        stop: &AtomicBool,
    ) -> Result<(Vec<Record>, Offsets), SourceError>;

    /// Tells the broker how far the pipeline has committed, for lag monitoring only.
    fn acknowledge(&mut self, committed: &Offsets);

    /// Called while the pipeline waits for its next batch: time for housekeeping, such as
    /// answering the consumer group.
    fn idle(&mut self) {}

    /// Consumer-group rebalances seen since the start (`None`: the source assigns itself
    /// every partition).
    fn rebalances(&self) -> Option<u64> {
        None
    }

    /// Lets go of every partition until the next [`Source::start`] (a process that stops
    /// being the active one of its pipeline): nothing is fetched meanwhile.
    fn release(&mut self) {}

    /// Whether each partition still holds, at the recorded offset, the record `last` says
    /// the pipeline read there (see [`identity`]): the partitions that hold another one.
    /// A record that is gone (retention, compaction) proves nothing either way.
    fn verify(&mut self, last: &Fingerprints) -> Result<Vec<Mismatch>, SourceError> {
        let _ = last;
        Ok(Vec::new())
    }

    /// Data loss accepted (`on-data-loss = "continue"`) since the last call, for the next
    /// commit to record.
    fn take_losses(&mut self) -> Vec<Loss> {
        Vec::new()
    }

    /// How many partitions each topic of the source has now, every member's included: a
    /// producer's partitioner places a keyed record by it. Empty when not known.
    fn partition_counts(&mut self) -> Result<BTreeMap<Arc<str>, i32>, SourceError> {
        Ok(BTreeMap::new())
    }
}

/// How many partitions each topic of `partitions` has (one past its highest).
pub fn partition_counts(partitions: &[TopicPartition]) -> BTreeMap<Arc<str>, i32> {
    let mut counts = BTreeMap::new();
    for tp in partitions {
        let count = counts.entry(tp.topic.clone()).or_insert(0);
        *count = (*count).max(tp.partition + 1);
    }
    counts
}

/// Records skipped for good: deleted before they were read, or in a partition replaced by
/// another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    /// The partition.
    pub partition: TopicPartition,
    /// Records known lost (`None`: unknown, the partition was replaced).
    pub records: Option<i64>,
    /// Why, for people.
    pub why: String,
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.records {
            Some(n) => write!(f, "{}: {n} records lost ({})", self.partition, self.why),
            None => write!(f, "{}: {}", self.partition, self.why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition {
            topic: t.into(),
            partition: p,
        }
    }

    #[test]
    fn offsets_round_trip_and_distance() {
        let mut a = Offsets::default();
        a.set(tp("clicks", 0), 5);
        a.set(tp("clicks", 1), 0);
        a.set(tp("other", 0), 3);
        let json = a.to_json();
        assert_eq!(json, r#"{"clicks":{"0":5,"1":0},"other":{"0":3}}"#);
        assert_eq!(Offsets::from_json(&json).unwrap(), a);
        let mut b = a.clone();
        b.set(tp("clicks", 1), 10);
        b.set(tp("clicks", 2), 4);
        assert_eq!(a.distance_to(&b), 10);
        assert!(Offsets::from_json(r#"{"clicks":{"x":1}}"#).is_err());
    }
}
