//! Record formats. A topic's values are JSON objects (the default) or Avro: in the
//! Confluent wire format, with the writer schemas in a Schema Registry, or bare datums of
//! one schema file.
//!
//! The wire format is a zero byte, the schema's id (4 bytes, big-endian), then the Avro
//! datum. Before a batch is processed, the pipeline fetches the schemas of the ids it has
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
//! - `iceberg.rs`: the Iceberg type of an Avro schema.

pub mod config;
pub mod iceberg;
pub mod json;
pub mod read;
pub mod registry;
pub mod schemas;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub use self::config::{Format, RegistryConfig};
pub use self::read::Writer;
pub use self::registry::{HttpRegistry, MemoryRegistry, Registry, RegistryError, SchemaType};
pub use self::schemas::{Resolved, Schemas};

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
    /// The id names a schema that is not Avro.
    #[error("schema {id} is a {kind:?} schema, and the topic's format is Avro")]
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

/// Where a topic's Avro writer schemas come from.
#[derive(Debug)]
pub enum Decoder {
    /// A Schema Registry: values are in the wire format.
    Registry(Schemas),
    /// One schema file: values are bare datums.
    File(Arc<Writer>),
}

impl Decoder {
    /// The decoder of a topic in `format`, with `registry` or `schema_file`; `None` for
    /// JSON.
    pub fn new(
        format: Format,
        registry: Option<&RegistryConfig>,
        schema_file: Option<&Path>,
    ) -> Result<Option<Decoder>, String> {
        match (format, registry, schema_file) {
            (Format::Json, None, None) => Ok(None),
            (Format::Json, _, _) => Err(
                "`schema-registry` and `schema-file` are for `format = \"avro\"`; the format is JSON"
                    .into(),
            ),
            (Format::Avro, Some(config), None) => Ok(Some(Decoder::Registry(Schemas::new(
                Box::new(HttpRegistry::new(config)?),
            )))),
            (Format::Avro, None, Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("schema-file {}: {e}", path.display()))?;
                let writer = Writer::parse(&text)
                    .map_err(|e| format!("schema-file {}: {e}", path.display()))?;
                Ok(Some(Decoder::File(Arc::new(writer))))
            }
            (Format::Avro, None, None) => Err(
                "`format = \"avro\"` needs `[source.schema-registry]` or `schema-file`".into(),
            ),
            (Format::Avro, Some(_), Some(_)) => {
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
            Decoder::File(writer) => Ok(Known {
                file: Some(writer.clone()),
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

    /// The writer schema of the registry's `subject`, or of the schema file.
    pub fn latest(&self, subject: &str) -> Result<Arc<Writer>, String> {
        match self {
            Decoder::File(writer) => Ok(writer.clone()),
            Decoder::Registry(schemas) => schemas.latest(subject),
        }
    }
}

/// The writer schemas a batch's records may name, fetched before the batch.
#[derive(Debug, Clone, Default)]
pub struct Known {
    file: Option<Arc<Writer>>,
    by_id: HashMap<u32, Resolved>,
}

impl Known {
    /// The writer schema of `value` and its Avro datum.
    pub fn writer<'a>(&self, value: Option<&'a [u8]>) -> Result<(&Writer, &'a [u8]), FormatError> {
        let value = value.ok_or(FormatError::NoValue)?;
        if let Some(writer) = &self.file {
            return Ok((writer, value));
        }
        let (id, payload) = unframe(value)?;
        match self.by_id.get(&id) {
            Some(Ok(writer)) => Ok((writer, payload)),
            Some(Err(e)) => Err(e.clone()),
            None => Err(FormatError::UnknownSchema { id }),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
