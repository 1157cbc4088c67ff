//! Telling a topic from a topic of the same name: the last record read from each
//! partition, by offset and a hash of its contents, recorded with every commit
//! (`sluice.last-records`).
//!
//! A topic deleted and created again, or a broker replaced by an empty one, keeps the
//! topic's name and restarts its offsets at 0. A stored offset past the new end is caught
//! by the end offset alone; one within it is not, and reading on from it would skip the
//! new topic's first records silently. So a restarted pipeline reads the record at each
//! recorded offset again and compares its hash: another record there means another topic
//! (see [`crate::source::Source::verify`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::TopicPartition;
use crate::checkpoint::LAST_RECORDS;
use crate::record::Record;

/// The offset of a record and a hash of its timestamp, key and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// The record's offset.
    pub offset: i64,
    /// The first 8 bytes of SHA-256 over its timestamp, key and value.
    pub hash: u64,
}

impl Fingerprint {
    /// The fingerprint of `record`.
    pub fn of(record: &Record) -> Self {
        Self::of_parts(
            record.offset,
            record.timestamp_ms,
            record.key.as_deref(),
            record.value.as_deref(),
        )
    }

    /// The fingerprint of the record at `offset` with this timestamp, key and value.
    pub fn of_parts(
        offset: i64,
        timestamp_ms: Option<i64>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Self {
        let mut sha = Sha256::new();
        sha.update(timestamp_ms.unwrap_or(i64::MIN).to_be_bytes());
        for part in [key, value] {
            match part {
                Some(bytes) => {
                    sha.update((bytes.len() as u64).to_be_bytes());
                    sha.update(bytes);
                }
                None => sha.update(u64::MAX.to_be_bytes()),
            }
        }
        let digest = sha.finalize();
        let hash = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        Fingerprint { offset, hash }
    }
}

/// The last record read of each partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fingerprints(pub BTreeMap<TopicPartition, Fingerprint>);

impl Fingerprints {
    /// These, updated with the last record of each partition in `records` (any order).
    pub fn updated(&self, records: &[Record]) -> Fingerprints {
        let mut last: BTreeMap<TopicPartition, &Record> = BTreeMap::new();
        // Records come in runs of one partition: the map is touched once per run.
        let same = |a: &Record, b: &Record| a.partition == b.partition && a.topic == b.topic;
        for run in records.chunk_by(same) {
            let record = run
                .iter()
                .max_by_key(|r| r.offset)
                .expect("a run is not empty");
            let tp = TopicPartition {
                topic: record.topic.clone(),
                partition: record.partition,
            };
            let entry = last.entry(tp).or_insert(record);
            if record.offset > entry.offset {
                *entry = record;
            }
        }
        let mut all = self.clone();
        for (tp, record) in last {
            all.0.insert(tp, Fingerprint::of(record));
        }
        all
    }

    /// As JSON, `{"topic": {"0": [41, "a1b2c3d4e5f60718"]}}`.
    pub fn to_json(&self) -> String {
        let mut map: BTreeMap<&str, BTreeMap<String, (i64, String)>> = BTreeMap::new();
        for (tp, f) in &self.0 {
            map.entry(&tp.topic).or_default().insert(
                tp.partition.to_string(),
                (f.offset, format!("{:016x}", f.hash)),
            );
        }
        serde_json::to_string(&map).expect("a map of numbers and strings serialises")
    }

    /// Parses what [`Fingerprints::to_json`] wrote.
    pub fn from_json(text: &str) -> Result<Fingerprints, String> {
        let map: BTreeMap<String, BTreeMap<String, (i64, String)>> = serde_json::from_str(text)
            .map_err(|e| format!("invalid `{LAST_RECORDS}` {text:?}: {e}"))?;
        let mut all = Fingerprints::default();
        for (topic, partitions) in map {
            let topic: Arc<str> = topic.into();
            for (partition, (offset, hash)) in partitions {
                let bad = || format!("invalid entry {partition:?} in `{LAST_RECORDS}`");
                let partition = partition.parse().map_err(|_| bad())?;
                let hash = u64::from_str_radix(&hash, 16).map_err(|_| bad())?;
                let tp = TopicPartition {
                    topic: topic.clone(),
                    partition,
                };
                all.0.insert(tp, Fingerprint { offset, hash });
            }
        }
        Ok(all)
    }
}

/// A partition whose recorded last record is not what the broker holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The partition.
    pub partition: TopicPartition,
    /// What was found instead, for people.
    pub found: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: i32, offset: i64, value: &str) -> Record {
        let mut r = Record::with_value("t".into(), offset, value);
        r.partition = partition;
        r
    }

    #[test]
    fn the_last_record_of_each_partition_is_kept_and_round_trips() {
        let first = Fingerprints::default().updated(&[record(0, 1, "a"), record(1, 7, "b")]);
        let later = first.updated(&[record(0, 3, "c"), record(0, 2, "x")]);
        assert_eq!(later.0.len(), 2);
        let p0 = &later.0[&TopicPartition {
            topic: "t".into(),
            partition: 0,
        }];
        assert_eq!(*p0, Fingerprint::of(&record(0, 3, "c")));
        assert_eq!(Fingerprints::from_json(&later.to_json()).unwrap(), later);
        assert!(Fingerprints::from_json(r#"{"t":{"0":[1,"zz"]}}"#).is_err());
    }

    #[test]
    fn another_record_at_the_same_offset_has_another_fingerprint() {
        let a = Fingerprint::of(&record(0, 5, "a"));
        assert_ne!(a, Fingerprint::of(&record(0, 5, "b")));
        let mut keyed = record(0, 5, "a");
        keyed.key = Some(Vec::new().into());
        assert_ne!(a, Fingerprint::of(&keyed), "a null key is not an empty key");
        let mut stamped = record(0, 5, "a");
        stamped.timestamp_ms = Some(1);
        assert_ne!(a, Fingerprint::of(&stamped));
    }
}
