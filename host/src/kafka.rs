//! Kafka plumbing shared by the source, the output topics, the election and the command
//! line: the one place client configurations are built ([`Connection::client_config`]),
//! reaching a cluster with a clear error when TLS or authentication fails ([`reach`]),
//! topic administration ([`ensure_topic`]), delivery counting, and the offline check of the
//! properties that `sluice run --check` does ([`check`]), knowing nothing of the pipeline.

pub mod check;
pub mod headers;
pub mod names;
pub mod partitioner;
pub mod reach;
pub mod target;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::{ClientConfig, ClientContext};

pub use self::check::ClientKind;
pub use self::names::{bootstrap_problem, topic_name_problem};
pub use self::reach::reach;
pub use self::target::TopicTarget;

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
    /// The cluster did not answer, or refused this client (TLS, authentication).
    #[error("cannot reach Kafka at {bootstrap}: {reason}")]
    Unreachable {
        /// The bootstrap servers.
        bootstrap: String,
        /// What librdkafka said.
        reason: String,
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

/// How long [`reach`] waits for a cluster that does not answer.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(30);

/// sluice's defaults for every client. With TLS, the CA certificates trusted are the
/// system's (`probe`: librdkafka looks in the usual places, `/etc/ssl/certs/` and others):
/// its OpenSSL is built in, and that OpenSSL's own default folder (`/usr/local/ssl`) is not
/// where systems keep them. `ssl.ca.location` in the properties replaces this.
pub const CONNECTION_DEFAULTS: [(&str, &str); 1] = [("ssl.ca.location", "probe")];

/// How sluice reaches a Kafka cluster: the bootstrap servers and the librdkafka properties
/// that every client made for it gets. The shared properties are `[source] properties`; an
/// output (dead letters, late data, a window's topic) adds its own, which win.
///
/// Its `Debug` shows property names, not values (they may be passwords).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Connection {
    /// `host:port[,host:port...]`.
    pub bootstrap: String,
    /// Properties every client gets (`[source] properties`).
    pub shared: BTreeMap<String, String>,
    /// The client's own properties, over the shared ones (an output's `properties`).
    pub own: BTreeMap<String, String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("bootstrap", &self.bootstrap)
            .field("shared", &self.shared.keys().collect::<Vec<_>>())
            .field("own", &self.own.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Connection {
    /// The cluster at `bootstrap`, every client getting `shared`.
    pub fn new(bootstrap: impl Into<String>, shared: BTreeMap<String, String>) -> Self {
        Connection {
            bootstrap: bootstrap.into(),
            shared,
            own: BTreeMap::new(),
        }
    }

    /// The cluster at `bootstrap`, with no properties but sluice's defaults.
    pub fn plain(bootstrap: impl Into<String>) -> Self {
        Self::new(bootstrap, BTreeMap::new())
    }

    /// The connection of one output: on its own `bootstrap` servers if it has some, else on
    /// these; this connection's properties, then `own` (which win).
    pub fn for_output(&self, bootstrap: Option<&str>, own: &BTreeMap<String, String>) -> Self {
        Connection {
            bootstrap: bootstrap.unwrap_or(&self.bootstrap).to_string(),
            shared: self.properties(),
            own: own.clone(),
        }
    }

    /// Every property a client gets: the shared ones, overridden by its own.
    pub fn properties(&self) -> BTreeMap<String, String> {
        let mut all = self.shared.clone();
        all.extend(self.own.iter().map(|(k, v)| (k.clone(), v.clone())));
        all
    }

    /// A client configuration: the bootstrap servers, [`CONNECTION_DEFAULTS`], sluice's
    /// `defaults` for this kind of client, then the properties
    /// ([`Connection::properties`]), which win over the defaults. Every Kafka client sluice
    /// makes is configured here.
    pub fn client_config(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        for (k, v) in CONNECTION_DEFAULTS.iter().chain(defaults) {
            config.set(*k, *v);
        }
        for (k, v) in self.properties() {
            config.set(k, v);
        }
        config
    }

    /// The error of a client that could not be created.
    pub fn client_error(&self, error: rdkafka::error::KafkaError) -> KafkaError {
        KafkaError::Client {
            bootstrap: self.bootstrap.clone(),
            error,
        }
    }
}

/// The replication factor sluice asks for when it creates a topic: -1, the broker's
/// `default.replication.factor` (Kafka 2.4 and later), so a topic it creates on a
/// production cluster is as durable as the cluster's others.
pub const BROKER_DEFAULT_REPLICATION: i32 = -1;

/// The request to create `topic` with `partitions` partitions and the broker's default
/// replication factor.
pub fn new_topic(topic: &str, partitions: i32) -> NewTopic<'_> {
    NewTopic::new(
        topic,
        partitions,
        TopicReplication::Fixed(BROKER_DEFAULT_REPLICATION),
    )
}

/// What [`ensure_topic`] found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicState {
    /// The topic was created.
    Created,
    /// The topic existed already.
    Existed,
    /// The broker refused to create the topic for lack of permission, and the topic
    /// exists: it is used as it is.
    ExistedCreationRefused,
}

/// Creates `topic` with `partitions` partitions unless it exists already. A topic the
/// broker's metadata lists is not created again, and a topic whose creation is refused for
/// lack of permission is fine if it exists: a client without the right to create topics
/// works with topics that an administrator made.
pub fn ensure_topic(
    config: &ClientConfig,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<TopicState, KafkaError> {
    let admin = admin_client(config)?;
    if listed(&admin, topic, timeout) {
        tracing::debug!(topic, "Topic exists already.");
        return Ok(TopicState::Existed);
    }
    let answer = create(&admin, topic, partitions, timeout)?;
    let state = creation_outcome(topic, answer, || listed(&admin, topic, timeout))?;
    match state {
        TopicState::Created => tracing::info!(topic, partitions, "Created topic."),
        TopicState::Existed => tracing::debug!(topic, "Topic exists already."),
        TopicState::ExistedCreationRefused => tracing::info!(
            topic,
            "Not allowed to create the topic, which exists: using it as it is."
        ),
    }
    Ok(state)
}

/// An admin client of `config`.
fn admin_client(config: &ClientConfig) -> Result<AdminClient<DefaultClientContext>, KafkaError> {
    let bootstrap = config.get("bootstrap.servers").unwrap_or_default();
    let bootstrap = bootstrap.to_string();
    config
        .create()
        .map_err(|error| KafkaError::Client { bootstrap, error })
}

/// How many partitions the broker's metadata lists for `topic` (`None`: it lists none).
pub fn partition_count(
    config: &ClientConfig,
    topic: &str,
    timeout: Duration,
) -> Result<Option<i32>, KafkaError> {
    let admin = admin_client(config)?;
    let metadata = admin.inner().fetch_metadata(Some(topic), timeout).ok();
    let count = metadata.and_then(|m| {
        let listed = m.topics().iter().find(|t| t.name() == topic)?;
        i32::try_from(listed.partitions().len()).ok()
    });
    Ok(count.filter(|&n| n > 0))
}

/// Whether the broker's metadata lists `topic`, with partitions.
fn listed(admin: &AdminClient<DefaultClientContext>, topic: &str, timeout: Duration) -> bool {
    admin
        .inner()
        .fetch_metadata(Some(topic), timeout)
        .is_ok_and(|metadata| {
            metadata
                .topics()
                .iter()
                .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
        })
}

/// Asks the broker to create `topic`: its answer for the topic.
fn create(
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<Result<(), RDKafkaErrorCode>, KafkaError> {
    let new = new_topic(topic, partitions);
    let options = AdminOptions::new().operation_timeout(Some(timeout));
    let results =
        futures_executor::block_on(admin.create_topics([&new], &options)).map_err(|e| {
            KafkaError::CreateTopic {
                topic: topic.to_string(),
                message: e.to_string(),
            }
        })?;
    Ok(match results.into_iter().next() {
        Some(Err((_, code))) => Err(code),
        _ => Ok(()),
    })
}

/// Whether the broker refused a request for lack of permission.
fn refused_for_permission(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::TopicAuthorizationFailed | RDKafkaErrorCode::ClusterAuthorizationFailed
    )
}

/// What the broker's `answer` to creating `topic` means. A refusal for lack of permission
/// is only an error when the topic does not exist either (`listed_now` asks the broker
/// again: it may have been created meanwhile, or the first look may have failed).
pub fn creation_outcome(
    topic: &str,
    answer: Result<(), RDKafkaErrorCode>,
    listed_now: impl FnOnce() -> bool,
) -> Result<TopicState, KafkaError> {
    match answer {
        Ok(()) => Ok(TopicState::Created),
        Err(RDKafkaErrorCode::TopicAlreadyExists) => Ok(TopicState::Existed),
        Err(code) if refused_for_permission(code) => {
            if listed_now() {
                Ok(TopicState::ExistedCreationRefused)
            } else {
                Err(KafkaError::CreateTopic {
                    topic: topic.to_string(),
                    message: format!(
                        "{code}: this client may not create topics and the topic does not \
                         exist (or this client may not see it); create it, or grant the \
                         right to create it"
                    ),
                })
            }
        }
        Err(code) => Err(KafkaError::CreateTopic {
            topic: topic.to_string(),
            message: code.to_string(),
        }),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn properties_win_over_defaults_and_own_over_shared() {
        let source = Connection::new(
            "a:9092",
            map(&[
                ("security.protocol", "SSL"),
                ("acks", "1"),
                ("client.id", "src"),
            ]),
        );
        let output = source.for_output(None, &map(&[("client.id", "dlq")]));
        let config = output.client_config(&[("acks", "all"), ("linger.ms", "5")]);
        assert_eq!(config.get("bootstrap.servers"), Some("a:9092"));
        assert_eq!(config.get("security.protocol"), Some("SSL"));
        assert_eq!(config.get("acks"), Some("1"), "the shared property wins");
        assert_eq!(config.get("linger.ms"), Some("5"), "a default stays");
        assert_eq!(
            config.get("client.id"),
            Some("dlq"),
            "the output's own wins"
        );
        assert_eq!(
            config.get("ssl.ca.location"),
            Some("probe"),
            "the system's CAs"
        );
        let own_ca = source.for_output(None, &map(&[("ssl.ca.location", "/ca.pem")]));
        let config = own_ca.client_config(&[]);
        assert_eq!(config.get("ssl.ca.location"), Some("/ca.pem"));
        let elsewhere = source.for_output(Some("b:9092"), &BTreeMap::new());
        let config = elsewhere.client_config(&[]);
        assert_eq!(config.get("bootstrap.servers"), Some("b:9092"));
        assert_eq!(config.get("client.id"), Some("src"));
    }

    #[test]
    fn debug_hides_property_values() {
        let c = Connection::new("a:9092", map(&[("sasl.password", "hunter2")]));
        let shown = format!("{c:?}");
        assert!(shown.contains("sasl.password"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn topics_are_created_with_the_broker_default_replication() {
        let topic = new_topic("t", 3);
        assert_eq!((topic.name, topic.num_partitions), ("t", 3));
        assert!(
            matches!(topic.replication, TopicReplication::Fixed(-1)),
            "replication factor -1: the broker's default.replication.factor"
        );
    }

    #[test]
    fn a_refused_creation_is_fine_when_the_topic_exists() {
        let refused = Err(RDKafkaErrorCode::TopicAuthorizationFailed);
        let state = creation_outcome("t", refused, || true).unwrap();
        assert_eq!(state, TopicState::ExistedCreationRefused);
        let cluster = Err(RDKafkaErrorCode::ClusterAuthorizationFailed);
        let state = creation_outcome("t", cluster, || true).unwrap();
        assert_eq!(state, TopicState::ExistedCreationRefused);
        let err = creation_outcome("t", refused, || false).unwrap_err();
        assert!(err.to_string().contains("may not create topics"), "{err}");
    }

    #[test]
    fn other_answers_to_a_creation() {
        let asked = std::cell::Cell::new(false);
        let listed = || {
            asked.set(true);
            true
        };
        assert_eq!(
            creation_outcome("t", Ok(()), listed).unwrap(),
            TopicState::Created
        );
        let exists = Err(RDKafkaErrorCode::TopicAlreadyExists);
        assert_eq!(
            creation_outcome("t", exists, listed).unwrap(),
            TopicState::Existed
        );
        let invalid = Err(RDKafkaErrorCode::InvalidReplicationFactor);
        assert!(creation_outcome("t", invalid, listed).is_err());
        assert!(!asked.get(), "only a refusal for permission looks again");
    }
}
