//! Kafka plumbing shared by sources, sinks and `sluice produce`: client configuration and
//! topic administration (rdkafka, which bundles librdkafka).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::{ClientConfig, ClientContext};

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

/// Creates `topic` with `partitions` partitions unless it exists already. A topic the
/// broker's metadata lists is not created again, so a client without the right to create
/// topics works with topics that exist.
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
    if let Ok(metadata) = admin.inner().fetch_metadata(Some(topic), timeout)
        && metadata
            .topics()
            .iter()
            .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
    {
        tracing::debug!(topic, "Topic exists already.");
        return Ok(());
    }
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

/// A producer context that counts deliveries and keeps the first failure.
#[derive(Debug, Default)]
pub struct Deliveries {
    delivered: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Deliveries {
    /// Records acknowledged so far.
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// Records that failed so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// The first failure's message.
    pub fn first_error(&self) -> Option<String> {
        self.first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err((error, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert_with(|| error.to_string());
            }
        }
    }
}
