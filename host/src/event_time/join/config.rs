//! Configuration of a stream-stream join: one `[[joins]]` entry of the pipeline file.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Deserialize;

use crate::event_time::config::{WindowIcebergConfig, WindowKafkaConfig};
use crate::event_time::extract::{check_path, path_column};
use crate::iceberg::ColumnConfig;

/// Which rows a join emits.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum JoinKind {
    /// A row per pair of a left event and a right record that match (default).
    Inner,
    /// As `inner`, and every left event that matched nothing, with the right columns null,
    /// once the right watermark proves that no match can still come (past the event's
    /// time plus `after`).
    LeftOuter,
}

/// One output column of a join: a field of one side, by name or dotted path, or a table
/// naming the field, the column (`name`, default the field's last segment) and its Iceberg
/// type.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum JoinField {
    /// The field, into a column of the same name (a path's: its last segment).
    Name(String),
    /// The field, renamed and typed.
    Column(JoinColumn),
}

/// A join output column given as a table (see [`JoinField`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JoinColumn {
    /// The JSON field of the event (left) or record (right), a top-level key or a dotted
    /// path (`context.device.os`).
    pub field: String,
    /// The output column; default: the field's name, a path's last segment.
    #[serde(default)]
    pub name: Option<String>,
    /// The Iceberg type (`string`, `long`, `double`, `timestamptz`...). Default: a left
    /// field's type in `[sink] columns` if it is one of them, else `string`.
    #[serde(default, rename = "type")]
    pub ty: Option<String>,
}

impl JoinField {
    /// The JSON field read.
    pub fn field(&self) -> &str {
        match self {
            JoinField::Name(name) => name,
            JoinField::Column(c) => &c.field,
        }
    }

    /// The output column's name: `name`, else the field's last segment.
    pub fn column(&self) -> &str {
        match self {
            JoinField::Name(name) => path_column(name),
            JoinField::Column(c) => c.name.as_deref().unwrap_or(path_column(&c.field)),
        }
    }

    /// The type given, if any.
    pub fn ty(&self) -> Option<&str> {
        match self {
            JoinField::Name(_) => None,
            JoinField::Column(c) => c.ty.as_deref(),
        }
    }
}

/// One `[[joins]]` entry: a stream-stream join of the pipeline's on-time, deduplicated
/// events (the left side) with the records of a second topic (the right side), on equal
/// key fields, within a time bound: `right.time` in `[left.time - before, left.time +
/// after]` (Spark's `right.ts BETWEEN left.ts - INTERVAL before AND left.ts + INTERVAL
/// after`). Each side has its own watermark; a side's rows leave the state once the other
/// side's watermark proves no match can still come, so the state is bounded by the bound
/// and the watermarks, not by the streams.
///
/// The right topic is read by the pipeline's source (its offsets commit with the table),
/// but its records go to the join alone: not through the plugin stages, not into the
/// table. Its values are JSON objects.
///
/// ```toml
/// [[joins]]
/// name = "events-with-profiles"
/// right-topic = "user-profiles"
/// right-time-field = "updated_at"
/// right-max-delay = "2m"
/// on = ["user_id"]
/// kind = "left-outer"
/// before = "1h"
/// after = "0s"
/// left-fields = ["event_id", "user_id", "event_type", "timestamp", "page"]
/// right-fields = ["tier", "country", { field = "updated_at", name = "profile_updated_at", type = "timestamptz" }]
/// [joins.iceberg]
/// table = "events_with_profiles"
/// partition-by = ["day(timestamp)"]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JoinConfig {
    /// Name, unique in the pipeline; it keys the join's state.
    pub name: String,
    /// The topic of the right side; read from the same cluster as `[source] topics`, in
    /// the source's `format` (Avro and Protobuf with its schema registry), and not to be
    /// listed there (its records are the join's alone).
    pub right_topic: String,
    /// JSON field (or dotted path) of a right record holding its event time, read like
    /// `[event-time] field`. A record without one is dead-lettered.
    pub right_time_field: String,
    /// How far behind the newest right event time of a partition the right watermark
    /// stays. Right records behind it are late, handled as `[event-time] late` says.
    #[serde(with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub right_max_delay: Duration,
    /// The key fields of the left events, top-level keys or dotted paths (`customer.id`);
    /// equal values on both sides match. An event with one of them missing or null matches
    /// nothing.
    pub on: Vec<String>,
    /// The key fields (or dotted paths) of the right records, in the order of `on`;
    /// default: `on`. A right record with one of them missing or null is dead-lettered
    /// (`missing_join_key`).
    #[serde(default)]
    pub right_on: Option<Vec<String>>,
    /// `inner` (default) or `left-outer`.
    #[serde(default = "default_kind")]
    pub kind: JoinKind,
    /// How far before a left event's time a right record may be and match, e.g. `"1h"`.
    #[serde(with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub before: Duration,
    /// How far after a left event's time a right record may be and match; default `"0s"`.
    #[serde(default, with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub after: Duration,
    /// Output columns taken from the left event, in order: fields or dotted paths (a
    /// path's column is its last segment), or tables renaming and typing them.
    pub left_fields: Vec<JoinField>,
    /// Output columns taken from the right record, in order (null in a left-outer row),
    /// given like `left-fields`.
    pub right_fields: Vec<JoinField>,
    /// The most rows each side holds. The watermarks bound the state by themselves; this
    /// is the backstop when they cannot (a right topic far behind, or a bound far wider
    /// than the data). Past it the oldest rows of the side leave early: a left row of a
    /// left-outer join is emitted with the right columns null, any other row is dropped,
    /// each counted (`sluice_join_rows_evicted_total`) and logged. A row takes about 200
    /// bytes plus its fields' text. Default 1 000 000.
    #[serde(default = "default_max_rows")]
    pub max_rows: usize,
    /// Send the joined rows to a Kafka topic (JSON values; keys name the rows' left and
    /// right ids, so a repeat after a crash carries the same key and value).
    #[serde(default)]
    pub kafka: Option<WindowKafkaConfig>,
    /// Append the joined rows to an Iceberg table, exactly once.
    #[serde(default)]
    pub iceberg: Option<WindowIcebergConfig>,
}

const fn default_max_rows() -> usize {
    1_000_000
}

const fn default_kind() -> JoinKind {
    JoinKind::Inner
}

/// Column names a join output reserves.
pub const RESERVED: [&str; 1] = ["batch_id"];

impl JoinConfig {
    /// Checks every field path the join reads.
    fn check_paths(&self, at: &str) -> Result<(), String> {
        let fields = self.left_fields.iter().chain(&self.right_fields);
        let paths = [self.right_time_field.as_str()]
            .into_iter()
            .chain(self.on.iter().chain(self.right_on()).map(String::as_str))
            .chain(fields.map(JoinField::field));
        for path in paths {
            check_path(path).map_err(|e| format!("{at}: {e}"))?;
        }
        Ok(())
    }

    /// The right side's key fields.
    pub fn right_on(&self) -> &[String] {
        self.right_on.as_deref().unwrap_or(&self.on)
    }

    /// `before` in microseconds.
    pub fn before_micros(&self) -> i64 {
        i64::try_from(self.before.as_micros()).unwrap_or(i64::MAX)
    }

    /// `after` in microseconds.
    pub fn after_micros(&self) -> i64 {
        i64::try_from(self.after.as_micros()).unwrap_or(i64::MAX)
    }

    /// The output columns: the left fields, the right fields (never required: null in a
    /// left-outer row), then `batch_id`. A left field's type defaults to its type in the
    /// main table's `columns`.
    pub fn columns(&self, main: &[ColumnConfig]) -> Vec<ColumnConfig> {
        let types: BTreeMap<&str, &str> = main
            .iter()
            .map(|c| (c.name.as_str(), c.ty.as_str()))
            .collect();
        let column = |name: &str, ty: &str| ColumnConfig {
            name: name.to_string(),
            ty: ty.to_string(),
            required: false,
            doc: None,
        };
        let mut columns = Vec::new();
        for f in &self.left_fields {
            let ty = f
                .ty()
                .or_else(|| types.get(f.field()).copied())
                .unwrap_or("string");
            columns.push(column(f.column(), ty));
        }
        for f in &self.right_fields {
            columns.push(column(f.column(), f.ty().unwrap_or("string")));
        }
        columns.push(ColumnConfig {
            required: true,
            ..column("batch_id", "long")
        });
        columns
    }

    /// Checks the entry on its own.
    pub fn check(&self) -> Result<(), String> {
        let at = format!("joins `{}`", self.name);
        if self.name.trim().is_empty() {
            return Err("a join's name must not be empty".into());
        }
        if self.right_topic.trim().is_empty() || self.right_time_field.trim().is_empty() {
            return Err(format!(
                "{at}: right-topic and right-time-field must not be empty"
            ));
        }
        if self.on.is_empty() {
            return Err(format!("{at}: `on` must name at least one key field"));
        }
        if self.max_rows == 0 {
            return Err(format!("{at}: max-rows must be at least 1"));
        }
        if self.right_on().len() != self.on.len() {
            return Err(format!("{at}: right-on must name as many fields as on"));
        }
        if self.left_fields.is_empty() && self.right_fields.is_empty() {
            return Err(format!(
                "{at}: list the output columns in left-fields and right-fields"
            ));
        }
        self.check_paths(&at)?;
        let mut names = HashMap::new();
        for f in self.left_fields.iter().chain(&self.right_fields) {
            let name = f.column();
            if RESERVED.contains(&name) {
                return Err(format!("{at}: `{name}` is a reserved column name"));
            }
            if let Some(first) = names.insert(name, f.field()) {
                return Err(format!(
                    "{at}: two output columns are named `{name}`, from fields `{first}` and `{}` (a path's column is its last segment; rename one: {{ field = \"{}\", name = \"...\" }})",
                    f.field(),
                    f.field()
                ));
            }
        }
        if self.kafka.is_none() && self.iceberg.is_none() {
            return Err(format!(
                "{at}: give an output, [joins.kafka] and/or [joins.iceberg]"
            ));
        }
        Ok(())
    }
}
