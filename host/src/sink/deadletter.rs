//! The dead-letter sink: records that a plugin rejected, that failed in a plugin, or that
//! do not fit the table, sent to a Kafka topic with the reason in headers.
//!
//! Each dead-letter record keeps the original key and value and headers, and adds:
//!
//! | header | value |
//! |---|---|
//! | `sluice.error.stage` | the stage that refused it (`encode` for the table's schema) |
//! | `sluice.error.code` | machine-readable code (`invalid_event_type`, `type_mismatch`...) |
//! | `sluice.error.message` | the reason, for people |
//! | `sluice.error.field` | the offending field, when one is to blame |
//! | `sluice.stage.digest` | sha256 of the plugin that refused it (plugin stages only) |
//! | `sluice.source.topic`, `.partition`, `.offset`, `.timestamp` | where it came from |
//! | `sluice.pipeline`, `sluice.batch-id` | which pipeline and batch |
//!
//! The same output sends late events to their own topic (`event-time.late = "topic"`),
//! with the same headers.
//!
//! Dead-letter delivery is at least once: a batch's records are acknowledged before its
//! table commit, so a crash between the two re-sends them on restart. `sluice.source.*`
//! identify a record uniquely, so a consumer can drop repeats.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::topic::{Outgoing, Topic, TopicTarget};
use super::{Delivered, Output, OutputError, Results, send_to};
use crate::kafka::Connection;
use crate::record::{Reason, Record};

/// The dead-letter topic.
///
/// ```toml
/// [dead-letter]
/// topic = "retail-clickstream-dead-letter"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DeadLetterConfig {
    /// The topic. Created (one partition, the broker's default replication factor) if
    /// absent.
    pub topic: String,
    /// Bootstrap servers of the dead-letter cluster; default: the source's. The source's
    /// `properties` still apply (override them in `properties`).
    #[serde(default)]
    pub bootstrap_servers: Option<String>,
    /// Longest wait for the broker to acknowledge a batch's dead-letter records.
    #[serde(default = "default_ack_timeout", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub ack_timeout: Duration,
    /// librdkafka properties of the dead-letter producer (and of `sluice show`'s reader),
    /// over `[source] properties`: these win.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

const fn default_ack_timeout() -> Duration {
    Duration::from_secs(60)
}

impl DeadLetterConfig {
    /// Where the topic is: on its own cluster if configured, else on the `source`'s; with
    /// the source's properties and these over them.
    pub fn target(&self, source: &Connection) -> TopicTarget {
        TopicTarget {
            topic: self.topic.clone(),
            connection: source.for_output(self.bootstrap_servers.as_deref(), &self.properties),
            ack_timeout: self.ack_timeout,
        }
    }
}

/// Which of a batch's refused records an output takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Refused by a plugin, the encoder or event time (`[dead-letter]`).
    DeadLetters,
    /// Behind the watermark, with `event-time.late = "topic"`.
    Late,
}

/// Sends a batch's refused records, with their reason in headers, to a topic.
pub struct DeadLetterOutput {
    topic: Box<dyn Topic>,
    route: Route,
    /// The largest record the producer sends (see [`TopicTarget::max_record_bytes`]).
    max_record_bytes: usize,
}

impl std::fmt::Debug for DeadLetterOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadLetterOutput")
            .field("topic", &self.topic.name())
            .field("route", &self.route)
            .finish()
    }
}

impl DeadLetterOutput {
    /// Sends the records of `route` to `topic`, none larger than `max_record_bytes` (a
    /// larger one is cut to fit, see [`fit`]).
    pub fn new(topic: Box<dyn Topic>, route: Route, max_record_bytes: usize) -> Self {
        DeadLetterOutput {
            topic,
            route,
            max_record_bytes,
        }
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        self.topic.name()
    }
}

impl Output for DeadLetterOutput {
    fn name(&self) -> String {
        match self.route {
            Route::DeadLetters => format!("dead-letter topic `{}`", self.topic.name()),
            Route::Late => format!("late topic `{}`", self.topic.name()),
        }
    }

    fn send(&mut self, results: &Results) -> Result<Delivered, OutputError> {
        let records = match self.route {
            Route::DeadLetters => &results.dead,
            Route::Late => &results.late,
        };
        let batch = results.batch_id.to_string();
        let positions: Vec<[String; 3]> = records.iter().map(|(r, _)| position(r)).collect();
        let mut outgoing: Vec<Outgoing<'_>> = records
            .iter()
            .zip(&positions)
            .map(|((record, reason), position)| {
                outgoing(record, reason, position, &results.pipeline, &batch)
            })
            .collect();
        let notes: Vec<Option<String>> = outgoing
            .iter_mut()
            .map(|o| fit(o, self.max_record_bytes))
            .collect();
        for (o, note) in outgoing.iter_mut().zip(&notes) {
            if let Some(note) = note {
                o.headers.push((TRUNCATED, Some(note.as_bytes())));
            }
        }
        send_to(self.topic.as_ref(), self.name(), outgoing)
    }
}

/// Header of a dead letter that was cut to fit the topic: what was cut, e.g. `value
/// 2000000 -> 998500 bytes`. The original stays in the source topic, at the position in
/// `sluice.source.*`.
pub const TRUNCATED: &str = "sluice.truncated";

/// Room kept for the record's framing and the [`TRUNCATED`] header.
const FRAMING_BYTES: usize = 1024;

/// Roughly what `record` weighs on the wire (its framing aside).
fn weight(record: &Outgoing<'_>) -> usize {
    let len = |b: Option<&[u8]>| b.map_or(0, <[u8]>::len);
    let headers: usize = record
        .headers
        .iter()
        .map(|(name, value)| name.len() + len(*value) + 10)
        .sum();
    len(record.key) + len(record.value) + headers
}

/// Cuts `record` to at most `max` bytes if it is larger: the value first, then the key,
/// then the original record's headers (sluice's own stay). Returns what was cut, for the
/// [`TRUNCATED`] header; `None` if it fits.
pub fn fit(record: &mut Outgoing<'_>, max: usize) -> Option<String> {
    let budget = max.saturating_sub(FRAMING_BYTES);
    let mut excess = weight(record).checked_sub(budget).filter(|&e| e > 0)?;
    let mut cuts = Vec::new();
    for (part, bytes) in [("value", &mut record.value), ("key", &mut record.key)] {
        if let Some(whole) = bytes.filter(|b| !b.is_empty() && excess > 0) {
            let keep = whole.len().saturating_sub(excess);
            excess -= whole.len() - keep;
            cuts.push(format!("{part} {} -> {keep} bytes", whole.len()));
            *bytes = Some(&whole[..keep]);
        }
    }
    if excess > 0 {
        let before = record.headers.len();
        record
            .headers
            .retain(|(name, _)| name.starts_with("sluice."));
        cuts.push(format!(
            "{} original headers dropped",
            before - record.headers.len()
        ));
    }
    Some(cuts.join("; "))
}

/// A record's partition, offset and timestamp, as header text.
fn position(record: &Record) -> [String; 3] {
    [
        record.partition.to_string(),
        record.offset.to_string(),
        record
            .timestamp_ms
            .map(|t| t.to_string())
            .unwrap_or_default(),
    ]
}

/// The dead letter of `record`: its key, value and headers, and sluice's headers.
fn outgoing<'a>(
    record: &'a Record,
    reason: &'a Reason,
    [partition, offset, timestamp]: &'a [String; 3],
    pipeline: &'a str,
    batch: &'a str,
) -> Outgoing<'a> {
    let mut headers: Vec<(&str, Option<&[u8]>)> = record
        .headers
        .iter()
        .map(|h| (h.name.as_str(), h.value.as_deref()))
        .collect();
    let timestamp = record.timestamp_ms.map(|_| timestamp.as_str());
    let added = [
        ("sluice.error.stage", Some(reason.stage.as_str())),
        ("sluice.error.code", Some(&reason.code)),
        ("sluice.error.message", Some(&*reason.message)),
        ("sluice.error.field", reason.field.as_deref()),
        ("sluice.stage.digest", reason.digest.as_deref()),
        ("sluice.source.topic", Some(&record.topic)),
        ("sluice.source.partition", Some(partition)),
        ("sluice.source.offset", Some(offset)),
        ("sluice.source.timestamp", timestamp),
        ("sluice.pipeline", Some(pipeline)),
        ("sluice.batch-id", Some(batch)),
    ];
    for (key, value) in added {
        if let Some(value) = value {
            headers.push((key, Some(value.as_bytes())));
        }
    }
    Outgoing {
        partition: None,
        key: record.key.as_deref(),
        value: record.value.as_deref(),
        headers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter<'a>(key: &'a [u8], value: &'a [u8]) -> Outgoing<'a> {
        Outgoing {
            partition: None,
            key: Some(key),
            value: Some(value),
            headers: vec![
                ("trace", Some(b"abc".as_slice())),
                ("sluice.error.code", Some(b"too_big".as_slice())),
            ],
        }
    }

    #[test]
    fn a_dead_letter_that_fits_is_left_alone() {
        let value = vec![b'x'; 10_000];
        let mut record = letter(b"k", &value);
        assert_eq!(fit(&mut record, 1_000_000), None);
        assert_eq!(record, letter(b"k", &value));
    }

    #[test]
    fn an_oversized_dead_letter_is_cut_to_the_limit_value_first() {
        let value = vec![b'x'; 2_000_000];
        let mut record = letter(b"key", &value);
        let note = fit(&mut record, 1_000_000).unwrap();
        assert!(weight(&record) + FRAMING_BYTES <= 1_000_000);
        assert!(
            weight(&record) + FRAMING_BYTES > 990_000,
            "cut no more than needed"
        );
        assert_eq!(record.key, Some(b"key".as_slice()));
        assert_eq!(record.headers.len(), 2);
        let kept = record.value.unwrap().len();
        assert_eq!(note, format!("value 2000000 -> {kept} bytes"));
    }

    #[test]
    fn a_huge_key_and_headers_are_cut_after_the_value() {
        let key = vec![b'k'; 3_000];
        let mut record = letter(&key, b"vvvv");
        let note = fit(&mut record, FRAMING_BYTES + 40).unwrap();
        assert_eq!(record.value, Some(b"".as_slice()));
        assert_eq!(record.key, Some(b"".as_slice()));
        assert_eq!(
            record.headers,
            vec![("sluice.error.code", Some(b"too_big".as_slice()))]
        );
        assert_eq!(
            note,
            "value 4 -> 0 bytes; key 3000 -> 0 bytes; 1 original headers dropped"
        );
    }
}
