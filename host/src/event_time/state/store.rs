//! Where state files are kept ([`StateStore`]: the table's storage in production, memory
//! in tests) and how saving or loading fails ([`StateError`]).

use crate::iceberg::TableFiles;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Saving or loading the state failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The store failed.
    #[error("{0}")]
    Store(Box<dyn std::error::Error + Send + Sync>),
    /// The state cannot be serialised.
    #[error("cannot serialise the state: {0}")]
    Serialise(serde_json::Error),
    /// A snapshot cannot be encoded.
    #[error("cannot encode the state: {0}")]
    Encode(postcard::Error),
    /// A binary snapshot cannot be read.
    #[error("cannot decode {path}: {error}")]
    Undecodable {
        /// The file.
        path: String,
        /// Why.
        error: postcard::Error,
    },
    /// A state file cannot be read.
    #[error("cannot read {path}: {error}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        error: serde_json::Error,
    },
    /// The state file named by the table's last commit is missing.
    #[error("the state file {0} named by the table's last commit is missing")]
    Missing(String),
    /// A file of the chain of a delta is missing or does not follow the files before it.
    #[error("the state file {file}, in the chain of {named_by}, is missing or out of order")]
    Chain {
        /// The file of the chain.
        file: String,
        /// The delta that names it.
        named_by: String,
    },
    /// A batch's plan names offsets that cannot be read.
    #[error("a plan's offsets cannot be read: {0}")]
    Plan(String),
}

impl StateError {
    /// A failure of the store.
    pub fn store(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        StateError::Store(Box::new(error))
    }
}

/// Where state files are kept: the table's storage in production
/// ([`crate::iceberg::TableFiles`]), [`MemoryStore`] in tests. Paths are full paths
/// below the table's location (see [`super::path`]).
pub trait StateStore: Send + Sync {
    /// Writes a whole file.
    fn put(&self, path: &str, bytes: Vec<u8>) -> Result<(), StateError>;
    /// Reads a whole file; `None` if it does not exist.
    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, StateError>;
    /// Deletes a file.
    fn delete(&self, path: &str) -> Result<(), StateError>;
}

/// A state store in memory; clones share the files.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore(Arc<Mutex<BTreeMap<String, Vec<u8>>>>);

impl MemoryStore {
    /// The paths held, in order.
    pub fn paths(&self) -> Vec<String> {
        self.files().keys().cloned().collect()
    }

    fn files(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl StateStore for MemoryStore {
    fn put(&self, path: &str, bytes: Vec<u8>) -> Result<(), StateError> {
        self.files().insert(path.to_string(), bytes);
        Ok(())
    }

    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.files().get(path).cloned())
    }

    fn delete(&self, path: &str) -> Result<(), StateError> {
        self.files().remove(path);
        Ok(())
    }
}

/// The Iceberg adapter's files beside a table's data: where a running pipeline keeps its
/// state.
impl StateStore for TableFiles {
    fn put(&self, path: &str, bytes: Vec<u8>) -> Result<(), StateError> {
        TableFiles::put(self, path, bytes).map_err(StateError::store)
    }

    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, StateError> {
        TableFiles::get(self, path).map_err(StateError::store)
    }

    fn delete(&self, path: &str) -> Result<(), StateError> {
        TableFiles::delete(self, path).map_err(StateError::store)
    }
}
