//! Record formats. A topic's values are JSON objects (the default), Avro or Protobuf: in
//! the Confluent wire format, with the writer schemas in a Schema Registry, or bare datums
//! (messages) of one schema file.
//!
//! The wire format is a zero byte, the schema's id (4 bytes, big-endian), for Protobuf the
//! indexes of the message in the schema's file, then the Avro datum or Protobuf message. Before a batch is processed, the pipeline fetches the schemas of the ids it has
//! not seen ([`Decoder::prepare`]): a registry that cannot be reached is a transient fault
//! (the batch is retried within `fault-budget`), an id it does not know makes its records
//! dead letters. The steps of the batch then read each record against the [`Known`]
//! schemas without asking the registry: straight into the table's columns when nothing
//! needs the record as JSON (`encode/avro.rs`), or to JSON once (`json.rs`) for the plugin
//! stages and event time.
//!
//! - `config.rs`: `format` and `[source.schema-registry]`;
//! - `registry.rs`: the registry seam (HTTP, and an in-memory twin);
//! - `read.rs`: a parsed writer schema, and the Avro binary encoding read in place;
//! - `schemas.rs`: the writer schemas by id, fetched once each;
//! - `json.rs`: an Avro datum as the JSON object plugins see;
//! - `iceberg.rs`: the Iceberg type of an Avro schema;
//! - `protobuf.rs`: `.proto` schemas compiled, messages decoded, their JSON and types.

pub mod config;
pub mod iceberg;
pub mod json;
pub mod protobuf;
pub mod read;
pub mod registry;
pub mod schemas;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub use self::config::{Format, RegistryConfig};
use self::protobuf::ProtoSchema;
pub use self::read::Writer;
pub use self::registry::{HttpRegistry, MemoryRegistry, Registry, RegistryError, SchemaType};
pub use self::schemas::{Parsed, Resolved, Schemas};
use ::iceberg::spec::NestedFieldRef;
use prost_reflect::MessageDescriptor;

/// The first byte of a record in the Confluent wire format.
pub const MAGIC: u8 = 0;

/// Why a record's value cannot be read in its format. Each is the record's dead letter,
/// with [`FormatError::code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The record has no value (a tombstone).
    #[error("the record has no value (a tombstone)")]
    NoValue,
    /// The value does not start with the wire format's zero byte and 4-byte schema id.
    #[error("the value is not in the Confluent wire format: {0}")]
    NotFramed(String),
    /// The registry does not know the schema id.
    #[error("the schema registry has no schema with id {id}")]
    UnknownSchema {
        /// The id.
        id: u32,
    },
    /// The id names a schema of another type than the topic's format.
    #[error("schema {id} is a {kind:?} schema, not of the topic's format")]
    WrongSchemaType {
        /// The id.
        id: u32,
        /// Its type.
        kind: SchemaType,
    },
    /// The id's schema cannot be parsed.
    #[error("schema {id} cannot be used: {reason}")]
    BadSchema {
        /// The id.
        id: u32,
        /// Why.
        reason: String,
    },
    /// The payload does not decode with its writer schema.
    #[error("the payload does not decode with its schema: {0}")]
    Undecodable(String),
}

impl FormatError {
    /// The dead-letter code.
    pub fn code(&self) -> &'static str {
        match self {
            FormatError::NoValue => "null_value",
            FormatError::NotFramed(_) => "not_framed",
            FormatError::UnknownSchema { .. } => "unknown_schema",
            FormatError::WrongSchemaType { .. } | FormatError::BadSchema { .. } => {
                "unsupported_schema"
            }
            FormatError::Undecodable(_) => "undecodable",
        }
    }
}

impl From<read::ReadError> for FormatError {
    fn from(e: read::ReadError) -> Self {
        FormatError::Undecodable(e.0)
    }
}

/// The schema id and the payload of a value in the wire format.
pub fn unframe(value: &[u8]) -> Result<(u32, &[u8]), FormatError> {
    match value {
        [MAGIC, a, b, c, d, payload @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), payload)),
        [MAGIC, ..] => Err(FormatError::NotFramed(format!(
            "{} bytes, too short for the schema id",
            value.len()
        ))),
        [first, ..] => Err(FormatError::NotFramed(format!(
            "the first byte is {first:#04x}, not the magic byte 0x00"
        ))),
        [] => Err(FormatError::NotFramed("the value is empty".into())),
    }
}

/// Where a topic's writer schemas come from.
#[derive(Debug)]
pub enum Decoder {
    /// A Schema Registry: values are in the wire format.
    Registry(Schemas),
    /// One schema file: values are bare datums or messages.
    File(FileSchema),
}

/// The schema of a topic without a registry: every value was written with it.
#[derive(Debug, Clone)]
pub struct FileSchema {
    parsed: Arc<Parsed>,
    /// With Protobuf, the message of every value.
    message: Option<MessageDescriptor>,
}

impl Decoder {
    /// The decoder of a topic in `format`, with `registry` or `schema_file` (and, with
    /// Protobuf, `message`, the records' message type); `None` for JSON.
    pub fn new(
        format: Format,
        registry: Option<&RegistryConfig>,
        schema_file: Option<&Path>,
        message: Option<&str>,
    ) -> Result<Option<Decoder>, String> {
        match (format, registry, schema_file) {
            (Format::Json, None, None) if message.is_none() => Ok(None),
            (Format::Json, _, _) => Err(
                "`schema-registry`, `schema-file` and `message` are for Avro and Protobuf; the format is JSON"
                    .into(),
            ),
            (_, Some(config), None) => Ok(Some(Decoder::Registry(Schemas::with_capacity(
                Box::new(HttpRegistry::new(config)?),
                format,
                config.cache_capacity,
            )))),
            (_, None, Some(path)) => {
                let bad = |e: String| format!("schema-file {}: {e}", path.display());
                let file = FileSchema::read(format, path, message).map_err(bad)?;
                Ok(Some(Decoder::File(file)))
            }
            (_, None, None) => Err(format!(
                "`format = \"{}\"` needs `[source.schema-registry]` or `schema-file`",
                format.name()
            )),
            (_, Some(_), Some(_)) => {
                Err("give `[source.schema-registry]` or `schema-file`, not both".into())
            }
        }
    }

    /// Fetches the schemas of the ids among `values` not fetched before, and returns every
    /// schema known. Fails only when the registry cannot be reached (a transient fault).
    pub fn prepare<'a>(
        &self,
        values: impl IntoIterator<Item = Option<&'a [u8]>>,
    ) -> Result<Known, RegistryError> {
        match self {
            Decoder::File(file) => Ok(Known {
                file: Some(file.clone()),
                by_id: HashMap::new(),
            }),
            Decoder::Registry(schemas) => {
                let mut by_id = schemas.known();
                for value in values.into_iter().flatten() {
                    if let Ok((id, _)) = unframe(value)
                        && !by_id.contains_key(&id)
                    {
                        by_id.insert(id, schemas.get(id)?);
                    }
                }
                Ok(Known { file: None, by_id })
            }
        }
    }

    /// The columns of a table made from the latest schema of the registry's `subject`
    /// (with Protobuf, of its message `message`, or its first), or of the schema file;
    /// with the fields left out for want of a type.
    pub fn columns(
        &self,
        subject: &str,
        message: Option<&str>,
    ) -> Result<(Vec<NestedFieldRef>, Vec<String>), String> {
        let file = match self {
            Decoder::File(file) => file.clone(),
            Decoder::Registry(schemas) => {
                FileSchema::with_message(schemas.latest(subject)?, message)?
            }
        };
        match (&*file.parsed, &file.message) {
            (Parsed::Avro(writer), _) => iceberg::columns(writer),
            (Parsed::Protobuf(_), Some(message)) => Ok(protobuf::columns(message)),
            (Parsed::Protobuf(_), None) => unreachable!("a Protobuf file schema has its message"),
        }
    }
}

impl FileSchema {
    /// The schema of the file `path` (a `.proto` may import files of its folder).
    fn read(format: Format, path: &Path, message: Option<&str>) -> Result<Self, String> {
        let parsed = match format {
            Format::Avro => {
                let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
                Parsed::Avro(Writer::parse(&text)?)
            }
            Format::Protobuf => Parsed::Protobuf(ProtoSchema::compile_file(path)?),
            Format::Json => unreachable!("JSON has no schema file"),
        };
        Self::with_message(Arc::new(parsed), message)
    }

    fn with_message(parsed: Arc<Parsed>, message: Option<&str>) -> Result<Self, String> {
        let message = match &*parsed {
            Parsed::Protobuf(proto) => Some(proto.named(message)?),
            Parsed::Avro(_) if message.is_some() => {
                return Err("`message` is for Protobuf topics".into());
            }
            Parsed::Avro(_) => None,
        };
        Ok(FileSchema { parsed, message })
    }
}

/// The writer schemas a batch's records may name, fetched before the batch.
#[derive(Debug, Clone, Default)]
pub struct Known {
    file: Option<FileSchema>,
    by_id: HashMap<u32, Resolved>,
}

/// A record's writer schema and its payload.
pub enum Framed<'k, 'a> {
    /// An Avro datum and its writer schema.
    Avro(&'k Writer, &'a [u8]),
    /// A Protobuf message and its type.
    Protobuf(MessageDescriptor, &'a [u8]),
}

impl Known {
    /// The writer schema of `value` and its payload.
    pub fn framed<'a>(&self, value: Option<&'a [u8]>) -> Result<Framed<'_, 'a>, FormatError> {
        let value = value.ok_or(FormatError::NoValue)?;
        if let Some(file) = &self.file {
            return Ok(match (&*file.parsed, &file.message) {
                (Parsed::Avro(writer), _) => Framed::Avro(writer, value),
                (Parsed::Protobuf(_), Some(message)) => Framed::Protobuf(message.clone(), value),
                (Parsed::Protobuf(_), None) => {
                    unreachable!("a Protobuf file schema has its message")
                }
            });
        }
        let (id, payload) = unframe(value)?;
        let parsed = match self.by_id.get(&id) {
            Some(Ok(parsed)) => parsed,
            Some(Err(e)) => return Err(e.clone()),
            None => return Err(FormatError::UnknownSchema { id }),
        };
        match &**parsed {
            Parsed::Avro(writer) => Ok(Framed::Avro(writer, payload)),
            Parsed::Protobuf(proto) => {
                let (indexes, payload) = protobuf::unindex(payload)?;
                let message = proto.message(&indexes).ok_or_else(|| {
                    FormatError::NotFramed(format!("schema {id} has no message at {indexes:?}"))
                })?;
                Ok(Framed::Protobuf(message, payload))
            }
        }
    }

    /// The Avro writer schema of `value` and its datum.
    pub fn writer<'a>(&self, value: Option<&'a [u8]>) -> Result<(&Writer, &'a [u8]), FormatError> {
        match self.framed(value)? {
            Framed::Avro(writer, payload) => Ok((writer, payload)),
            Framed::Protobuf(..) => Err(FormatError::NotFramed("a Protobuf record".into())),
        }
    }

    /// `value` as the JSON object plugins see.
    pub fn to_json(&self, value: Option<&[u8]>) -> Result<Vec<u8>, FormatError> {
        match self.framed(value)? {
            Framed::Avro(writer, payload) => json::to_json(writer, payload),
            Framed::Protobuf(message, payload) => protobuf::to_json(&message, payload),
        }
    }
}

#[cfg(test)]
pub(crate) mod protobuf_tests;
#[cfg(test)]
pub(crate) mod tests;
