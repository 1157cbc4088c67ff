//! The Iceberg table sink (apache/iceberg-rust): catalog, table creation, Parquet files
//! through a partition fanout writer, and one fast-append commit per batch carrying the
//! pipeline's [`CommitMark`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::io::LocalFsStorageFactory;
use iceberg::spec::{
    DataFile, DataFileFormat, NestedField, PrimitiveType, Schema, SnapshotRef, Transform, Type,
    UnboundPartitionSpec,
};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation, TableIdent};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::Deserialize;

use crate::commit::{CommitMark, MarkError};
use crate::units::ByteSize;

/// Which catalog holds the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CatalogKind {
    /// A SQL catalog (SQLite or PostgreSQL), the JDBC catalog's layout.
    Sql,
    /// An Iceberg REST catalog.
    Rest,
}

/// The catalog.
///
/// ```toml
/// [sink.catalog]
/// type = "sql"
/// # uri = "postgres://user:pass@db/iceberg"   # default: SQLite inside the warehouse
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CatalogConfig {
    /// `sql` (SQLite or PostgreSQL) or `rest`.
    #[serde(rename = "type", default = "default_kind")]
    pub kind: CatalogKind,
    /// Catalog name, as other engines will call it (pyiceberg's and Spark's catalog name).
    #[serde(default = "default_catalog_name")]
    pub name: String,
    /// For `sql`: an sqlx database URL, `sqlite:PATH` or `postgres://...`; by default the
    /// SQLite file `catalog.db` inside the warehouse folder. For `rest`: the REST
    /// catalog's base URL.
    #[serde(default)]
    pub uri: Option<String>,
    /// Extra catalog properties (REST credentials, `pool.max-connections`...).
    #[serde(default)]
    pub properties: HashMap<String, String>,
}

const fn default_kind() -> CatalogKind {
    CatalogKind::Sql
}

fn default_catalog_name() -> String {
    "sluice".into()
}

impl Default for CatalogConfig {
    fn default() -> Self {
        CatalogConfig {
            kind: default_kind(),
            name: default_catalog_name(),
            uri: None,
            properties: HashMap::new(),
        }
    }
}

/// One column of a table that sluice creates.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ColumnConfig {
    /// Column name; the JSON field of the same name fills it.
    pub name: String,
    /// Iceberg type: `string`, `int`, `long`, `boolean`, `float`, `double`, `date`,
    /// `timestamp`, `timestamptz` or `decimal(P,S)`.
    #[serde(rename = "type")]
    pub ty: String,
    /// Whether the column may not be null. An event without it is dead-lettered.
    #[serde(default)]
    pub required: bool,
    /// Doc string stored in the table's schema.
    #[serde(default)]
    pub doc: Option<String>,
}

/// The Iceberg sink.
///
/// ```toml
/// [sink]
/// warehouse = "${SLUICE_WAREHOUSE:-./warehouse}"
/// namespace = "tutorial"
/// table = "retail_clickstream_events"
/// partition-by = ["day(event_time)"]
/// ingestion-time-column = "ingestion_time"
/// columns = [
///   { name = "event_id", type = "string" },
///   { name = "event_time", type = "timestamptz" },
///   { name = "ingestion_time", type = "timestamptz" },
/// ]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct IcebergSinkConfig {
    /// Warehouse: a folder (created if absent; relative to the configuration file) or a
    /// `file://` URL. Data and metadata files go below it.
    pub warehouse: String,
    /// The catalog. Default: SQLite in `<warehouse>/catalog.db`.
    #[serde(default)]
    pub catalog: CatalogConfig,
    /// Namespace of the table (dots separate levels); created if absent.
    pub namespace: String,
    /// Table name; the table is created if absent, from `columns` and `partition-by`.
    pub table: String,
    /// Columns of the table to create, in order. Ignored when the table exists: sluice
    /// then encodes against the table's own schema.
    #[serde(default)]
    pub columns: Vec<ColumnConfig>,
    /// Partition transforms of the table to create: `day(event_time)`, `identity(col)`,
    /// `bucket[16](col)`, `truncate[4](col)`, `year(..)`, `month(..)`, `hour(..)`.
    #[serde(default)]
    pub partition_by: Vec<String>,
    /// A timestamp column that sluice fills with the time each batch is processed
    /// (Spark's `current_timestamp()`), not from the event.
    #[serde(default)]
    pub ingestion_time_column: Option<String>,
    /// Size at which a data file is closed and a new one started, e.g. `"128MiB"`.
    #[serde(default = "default_target_file_size")]
    pub target_file_size: ByteSize,
    /// Parquet zstd compression level (1-22).
    #[serde(default = "default_zstd_level")]
    pub zstd_level: i32,
}

const fn default_target_file_size() -> ByteSize {
    ByteSize::mib(128)
}

const fn default_zstd_level() -> i32 {
    3
}

/// The sink failed.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The configuration is wrong.
    #[error("{0}")]
    Config(String),
    /// The catalog or a file operation failed.
    #[error("{what}: {error}")]
    Iceberg {
        /// What was being done.
        what: String,
        /// What iceberg-rust said.
        error: Box<iceberg::Error>,
    },
    /// A commit mark in the table cannot be read.
    #[error(transparent)]
    Mark(#[from] MarkError),
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

fn iceberg_err(what: impl Into<String>) -> impl FnOnce(iceberg::Error) -> SinkError {
    let what = what.into();
    move |error| SinkError::Iceberg {
        what,
        error: Box::new(error),
    }
}

/// Parses a column type.
pub fn parse_type(text: &str) -> Result<PrimitiveType, String> {
    let t = text.trim().to_ascii_lowercase();
    Ok(match t.as_str() {
        "string" => PrimitiveType::String,
        "int" | "integer" => PrimitiveType::Int,
        "long" | "bigint" => PrimitiveType::Long,
        "boolean" => PrimitiveType::Boolean,
        "float" => PrimitiveType::Float,
        "double" => PrimitiveType::Double,
        "date" => PrimitiveType::Date,
        "timestamp" => PrimitiveType::Timestamp,
        "timestamptz" => PrimitiveType::Timestamptz,
        _ => {
            let inner = t
                .strip_prefix("decimal(")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("unknown column type `{text}`"))?;
            let (p, s) = inner
                .split_once(',')
                .ok_or_else(|| format!("decimal needs a precision and a scale: `{text}`"))?;
            let precision: u32 = p
                .trim()
                .parse()
                .map_err(|_| format!("bad precision in `{text}`"))?;
            let scale: u32 = s
                .trim()
                .parse()
                .map_err(|_| format!("bad scale in `{text}`"))?;
            if precision == 0 || precision > 38 || scale > precision {
                return Err(format!(
                    "`{text}`: need 1 <= precision <= 38 and scale <= precision"
                ));
            }
            PrimitiveType::Decimal { precision, scale }
        }
    })
}

/// Parses a partition transform like `day(event_time)` or `bucket[16](user_id)`.
pub fn parse_partition(text: &str) -> Result<(Transform, String), String> {
    let t = text.trim();
    let (name, rest) = t.split_once('(').ok_or_else(|| {
        format!("partition `{text}`: expected TRANSFORM(COLUMN), e.g. day(event_time)")
    })?;
    let column = rest
        .strip_suffix(')')
        .ok_or_else(|| format!("partition `{text}`: missing `)`"))?
        .trim();
    let transform: Transform = name
        .trim()
        .parse()
        .map_err(|e| format!("partition `{text}`: {e}"))?;
    if matches!(transform, Transform::Unknown | Transform::Void) || column.is_empty() {
        return Err(format!("partition `{text}`: unsupported"));
    }
    Ok((transform, column.to_string()))
}

impl IcebergSinkConfig {
    /// The Iceberg schema of the table to create.
    pub fn schema(&self) -> Result<Schema, String> {
        if self.columns.is_empty() {
            return Err(
                "sink.columns is empty: list the table's columns so it can be created".into(),
            );
        }
        let mut fields = Vec::new();
        for (i, c) in self.columns.iter().enumerate() {
            let ty =
                parse_type(&c.ty).map_err(|e| format!("sink.columns[{i}] ({}): {e}", c.name))?;
            let mut field =
                NestedField::new(i as i32 + 1, &c.name, Type::Primitive(ty), c.required);
            if let Some(doc) = &c.doc {
                field = field.with_doc(doc);
            }
            fields.push(Arc::new(field));
        }
        Schema::builder()
            .with_fields(fields)
            .build()
            .map_err(|e| format!("sink.columns: {e}"))
    }

    /// The partition spec of the table to create.
    pub fn partition_spec(&self, schema: &Schema) -> Result<UnboundPartitionSpec, String> {
        let mut spec = UnboundPartitionSpec::builder();
        for text in &self.partition_by {
            let (transform, column) = parse_partition(text)?;
            let field = schema.field_by_name(&column).ok_or_else(|| {
                format!("partition `{text}`: no column `{column}` in sink.columns")
            })?;
            let name = match transform {
                Transform::Identity => column.clone(),
                Transform::Bucket(_) => format!("{column}_bucket"),
                Transform::Truncate(_) => format!("{column}_trunc"),
                other => format!("{column}_{}", other.to_string().to_lowercase()),
            };
            spec = spec
                .add_partition_field(field.id, name, transform)
                .map_err(|e| format!("partition `{text}`: {e}"))?;
        }
        Ok(spec.build())
    }
}

/// Resolves `path` against `base` unless it is absolute or a URL.
fn resolve(base: &Path, path: &str) -> String {
    if path.contains("://") || path.starts_with("file:") {
        return path.to_string();
    }
    let p = PathBuf::from(path);
    let p = if p.is_absolute() { p } else { base.join(p) };
    p.to_string_lossy().into_owned()
}

/// An open Iceberg table that batches are appended to.
pub struct IcebergSink {
    catalog: Arc<dyn Catalog>,
    ident: TableIdent,
    table: Table,
    config: IcebergSinkConfig,
    runtime: tokio::runtime::Runtime,
    /// Distinguishes the files of this process from those of a crashed attempt.
    run_id: String,
}

impl std::fmt::Debug for IcebergSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcebergSink")
            .field("table", &self.ident)
            .finish_non_exhaustive()
    }
}

/// What a batch wrote.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// The data files, not yet committed.
    pub files: Vec<DataFile>,
    /// Rows in them.
    pub rows: u64,
    /// Bytes in them.
    pub bytes: u64,
}

impl IcebergSink {
    /// Opens the catalog, creating the warehouse folder, namespace and table if absent.
    /// Relative paths are resolved against `base` (the configuration file's folder).
    pub fn open(config: IcebergSinkConfig, base: &Path) -> Result<Self, SinkError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-iceberg")
            .enable_all()
            .build()
            .map_err(|e| SinkError::Config(format!("cannot start the I/O runtime: {e}")))?;
        let warehouse = resolve(base, &config.warehouse);
        let local = !warehouse.contains("://") || warehouse.starts_with("file:");
        let warehouse_url = if local {
            let dir = warehouse.trim_start_matches("file://");
            std::fs::create_dir_all(dir).map_err(|e| {
                SinkError::Config(format!("cannot create the warehouse folder {dir}: {e}"))
            })?;
            let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| PathBuf::from(dir));
            format!("file://{}", dir.display())
        } else {
            warehouse.clone()
        };
        let catalog = runtime.block_on(open_catalog(&config.catalog, &warehouse_url))?;
        let namespace =
            NamespaceIdent::from_vec(config.namespace.split('.').map(String::from).collect())
                .map_err(iceberg_err(format!("namespace `{}`", config.namespace)))?;
        let ident = TableIdent::new(namespace.clone(), config.table.clone());
        let table = runtime.block_on(async {
            if !catalog
                .namespace_exists(&namespace)
                .await
                .map_err(iceberg_err("checking the namespace"))?
            {
                catalog
                    .create_namespace(&namespace, HashMap::new())
                    .await
                    .map_err(iceberg_err(format!(
                        "creating namespace `{}`",
                        config.namespace
                    )))?;
            }
            if catalog
                .table_exists(&ident)
                .await
                .map_err(iceberg_err("checking the table"))?
            {
                return catalog
                    .load_table(&ident)
                    .await
                    .map_err(iceberg_err(format!("loading table {ident}")));
            }
            let schema = config.schema().map_err(SinkError::Config)?;
            let spec = config.partition_spec(&schema).map_err(SinkError::Config)?;
            let creation = TableCreation::builder()
                .name(config.table.clone())
                .schema(schema)
                .partition_spec(spec)
                .properties([(
                    "write.parquet.compression-codec".to_string(),
                    "zstd".to_string(),
                )])
                .build();
            let table = catalog
                .create_table(&namespace, creation)
                .await
                .map_err(iceberg_err(format!("creating table {ident}")))?;
            tracing::info!(table = %ident, "created table");
            Ok(table)
        })?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        Ok(IcebergSink {
            catalog,
            ident,
            table,
            config,
            runtime,
            run_id: format!("{:x}-{nanos:x}", std::process::id()),
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

    /// Reloads the table from the catalog.
    pub fn refresh(&mut self) -> Result<(), SinkError> {
        self.table = self
            .runtime
            .block_on(self.catalog.load_table(&self.ident))
            .map_err(iceberg_err(format!("loading table {}", self.ident)))?;
        Ok(())
    }

    /// The table's location, e.g. `file:///warehouse/ns/table`.
    pub fn location(&self) -> &str {
        self.table.metadata().location()
    }

    /// Writes a whole file through the table's storage (any warehouse, local or not).
    pub fn put_file(&self, path: &str, bytes: Vec<u8>) -> Result<(), SinkError> {
        let io = self.table.file_io();
        self.runtime
            .block_on(async { io.new_output(path)?.write(bytes.into()).await })
            .map_err(iceberg_err(format!("writing {path}")))
    }

    /// Reads a whole file through the table's storage; `None` if it does not exist.
    pub fn get_file(&self, path: &str) -> Result<Option<Vec<u8>>, SinkError> {
        let io = self.table.file_io();
        self.runtime
            .block_on(async {
                if !io.exists(path).await? {
                    return Ok(None);
                }
                io.new_input(path)?.read().await.map(|b| Some(b.to_vec()))
            })
            .map_err(iceberg_err(format!("reading {path}")))
    }

    /// Deletes a file through the table's storage.
    pub fn delete_file(&self, path: &str) -> Result<(), SinkError> {
        let io = self.table.file_io();
        self.runtime
            .block_on(io.delete(path))
            .map_err(iceberg_err(format!("deleting {path}")))
    }

    /// The snapshot that carries `pipeline`'s latest mark, walking back from the current
    /// snapshot.
    fn last_mark_snapshot(&self, pipeline: &str) -> Option<&SnapshotRef> {
        let metadata = self.table.metadata();
        let mut next = metadata.current_snapshot();
        while let Some(snapshot) = next {
            let props = &snapshot.summary().additional_properties;
            if props.get(crate::commit::PIPELINE).map(String::as_str) == Some(pipeline) {
                return Some(snapshot);
            }
            next = snapshot
                .parent_snapshot_id()
                .and_then(|id| metadata.snapshot_by_id(id));
        }
        None
    }

    /// The summary properties of the snapshot that carries `pipeline`'s latest mark.
    pub fn last_mark_properties(&self, pipeline: &str) -> Option<&HashMap<String, String>> {
        self.last_mark_snapshot(pipeline)
            .map(|s| &s.summary().additional_properties)
    }

    /// The latest commit mark of `pipeline`.
    pub fn last_mark(&self, pipeline: &str) -> Result<Option<CommitMark>, SinkError> {
        let Some(snapshot) = self.last_mark_snapshot(pipeline) else {
            return Ok(None);
        };
        let props = &snapshot.summary().additional_properties;
        Ok(CommitMark::from_properties(pipeline, snapshot.snapshot_id(), props).transpose()?)
    }

    /// Reads the whole table (current snapshot) as JSON objects, columns in table order:
    /// integers as numbers, other values as their text (timestamps in RFC 3339, decimals
    /// with their scale). For `sluice show` and tests; not for large tables.
    pub fn read_rows(&self) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, SinkError> {
        use futures::TryStreamExt;
        let batches: Vec<RecordBatch> = self
            .runtime
            .block_on(async {
                let scan = self.table.scan().select_all().build()?;
                scan.to_arrow().await?.try_collect().await
            })
            .map_err(iceberg_err(format!("reading table {}", self.ident)))?;
        let mut rows = Vec::new();
        let options = arrow_cast::display::FormatOptions::default();
        for batch in &batches {
            let schema = batch.schema();
            let formatters = batch
                .columns()
                .iter()
                .map(|c| arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| SinkError::Config(format!("cannot display a column: {e}")))?;
            for row in 0..batch.num_rows() {
                let mut object = serde_json::Map::new();
                for (i, (field, column)) in schema.fields().iter().zip(batch.columns()).enumerate()
                {
                    use arrow_schema::DataType;
                    let value = if column.is_null(row) {
                        serde_json::Value::Null
                    } else {
                        let text = formatters[i].value(row).to_string();
                        match field.data_type() {
                            DataType::Int32 | DataType::Int64 | DataType::Boolean => {
                                serde_json::from_str(&text)
                                    .unwrap_or(serde_json::Value::String(text))
                            }
                            _ => serde_json::Value::String(text),
                        }
                    };
                    object.insert(field.name().clone(), value);
                }
                rows.push(object);
            }
        }
        Ok(rows)
    }

    /// Writes `batches` as Parquet data files (not yet visible: see [`IcebergSink::commit`]).
    pub fn write(&self, batches: Vec<RecordBatch>, batch_id: u64) -> Result<Written, SinkError> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows == 0 {
            return Ok(Written::default());
        }
        let metadata = self.table.metadata();
        let schema = metadata.current_schema().clone();
        let spec = metadata.default_partition_spec().clone();
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(self.config.zstd_level)
                    .map_err(|e| SinkError::Config(format!("sink.zstd-level: {e}")))?,
            ))
            .build();
        let location =
            DefaultLocationGenerator::new(metadata).map_err(iceberg_err("locating data files"))?;
        let names = DefaultFileNameGenerator::new(
            format!("{batch_id:010}-{}", self.run_id),
            None,
            DataFileFormat::Parquet,
        );
        let rolling = RollingFileWriterBuilder::new(
            ParquetWriterBuilder::new(properties, schema.clone()),
            self.config.target_file_size.as_usize(),
            self.table.file_io().clone(),
            location,
            names,
        );
        let builder = DataFileWriterBuilder::new(rolling);
        let files = self.runtime.block_on(async {
            if spec.is_unpartitioned() {
                let mut writer = builder
                    .build(None)
                    .await
                    .map_err(iceberg_err("opening a data file"))?;
                for batch in batches {
                    writer
                        .write(batch)
                        .await
                        .map_err(iceberg_err("writing a data file"))?;
                }
                writer
                    .close()
                    .await
                    .map_err(iceberg_err("closing a data file"))
            } else {
                let splitter =
                    RecordBatchPartitionSplitter::try_new_with_computed_values(schema, spec)
                        .map_err(iceberg_err("partitioning"))?;
                let mut fanout = FanoutWriter::new(builder);
                for batch in batches {
                    for (key, part) in splitter
                        .split(&batch)
                        .map_err(iceberg_err("partitioning a batch"))?
                    {
                        fanout
                            .write(key, part)
                            .await
                            .map_err(iceberg_err("writing a data file"))?;
                    }
                }
                fanout
                    .close()
                    .await
                    .map_err(iceberg_err("closing data files"))
            }
        })?;
        let bytes = files.iter().map(|f| f.file_size_in_bytes()).sum();
        Ok(Written {
            files,
            rows: rows as u64,
            bytes,
        })
    }

    /// Appends `files` in one snapshot carrying `mark` (and `extra` summary properties),
    /// then reloads the table and checks that the commit is there. A commit that returned
    /// an error but did land is accepted.
    pub fn commit(
        &mut self,
        files: Vec<DataFile>,
        mark: &CommitMark,
        extra: HashMap<String, String>,
    ) -> Result<(), SinkError> {
        let mut properties = mark.to_properties();
        properties.extend(extra);
        let tx = Transaction::new(&self.table);
        let action = tx
            .fast_append()
            .add_data_files(files)
            .set_snapshot_properties(properties);
        let result = self.runtime.block_on(async {
            let tx = action.apply(tx)?;
            tx.commit(self.catalog.as_ref()).await
        });
        let cause = result.as_ref().err().map(ToString::to_string);
        self.refresh()?;
        let landed = self.last_mark(&mark.pipeline)?;
        if landed.as_ref().map(CommitMark::commit_id) == Some(mark.commit_id()) {
            if let Some(cause) = cause {
                tracing::warn!(%cause, commit_id = %mark.commit_id(), "the commit reported an error but landed");
            }
            Ok(())
        } else {
            Err(SinkError::NotCommitted {
                table: self.name(),
                commit_id: mark.commit_id(),
                cause,
            })
        }
    }
}

async fn open_catalog(
    config: &CatalogConfig,
    warehouse: &str,
) -> Result<Arc<dyn Catalog>, SinkError> {
    let mut props = config.properties.clone();
    props.insert("warehouse".into(), warehouse.to_string());
    match config.kind {
        CatalogKind::Sql => {
            let uri = match &config.uri {
                Some(uri) => uri.clone(),
                None => {
                    let dir = warehouse.trim_start_matches("file://");
                    if warehouse.contains("://") && !warehouse.starts_with("file://") {
                        return Err(SinkError::Config(
                            "sink.catalog.uri is required when the warehouse is not a local folder"
                                .into(),
                        ));
                    }
                    format!("sqlite:{dir}/catalog.db")
                }
            };
            let uri = if uri.starts_with("sqlite:") && !uri.contains("mode=") {
                format!("{uri}{}mode=rwc", if uri.contains('?') { '&' } else { '?' })
            } else {
                uri
            };
            let bind = if uri.starts_with("postgres") {
                "DollarNumeric"
            } else {
                "QMark"
            };
            props.insert("uri".into(), uri.clone());
            props.insert("sql_bind_style".into(), bind.into());
            let catalog = iceberg_catalog_sql::SqlCatalogBuilder::default()
                .with_storage_factory(Arc::new(LocalFsStorageFactory))
                .load(config.name.clone(), props)
                .await
                .map_err(iceberg_err(format!(
                    "opening the SQL catalog {}",
                    redact(&uri)
                )))?;
            Ok(Arc::new(catalog))
        }
        CatalogKind::Rest => {
            let uri = config.uri.clone().ok_or_else(|| {
                SinkError::Config("sink.catalog.uri: the REST catalog's URL is required".into())
            })?;
            props.insert("uri".into(), uri.clone());
            let catalog = iceberg_catalog_rest::RestCatalogBuilder::default()
                .with_storage_factory(Arc::new(LocalFsStorageFactory))
                .load(config.name.clone(), props)
                .await
                .map_err(iceberg_err(format!("opening the REST catalog {uri}")))?;
            Ok(Arc::new(catalog))
        }
    }
}

/// Hides a password in a database URL.
fn redact(uri: &str) -> String {
    match (uri.find("://"), uri.find('@')) {
        (Some(s), Some(at)) if at > s => match uri[s + 3..at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &uri[..s + 3], &uri[at..]),
            None => uri.to_string(),
        },
        _ => uri.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_and_transforms() {
        assert_eq!(
            parse_type("DECIMAL(10, 2)").unwrap(),
            PrimitiveType::Decimal {
                precision: 10,
                scale: 2
            }
        );
        assert_eq!(
            parse_type("timestamptz").unwrap(),
            PrimitiveType::Timestamptz
        );
        assert!(parse_type("decimal(2,3)").is_err());
        assert!(parse_type("varchar").is_err());
        assert_eq!(
            parse_partition("day(event_time)").unwrap(),
            (Transform::Day, "event_time".into())
        );
        assert_eq!(
            parse_partition("bucket[16](user_id)").unwrap(),
            (Transform::Bucket(16), "user_id".into())
        );
        assert!(parse_partition("day event_time").is_err());
        assert!(parse_partition("fortnight(x)").is_err());
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
    }
}
