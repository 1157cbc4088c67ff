//! The seam between a lookup table and its source: [`Loader`], with its in-memory twin
//! [`MemoryLoader`] (a one-partition compacted topic in memory).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::{Table, Version};

/// Loading a lookup table failed.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The source (the broker, the catalog, storage) failed: a transient fault.
    #[error("lookup `{table}`: {what}: {error}")]
    Source {
        /// The lookup table.
        table: String,
        /// What was being done.
        what: String,
        /// What failed.
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The table grew past its `max-bytes`.
    #[error(
        "lookup `{table}` holds more than its max-bytes of {max} bytes ({bytes} bytes read so far): raise max-bytes, or make the table smaller"
    )]
    TooLarge {
        /// The lookup table.
        table: String,
        /// Bytes of keys and values read so far.
        bytes: usize,
        /// Its `max-bytes`.
        max: u64,
    },
    /// The lookup's topic does not exist: a configuration fault, not retried (as a
    /// missing source topic is not).
    #[error(
        "lookup `{table}`: topic `{topic}` does not exist (create it, or check the lookup's `topic`)"
    )]
    NoSuchTopic {
        /// The lookup table.
        table: String,
        /// The topic.
        topic: String,
    },
    /// The topic is not the one the table was read from: deleted and created again, or
    /// truncated (its offsets went back), and `[source] on-data-loss = "fail"`.
    #[error(
        "lookup `{table}`: topic `{topic}` is not the topic the table was read from: {found}. Was it deleted and created again? Set `[source] on-data-loss = \"continue\"` to rebuild the table from the topic as it is now"
    )]
    Replaced {
        /// The lookup table.
        table: String,
        /// Its topic.
        topic: String,
        /// What was found, naming the partition.
        found: String,
    },
    /// The source cannot serve this table (a missing key column, a recorded version of
    /// another kind of source).
    #[error("lookup `{table}`: {message}")]
    Invalid {
        /// The lookup table.
        table: String,
        /// What is wrong.
        message: String,
    },
}

impl LookupError {
    /// A failure of the source.
    pub fn source(
        table: &str,
        what: impl Into<String>,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        LookupError::Source {
            table: table.to_string(),
            what: what.into(),
            error: Box::new(error),
        }
    }

    /// Whether retrying later may succeed (the source failed, not the data or the config).
    pub fn is_transient(&self) -> bool {
        matches!(self, LookupError::Source { .. })
    }
}

/// Fails when `table` (the lookup `name`) holds more than `max` bytes.
pub fn check_size(name: &str, table: &Table, max: u64) -> Result<(), LookupError> {
    if table.bytes() as u64 > max {
        return Err(LookupError::TooLarge {
            table: name.to_string(),
            bytes: table.bytes(),
            max,
        });
    }
    Ok(())
}

/// Where one lookup table's data comes from: a compacted topic
/// ([`super::topic::TopicLoader`]), an Iceberg table ([`super::iceberg::IcebergLoader`]),
/// or memory in tests ([`MemoryLoader`]). Each checks the table's `max-bytes` as it loads.
pub trait Loader: Send {
    /// The table before anything was read, at the version that says so.
    fn empty(&self) -> Table;
    /// Brings `table` to the source's newest version (a topic applies only what is new);
    /// returns whether it changed. A table earlier batches still hold is shared: it is
    /// copied (`Arc::make_mut`) only when there is something to change, never to find out
    /// that nothing changed.
    fn refresh(&mut self, table: &mut Arc<Table>) -> Result<bool, LookupError>;
    /// The table at exactly `version`, as a batch recorded it (a replay).
    fn at(&mut self, version: &Version) -> Result<Table, LookupError>;
    /// Records skipped since the process started: without a key, or with a value that is
    /// not a JSON object (its key deleted: see [`Table::apply`]).
    fn skipped(&self) -> u64 {
        0
    }
}

/// A compacted topic of one partition, in memory: what tests append to while a pipeline
/// runs. Clones share the records.
#[derive(Debug, Clone, Default)]
pub struct MemoryLookup(Arc<Mutex<Vec<Record>>>);

/// A key and its value (`None`: a tombstone).
type Record = (Vec<u8>, Option<Vec<u8>>);

impl MemoryLookup {
    /// Appends `key` → `value` (`None`: a tombstone).
    pub fn append(&self, key: &str, value: Option<&str>) {
        let record = (
            key.as_bytes().to_vec(),
            value.map(|v| v.as_bytes().to_vec()),
        );
        self.records().push(record);
    }

    /// A loader of the lookup table `name` over these records, capped at `max` bytes.
    pub fn loader(&self, name: &str, max: u64) -> MemoryLoader {
        MemoryLoader {
            name: name.to_string(),
            log: self.clone(),
            max,
            skipped: 0,
        }
    }

    fn records(&self) -> std::sync::MutexGuard<'_, Vec<Record>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The loader of a [`MemoryLookup`]: versions are offsets of partition 0.
#[derive(Debug)]
pub struct MemoryLoader {
    name: String,
    log: MemoryLookup,
    max: u64,
    /// Values skipped: not a JSON object.
    skipped: u64,
}

impl MemoryLoader {
    fn offset(&self, version: &Version) -> Result<i64, LookupError> {
        match version {
            Version::Topic { offsets } => Ok(offsets.get(&0).copied().unwrap_or(0)),
            other => Err(LookupError::Invalid {
                table: self.name.clone(),
                message: format!("a topic cannot be read at {other:?}"),
            }),
        }
    }

    /// Applies the records from `from` to `to` to `table`.
    fn apply(&mut self, table: &mut Table, from: i64, to: i64) -> Result<(), LookupError> {
        let records = self.log.records();
        for (key, value) in &records[from as usize..to as usize] {
            if !table.apply(key, value.as_deref()) {
                self.skipped += 1;
            }
            check_size(&self.name, table, self.max)?;
        }
        table.set_version(version_at(to));
        Ok(())
    }
}

fn version_at(offset: i64) -> Version {
    Version::Topic {
        offsets: BTreeMap::from([(0, offset)]),
    }
}

impl Loader for MemoryLoader {
    fn empty(&self) -> Table {
        Table::new(version_at(0))
    }

    fn refresh(&mut self, table: &mut Arc<Table>) -> Result<bool, LookupError> {
        let from = self.offset(table.version())?;
        let to = self.log.records().len() as i64;
        if from >= to {
            return Ok(false);
        }
        self.apply(Arc::make_mut(table), from, to)?;
        Ok(true)
    }

    fn at(&mut self, version: &Version) -> Result<Table, LookupError> {
        let to = self.offset(version)?;
        let end = self.log.records().len() as i64;
        if to > end {
            return Err(LookupError::Invalid {
                table: self.name.clone(),
                message: format!("recorded at offset {to}, past the end {end}"),
            });
        }
        let mut table = self.empty();
        self.apply(&mut table, 0, to)?;
        Ok(table)
    }

    fn skipped(&self) -> u64 {
        self.skipped
    }
}
