//! `sluice produce`: a load generator of realistic retail clickstream events, as JSON or as
//! Avro in the Confluent wire format (the schema registered in a Schema Registry).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

use super::produce_format::{Target, ValueEncoder, encoder, format_name};
use crate::bar::Bar;
use crate::event_time::extract::Extractor;
use crate::format::Format;
use crate::generate::{EventKind, GeneratedEvent, Generator, GeneratorConfig, Shape};
use crate::kafka::{self, Deliveries};

/// Arguments of `sluice produce`.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Kafka bootstrap servers.
    #[arg(
        long,
        env = "KAFKA_BOOTSTRAP",
        default_value = "localhost:9092",
        value_name = "HOST:PORT",
        value_parser = bootstrap_servers
    )]
    pub bootstrap_servers: String,
    /// Topic to write to.
    #[arg(long, env = "KAFKA_TOPIC", value_name = "NAME", value_parser = topic_name)]
    pub topic: String,
    /// Number of events to send; 0 sends until interrupted.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub count: u64,
    /// Events per second; 0 sends as fast as the broker takes them. Any positive rate
    /// works, however small (`0.001`: one event every 1000 s); a signal stops the wait.
    #[arg(long, default_value_t = 0.0, value_name = "PER_SECOND", value_parser = rate)]
    pub rate: f64,
    /// Seed of the generator: the same seed sends the same events.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Share of events (0 to 1) that break one validation rule.
    #[arg(long, default_value_t = 0.05, value_name = "SHARE")]
    pub invalid_share: f64,
    /// Share of events (0 to 1) whose event time is 30 to 90 seconds late.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub late_share: f64,
    /// Share of events (0 to 1) that repeat a recent event exactly.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub duplicate_share: f64,
    /// Create the topic first if it does not exist, with `--partitions` partitions.
    #[arg(long)]
    pub create_topic: bool,
    /// Partitions of a topic created by `--create-topic` (at least 1).
    #[arg(
        long,
        default_value_t = 3,
        value_name = "N",
        value_parser = clap::value_parser!(i32).range(1..)
    )]
    pub partitions: i32,
    /// A librdkafka producer property `KEY=VALUE`, e.g. `compression.type=zstd`,
    /// `security.protocol=SSL`, `ssl.ca.location=ca.pem`. Repeatable; the last of a key
    /// wins. (`--kafka` is an older name.)
    #[arg(
        long = "property",
        alias = "kafka",
        value_name = "KEY=VALUE",
        value_parser = super::parse_key_value
    )]
    pub properties: Vec<(String, String)>,
    /// Events to generate: `retail` (the retail tutorial's 18 fields) or `analytics` (the
    /// real-time analytics tutorial's 5 fields, event time in `timestamp`).
    #[arg(long, value_enum, default_value_t = Shape::Retail)]
    pub shape: Shape,
    /// Send every event to this partition (default: the producer's partitioner).
    #[arg(long, value_name = "N")]
    pub partition: Option<i32>,
    /// Key each event by the value of this field (a path, like `user.id`): its text, as
    /// `[source] keyed-by` reads it; no key when it is missing. Default: the generator's
    /// key (the session), no key for `--input` lines.
    #[arg(long, value_name = "FIELD")]
    pub key_by: Option<String>,
    /// Number the generated events from this one (`evt_000000000` by default), so that
    /// several runs or producers make distinct event ids.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub first_id: u64,
    /// Send the lines of this JSON-lines file as they are (blank lines skipped, no key)
    /// instead of generated events; `--count` and the shares are then ignored.
    #[arg(long, value_name = "FILE")]
    pub input: Option<std::path::PathBuf>,
    /// How values are encoded: `json` (the default), `avro` or `protobuf` (the retail and
    /// analytics shapes): the Confluent wire format, a zero byte, the schema's 4-byte id
    /// (for Protobuf the message index `0`) and the datum or message, the schema
    /// registered first under the subject `<topic>-value` of `--schema-registry`. An
    /// invalid event the format cannot express (a quantity of `"several"`, a time that is
    /// not a time) is sent as a value a reader refuses as undecodable.
    #[arg(long, default_value = "json", value_name = "FORMAT", value_parser = format_name)]
    pub format: Format,
    /// The Schema Registry (Confluent REST API) to register the schema in, e.g.
    /// `http://localhost:8081`; needed by `--format avro` and `protobuf`.
    #[arg(
        long,
        env = "SCHEMA_REGISTRY_URL",
        value_name = "URL",
        required_if_eq_any([("format", "avro"), ("format", "protobuf")])
    )]
    pub schema_registry: Option<String>,
    /// HTTP basic auth for `--schema-registry`, `USER:PASSWORD`.
    #[arg(long, env = "SCHEMA_REGISTRY_USER", value_name = "USER:PASSWORD")]
    pub schema_registry_user: Option<String>,
}

/// What `sluice produce` sent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ProduceSummary {
    /// Events acknowledged by the broker.
    pub delivered: u64,
    /// Valid, on-time events.
    pub valid: u64,
    /// Valid events with a late event time.
    pub late: u64,
    /// Events that break a validation rule.
    pub invalid: u64,
    /// Exact repeats of recent events.
    pub duplicates: u64,
    /// Events sent as undecodable values (truncated Avro datums, broken Protobuf
    /// messages), because the format cannot express them (they are among the invalid
    /// ones).
    pub truncated: u64,
}

/// Sends generated events; returns once every event is acknowledged (or fails).
pub fn run(args: &ProduceArgs, stop: &dyn Fn() -> bool) -> anyhow::Result<ProduceSummary> {
    check_shares(args)?;
    let encoder = value_encoder(args)?;
    let producer = producer(args)?;
    let mut events = Events::open(args)?;
    let key_by = args.key_by.as_deref().map(|field| Extractor::new([field]));
    let mut summary = ProduceSummary::default();
    let start = Instant::now();
    let mut sent = 0u64;
    let total = (!events.reads_file() && args.count > 0).then_some(args.count);
    let bar = Bar::counting("events sent", total);
    while (events.reads_file() || args.count == 0 || sent < args.count) && !stop() {
        if !pace(args.rate, start, sent, stop) {
            break;
        }
        let Some(event) = events.next() else {
            break;
        };
        if !events.reads_file() {
            summary.count(event.kind);
        }
        let key = match &key_by {
            Some(extractor) => key_of(extractor, &event.value),
            None => event.key.clone(),
        };
        match &encoder {
            Some(encoder) => {
                let encoded = encoder.encode(&event.value);
                if let Some(reason) = &encoded.broken {
                    tracing::debug!(%reason, %key, "Sending an undecodable value.");
                    summary.truncated += 1;
                }
                send(&producer, args, &key, &encoded.value)?;
            }
            None => send(&producer, args, &key, event.value.as_bytes())?,
        }
        sent += 1;
        bar.inc(1);
    }
    bar.say("waiting for the broker's acknowledgements");
    summary.delivered = acknowledged(&producer, sent)?;
    drop(bar);
    log_summary(args, &summary, start);
    Ok(summary)
}

/// The text of the one field `extractor` reads from `value` (empty: no key).
fn key_of(extractor: &Extractor, value: &str) -> String {
    match extractor.read(Some(value.as_bytes())) {
        Ok(values) => values
            .into_iter()
            .next()
            .flatten()
            .map(|v| v.text().to_string())
            .unwrap_or_default(),
        Err(_) => String::new(),
    }
}

fn check_shares(args: &ProduceArgs) -> anyhow::Result<()> {
    for (name, share) in [
        ("--invalid-share", args.invalid_share),
        ("--late-share", args.late_share),
        ("--duplicate-share", args.duplicate_share),
    ] {
        if !(0.0..=1.0).contains(&share) {
            bail!("{name} must be between 0 and 1, not {share}");
        }
    }
    Ok(())
}

/// The encoder of `--format avro` or `protobuf`, its schema registered under
/// `<topic>-value` of `--schema-registry`; `None` for JSON.
pub(super) fn value_encoder(args: &ProduceArgs) -> anyhow::Result<Option<ValueEncoder>> {
    let target = Target {
        url: args.schema_registry.as_deref(),
        user: args.schema_registry_user.as_deref(),
        topic: &args.topic,
    };
    encoder(args.format, args.shape, &target)
}

/// The producer's configuration: sluice's defaults, then the `--property` values.
fn producer_config(args: &ProduceArgs) -> (kafka::Connection, ClientConfig) {
    let connection = kafka::Connection::new(
        args.bootstrap_servers.clone(),
        args.properties.iter().cloned().collect(),
    );
    let config = connection.client_config(&[("linger.ms", "5"), ("acks", "all")]);
    (connection, config)
}

/// A producer with the user's properties, after creating the topic if asked.
fn producer(args: &ProduceArgs) -> anyhow::Result<ThreadedProducer<Deliveries>> {
    let (connection, config) = producer_config(args);
    kafka::reach(
        &connection,
        kafka::ClientKind::Producer,
        kafka::REACH_TIMEOUT,
    )?;
    if args.create_topic {
        kafka::ensure_topic(
            &config,
            &args.topic,
            args.partitions,
            Duration::from_secs(30),
        )?;
    }
    config
        .create_with_context(Deliveries::default())
        .with_context(|| {
            format!(
                "cannot create a Kafka producer for {}",
                args.bootstrap_servers
            )
        })
}

/// Where the events come from.
enum Events {
    /// The generator, `--count` events or endless.
    Generated(Generator),
    /// The non-blank lines of `--input`, as they are, with no key; their kinds are unknown.
    Lines(std::vec::IntoIter<String>),
}

impl Events {
    fn open(args: &ProduceArgs) -> anyhow::Result<Self> {
        let Some(path) = &args.input else {
            let config = GeneratorConfig {
                seed: args.seed,
                invalid_share: args.invalid_share,
                late_share: args.late_share,
                duplicate_share: args.duplicate_share,
                shape: args.shape,
                ..GeneratorConfig::default()
            };
            return Ok(Events::Generated(
                Generator::new(config).numbered_from(args.first_id),
            ));
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let lines: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        Ok(Events::Lines(lines.into_iter()))
    }

    fn reads_file(&self) -> bool {
        matches!(self, Events::Lines(_))
    }
}

impl Iterator for Events {
    type Item = GeneratedEvent;

    fn next(&mut self) -> Option<GeneratedEvent> {
        match self {
            Events::Generated(generator) => Some(generator.next_event()),
            Events::Lines(lines) => lines.next().map(|value| GeneratedEvent {
                key: String::new(),
                value,
                kind: EventKind::Valid,
            }),
        }
    }
}

impl ProduceSummary {
    fn count(&mut self, kind: EventKind) {
        match kind {
            EventKind::Valid => self.valid += 1,
            EventKind::Late => self.late += 1,
            EventKind::Invalid => self.invalid += 1,
            EventKind::Duplicate => self.duplicates += 1,
        }
    }
}

/// The longest sleep between two looks at the stop flag while pacing.
const PACE_SLICE: Duration = Duration::from_millis(50);

/// Sleeps until event number `sent` is due at `rate` events per second (0: never sleeps),
/// in slices of [`PACE_SLICE`], looking at `stop` after each; false when stopped first. A
/// time too far to be told (a tiny rate) is never due: the wait lasts until `stop`.
fn pace(rate: f64, start: Instant, sent: u64, stop: &dyn Fn() -> bool) -> bool {
    if rate <= 0.0 {
        return true;
    }
    let due = Duration::try_from_secs_f64(sent as f64 / rate)
        .ok()
        .and_then(|after| start.checked_add(after));
    loop {
        if stop() {
            return false;
        }
        let wait = match due {
            Some(due) => match due.checked_duration_since(Instant::now()) {
                Some(wait) if !wait.is_zero() => wait,
                _ => return true,
            },
            None => PACE_SLICE,
        };
        std::thread::sleep(wait.min(PACE_SLICE));
    }
}

/// A `--rate`: a number of events per second, 0 or more (0: as fast as the broker takes
/// them).
fn rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of events per second"))?;
    if !rate.is_finite() || rate < 0.0 {
        return Err(format!(
            "the rate must be a finite number of events per second, 0 or more (0: as fast as the broker takes them), not {text}"
        ));
    }
    Ok(rate)
}

/// A `--topic`: a name Kafka accepts.
fn topic_name(text: &str) -> Result<String, String> {
    match kafka::topic_name_problem(text) {
        Some(problem) => Err(problem),
        None => Ok(text.to_string()),
    }
}

/// A `--bootstrap-servers` list naming at least one server.
fn bootstrap_servers(text: &str) -> Result<String, String> {
    match kafka::bootstrap_problem(text) {
        Some(problem) => Err(problem),
        None => Ok(text.to_string()),
    }
}

/// Queues one record (no key if `key` is empty), waiting while the producer's queue is
/// full.
fn send(
    producer: &ThreadedProducer<Deliveries>,
    args: &ProduceArgs,
    key: &str,
    value: &[u8],
) -> anyhow::Result<()> {
    let mut record = BaseRecord::to(&args.topic).payload(value);
    if !key.is_empty() {
        record = record.key(key);
    }
    if let Some(partition) = args.partition {
        record = record.partition(partition);
    }
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((error, _)) => return Err(error).context("cannot send an event"),
        }
    }
}

/// Waits for every acknowledgement; returns how many events were delivered.
fn acknowledged(producer: &ThreadedProducer<Deliveries>, sent: u64) -> anyhow::Result<u64> {
    producer
        .flush(Duration::from_secs(60))
        .context("events were not all acknowledged within 60s")?;
    let context = producer.context();
    let delivered = context.delivered();
    let failed = context.failed();
    if failed > 0 {
        bail!(
            "{failed} of {sent} events were not delivered; first error: {}",
            context.first_error().unwrap_or_default()
        );
    }
    Ok(delivered)
}

fn log_summary(args: &ProduceArgs, summary: &ProduceSummary, start: Instant) {
    let seconds = start.elapsed().as_secs_f64();
    tracing::info!(
        topic = %args.topic,
        delivered = summary.delivered,
        valid = summary.valid,
        late = summary.late,
        invalid = summary.invalid,
        duplicates = summary.duplicates,
        truncated = summary.truncated,
        events_per_second = (summary.delivered as f64 / seconds.max(1e-9)).round(),
        "Produced events."
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, parse};

    #[test]
    fn properties_reach_the_producer_and_the_last_of_a_key_wins() {
        let invocation = parse([
            "sluice",
            "produce",
            "--topic",
            "t",
            "--property",
            "compression.type=zstd",
            "--kafka",
            "linger.ms=7",
            "--property",
            "acks=1",
            "--property",
            "acks=0",
        ])
        .unwrap();
        let Command::Produce(args) = &invocation.cli.command else {
            panic!("parsed as produce")
        };
        let (_, config) = producer_config(args);
        assert_eq!(config.get("compression.type"), Some("zstd"));
        assert_eq!(config.get("linger.ms"), Some("7"), "--kafka is an alias");
        assert_eq!(config.get("acks"), Some("0"));
    }

    /// What `sluice produce … EXTRA` parses to, or clap's message.
    fn parsed(extra: &[&str]) -> Result<ProduceArgs, String> {
        let topic: &[&str] = if extra.contains(&"--topic") {
            &[]
        } else {
            &["--topic", "t"]
        };
        let args = ["sluice", "produce"]
            .iter()
            .chain(topic)
            .chain(extra)
            .copied();
        match parse(args).map_err(|e| e.to_string())?.cli.command {
            Command::Produce(args) => Ok(args),
            _ => panic!("parsed as produce"),
        }
    }

    #[test]
    fn rates_partitions_topics_and_servers_are_checked_when_parsed() {
        for (extra, says) in [
            (&["--partitions", "0"][..], "0 is not in 1.."),
            (&["--partitions=-2"][..], "--partitions"),
            (&["--rate=-1"][..], "0 or more"),
            (&["--rate", "NaN"][..], "finite"),
            (&["--rate", "inf"][..], "finite"),
            (&["--rate", "fast"][..], "not a number"),
            (&["--topic", ""][..], "the topic name is empty"),
            (&["--topic", "a/b"][..], "holds `/`"),
            (&["--bootstrap-servers", ""][..], "no bootstrap server"),
        ] {
            let error = parsed(extra).expect_err(&format!("{extra:?} parsed"));
            assert!(error.contains(says), "{extra:?}: {error}");
        }
        for rate in ["0", "1e-300", "5e-324", "2.5"] {
            let args = parsed(&["--rate", rate]).unwrap();
            assert_eq!(args.rate, rate.parse::<f64>().unwrap());
        }
        assert_eq!(parsed(&["--partitions", "1"]).unwrap().partitions, 1);
    }

    #[test]
    fn events_are_keyed_by_a_fields_text() {
        let args = parsed(&["--key-by", "user.id"]).unwrap();
        let extractor = Extractor::new([args.key_by.as_deref().unwrap()]);
        for (value, key) in [
            (r#"{"user":{"id":"u1"},"n":1}"#, "u1"),
            (r#"{"user":{"id":42}}"#, "42"),
            (r#"{"user":{}}"#, ""),
            ("not json", ""),
        ] {
            assert_eq!(key_of(&extractor, value), key, "{value}");
        }
    }

    #[test]
    fn pacing_stops_within_a_slice_of_the_stop_flag_at_any_rate() {
        let start = Instant::now();
        let never = || false;
        assert!(pace(0.0, start, 1_000_000, &never), "0: never waits");
        assert!(
            pace(1e-300, start, 0, &never),
            "the first event is due at once"
        );
        for rate in [1e-9, 1e-300, 5e-324, 0.001] {
            let asked = Instant::now();
            let stop = || asked.elapsed() > Duration::from_millis(120);
            assert!(!pace(rate, start, 1, &stop), "{rate}");
            let took = asked.elapsed();
            assert!(
                took < Duration::from_millis(120) + PACE_SLICE * 2,
                "{rate}: {took:?}"
            );
        }
        let fast = Instant::now();
        assert!(pace(1000.0, fast, 50, &never));
        assert!(fast.elapsed() >= Duration::from_millis(50));
    }
}
