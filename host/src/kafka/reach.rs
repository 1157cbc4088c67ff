//! Reaching a cluster before using it. librdkafka retries a connection that fails the TLS
//! handshake or SASL authentication forever, and a request meanwhile only times out; so
//! before a client is used, [`reach`] asks the cluster for its metadata with a client of the
//! same kind and properties, and stops at the first TLS or authentication error, with
//! librdkafka's words for it (`certificate verify failed`, `Authentication failed`...). A
//! cluster that does not answer at all is reported after the timeout, with the last
//! connection error seen.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError as RdKafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, DeliveryResult, Producer, ProducerContext};

use super::check::ClientKind;
use super::{Connection, KafkaError};

/// How long one metadata request may wait before the errors seen meanwhile are looked at.
const SLICE: Duration = Duration::from_millis(250);

/// The first error that retrying will not mend, and the last error of any kind.
#[derive(Debug, Default)]
struct Watch {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    refused: Option<String>,
    last: Option<String>,
}

impl Watch {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether an error is a refusal that retrying will not mend: a TLS handshake or an
/// authentication that failed.
pub fn is_refusal(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::SSL
            | RDKafkaErrorCode::Authentication
            | RDKafkaErrorCode::SaslAuthenticationFailed
    )
}

impl ClientContext for Watch {
    fn error(&self, error: RdKafkaError, reason: &str) {
        tracing::debug!(%error, reason, "Kafka client error while reaching the cluster.");
        let mut seen = self.seen();
        if error.rdkafka_error_code().is_some_and(is_refusal) {
            seen.refused.get_or_insert_with(|| reason.to_string());
        }
        seen.last = Some(reason.to_string());
    }
}

impl ConsumerContext for Watch {}

impl ProducerContext for Watch {
    type DeliveryOpaque = ();

    fn delivery(&self, _: &DeliveryResult<'_>, _: ()) {}
}

/// Waits until the cluster of `connection` answers a client of `kind` made with its
/// properties (see the module's documentation), for at most `timeout`.
pub fn reach(
    connection: &Connection,
    kind: ClientKind,
    timeout: Duration,
) -> Result<(), KafkaError> {
    let config = connection.client_config(&[]);
    let client_error = |error| connection.client_error(error);
    let outcome = match kind {
        ClientKind::Consumer => {
            let consumer: BaseConsumer<Watch> = config
                .create_with_context(Watch::default())
                .map_err(client_error)?;
            wait(
                || consumer.fetch_metadata(None, SLICE).is_ok(),
                || {
                    let _ = consumer.poll(Duration::ZERO);
                },
                consumer.context(),
                timeout,
            )
        }
        ClientKind::Producer => {
            let producer: BaseProducer<Watch> = config
                .create_with_context(Watch::default())
                .map_err(client_error)?;
            wait(
                || producer.client().fetch_metadata(None, SLICE).is_ok(),
                || producer.poll(Duration::ZERO),
                producer.context(),
                timeout,
            )
        }
    };
    outcome.map_err(|reason| KafkaError::Unreachable {
        bootstrap: connection.bootstrap.clone(),
        reason,
    })
}

/// Asks `answered` until it says yes, serving the client's events (`serve`) in between:
/// stops at a refusal that `watch` saw, or after `timeout`.
fn wait(
    answered: impl Fn() -> bool,
    serve: impl Fn(),
    watch: &Watch,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if answered() {
            return Ok(());
        }
        serve();
        let seen = watch.seen();
        if let Some(refused) = &seen.refused {
            return Err(refused.clone());
        }
        if Instant::now() >= deadline {
            let last = seen.last.as_deref().unwrap_or("no error reported");
            return Err(format!("no answer within {timeout:?} (last error: {last})"));
        }
    }
}
