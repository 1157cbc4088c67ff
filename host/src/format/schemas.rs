//! The cache of writer schemas by registry id: each fetched and parsed once per process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::FormatError;
use super::read::Writer;
use super::registry::{Registry, RegistryError, SchemaType};

/// What a schema id stands for: the writer schema, or why records written with it cannot
/// be read (the registry does not know it, or it is not an Avro schema sluice can parse).
pub type Resolved = Result<Arc<Writer>, FormatError>;

/// The writer schemas of a pipeline, by id: fetched from the registry the first time an
/// id is seen, then kept for the life of the process (an id's schema never changes).
pub struct Schemas {
    registry: Box<dyn Registry>,
    by_id: Mutex<HashMap<u32, Resolved>>,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schemas").finish_non_exhaustive()
    }
}

impl Schemas {
    /// The writer schemas `registry` serves.
    pub fn new(registry: Box<dyn Registry>) -> Self {
        Schemas {
            registry,
            by_id: Mutex::new(HashMap::new()),
        }
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
            Ok(schema) if schema.schema_type != SchemaType::Avro => {
                Err(FormatError::WrongSchemaType {
                    id,
                    kind: schema.schema_type,
                })
            }
            Ok(schema) => Writer::parse(&schema.schema)
                .map(Arc::new)
                .map_err(|reason| FormatError::BadSchema { id, reason }),
            Err(RegistryError::NotFound { .. }) => Err(FormatError::UnknownSchema { id }),
            Err(e) => return Err(e),
        };
        tracing::debug!(id, ok = resolved.is_ok(), "fetched a writer schema");
        let mut by_id = self.by_id.lock().expect("not poisoned");
        Ok(by_id.entry(id).or_insert(resolved).clone())
    }

    /// The latest Avro schema of `subject` (for the table of a new pipeline).
    pub fn latest(&self, subject: &str) -> Result<Arc<Writer>, String> {
        let registered = self.registry.latest(subject).map_err(|e| e.to_string())?;
        if registered.schema_type != SchemaType::Avro {
            return Err(format!(
                "the latest schema of `{subject}` is a {:?} schema, not Avro",
                registered.schema_type
            ));
        }
        let writer = Writer::parse(&registered.schema)
            .map(Arc::new)
            .map_err(|e| format!("the latest schema of `{subject}`: {e}"))?;
        if let Some(id) = registered.id {
            let mut by_id = self.by_id.lock().expect("not poisoned");
            by_id.entry(id).or_insert_with(|| Ok(writer.clone()));
        }
        Ok(writer)
    }

    /// The schemas already fetched, by id (for the steps of a batch, which must not
    /// fetch).
    pub fn known(&self) -> HashMap<u32, Resolved> {
        self.by_id.lock().expect("not poisoned").clone()
    }
}
