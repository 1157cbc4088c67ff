//! The Iceberg tables sluice writes (apache/iceberg-rust): the main table and the window
//! tables, in one catalog per process.
//!
//! # How a batch becomes a snapshot
//!
//! Writing ([`writer`]) stacks iceberg-rust's writers, outermost first:
//!
//! 1. a **partition fanout** writer (`FanoutWriter`), fed by `RecordBatchPartitionSplitter`,
//!    which computes each row's partition from the table's default spec (skipped for an
//!    unpartitioned table);
//! 2. a **data file** writer per partition (`DataFileWriter`), which turns what was written
//!    into `DataFile` entries with their statistics;
//! 3. a **rolling file** writer (`RollingFileWriter`), which closes a file at
//!    `target-file-size` and starts the next; names are `<batch>-<run>-<n>.parquet`, so the
//!    files of a crashed attempt never collide with a retry's;
//! 4. the **Parquet** writer (zstd at `zstd-level`), against the table's current schema.
//!
//! The files stay invisible until [`commit`] appends them in one fast-append snapshot whose
//! summary carries the pipeline's [`crate::checkpoint::CommitMark`], behind a [`fence`]: only if
//! the table still records where the batch started, checked by the catalog itself. It then
//! reloads the table and checks that the snapshot is there (iceberg-rust can report success
//! for a commit that did not land).
//! The mark is also kept in a table property, so that snapshot expiry cannot lose it
//! ([`marks`]); [`maintain`] is `sluice maintain` (expiry that keeps every pipeline's mark,
//! orphan-file cleanup). [`read`] scans a table back (for `sluice show` and tests) and reads
//! or writes the other files sluice keeps beside the data (event-time state). [`catalog`]
//! opens the catalog once per process, on [`storage`] ([`durable`] for local folders:
//! every file and folder fsynced); [`config`] is the `[sink]` section.

pub mod catalog;
pub mod column_type;
pub mod commit;
pub mod compact;
pub mod config;
pub mod durable;
pub mod evolve;
pub mod fence;
pub mod listing;
pub mod maintain;
pub mod marks;
pub mod read;
mod split;
pub mod storage;
pub mod writer;

use std::collections::HashMap;

use iceberg::spec::{NestedFieldRef, Schema};
use iceberg::table::Table;
use iceberg::{Catalog, NamespaceIdent, TableCreation, TableIdent};

pub use self::catalog::IcebergCatalog;
pub use self::commit::Landed;
pub use self::config::{
    CatalogConfig, CatalogKind, ColumnConfig, ExpireSnapshotsConfig, IcebergSinkConfig,
};
pub use self::evolve::Evolution;
pub use self::fence::Fence;
pub use self::read::TableFiles;
pub use self::storage::{S3Config, StorageKind};
pub use self::writer::Written;
use crate::checkpoint::MarkError;

/// A table operation failed.
#[derive(Debug, thiserror::Error)]
pub enum IcebergError {
    /// The configuration is wrong.
    #[error("{0}")]
    Config(String),
    /// The catalog or a file operation failed.
    #[error("{what}: {}", with_causes(error.as_ref()))]
    Iceberg {
        /// What was being done.
        what: String,
        /// What iceberg-rust said.
        error: Box<iceberg::Error>,
    },
    /// The catalog did not answer within a bound of sluice's own (a catalog that hangs
    /// rather than refuses).
    #[error("{what}: no answer within {}s", limit.as_secs_f64())]
    NoAnswer {
        /// What was being done.
        what: String,
        /// How long it was given.
        limit: std::time::Duration,
    },
    /// A commit mark in the table cannot be read.
    #[error(transparent)]
    Mark(#[from] MarkError),
    /// The fence does not hold: the pipeline's partitions were committed by someone else
    /// since the batch was read (another process, or this one before a restart).
    #[error("batch {commit_id} fenced off {table}: {why}")]
    Fenced {
        /// The table.
        table: String,
        /// The commit id of the batch.
        commit_id: String,
        /// What the table shows instead.
        why: String,
    },
    /// A batch that changes the schema was planned against a schema that is no longer
    /// the table's current one (another process or a user changed it meanwhile): nothing
    /// was committed, and the batch is to be encoded again against the new schema.
    #[error(
        "batch {commit_id} changes the schema of {table} planned against schema {expected}, but the table's current schema is {found} now"
    )]
    SchemaMoved {
        /// The table.
        table: String,
        /// The commit id of the batch.
        commit_id: String,
        /// The schema id the change was planned against.
        expected: i32,
        /// The table's current schema id.
        found: i32,
    },
    /// A batch's rows and schema change committed, but the table's current schema lacks
    /// fields the change added: the catalog did not apply it (a REST server built on
    /// pyiceberg keeps the schema id the client sends, and iceberg-rust sends 0). The
    /// rows landed; their values for those fields are in the data files under the new
    /// field ids, but readers do not see them until the schema has them.
    #[error(
        "batch {commit_id} committed to {table} with a schema change the catalog did not apply: the current schema ({schema_id}) is the one the change was planned against, or lacks its fields: {missing:?}. Does the catalog assign new schema ids itself, as Java's and iceberg-rust's do?"
    )]
    SchemaNotApplied {
        /// The table.
        table: String,
        /// The commit id of the batch.
        commit_id: String,
        /// The table's current schema id.
        schema_id: i32,
        /// The fields of the planned schema the current one lacks (when its id is the one
        /// the change was planned against: the columns the change added and widened).
        missing: Vec<String>,
    },
    /// The commit reported success but the table does not show it (iceberg-rust #3061),
    /// or it failed and the table does not show it either.
    #[error("commit {commit_id} did not land in {table}{}", .cause.as_deref().map(|c| format!(": {c}")).unwrap_or_default())]
    NotCommitted {
        /// The table.
        table: String,
        /// The commit id.
        commit_id: String,
        /// The error the commit returned, if any.
        cause: Option<String>,
    },
}

/// `error` followed by each of its causes that it does not already say (iceberg-rust's
/// HTTP errors do not say why a request failed: a refused certificate, a reset connection).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let said = e.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = e.source();
    }
    text
}

/// An Arrow error inside the Iceberg writer stack, as iceberg-rust's error, with `what`
/// was being done.
fn arrow_error(what: &'static str) -> impl Fn(arrow_schema::ArrowError) -> iceberg::Error {
    move |e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, what).with_source(e)
}

/// For tests: a warehouse folder of its own (`sluice-<name>-<pid>` in the temporary
/// folder, emptied), the catalog in it, and the configuration of table `n.t` of one string
/// column `a`.
#[cfg(test)]
pub(crate) fn test_table(name: &str) -> (std::path::PathBuf, IcebergCatalog, IcebergSinkConfig) {
    let dir = std::env::temp_dir().join(format!("sluice-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config: IcebergSinkConfig = toml::from_str(&format!(
        "warehouse = {:?}\nnamespace = \"n\"\ntable = \"t\"\ncolumns = [{{ name = \"a\", type = \"string\" }}]",
        dir.display()
    ))
    .unwrap();
    let catalog = IcebergCatalog::open(&config, &dir).unwrap();
    (dir, catalog, config)
}

pub(crate) fn iceberg_err(what: impl Into<String>) -> impl FnOnce(iceberg::Error) -> IcebergError {
    let what = what.into();
    move |error| IcebergError::Iceberg {
        what,
        error: Box::new(error),
    }
}

/// An open Iceberg table that batches are appended to.
pub struct IcebergTable {
    catalog: IcebergCatalog,
    ident: TableIdent,
    table: Table,
    config: IcebergSinkConfig,
    /// Distinguishes the files of this process from those of a crashed attempt.
    run_id: String,
}

impl std::fmt::Debug for IcebergTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcebergTable")
            .field("table", &self.ident)
            .finish_non_exhaustive()
    }
}

impl IcebergTable {
    /// Opens the table of `config` in `catalog`, creating its namespace and the table (from
    /// `config.columns` and `partition-by`) if absent.
    pub fn open(catalog: &IcebergCatalog, config: IcebergSinkConfig) -> Result<Self, IcebergError> {
        Self::open_with(catalog, config, Create::FromConfig)
    }

    /// Opens the table, creating it if absent with the columns `columns` gives (a topic's
    /// schema) when `[sink] columns` is empty.
    pub fn open_or_create_from(
        catalog: &IcebergCatalog,
        config: IcebergSinkConfig,
        columns: &(dyn Fn() -> Result<Vec<NestedFieldRef>, String> + Sync),
    ) -> Result<Self, IcebergError> {
        Self::open_with(catalog, config, Create::From(columns))
    }

    /// Opens the table if it exists; creates nothing (`sluice show`).
    pub fn open_existing(
        catalog: &IcebergCatalog,
        config: IcebergSinkConfig,
    ) -> Result<Self, IcebergError> {
        Self::open_with(catalog, config, Create::No)
    }

    fn open_with(
        catalog: &IcebergCatalog,
        config: IcebergSinkConfig,
        create: Create<'_>,
    ) -> Result<Self, IcebergError> {
        let namespace =
            NamespaceIdent::from_vec(config.namespace.split('.').map(String::from).collect())
                .map_err(iceberg_err(format!("namespace `{}`", config.namespace)))?;
        let ident = TableIdent::new(namespace.clone(), config.table.clone());
        let table = match create {
            Create::No => catalog.block_on(load_existing(catalog.catalog(), &ident))?,
            create => {
                catalog.block_on(load_or_create(catalog, &namespace, &ident, &config, create))?
            }
        };
        Ok(IcebergTable {
            catalog: catalog.clone(),
            ident,
            table,
            config,
            run_id: crate::checkpoint::run_id(),
        })
    }

    /// The table's current schema.
    pub fn schema(&self) -> &Schema {
        self.table.metadata().current_schema()
    }

    /// The configured host-filled timestamp column.
    pub fn ingestion_time_column(&self) -> Option<&str> {
        self.config.ingestion_time_column.as_deref()
    }

    /// The table's name, `namespace.table`.
    pub fn name(&self) -> String {
        self.ident.to_string()
    }

    /// The table as last loaded.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The table's location, e.g. `file:///warehouse/ns/table`.
    pub fn location(&self) -> &str {
        self.table.metadata().location()
    }

    /// Reloads the table from the catalog.
    pub fn refresh(&mut self) -> Result<(), IcebergError> {
        self.table = self
            .catalog
            .block_on(self.catalog.catalog().load_table(&self.ident))
            .map_err(iceberg_err(format!("loading table {}", self.ident)))?;
        Ok(())
    }

    /// [`Self::refresh`], given up after `limit` ([`IcebergError::NoAnswer`]).
    pub fn refresh_within(&mut self, limit: std::time::Duration) -> Result<(), IcebergError> {
        let load = self.catalog.catalog().load_table(&self.ident);
        let what = || format!("loading table {}", self.ident);
        let answer = self
            .catalog
            .block_on(async { tokio::time::timeout(limit, load).await });
        self.table = answer
            .map_err(|_| IcebergError::NoAnswer {
                what: what(),
                limit,
            })?
            .map_err(iceberg_err(what()))?;
        Ok(())
    }
}

/// Loads the table, creating it (and its namespace) if absent. Another process may create
/// either at the same moment: a creation that fails because the other one won is fine.
/// Whether and how a table that is absent is created.
#[derive(Clone, Copy)]
enum Create<'a> {
    /// It is not: opening fails.
    No,
    /// From `[sink] columns`.
    FromConfig,
    /// From `[sink] columns`, or when it is empty from these columns.
    From(&'a (dyn Fn() -> Result<Vec<NestedFieldRef>, String> + Sync)),
}

async fn load_or_create(
    catalog: &IcebergCatalog,
    namespace: &NamespaceIdent,
    ident: &TableIdent,
    config: &IcebergSinkConfig,
    create: Create<'_>,
) -> Result<Table, IcebergError> {
    let catalog = catalog.catalog();
    if !catalog
        .namespace_exists(namespace)
        .await
        .map_err(iceberg_err("checking the namespace"))?
        && let Err(error) = catalog.create_namespace(namespace, HashMap::new()).await
        && !catalog.namespace_exists(namespace).await.unwrap_or(false)
    {
        return Err(iceberg_err(format!(
            "creating namespace `{}`",
            config.namespace
        ))(error));
    }
    if catalog
        .table_exists(ident)
        .await
        .map_err(iceberg_err("checking the table"))?
    {
        return load(catalog, ident).await;
    }
    let schema = match create {
        Create::From(columns) if config.columns.is_empty() => {
            columns().and_then(|fields| config.schema_with(fields))
        }
        _ => config.schema(),
    }
    .map_err(IcebergError::Config)?;
    let spec = config
        .partition_spec(&schema)
        .map_err(IcebergError::Config)?;
    let creation = TableCreation::builder()
        .name(config.table.clone())
        .schema(schema)
        .partition_spec(spec)
        .properties([(
            "write.parquet.compression-codec".to_string(),
            "zstd".to_string(),
        )])
        .build();
    match catalog.create_table(namespace, creation).await {
        Ok(table) => {
            tracing::info!(table = %ident, "created table");
            Ok(table)
        }
        Err(_) if catalog.table_exists(ident).await.unwrap_or(false) => {
            tracing::info!(table = %ident, "the table was created meanwhile by another process");
            load(catalog, ident).await
        }
        Err(error) => Err(iceberg_err(format!("creating table {ident}"))(error)),
    }
}

/// Loads the table; its absence is a configuration error that says so.
async fn load_existing(catalog: &dyn Catalog, ident: &TableIdent) -> Result<Table, IcebergError> {
    let exists = catalog
        .table_exists(ident)
        .await
        .map_err(iceberg_err("checking the table"))?;
    if !exists {
        return Err(IcebergError::Config(format!(
            "table {ident} does not exist (sluice run creates it)"
        )));
    }
    load(catalog, ident).await
}

async fn load(catalog: &dyn Catalog, ident: &TableIdent) -> Result<Table, IcebergError> {
    catalog
        .load_table(ident)
        .await
        .map_err(iceberg_err(format!("loading table {ident}")))
}
