//! The values of `sluice produce --format avro|protobuf`: each generated JSON event in the
//! Confluent wire format, its shape's schema registered first under `<topic>-value`.
//!
//! An invalid event the format cannot express (a quantity of `"several"`, a time that is
//! not a time, JSON cut short; for Avro a missing required field) is sent as a value a
//! reader refuses as undecodable: the Avro datum of the fields before the first bad one
//! (see `generate::avro`), or a Protobuf message whose first field's length runs past its
//! end.

use anyhow::Context;
use prost_reflect::MessageDescriptor;

use crate::format::protobuf::{ProtoSchema, from_json};
use crate::format::{Format, HttpRegistry, MAGIC, Registry, RegistryConfig, SchemaType};
use crate::generate::Shape;
use crate::generate::avro::AvroEncoder;

/// The Protobuf schema of the retail shape's events.
pub const RETAIL_PROTO: &str = include_str!("../generate/retail.proto");
/// The Protobuf schema of the analytics shape's events.
pub const ANALYTICS_PROTO: &str = include_str!("../generate/analytics.proto");

/// A length-delimited field 1 that claims 127 bytes and has none: no reader decodes it.
const UNDECODABLE: [u8; 2] = [0x0a, 0x7f];

/// How each event is written.
#[derive(Debug)]
pub(super) enum ValueEncoder {
    /// As an Avro datum.
    Avro(AvroEncoder),
    /// As a Protobuf message of the schema with registry id `id` (the file's first
    /// message: indexes `[0]`).
    Protobuf {
        /// The events' message.
        message: MessageDescriptor,
        /// The registry id of its schema.
        id: u32,
    },
}

/// One event as a record value.
pub(super) struct Encoded {
    /// The value.
    pub(super) value: Vec<u8>,
    /// Why the value is undecodable on purpose, if the format cannot express the event.
    pub(super) broken: Option<String>,
}

impl ValueEncoder {
    /// The record value of the JSON event `json`.
    pub(super) fn encode(&self, json: &str) -> Encoded {
        match self {
            ValueEncoder::Avro(avro) => {
                let encoded = avro.encode(json);
                let broken = encoded.truncated.map(|e| e.to_string());
                Encoded {
                    value: encoded.value,
                    broken,
                }
            }
            ValueEncoder::Protobuf { message, id } => {
                let mut value = vec![MAGIC];
                value.extend_from_slice(&id.to_be_bytes());
                value.push(0); // message indexes [0]
                let broken = match from_json(message, json) {
                    Ok(bytes) => {
                        value.extend_from_slice(&bytes);
                        None
                    }
                    Err(reason) => {
                        value.extend_from_slice(&UNDECODABLE);
                        Some(reason)
                    }
                };
                Encoded { value, broken }
            }
        }
    }
}

/// The Protobuf schema text of `shape`'s events, if it has one.
pub fn proto_text(shape: Shape) -> anyhow::Result<&'static str> {
    match shape {
        Shape::Retail => Ok(RETAIL_PROTO),
        Shape::Analytics => Ok(ANALYTICS_PROTO),
        other => anyhow::bail!(
            "`--format protobuf` has schemas for the retail and analytics shapes, not {other:?}"
        ),
    }
}

/// Where `sluice produce` registers its schema: the registry's URL and basic auth
/// (`USER:PASSWORD`), and the topic (the subject is `<topic>-value`).
pub(super) struct Target<'a> {
    pub(super) url: Option<&'a str>,
    pub(super) user: Option<&'a str>,
    pub(super) topic: &'a str,
}

/// The encoder of `format` (`avro` or `protobuf`) for `shape`'s events, its schema
/// registered at `target`; `None` for JSON.
pub(super) fn encoder(
    format: Format,
    shape: Shape,
    target: &Target<'_>,
) -> anyhow::Result<Option<ValueEncoder>> {
    let Some(url) = target.url else {
        return Ok(None);
    };
    let (schema, kind) = match format {
        Format::Json => return Ok(None),
        Format::Avro => (crate::generate::avro::schema_text(shape)?, SchemaType::Avro),
        Format::Protobuf => (proto_text(shape)?, SchemaType::Protobuf),
    };
    let registry = HttpRegistry::new(&registry_config(url, target.user));
    let registry = registry.map_err(anyhow::Error::msg)?;
    let subject = format!("{}-value", target.topic);
    let id = registry
        .register(&subject, schema, kind)
        .with_context(|| format!("cannot register the schema of subject {subject}"))?;
    tracing::info!(subject, id, ?kind, "Registered the events' schema.");
    Ok(Some(match format {
        Format::Avro => ValueEncoder::Avro(AvroEncoder::new(shape)?.with_id(id)),
        _ => ValueEncoder::Protobuf {
            message: ProtoSchema::compile(schema, Vec::new())
                .map_err(anyhow::Error::msg)?
                .named(None)
                .map_err(anyhow::Error::msg)?,
            id,
        },
    }))
}

/// The registry at `url`, with `user`'s basic auth (`USER:PASSWORD`).
fn registry_config(url: &str, user: Option<&str>) -> RegistryConfig {
    let (username, password) = match user {
        Some(user) => match user.split_once(':') {
            Some((u, p)) => (Some(u.to_string()), Some(p.to_string())),
            None => (Some(user.to_string()), None),
        },
        None => (None, None),
    };
    RegistryConfig {
        url: url.to_string(),
        username,
        password,
        ..RegistryConfig::default()
    }
}

/// A `--format`: `json`, `avro` or `protobuf`.
pub(super) fn format_name(text: &str) -> Result<Format, String> {
    match text {
        "json" => Ok(Format::Json),
        "avro" => Ok(Format::Avro),
        "protobuf" => Ok(Format::Protobuf),
        other => Err(format!("`{other}` is not a format: json, avro or protobuf")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Decoder, MemoryRegistry, Schemas};
    use crate::generate::{Generator, GeneratorConfig};

    /// A timestamp's text as its instant (`.000Z` and `Z` are the same time); other
    /// values as they are.
    fn instant(value: &serde_json::Value) -> serde_json::Value {
        let at = value
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        at.map_or_else(|| value.clone(), |at| at.timestamp_micros().into())
    }

    /// Generated events written as Protobuf read back (sluice's own decoder) to the
    /// generator's fields; an event that cannot be written is undecodable.
    #[test]
    fn protobuf_events_read_back_as_their_json() {
        for (shape, text) in [
            (Shape::Retail, RETAIL_PROTO),
            (Shape::Analytics, ANALYTICS_PROTO),
        ] {
            let registry = std::sync::Arc::new(MemoryRegistry::default());
            let id = Registry::register(&*registry, "t-value", text, SchemaType::Protobuf).unwrap();
            let message = ProtoSchema::compile(text, Vec::new())
                .unwrap()
                .named(None)
                .unwrap();
            let encoder = ValueEncoder::Protobuf { message, id };
            let decoder = Decoder::Registry(Schemas::new(Box::new(registry), Format::Protobuf));
            let config = GeneratorConfig {
                shape,
                invalid_share: 0.2,
                ..GeneratorConfig::default()
            };
            let (mut broken, mut events) = (0, 0);
            for event in Generator::new(config).take(500) {
                let encoded = encoder.encode(&event.value);
                let known = decoder.prepare([Some(&encoded.value[..])]).unwrap();
                let read = known.to_json(Some(&encoded.value));
                if encoded.broken.is_some() {
                    broken += 1;
                    assert_eq!(read.unwrap_err().code(), "undecodable", "{}", event.value);
                    continue;
                }
                events += 1;
                let read: serde_json::Value = serde_json::from_slice(&read.unwrap()).unwrap();
                let sent: serde_json::Value = serde_json::from_str(&event.value).unwrap();
                for (field, value) in sent.as_object().unwrap() {
                    if !value.is_null() {
                        let (read, sent) = (instant(&read[field]), instant(value));
                        assert_eq!(read, sent, "{shape:?} {field}: {}", event.value);
                    }
                }
            }
            assert!(
                events > 300 && broken > 0,
                "{shape:?}: {events} events, {broken} broken"
            );
        }
    }
}
