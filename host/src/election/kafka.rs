//! The election on Kafka: a consumer of its own in the group `<group-id>-active`,
//! subscribed to the first source topic with cooperative-sticky assignment. It never reads:
//! every partition it is given is paused at once. Whoever owns partition 0 is active; the
//! assignment is sticky, so a standby joining does not move it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientConfig, ClientContext, TopicPartitionList};

use super::Election;
use crate::source::SourceError;
use crate::source::kafka::KafkaSourceConfig;

/// What the group gave this process.
#[derive(Debug, Default)]
struct Held {
    partitions: BTreeSet<i32>,
    changes: u64,
}

#[derive(Debug, Default, Clone)]
struct ElectionContext(Arc<Mutex<Held>>);

impl ElectionContext {
    fn held(&self) -> MutexGuard<'_, Held> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ClientContext for ElectionContext {}

impl ConsumerContext for ElectionContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let partitions: Vec<i32> = tpl.elements().iter().map(|e| e.partition()).collect();
        let mut held = self.held();
        let applied = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                held.partitions.extend(&partitions);
                consumer
                    .incremental_assign(tpl)
                    .and_then(|()| consumer.pause(tpl))
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                for p in &partitions {
                    held.partitions.remove(p);
                }
                consumer.incremental_unassign(tpl)
            }
            other => {
                tracing::warn!(error = ?other, "election: rebalance failed");
                return;
            }
        };
        if let Err(error) = applied {
            tracing::warn!(%error, "election: applying a rebalance failed");
        }
        held.changes += 1;
        tracing::debug!(partitions = ?held.partitions, "election: the group changed");
    }
}

/// Active while the group `<group-id>-active` gives this process partition 0 of the first
/// source topic.
pub struct KafkaElection {
    consumer: BaseConsumer<ElectionContext>,
    group: String,
}

impl std::fmt::Debug for KafkaElection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaElection")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl KafkaElection {
    /// Joins the election of the pipeline whose source is `config` and whose consumer group
    /// is `group`. The source's `properties` apply (security, `session.timeout.ms`: a dead
    /// active process is replaced after its session times out).
    pub fn join(config: &KafkaSourceConfig, group: &str) -> Result<Self, SourceError> {
        let consumer: BaseConsumer<ElectionContext> = Self::client_config(config, group)
            .create_with_context(ElectionContext::default())
            .map_err(|error| config.connection().client_error(error))?;
        let group = Self::group(group);
        let topic = config
            .topics
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        consumer
            .subscribe(&[topic])
            .map_err(|error| SourceError::Request {
                what: format!("joining the election group `{group}`"),
                error,
            })?;
        tracing::info!(%group, %topic, "election: joined (the owner of partition 0 is active)");
        Ok(KafkaElection { consumer, group })
    }

    /// The election's consumer group, beside the pipeline's `group`.
    pub fn group(group: &str) -> String {
        format!("{group}-active")
    }

    /// The election consumer's configuration: sluice's defaults (the election group,
    /// cooperative-sticky assignment, no commits), then `[source] properties`.
    pub fn client_config(config: &KafkaSourceConfig, group: &str) -> ClientConfig {
        let group = Self::group(group);
        config.connection().client_config(&[
            ("group.id", &group),
            ("enable.auto.commit", "false"),
            ("enable.partition.eof", "false"),
            ("partition.assignment.strategy", "cooperative-sticky"),
        ])
    }
}

impl Election for KafkaElection {
    fn active(&mut self) -> bool {
        // Rebalance callbacks run here. Nothing is read (every partition is paused); a
        // record fetched before the pause is dropped.
        while self.consumer.poll(Duration::ZERO).is_some() {}
        self.consumer.context().held().partitions.contains(&0)
    }

    fn changes(&self) -> u64 {
        self.consumer.context().held().changes
    }
}
