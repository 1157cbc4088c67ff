//! Configuration of an Iceberg table: its catalog, warehouse, columns and partitioning.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use iceberg::spec::{
    NestedField, NestedFieldRef, PrimitiveType, Schema, Transform, Type, UnboundPartitionSpec,
};
use serde::{Deserialize, Deserializer};

use super::storage::S3Config;
use crate::encode::UnknownFields;
use crate::units::ByteSize;

/// Which catalog holds the table.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
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
/// # uri = "postgres://user:pass@db/iceberg?sslmode=verify-full&sslrootcert=/etc/ca.pem"
/// # default: SQLite inside the warehouse
/// ```
///
/// A REST catalog over HTTPS, with OAuth2 client credentials:
///
/// ```toml
/// [sink.catalog]
/// type = "rest"
/// uri = "https://catalog.example.com/api/catalog"
/// credential = "${CLIENT_ID}:${CLIENT_SECRET}"
/// ca-cert = "/etc/sluice/ca.pem"
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CatalogConfig {
    /// `sql` (SQLite or PostgreSQL) or `rest`.
    #[serde(rename = "type", default = "default_kind")]
    pub kind: CatalogKind,
    /// Catalog name, as other engines will call it (pyiceberg's and Spark's catalog name).
    #[serde(default = "default_catalog_name")]
    pub name: String,
    /// For `sql`: an sqlx database URL, `sqlite:PATH` or `postgres://...` (TLS with
    /// `?sslmode=require`, `verify-ca` or `verify-full`, and `&sslrootcert=CA.pem` for a
    /// private CA); by default the SQLite file `catalog.db` inside a local warehouse
    /// folder. For `rest`: the REST catalog's base URL, `http://` or `https://`.
    #[serde(default)]
    pub uri: Option<String>,
    /// REST: a bearer token sent with every request (`Authorization: Bearer ...`).
    #[serde(default)]
    pub token: Option<String>,
    /// REST: OAuth2 client credentials, `CLIENT_ID:SECRET`, exchanged for a token (client
    /// credentials grant) at `oauth2-server-uri`, by default the catalog's
    /// `v1/oauth/tokens`, and exchanged again when it expires.
    #[serde(default)]
    pub credential: Option<String>,
    /// REST: the OAuth2 token endpoint for `credential`.
    #[serde(default)]
    pub oauth2_server_uri: Option<String>,
    /// REST: the OAuth2 scope asked for with `credential`. Default: `catalog`.
    #[serde(default)]
    pub scope: Option<String>,
    /// REST: a PEM file of CA certificates to trust, besides the system's, for an
    /// `https://` catalog whose certificate a private CA signed.
    #[serde(default)]
    pub ca_cert: Option<PathBuf>,
    /// Extra catalog properties (`pool.max-connections`, a REST `prefix`, `audience`...).
    #[serde(default)]
    pub properties: HashMap<String, String>,
}

impl std::fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "***");
        f.debug_struct("CatalogConfig")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("uri", &self.uri.as_deref().map(redact_password))
            .field("token", &hidden(&self.token))
            .field("credential", &hidden(&self.credential))
            .field("oauth2_server_uri", &self.oauth2_server_uri)
            .field("scope", &self.scope)
            .field("ca_cert", &self.ca_cert)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Hides a password in a URL (`scheme://user:***@host/...`).
pub fn redact_password(uri: &str) -> String {
    match (uri.find("://"), uri.find('@')) {
        (Some(s), Some(at)) if at > s => match uri[s + 3..at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &uri[..s + 3], &uri[at..]),
            None => uri.to_string(),
        },
        _ => uri.to_string(),
    }
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
            token: None,
            credential: None,
            oauth2_server_uri: None,
            scope: None,
            ca_cert: None,
            properties: HashMap::new(),
        }
    }
}

/// One column of a table that sluice creates.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ColumnConfig {
    /// Column name; the JSON field of the same name fills it.
    pub name: String,
    /// Iceberg type: `string`, `int`, `long`, `boolean`, `float`, `double`, `date`,
    /// `timestamp`, `timestamptz`, `decimal(P,S)`, `binary` (from base64 text in JSON), or
    /// a nested type, to any depth:
    /// `struct<name: type, ...>` (from a JSON object), `list<type>` (from an array) or
    /// `map<keytype, valuetype>` (from an object's keys and values). Nested fields are
    /// optional; a field name other than letters, digits and `_` goes between backticks
    /// (`` struct<`user-agent`: string> ``).
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct IcebergSinkConfig {
    /// Warehouse: a folder (created if absent; relative to the configuration file), a
    /// `file://` URL, or an S3 bucket and prefix, `s3://BUCKET/PATH` (see `[sink.s3]`).
    /// Data files, metadata and the event-time state go below it.
    pub warehouse: String,
    /// The catalog. Default: SQLite in `<warehouse>/catalog.db`.
    #[serde(default)]
    pub catalog: CatalogConfig,
    /// S3 settings, for an `s3://` warehouse.
    #[serde(default)]
    pub s3: S3Config,
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
    /// What happens to an event's field that the table has no column for. The default,
    /// `"drop"`, is what a Kafka Connect Iceberg sink user gets
    /// (`iceberg.tables.evolve-schema-enabled` is off by default, and the connector then
    /// leaves such fields out), but counted rather than silent: the table's schema stays
    /// the contract, and no event stops on a field added upstream.
    #[serde(default)]
    pub unknown_fields: UnknownFields,
    /// With `unknown-fields = "add"`: the most fields the table may have, nested fields
    /// (list elements, map keys and values) counted. A new field that would take it past
    /// this is not added: its events are dead-lettered `too_many_columns`. Stops objects
    /// with dynamic keys (ids, timestamps as keys) from exploding the schema.
    #[serde(default = "default_max_columns")]
    pub max_columns: usize,
    /// With `unknown-fields = "add"`: how deep a new column's type may nest (a struct of
    /// primitives is 1, a list of structs 2). Deeper values are dead-lettered
    /// `nested_too_deep`.
    #[serde(default = "default_max_nesting_depth")]
    pub max_nesting_depth: usize,
    /// With `unknown-fields = "add"`: whether a new field whose string values are
    /// timestamps becomes a timestamp column: `timestamptz` for RFC 3339 ones with a zone
    /// (`2026-01-09T10:04:00Z`), `timestamp` for ones without (`2026-01-09T10:04:00`,
    /// `2026-01-09 10:04:00`). Off by default, as in Kafka Connect's sink: a timestamp
    /// stays the string it came as. Once a column is a timestamp, a later value that is
    /// not one is dead-lettered `invalid_timestamp` (no column turns back into a string).
    #[serde(default)]
    pub infer_timestamps: bool,
    /// Size at which a data file is closed and a new one started, e.g. `"128MiB"`.
    #[serde(default = "default_target_file_size")]
    pub target_file_size: ByteSize,
    /// Parquet zstd compression level (1-22). The default, 1, wrote the retail events
    /// with ~20% less CPU than 3 for 1% larger files (ingest benchmark); raise it when
    /// storage costs more than CPU.
    #[serde(default = "default_zstd_level")]
    pub zstd_level: i32,
    /// Commit at most this often, e.g. `"1m"`: the triggers in between are processed and
    /// held (their rows in memory, their dead letters unsent) and land together in one
    /// snapshot, so that frequent small triggers do not each make a snapshot and small
    /// files. Offsets still move only with a commit: a crash replays the held triggers.
    /// Held triggers are committed early at `min-commit-rows`, at the end of an
    /// `--available-now` run and on a graceful stop. Default: every trigger commits.
    /// With `[event-time]`, each held trigger runs the operators as it would alone, and
    /// their state is saved once, at the commit (see [`crate::pipeline`]'s `cadence`).
    #[serde(default, with = "crate::units::optional_duration")]
    #[schemars(with = "Option<crate::units::DurationText>")]
    pub commit_interval: Option<Duration>,
    /// Commit the held triggers once they read this many records, before
    /// `commit-interval` is up (which then defaults to `"5m"`, the Kafka Connect Iceberg
    /// sink's commit interval). Default with `commit-interval`: 500 000, which bounds the
    /// rows held in memory.
    #[serde(default)]
    pub min_commit_rows: Option<u64>,
    /// Snapshot expiry by the running pipeline, between commits. Default: none (only
    /// `sluice maintain` expires snapshots).
    #[serde(default)]
    pub expire_snapshots: Option<ExpireSnapshotsConfig>,
    /// Compaction of small data files, by the running pipeline and by `sluice maintain
    /// --compact`. Default: none (`sluice maintain --compact` then uses the defaults).
    #[serde(default)]
    pub compact: Option<super::compact::CompactConfig>,
}

/// Snapshot expiry by the running pipeline: every `every-commits` commits, the snapshots
/// of the pipeline's tables (the main table and the window tables) older than
/// `older-than` are expired, keeping the newest `retain-last`, branch and tag heads, and
/// the snapshot carrying each pipeline's latest mark (as `sluice maintain` does). Only
/// the metadata changes: deleting the files of expired snapshots stays with
/// `sluice maintain`. A failed expiry is logged and counted, never fails the batch.
///
/// ```toml
/// [sink.expire-snapshots]
/// older-than = "1h"
/// retain-last = 10
/// every-commits = 10
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ExpireSnapshotsConfig {
    /// Expire snapshots older than this, e.g. `"1h"`; `"0s"`: whatever their age.
    #[serde(default = "default_expire_older_than", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub older_than: Duration,
    /// Keep at least this many of the newest snapshots of the current history (at least 1).
    #[serde(default = "default_retain_last", deserialize_with = "at_least_one")]
    pub retain_last: usize,
    /// Expire after every this many commits of this process (at least 1).
    #[serde(default = "default_every_commits", deserialize_with = "at_least_one")]
    pub every_commits: u64,
}

/// Snapshots older than this are expired by default.
pub const DEFAULT_EXPIRE_OLDER_THAN: Duration = Duration::from_secs(3600);

const fn default_expire_older_than() -> Duration {
    DEFAULT_EXPIRE_OLDER_THAN
}

const fn default_retain_last() -> usize {
    10
}

const fn default_every_commits() -> u64 {
    10
}

impl Default for ExpireSnapshotsConfig {
    fn default() -> Self {
        ExpireSnapshotsConfig {
            older_than: default_expire_older_than(),
            retain_last: default_retain_last(),
            every_commits: default_every_commits(),
        }
    }
}

/// A whole number of at least 1.
fn at_least_one<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<T, D::Error> {
    use serde::de::Error;
    let n = u64::deserialize(d)?;
    if n == 0 {
        return Err(D::Error::custom(
            "must be at least 1 (the newest snapshot is always kept, and expiry runs after a commit)",
        ));
    }
    T::try_from(n).map_err(|_| D::Error::custom(format!("{n} is too large")))
}

/// The held rows' cap when only `commit-interval` is set.
pub const DEFAULT_MIN_COMMIT_ROWS: u64 = 500_000;
/// The commit interval when only `min-commit-rows` is set.
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_secs(300);

impl IcebergSinkConfig {
    /// When held triggers commit: `None` when every trigger commits.
    pub fn cadence(&self) -> Option<(Duration, u64)> {
        match (self.commit_interval, self.min_commit_rows) {
            (None, None) => None,
            (interval, rows) => Some((
                interval.unwrap_or(DEFAULT_COMMIT_INTERVAL),
                rows.unwrap_or(DEFAULT_MIN_COMMIT_ROWS),
            )),
        }
    }
}

const fn default_target_file_size() -> ByteSize {
    ByteSize::mib(128)
}

const fn default_zstd_level() -> i32 {
    1
}

const fn default_max_columns() -> usize {
    1000
}

const fn default_max_nesting_depth() -> usize {
    5
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
    if matches!(transform, Transform::Bucket(0) | Transform::Truncate(0)) {
        return Err(format!(
            "partition `{text}`: the number in brackets must be at least 1 (bucket[N] makes N buckets, truncate[W] keeps a width of W)"
        ));
    }
    Ok((transform, column.to_string()))
}

/// Why `namespace` (levels separated by dots) and `table` cannot name a table, if they
/// cannot: each level and the table must be a non-empty name that is not `.` or `..` and
/// holds no `/`, `\` or control character, as the table's files go to
/// `<warehouse>/<level>/…/<table>` and must stay inside the warehouse. Returns the key
/// (`namespace` or `table`) and the reason; the name is not repeated.
pub fn table_name_problem(namespace: &str, table: &str) -> Option<(&'static str, String)> {
    for level in namespace.split('.') {
        if let Some(reason) = name_part_problem(level) {
            let reason = format!("{reason} (levels are separated by dots)");
            return Some(("namespace", format!("a level of the namespace {reason}")));
        }
    }
    name_part_problem(table).map(|reason| ("table", format!("the table name {reason}")))
}

/// Why one level of a namespace, or a table name, would not stay a folder of its own.
fn name_part_problem(part: &str) -> Option<String> {
    if part.trim().is_empty() {
        return Some("is empty".to_string());
    }
    if part == "." || part == ".." {
        return Some("may not be `.` or `..`".to_string());
    }
    if part.contains(['/', '\\']) {
        return Some("may not hold `/` or `\\`".to_string());
    }
    if part.chars().any(char::is_control) {
        return Some("may not hold a control character".to_string());
    }
    None
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
        // Top-level columns take ids 1..=n, their nested fields the ids after.
        let mut next_id = self.columns.len() as i32 + 1;
        for (i, c) in self.columns.iter().enumerate() {
            let ty = super::column_type::parse_column_type(&c.ty, &mut next_id)
                .map_err(|e| format!("sink.columns[{i}] ({}): type `{}`: {e}", c.name, c.ty))?;
            let mut field = NestedField::new(i as i32 + 1, &c.name, ty, c.required);
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

    /// The Iceberg schema of a table to create with `fields` (from a topic's schema, with
    /// ids 1..=n at the top), and the ingestion-time column after them if they lack it.
    pub fn schema_with(&self, mut fields: Vec<NestedFieldRef>) -> Result<Schema, String> {
        if let Some(column) = &self.ingestion_time_column
            && !fields.iter().any(|f| &f.name == column)
        {
            let so_far = Schema::builder().with_fields(fields.clone()).build();
            let id = so_far.map_or(0, |s| s.highest_field_id()) + 1;
            let ty = Type::Primitive(PrimitiveType::Timestamptz);
            fields.push(Arc::new(NestedField::optional(id, column, ty)));
        }
        Schema::builder()
            .with_fields(fields)
            .build()
            .map_err(|e| format!("the columns from the topic's schema: {e}"))
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

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
