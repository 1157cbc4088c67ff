//! Where an output topic is ([`TopicTarget`]) and how its producer is configured: shared
//! by the outputs that write topics (dead letters, late data, window and join results) and
//! the configuration sections that name them.

use std::time::Duration;

use rdkafka::ClientConfig;

use super::Connection;

/// Where an output topic is and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicTarget {
    /// The topic.
    pub topic: String,
    /// The cluster, and the properties of the clients that write and read the topic.
    pub connection: Connection,
    /// Longest wait for acknowledgements.
    pub ack_timeout: Duration,
}

impl TopicTarget {
    /// The largest record its producer sends: the producer's `message.max.bytes` if the
    /// properties set it, else librdkafka's default (1 000 000). If the topic's own
    /// `max.message.bytes` is lower, set the property to it.
    pub fn max_record_bytes(&self) -> usize {
        self.connection
            .properties()
            .get("message.max.bytes")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000)
    }
}

/// sluice's defaults for the producers of output topics (the connection's properties win):
/// every record acknowledged by all in-sync replicas; no idempotence (delivery is at least
/// once, and repeats are identifiable by their headers or keys).
pub const PRODUCER_DEFAULTS: [(&str, &str); 3] = [
    ("acks", "all"),
    ("linger.ms", "5"),
    ("enable.idempotence", "false"),
];

/// The configuration of the producer (and of the admin client that creates the topic) of
/// an output topic on `connection`.
pub fn producer_config(connection: &Connection) -> ClientConfig {
    connection.client_config(&PRODUCER_DEFAULTS)
}
