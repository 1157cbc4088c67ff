//! Consumer-group membership (`mode = "group"`): the group gives this process a share of
//! the partitions (cooperative-sticky assignment), and the table says where each starts.
//!
//! The rebalance callback runs inside the consumer's poll. On an assignment it assigns each
//! new partition at the offset the table recorded for it when the pipeline last looked
//! ([`Membership::starts`]); on a revocation it releases the partitions. Either way it
//! flags the change: the batch being read is then abandoned ([`SourceError::Rebalanced`]),
//! and the pipeline reads the table's offsets again and positions what it owns now. A
//! partition released in the middle of a batch is never committed by this process: the
//! batch is abandoned before anything of it leaves, and the table's fence stops any commit
//! that overlaps another member's.
//!
//! [`SourceError::Rebalanced`]: crate::source::SourceError::Rebalanced

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

use crate::record::Record;
use crate::source::{Offsets, TopicPartition};

/// Records kept at most while serving the group between batches (fewer when a batch's
/// caps are lower: the stash never holds more than one batch's `max-records` or
/// `max-bytes`); past it, callbacks wait for the next batch's polls.
const IDLE_STASH: usize = 100_000;

/// What the group gave this process.
#[derive(Debug, Default)]
pub(super) struct Membership {
    /// The partitions this process owns now, as `(topic, partition)`.
    pub(super) owned: BTreeSet<(String, i32)>,
    /// Whether the assignment changed since the pipeline last positioned it.
    pub(super) changed: bool,
    /// Whether the group answered at least once.
    pub(super) joined: bool,
    /// Rebalances seen since the start.
    pub(super) rebalances: u64,
    /// Where a newly assigned partition starts: the table's offsets as last read.
    pub(super) starts: Offsets,
    /// Where a partition the table does not know starts: the end (a brand-new pipeline
    /// with `starting-offsets = "latest"`) or the beginning.
    pub(super) unknown_at_end: bool,
}

/// The consumer's context: it keeps the membership up to date.
#[derive(Debug, Default, Clone)]
pub(super) struct SourceContext {
    pub(super) membership: Arc<Mutex<Membership>>,
}

impl SourceContext {
    pub(super) fn membership(&self) -> MutexGuard<'_, Membership> {
        self.membership.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ClientContext for SourceContext {}

impl ConsumerContext for SourceContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let partitions: Vec<(String, i32)> = tpl
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition()))
            .collect();
        let mut m = self.membership();
        let outcome = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                for (topic, partition) in &partitions {
                    let _ =
                        tpl.set_partition_offset(topic, *partition, m.start_of(topic, *partition));
                    m.owned.insert((topic.clone(), *partition));
                }
                tracing::info!(partitions = ?partitions, "consumer group: partitions assigned");
                if cooperative {
                    consumer.incremental_assign(tpl)
                } else {
                    consumer.assign(tpl)
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                for p in &partitions {
                    m.owned.remove(p);
                }
                tracing::info!(partitions = ?partitions, "consumer group: partitions revoked");
                if cooperative {
                    consumer.incremental_unassign(tpl)
                } else {
                    consumer.unassign()
                }
            }
            other => {
                tracing::warn!(error = ?other, "consumer group: rebalance failed");
                return;
            }
        };
        if let Err(error) = outcome {
            tracing::warn!(%error, "consumer group: applying a rebalance failed");
        }
        m.changed = true;
        m.joined = true;
        m.rebalances += 1;
    }
}

impl Membership {
    /// Where a newly assigned partition starts.
    fn start_of(&self, topic: &str, partition: i32) -> Offset {
        let tp = TopicPartition {
            topic: topic.into(),
            partition,
        };
        match self.starts.get(&tp) {
            Some(next) => Offset::Offset(next),
            None if self.unknown_at_end => Offset::End,
            None => Offset::Beginning,
        }
    }
}

impl super::KafkaSource {
    /// `mode = "group"`: joins the group (the first time), then positions the partitions
    /// this process owns now at the table's offsets (`resume`).
    pub(super) fn start_member(
        &mut self,
        resume: Option<&Offsets>,
    ) -> Result<Offsets, crate::source::SourceError> {
        {
            let mut m = self.consumer.context().membership();
            m.starts = resume.cloned().unwrap_or_default();
            m.unknown_at_end =
                resume.is_none() && self.config.starting_offsets == super::StartingOffsets::Latest;
        }
        if !self.subscribed {
            let topics: Vec<&str> = self.topics.iter().map(|t| &**t).collect();
            Self::request(
                || "joining the consumer group".into(),
                self.consumer.subscribe(&topics),
            )?;
            self.subscribed = true;
            self.wait_for_assignment()?;
        }
        let owned = self.owned();
        let watermarks = self.watermarks_of(&owned)?;
        let mut positions = Offsets::default();
        for tp in owned {
            let next = self.start_position(&tp, resume, self.watermark(&watermarks, &tp)?)?;
            positions.set(tp, next);
        }
        self.consumer.context().membership().changed = false;
        self.positions = positions;
        self.stash.clear();
        self.seek_owned()?;
        tracing::info!(group = %self.group, partitions = %self.positions, "consumer group: reading these partitions");
        Ok(self.positions.clone())
    }

    /// The end offsets of the partitions this process owns.
    pub(super) fn member_end_offsets(&mut self) -> Result<Offsets, crate::source::SourceError> {
        self.serve_group();
        if self.consumer.context().membership().changed {
            return Err(crate::source::SourceError::Rebalanced);
        }
        self.end_offsets_of(&self.owned())
    }

    /// Serves the group's callbacks (rebalances) between batches: a member that reads
    /// nothing for a while must still poll, or it would never learn of partitions given to
    /// it. Records that arrive meanwhile are kept for the next batch, up to one batch's
    /// caps (what is not polled stays in the broker, or in librdkafka's bounded prefetch).
    pub(super) fn serve_group(&mut self) {
        let most = self.caps.records.min(IDLE_STASH);
        let mut bytes: u64 = self.stash.iter().map(Record::bytes).sum();
        while self.stash.len() < most && bytes < self.caps.bytes {
            let Some(polled) = self.consumer.poll(std::time::Duration::ZERO) else {
                break;
            };
            match polled {
                Ok(message) => {
                    if let Some(topic) = self.topic_arc(rdkafka::Message::topic(&message)) {
                        let record = Self::record(&message, &topic, &mut self.chunks);
                        bytes += record.bytes();
                        self.stash.push_back(record);
                    }
                }
                Err(error) => tracing::warn!(%error, "Kafka consumer error (retrying)"),
            }
        }
    }

    /// Whether the group changed what this process owns since it last positioned it.
    pub(super) fn rebalanced(&self) -> bool {
        self.config.mode == super::SourceMode::Group && self.consumer.context().membership().changed
    }

    /// Rebalances since the start.
    pub(super) fn rebalances(&self) -> u64 {
        self.consumer.context().membership().rebalances
    }

    /// The partitions this process owns now.
    fn owned(&self) -> Vec<TopicPartition> {
        let owned = self.consumer.context().membership().owned.clone();
        owned
            .into_iter()
            .filter_map(|(topic, partition)| {
                let topic = self.topic_arc(&topic)?;
                Some(TopicPartition { topic, partition })
            })
            .collect()
    }

    /// Polls until the group gives this process its first assignment (possibly none).
    fn wait_for_assignment(&mut self) -> Result<(), crate::source::SourceError> {
        let started = std::time::Instant::now();
        while !self.consumer.context().membership().joined {
            if started.elapsed() > self.config.fetch_timeout {
                return Err(crate::source::SourceError::NoAssignment {
                    group: self.group.clone(),
                    seconds: self.config.fetch_timeout.as_secs(),
                });
            }
            // Records polled meanwhile are fetched again once positioned.
            let _ = self.consumer.poll(super::POLL);
        }
        Ok(())
    }

    /// Moves every owned partition to its position (records prefetched are fetched again).
    fn seek_owned(&mut self) -> Result<(), crate::source::SourceError> {
        if self.positions.0.is_empty() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for (tp, &next) in &self.positions.0 {
            let added = tpl.add_partition_offset(&tp.topic, tp.partition, Offset::Offset(next));
            Self::request(|| format!("positioning {tp}"), added)?;
        }
        let sought = self.consumer.seek_partitions(tpl, super::METADATA_TIMEOUT);
        let sought = Self::request(|| "positioning the owned partitions".into(), sought)?;
        for e in sought.elements() {
            if let Err(error) = e.error() {
                return Err(crate::source::SourceError::Request {
                    what: format!("positioning {}/{}", e.topic(), e.partition()),
                    error,
                });
            }
        }
        Ok(())
    }
}
