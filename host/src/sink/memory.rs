//! In-memory output topics, the twin of Kafka for fast tests: what is sent is kept, in
//! order, and can be read back in the shape [`super::topic::read_all`] gives for Kafka.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use super::topic::{Outgoing, Topic, TopicError, TopicRecord, TopicTarget, Topics};
use crate::record::Header;
use crate::source::memory::MemoryLog;

#[derive(Debug, Default)]
struct Held {
    topics: BTreeMap<String, Vec<TopicRecord>>,
    /// Where what is sent is also appended, to be read back as a source.
    log: Option<MemoryLog>,
    failing: BTreeSet<String>,
    opened: Vec<TopicTarget>,
}

/// Output topics in memory. Clones share the topics, so what a pipeline sent survives the
/// pipeline (as a broker survives a crash).
#[derive(Debug, Clone, Default)]
pub struct MemoryTopics(Arc<Mutex<Held>>);

impl MemoryTopics {
    /// Topics that also append what is sent to `log`, by partition (a record without one
    /// to partition 0), where a [`crate::source::memory::MemorySource`] reads it: a
    /// repartition topic's stage two reads what stage one sent.
    pub fn with_log(log: &MemoryLog) -> Self {
        let topics = MemoryTopics::default();
        topics.held().log = Some(log.clone());
        topics
    }

    /// Every record sent to `topic`, in order (offsets count from 0).
    pub fn records(&self, topic: &str) -> Vec<TopicRecord> {
        self.held().topics.get(topic).cloned().unwrap_or_default()
    }

    /// Every target opened so far, in order: where a Kafka topic would have been, and how
    /// it would have been reached.
    pub fn opened(&self) -> Vec<TopicTarget> {
        self.held().opened.clone()
    }

    /// Every topic and its records.
    pub fn all(&self) -> BTreeMap<String, Vec<TopicRecord>> {
        self.held().topics.clone()
    }

    /// Makes sends to `topic` fail (`true`) or succeed again.
    pub fn set_failing(&self, topic: &str, failing: bool) {
        let mut held = self.held();
        if failing {
            held.failing.insert(topic.to_string());
        } else {
            held.failing.remove(topic);
        }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Topics for MemoryTopics {
    fn open_partitioned(
        &self,
        target: &TopicTarget,
        partitions: i32,
    ) -> Result<Box<dyn Topic>, TopicError> {
        let mut held = self.held();
        held.opened.push(target.clone());
        held.topics.entry(target.topic.clone()).or_default();
        if let Some(log) = &held.log {
            log.create(&target.topic, partitions);
        }
        Ok(Box::new(MemoryTopic {
            name: target.topic.clone(),
            topics: self.clone(),
        }))
    }
}

/// One topic of [`MemoryTopics`].
#[derive(Debug)]
struct MemoryTopic {
    name: String,
    topics: MemoryTopics,
}

impl Topic for MemoryTopic {
    fn name(&self) -> &str {
        &self.name
    }

    fn send_all(&self, records: Vec<Outgoing<'_>>) -> Result<u64, TopicError> {
        let mut held = self.topics.held();
        if held.failing.contains(&self.name) {
            return Err(TopicError::NotAcknowledged {
                topic: self.name.clone(),
                failed: records.len() as u64,
                first: "the memory topic is set to fail".into(),
            });
        }
        let log = held.log.clone();
        let topic = held.topics.entry(self.name.clone()).or_default();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let sent = records.len() as u64;
        for record in records {
            if let Some(log) = &log {
                let headers = record.headers.iter().map(|(name, value)| Header {
                    name: (*name).to_string(),
                    value: value.map(<[u8]>::to_vec),
                });
                let partition = record.partition.unwrap_or(0);
                log.append_with(&self.name, partition, record.key, record.value, headers);
            }
            topic.push(TopicRecord {
                partition: record.partition.unwrap_or(0),
                offset: topic.len() as i64,
                key: record.key.map(text),
                value: record.value.map(text),
                headers: record
                    .headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.map(text).unwrap_or_default()))
                    .collect(),
            });
        }
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn sends_are_kept_and_can_fail() {
        let topics = MemoryTopics::default();
        let target = TopicTarget {
            topic: "t".into(),
            connection: crate::kafka::Connection::default(),
            ack_timeout: Duration::from_secs(1),
        };
        let topic = topics.open(&target).unwrap();
        let record = Outgoing {
            partition: None,
            key: Some(b"k"),
            value: Some(b"v"),
            headers: vec![("h", Some(b"1"))],
        };
        assert_eq!(
            topic
                .send_all(vec![record.clone(), record.clone()])
                .unwrap(),
            2
        );
        let held = topics.records("t");
        assert_eq!(held.len(), 2);
        assert_eq!((held[1].offset, held[1].key.as_deref()), (1, Some("k")));
        assert_eq!(held[0].headers["h"], "1");
        topics.set_failing("t", true);
        assert!(topic.send_all(vec![record]).is_err());
        assert_eq!(topics.records("t").len(), 2);
    }

    #[test]
    fn sends_to_partitions_are_appended_to_a_log_to_be_read_back() {
        let log = MemoryLog::default();
        let topics = MemoryTopics::with_log(&log);
        let target = TopicTarget {
            topic: "r".into(),
            connection: crate::kafka::Connection::default(),
            ack_timeout: Duration::from_secs(1),
        };
        let topic = topics.open_partitioned(&target, 3).unwrap();
        let marker = Outgoing {
            partition: Some(2),
            key: None,
            value: None,
            headers: vec![("h", Some(b"1"))],
        };
        topic.send_all(vec![marker]).unwrap();
        assert!(log.records("r", 0).is_empty() && log.records("r", 1).is_empty());
        let read = log.records("r", 2);
        assert_eq!(read.len(), 1);
        assert_eq!((read[0].value.as_ref(), read[0].key.as_ref()), (None, None));
        assert_eq!(read[0].headers[0].value.as_deref(), Some(b"1".as_slice()));
        assert_eq!(topics.records("r")[0].partition, 2);
    }
}
