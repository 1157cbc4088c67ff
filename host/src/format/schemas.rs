//! The cache of writer schemas by registry id: each fetched and parsed once per process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::protobuf::ProtoSchema;
use super::read::Writer;
use super::registry::{Registered, Registry, RegistryError, SchemaType};
use super::{Format, FormatError};

/// The deepest chain of references followed (a `.proto` importing one that imports…).
const MAX_REFERENCES: usize = 16;

/// A parsed writer schema.
#[derive(Debug)]
pub enum Parsed {
    /// An Avro schema.
    Avro(Writer),
    /// A compiled `.proto` file.
    Protobuf(ProtoSchema),
}

/// What a schema id stands for: the writer schema, or why records written with it cannot
/// be read (the registry does not know it, or it is not a schema of the topic's format
/// that sluice can parse).
pub type Resolved = Result<Arc<Parsed>, FormatError>;

/// The writer schemas of a pipeline, by id: fetched from the registry the first time an
/// id is seen, then kept for the life of the process (an id's schema never changes).
pub struct Schemas {
    registry: Box<dyn Registry>,
    format: Format,
    by_id: Mutex<HashMap<u32, Resolved>>,
    /// The most schemas kept.
    capacity: usize,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schemas").finish_non_exhaustive()
    }
}

impl Schemas {
    /// The writer schemas of a topic in `format` that `registry` serves, at most
    /// `capacity` of them kept.
    pub fn new(registry: Box<dyn Registry>, format: Format) -> Self {
        Self::with_capacity(registry, format, 1000)
    }

    /// As [`Schemas::new`], keeping at most `capacity` schemas (at least one).
    pub fn with_capacity(registry: Box<dyn Registry>, format: Format, capacity: usize) -> Self {
        Schemas {
            registry,
            format,
            by_id: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// Keeps `resolved` as the schema of `id`; past the capacity, the oldest id (the
    /// smallest: registries number schemas in order) is forgotten first.
    fn keep(&self, id: u32, resolved: Resolved) -> Resolved {
        let mut by_id = self.by_id.lock().expect("not poisoned");
        if by_id.len() >= self.capacity
            && !by_id.contains_key(&id)
            && let Some(&oldest) = by_id.keys().min()
        {
            by_id.remove(&oldest);
        }
        by_id.entry(id).or_insert(resolved).clone()
    }

    /// The schema of `id`, fetched if it was never seen. A registry that cannot be
    /// reached is an `Err` (a transient fault: nothing is cached); an id the registry does
    /// not know, or a schema that cannot be used, is an `Ok` holding the reason, cached
    /// like a schema.
    pub fn get(&self, id: u32) -> Result<Resolved, RegistryError> {
        if let Some(known) = self.by_id.lock().expect("not poisoned").get(&id) {
            return Ok(known.clone());
        }
        let resolved = match self.registry.schema(id) {
            Ok(schema) => self
                .parse(&schema)?
                .map(Arc::new)
                .map_err(|reason| match reason {
                    Unusable::WrongType(kind) => FormatError::WrongSchemaType { id, kind },
                    Unusable::Bad(reason) => FormatError::BadSchema { id, reason },
                }),
            Err(RegistryError::NotFound { .. }) => Err(FormatError::UnknownSchema { id }),
            Err(e) => return Err(e),
        };
        tracing::debug!(id, ok = resolved.is_ok(), "fetched a writer schema");
        Ok(self.keep(id, resolved))
    }

    /// `schema` parsed (a `.proto` with its references, fetched), or why it cannot be.
    fn parse(&self, schema: &Registered) -> Result<Result<Parsed, Unusable>, RegistryError> {
        Ok(match (self.format, schema.schema_type) {
            (Format::Avro, SchemaType::Avro) => Writer::parse(&schema.schema)
                .map(Parsed::Avro)
                .map_err(Unusable::Bad),
            (Format::Protobuf, SchemaType::Protobuf) => match self.imports(schema, 0)? {
                Ok(imports) => ProtoSchema::compile(&schema.schema, imports)
                    .map(Parsed::Protobuf)
                    .map_err(Unusable::Bad),
                Err(reason) => Err(Unusable::Bad(reason)),
            },
            (_, kind) => Err(Unusable::WrongType(kind)),
        })
    }

    /// The sources of the files `schema` imports, and of theirs, by import name.
    fn imports(
        &self,
        schema: &Registered,
        depth: usize,
    ) -> Result<Result<Vec<(String, String)>, String>, RegistryError> {
        let mut sources = Vec::new();
        for reference in &schema.references {
            if depth >= MAX_REFERENCES {
                return Ok(Err(format!("references nest deeper than {MAX_REFERENCES}")));
            }
            let version = reference.version.to_string();
            let imported = match self.registry.version(&reference.subject, &version) {
                Ok(imported) => imported,
                Err(RegistryError::NotFound { what }) => {
                    return Ok(Err(format!("reference `{}`: no {what}", reference.name)));
                }
                Err(e) => return Err(e),
            };
            match self.imports(&imported, depth + 1)? {
                Ok(theirs) => sources.extend(theirs),
                Err(reason) => return Ok(Err(reason)),
            }
            sources.push((reference.name.clone(), imported.schema));
        }
        Ok(Ok(sources))
    }

    /// The latest schema of `subject` (for the table of a new pipeline).
    pub fn latest(&self, subject: &str) -> Result<Arc<Parsed>, String> {
        let registered = self.registry.latest(subject).map_err(|e| e.to_string())?;
        let parsed = match self.parse(&registered).map_err(|e| e.to_string())? {
            Ok(parsed) => Arc::new(parsed),
            Err(Unusable::WrongType(kind)) => {
                return Err(format!(
                    "the latest schema of `{subject}` is a {kind:?} schema; the topic's format is {:?}",
                    self.format
                ));
            }
            Err(Unusable::Bad(reason)) => {
                return Err(format!("the latest schema of `{subject}`: {reason}"));
            }
        };
        if let Some(id) = registered.id {
            let _kept = self.keep(id, Ok(parsed.clone()));
        }
        Ok(parsed)
    }

    /// The schemas already fetched, by id (for the steps of a batch, which must not
    /// fetch).
    pub fn known(&self) -> HashMap<u32, Resolved> {
        self.by_id.lock().expect("not poisoned").clone()
    }
}

/// Why a registered schema cannot be used.
enum Unusable {
    /// It is not of the topic's format.
    WrongType(SchemaType),
    /// It does not parse or compile.
    Bad(String),
}
