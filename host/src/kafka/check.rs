//! The offline check of Kafka client properties, for `sluice run --check`: every property
//! that librdkafka does not know or that this build cannot honour, and every client that
//! cannot be made with its configuration, each named with the clients it is for.
//!
//! Nothing connects. A property is checked by building librdkafka's native configuration
//! with it alone; then each client whose properties all passed is made without bootstrap
//! servers (so it has no broker to reach) and destroyed at once. Making it runs the checks
//! that need the whole configuration: that the SASL mechanism is built in (GSSAPI is not),
//! that `sasl.username` is set for SCRAM. The files that TLS properties name are not opened
//! ([`LOCAL_FILES`]): they may exist only where sluice runs, which reports one that does not
//! load when it makes the client.

use std::collections::BTreeMap;
use std::fmt;

use rdkafka::ClientConfig;
use rdkafka::client::{Client, ClientContext};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaType;

use super::Connection;

/// Where the properties every client gets are set.
pub const SHARED_SECTION: &str = "[source] properties";

/// Whether a client consumes or produces (admin requests go through a producer's handle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// A consumer.
    Consumer,
    /// A producer.
    Producer,
}

/// A Kafka client that a pipeline makes, as the check sees it.
#[derive(Debug, Clone)]
pub struct PlannedClient {
    /// What it is, for people: `source consumer`, `dead-letter producer (topic `x`)`.
    pub role: String,
    /// Consumer or producer.
    pub kind: ClientKind,
    /// Where its own properties are set, e.g. `[dead-letter] properties`.
    pub section: String,
    /// Its connection: which properties are shared and which its own.
    pub connection: Connection,
    /// Its whole configuration, as the client is made with it.
    pub config: ClientConfig,
}

/// One thing the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// librdkafka does not know a property, or refuses its value.
    Property {
        /// Where it is set.
        section: String,
        /// The property.
        key: String,
        /// The clients that get it.
        clients: Vec<String>,
        /// What librdkafka said.
        reason: String,
    },
    /// A client cannot be made with its configuration.
    Client {
        /// The client.
        client: String,
        /// What librdkafka said.
        reason: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Property {
                section,
                key,
                clients,
                reason,
            } => write!(
                f,
                "{section} `{key}` (for the {}): {reason}",
                clients.join(", the ")
            ),
            Problem::Client { client, reason } => {
                write!(
                    f,
                    "the {client} cannot be made with its properties: {reason}"
                )
            }
        }
    }
}

/// Kafka client configurations that this build cannot honour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CheckError {
    /// Every problem found.
    pub problems: Vec<Problem>,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "{n} Kafka client problem{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

/// Checks `clients` offline: every refused property, then every client (among those whose
/// properties all passed) that cannot be made.
pub fn check_clients(clients: &[PlannedClient]) -> Result<(), CheckError> {
    let mut problems = property_problems(clients);
    let flagged: Vec<String> = problems
        .iter()
        .flat_map(|p| match p {
            Problem::Property { clients, .. } => clients.clone(),
            Problem::Client { .. } => Vec::new(),
        })
        .collect();
    for client in clients.iter().filter(|c| !flagged.contains(&c.role)) {
        if let Some(reason) = cannot_make(client) {
            problems.push(Problem::Client {
                client: client.role.clone(),
                reason,
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CheckError { problems })
    }
}

/// Every property of `clients` that librdkafka refuses, once per section and key, with
/// the clients that get it.
fn property_problems(clients: &[PlannedClient]) -> Vec<Problem> {
    let mut found: BTreeMap<(String, String), (String, Vec<String>)> = BTreeMap::new();
    for client in clients {
        for (key, value) in client.connection.properties() {
            let Some(reason) = refusal(&key, &value) else {
                continue;
            };
            let section = if client.connection.own.contains_key(&key) {
                client.section.clone()
            } else {
                SHARED_SECTION.to_string()
            };
            let entry = found.entry((section, key)).or_insert((reason, Vec::new()));
            entry.1.push(client.role.clone());
        }
    }
    found
        .into_iter()
        .map(|((section, key), (reason, clients))| Problem::Property {
            section,
            key,
            clients,
            reason,
        })
        .collect()
}

/// Why librdkafka refuses `key = value`, if it does: an unknown property, a value out of
/// range, or a feature not available at build time. The value is not repeated (it may
/// come from the environment, and error messages never show such values).
pub fn refusal(key: &str, value: &str) -> Option<String> {
    let mut config = ClientConfig::new();
    config.set(key, value);
    let reason = reason(config.create_native_config().err()?);
    Some(without_values(reason, [value]))
}

/// `reason` with every quoted occurrence of `values` replaced by `"…"`.
fn without_values<'a>(mut reason: String, values: impl IntoIterator<Item = &'a str>) -> String {
    for value in values.into_iter().filter(|v| !v.is_empty()) {
        reason = reason.replace(&format!("\"{value}\""), "\"…\"");
    }
    reason
}

/// librdkafka's words, without rdkafka's wrapping (nor the value, which may be secret).
fn reason(error: KafkaError) -> String {
    match error {
        KafkaError::ClientConfig(_, description, _, _) => description,
        KafkaError::ClientCreation(message) => message,
        other => other.to_string(),
    }
}

/// A context that keeps librdkafka's messages to itself: the client made by the check has
/// no brokers on purpose.
struct Quiet;

impl ClientContext for Quiet {
    fn log(&self, _: RDKafkaLogLevel, _: &str, _: &str) {}

    fn error(&self, _: KafkaError, _: &str) {}
}

/// Properties naming files of the host that runs sluice, which the check leaves out of the
/// clients it makes.
pub const LOCAL_FILES: [&str; 6] = [
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.crl.location",
    "ssl.engine.location",
];

/// Why `client` cannot be made, if it cannot: librdkafka makes it without bootstrap
/// servers, so it connects nowhere, and without [`LOCAL_FILES`]; it is destroyed at once.
pub fn cannot_make(client: &PlannedClient) -> Option<String> {
    let mut config = client.config.clone();
    config.remove("bootstrap.servers");
    for key in LOCAL_FILES {
        config.remove(key);
    }
    let native = match config.create_native_config() {
        Ok(native) => native,
        Err(error) => return Some(reason(error)),
    };
    let kind = match client.kind {
        ClientKind::Consumer => RDKafkaType::RD_KAFKA_CONSUMER,
        ClientKind::Producer => RDKafkaType::RD_KAFKA_PRODUCER,
    };
    let properties = client.connection.properties();
    let made = Client::new(&config, native, kind, Quiet);
    made.err()
        .map(|e| without_values(reason(e), properties.values().map(String::as_str)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(role: &str, kind: ClientKind, connection: Connection) -> PlannedClient {
        PlannedClient {
            role: role.into(),
            kind,
            section: format!("[{role}] properties"),
            config: connection.client_config(&[]),
            connection,
        }
    }

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_build_has_tls_sasl_scram_and_every_codec() {
        for (key, value) in [
            ("security.protocol", "SASL_SSL"),
            ("security.protocol", "SSL"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.mechanisms", "SCRAM-SHA-256"),
            ("sasl.mechanisms", "PLAIN"),
            ("compression.type", "gzip"),
            ("compression.type", "snappy"),
            ("compression.type", "lz4"),
            ("compression.type", "zstd"),
        ] {
            assert_eq!(refusal(key, value), None, "{key}={value}");
        }
        let scram = Connection::new(
            "",
            props(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanisms", "SCRAM-SHA-512"),
                ("sasl.username", "u"),
                ("sasl.password", "p"),
            ]),
        );
        for kind in [ClientKind::Consumer, ClientKind::Producer] {
            let c = client("scram", kind, scram.clone());
            assert_eq!(cannot_make(&c), None, "{kind:?}");
        }
        let zstd = Connection::new("", props(&[("compression.type", "zstd")]));
        assert_eq!(cannot_make(&client("p", ClientKind::Producer, zstd)), None);
    }

    #[test]
    fn unknown_and_unbuilt_properties_are_named_with_their_clients() {
        let source = Connection::new(
            "a:9092",
            props(&[("no.such.property", "1"), ("client.id", "x")]),
        );
        let dlq = source.for_output(None, &props(&[("sasl.oauthbearer.method", "oidc")]));
        let clients = [
            client("source consumer", ClientKind::Consumer, source.clone()),
            client("dead-letter producer", ClientKind::Producer, dlq),
        ];
        let err = check_clients(&clients).unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
        let about = |wanted: &str| {
            err.problems
                .iter()
                .find_map(|p| match p {
                    Problem::Property {
                        section,
                        key,
                        clients,
                        reason,
                    } if key == wanted => Some((section.clone(), clients.clone(), reason.clone())),
                    _ => None,
                })
                .unwrap_or_else(|| panic!("no problem about {wanted}: {err}"))
        };
        let (section, named, reason) = about("no.such.property");
        assert_eq!(section, SHARED_SECTION);
        assert_eq!(named, ["source consumer", "dead-letter producer"]);
        assert!(
            reason.contains("No such configuration property"),
            "{reason}"
        );
        let (section, named, reason) = about("sasl.oauthbearer.method");
        assert_eq!(section, "[dead-letter producer] properties");
        assert_eq!(named, ["dead-letter producer"]);
        assert!(reason.contains("not available at build time"), "{reason}");
        let reason = refusal("compression.type", "brotli").unwrap();
        assert!(reason.starts_with("Invalid value \"…\""), "{reason}");
        assert!(
            !reason.contains("brotli"),
            "the value is not repeated: {reason}"
        );
        let shown = err.to_string();
        assert!(shown.starts_with("2 Kafka client problems:"), "{shown}");
    }

    #[test]
    fn a_mechanism_not_built_in_is_found_by_making_the_client() {
        let gssapi = Connection::new(
            "a:9092",
            props(&[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanisms", "GSSAPI"),
            ]),
        );
        let err =
            check_clients(&[client("source consumer", ClientKind::Consumer, gssapi)]).unwrap_err();
        let [
            Problem::Client {
                client: role,
                reason,
            },
        ] = err.problems.as_slice()
        else {
            panic!("{err}")
        };
        assert_eq!(role, "source consumer");
        assert!(reason.contains("GSSAPI"), "{reason}");
        let fine = Connection::new("a:9092", props(&[("client.id", "x")]));
        assert_eq!(
            check_clients(&[client("source consumer", ClientKind::Consumer, fine)]),
            Ok(())
        );
    }

    #[test]
    fn making_the_client_catches_what_needs_the_whole_configuration() {
        let no_user = Connection::new(
            "a:9092",
            props(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanisms", "SCRAM-SHA-256"),
            ]),
        );
        let reason = cannot_make(&client("c", ClientKind::Consumer, no_user)).unwrap();
        assert!(reason.contains("sasl.username"), "{reason}");
    }

    #[test]
    fn files_of_the_running_host_are_not_opened() {
        let elsewhere = Connection::new(
            "a:9092",
            props(&[
                ("security.protocol", "SSL"),
                ("ssl.ca.location", "/no/such/ca.pem"),
                ("ssl.certificate.location", "/no/such/client.pem"),
                ("ssl.key.location", "/no/such/client.key"),
            ]),
        );
        let c = client("p", ClientKind::Producer, elsewhere);
        assert_eq!(check_clients(std::slice::from_ref(&c)), Ok(()));
        // Where sluice runs, making the client reads them.
        let made: Result<rdkafka::producer::BaseProducer, _> = c.config.create();
        let reason = reason(made.err().expect("the CA file is missing"));
        assert!(reason.contains("ssl.ca.location"), "{reason}");
    }
}
