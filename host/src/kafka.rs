//! Kafka plumbing shared by sources, sinks and `sluice produce`: client configuration and
//! topic administration (rdkafka, which bundles librdkafka).

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;

/// A Kafka operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    /// A client could not be created from the configuration.
    #[error("cannot create a Kafka client for {bootstrap}: {error}")]
    Client {
        /// The bootstrap servers.
        bootstrap: String,
        /// What librdkafka said.
        error: rdkafka::error::KafkaError,
    },
    /// A topic could not be created.
    #[error("cannot create topic `{topic}`: {message}")]
    CreateTopic {
        /// The topic.
        topic: String,
        /// What the broker said.
        message: String,
    },
}

/// Client configuration: the bootstrap servers, then `extra` librdkafka properties
/// (`KEY=VALUE`, e.g. `security.protocol=SSL`), which override sluice's defaults.
pub fn client_config(bootstrap: &str, extra: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (k, v) in extra {
        config.set(k, v);
    }
    config
}

/// Creates `topic` with `partitions` partitions unless it exists already.
pub fn ensure_topic(
    config: &ClientConfig,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<(), KafkaError> {
    let bootstrap = config
        .get("bootstrap.servers")
        .unwrap_or_default()
        .to_string();
    let admin: AdminClient<DefaultClientContext> = config
        .create()
        .map_err(|error| KafkaError::Client { bootstrap, error })?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(timeout));
    let results =
        futures_executor::block_on(admin.create_topics([&new], &options)).map_err(|e| {
            KafkaError::CreateTopic {
                topic: topic.to_string(),
                message: e.to_string(),
            }
        })?;
    for result in results {
        match result {
            Ok(_) => tracing::info!(topic, partitions, "Created topic."),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {
                tracing::debug!(topic, "Topic exists already.");
            }
            Err((_, code)) => {
                return Err(KafkaError::CreateTopic {
                    topic: topic.to_string(),
                    message: code.to_string(),
                });
            }
        }
    }
    Ok(())
}
