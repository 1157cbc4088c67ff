//! Window results: to a Kafka topic as JSON, and/or to an Iceberg table.
//!
//! A row is `window_start`, `window_end` (RFC 3339, UTC), the group-by fields (a path's
//! column named by its last segment), the aggregates, and the `batch_id` that emitted it.
//! On Kafka the key is the window and the group-by values, so a repeat (at-least-once
//! delivery after a crash) carries the same key and the same value, and a compacted topic
//! keeps one copy. The table is exactly
//! once: each batch's rows are one commit carrying the pipeline's commit mark, and a batch
//! the table already holds is not written again.

use serde_json::{Map, Value};

use super::Results;
use super::derived::{Derived, DerivedRow};
use crate::event_time::config::{WindowConfig, WindowKafkaConfig};
use crate::event_time::extract::format_micros;
use crate::event_time::window::WindowRow;
use crate::iceberg::{ColumnConfig, IcebergSinkConfig};

/// The columns of a window table.
pub fn table_columns(config: &WindowConfig) -> Vec<ColumnConfig> {
    let column = |name: &str, ty: &str, required: bool| ColumnConfig {
        name: name.to_string(),
        ty: ty.to_string(),
        required,
        doc: None,
    };
    let mut columns = vec![
        column("window_start", "timestamptz", true),
        column("window_end", "timestamptz", true),
    ];
    columns.extend(
        config
            .group_by_columns()
            .map(|(_, name)| column(name, "string", false)),
    );
    columns.extend(config.aggregates.iter().map(|a| {
        let ty = if a.function.is_integer() {
            "long"
        } else {
            "double"
        };
        column(&a.name, ty, false)
    }));
    columns.push(column("batch_id", "long", true));
    columns
}

/// The configuration of a window's table, if it has one: in the catalog and warehouse of
/// the pipeline's `sink`.
pub fn table_config(config: &WindowConfig, sink: &IcebergSinkConfig) -> Option<IcebergSinkConfig> {
    config.iceberg.as_ref().map(|t| IcebergSinkConfig {
        namespace: t.namespace.clone().unwrap_or(sink.namespace.clone()),
        table: t.table.clone(),
        columns: table_columns(config),
        partition_by: t.partition_by.clone(),
        ingestion_time_column: None,
        ..sink.clone()
    })
}

/// The outputs of one window: its topic and its table.
pub type WindowOutput = Derived<WindowRow>;

/// A row as a JSON object (the value), and its key.
pub fn to_json(
    config: &WindowConfig,
    row: &WindowRow,
    batch_id: u64,
) -> (Map<String, Value>, Map<String, Value>) {
    let mut key = Map::new();
    key.insert("window_start".into(), format_micros(row.start).into());
    key.insert("window_end".into(), format_micros(row.end).into());
    for ((_, name), value) in config.group_by_columns().zip(&row.key) {
        key.insert(
            name.to_string(),
            value.clone().map_or(Value::Null, Value::String),
        );
    }
    let mut value = key.clone();
    for (aggregate, v) in config.aggregates.iter().zip(&row.values) {
        value.insert(aggregate.name.clone(), v.clone());
    }
    value.insert("batch_id".into(), batch_id.into());
    (key, value)
}

impl WindowOutput {
    /// A row as a JSON object (the value), and its key.
    pub fn to_json(
        &self,
        row: &WindowRow,
        batch_id: u64,
    ) -> (Map<String, Value>, Map<String, Value>) {
        to_json(self.config(), row, batch_id)
    }
}

/// Window results, keyed on Kafka by window and group.
impl DerivedRow for WindowRow {
    type Config = WindowConfig;
    const KIND: &'static str = "window";
    const TAG: &'static str = "sluice.window";
    const ROW: &'static str = "a result";

    fn name(config: &WindowConfig) -> &str {
        &config.name
    }

    fn kafka(config: &WindowConfig) -> Option<&WindowKafkaConfig> {
        config.kafka.as_ref()
    }

    fn table_config(config: &WindowConfig, sink: &IcebergSinkConfig) -> Option<IcebergSinkConfig> {
        table_config(config, sink)
    }

    fn all(results: &Results) -> &[Vec<WindowRow>] {
        &results.windows
    }

    fn record(config: &WindowConfig, row: &WindowRow, batch_id: u64) -> (String, String) {
        let (key, value) = to_json(config, row, batch_id);
        (
            Value::Object(key).to_string(),
            Value::Object(value).to_string(),
        )
    }

    fn value(config: &WindowConfig, row: &WindowRow, batch_id: u64) -> String {
        Value::Object(to_json(config, row, batch_id).1).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_time::config::EmitMode;
    use crate::units::Micros;

    #[test]
    fn a_group_by_path_is_a_column_named_by_its_last_segment() {
        let mut config = crate::event_time::window::tests::config(60, None, EmitMode::Update);
        config.group_by = vec!["context.device.os".into(), "page".into()];
        let names: Vec<String> = table_columns(&config).into_iter().map(|c| c.name).collect();
        assert_eq!(
            names[..5],
            ["window_start", "window_end", "os", "page", "n"]
        );
        let row = WindowRow {
            start: Micros(0),
            end: Micros(60_000_000),
            key: vec![Some("ios".to_string()), None],
            values: vec![1.into(); 6],
        };
        let (key, value) = to_json(&config, &row, 7);
        let keys: Vec<&String> = key.keys().collect();
        assert_eq!(keys, ["window_start", "window_end", "os", "page"]);
        assert_eq!(key["os"], "ios");
        assert_eq!(value["page"], Value::Null);
        assert_eq!(value["batch_id"], 7);
    }
}
