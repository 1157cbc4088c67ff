//! Lookup tables: reference data that plugins read by key (`[[lookups]]`), the Wasm way to
//! enrich events.
//!
//! - [`Table`]: one table at one [`Version`]: key bytes → value bytes (a JSON object).
//! - [`Lookups`]: the tables one batch sees, fixed for the whole batch. Cheap to clone.
//! - [`Current`]: the slot the pipeline sets between batches and plugin calls read from.
//! - [`fields`]: where some top-level fields of a value lie (the `lookup-fields` import).
//! - [`config`]: the `[[lookups]]` sections; [`load`]: the [`load::Loader`] seam and its
//!   in-memory twin; [`topic`] and [`iceberg`]: the loaders from a compacted topic and an
//!   Iceberg table; [`refresh`]: the tables of a pipeline, refreshed between batches.
//!
//! A batch's versions are recorded in its plan and its commit, so a replayed batch sees
//! exactly the reference data the first attempt saw, and enrichment stays exactly once.

pub mod config;
pub mod fields;
pub mod iceberg;
pub mod load;
pub mod refresh;
pub mod topic;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

pub use crate::checkpoint::lookups::Version;

/// The loaders of `lookups`: topics on `connection` (the source's cluster; a replaced
/// topic is handled as `on_data_loss` says, the source's setting), tables in `catalog`
/// (the sink's).
pub fn loaders(
    lookups: &[config::LookupConfig],
    connection: &crate::kafka::Connection,
    on_data_loss: crate::source::kafka::OnDataLoss,
    catalog: &crate::iceberg::IcebergCatalog,
    registry: Option<&crate::format::RegistryConfig>,
) -> Result<refresh::LookupTables, load::LookupError> {
    let mut all = Vec::new();
    for lookup in lookups {
        let (name, max) = (lookup.name.as_str(), lookup.max_bytes.0);
        let invalid = |message| load::LookupError::Invalid {
            table: name.to_string(),
            message,
        };
        let loader: Box<dyn load::Loader> = match lookup.source().map_err(invalid)? {
            config::SourceKind::Topic(topic) => {
                let decoder = crate::format::Decoder::new(lookup.format, registry, None, None)
                    .map_err(|e| invalid(format!("format `{}`: {e}", lookup.format.name())))?;
                let loader = topic::TopicLoader::new(name, topic, connection, max)?;
                Box::new(loader.on_data_loss(on_data_loss).with_decoder(decoder))
            }
            config::SourceKind::Table(table, key) => {
                Box::new(iceberg::IcebergLoader::new(name, table, key, catalog, max)?)
            }
        };
        all.push((lookup.name.clone(), lookup.refresh_interval, loader));
    }
    Ok(refresh::LookupTables::new(all))
}

/// One lookup table at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    version: Version,
    entries: FxHashMap<Box<[u8]>, Box<[u8]>>,
    /// Bytes of all keys and values.
    bytes: usize,
}

impl Table {
    /// An empty table at `version`.
    pub fn new(version: Version) -> Self {
        Table {
            version,
            entries: FxHashMap::default(),
            bytes: 0,
        }
    }

    /// Sets `key` to `value` (the latest value wins).
    pub fn insert(&mut self, key: &[u8], value: &[u8]) {
        self.bytes += key.len() + value.len();
        if let Some(old) = self.entries.insert(key.into(), value.into()) {
            self.bytes -= key.len() + old.len();
        }
    }

    /// Applies one record of a compacted topic: a JSON object sets `key` to `value`, a
    /// null value (`None`, a tombstone) deletes it, and any other value deletes it too (it
    /// is not a value plugins can read, and the value it replaced is no longer the key's
    /// latest). Returns `false` for such a value, for the caller to count.
    pub fn apply(&mut self, key: &[u8], value: Option<&[u8]>) -> bool {
        match value {
            Some(value) if is_json_object(value) => self.insert(key, value),
            Some(_) => {
                self.remove(key);
                return false;
            }
            None => self.remove(key),
        }
        true
    }

    /// Deletes `key` (a tombstone).
    pub fn remove(&mut self, key: &[u8]) {
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= key.len() + old.len();
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.entries.get(key).map(|v| &**v)
    }

    /// The table's version.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// Moves the table to `version` (after applying what changed up to it).
    pub fn set_version(&mut self, version: Version) {
        self.version = version;
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table has no key.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of all keys and values (not counting the map's own overhead).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Whether `value` is a JSON object.
pub fn is_json_object(value: &[u8]) -> bool {
    value.trim_ascii_start().first() == Some(&b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(value).is_ok()
}

/// The lookup tables one batch sees, by name.
#[derive(Debug, Clone, Default)]
pub struct Lookups {
    tables: Arc<BTreeMap<String, Arc<Table>>>,
}

impl Lookups {
    /// The given tables.
    pub fn new(tables: BTreeMap<String, Arc<Table>>) -> Self {
        Lookups {
            tables: Arc::new(tables),
        }
    }

    /// The table called `name`.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.get(name).map(|t| &**t)
    }

    /// Every table, by name.
    pub fn tables(&self) -> &BTreeMap<String, Arc<Table>> {
        &self.tables
    }

    /// The version of every table: what a batch records in its plan and commit.
    pub fn versions(&self) -> BTreeMap<String, Version> {
        self.tables
            .iter()
            .map(|(name, t)| (name.clone(), t.version.clone()))
            .collect()
    }
}

/// The lookups plugin calls see: set by the pipeline between batches (never during one),
/// read once per plugin call.
#[derive(Debug, Clone, Default)]
pub struct Current(Arc<RwLock<Lookups>>);

impl Current {
    /// Makes `lookups` what the next plugin calls see.
    pub fn set(&self, lookups: Lookups) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = lookups;
    }

    /// What plugin calls see now.
    pub fn get(&self) -> Lookups {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_value_wins_and_tombstones_delete() {
        let mut t = Table::new(Version::Snapshot { id: Some(1) });
        t.insert(b"u1", b"{\"tier\":\"gold\"}");
        t.insert(b"u1", b"{}");
        t.insert(b"u2", b"{}");
        assert_eq!(t.get(b"u1"), Some(&b"{}"[..]));
        assert_eq!(t.bytes(), 8);
        t.remove(b"u1");
        assert_eq!(t.get(b"u1"), None);
        assert_eq!((t.len(), t.bytes()), (1, 4));
    }

    #[test]
    fn a_value_that_is_not_a_json_object_deletes_the_key() {
        let mut t = Table::new(Version::Snapshot { id: Some(1) });
        assert!(t.apply(b"u1", Some(br#"{"tier":"gold"}"#)));
        for bad in [&b"gold"[..], b"[1]", b"{\"open\":", b""] {
            assert!(!t.apply(b"u1", Some(bad)), "{bad:?}");
            assert_eq!(t.get(b"u1"), None, "never the stale value");
            assert_eq!((t.len(), t.bytes()), (0, 0));
            assert!(t.apply(b"u1", Some(br#" {"tier":"gold"}"#)));
        }
        assert!(t.apply(b"u1", None), "a tombstone is no skip");
        assert!(t.is_empty());
    }

    #[test]
    fn only_json_objects_are_values() {
        assert!(is_json_object(br#" {"tier":"gold"}"#));
        assert!(!is_json_object(b"[1]"));
        assert!(!is_json_object(b"{\"open\":"));
        assert!(!is_json_object(b"gold"));
    }

    #[test]
    fn a_batch_keeps_the_version_it_started_with() {
        let current = Current::default();
        let v1 = Table::new(Version::File { digest: "a".into() });
        current.set(Lookups::new(BTreeMap::from([("p".into(), Arc::new(v1))])));
        let seen = current.get();
        current.set(Lookups::default());
        assert!(seen.table("p").is_some());
        assert!(current.get().table("p").is_none());
        assert_eq!(seen.versions()["p"], Version::File { digest: "a".into() });
    }
}
