//! Join results: to an Iceberg table, exactly once, and/or to a Kafka topic as JSON.
//!
//! A row is the left fields, the right fields (null in a left-outer row that matched
//! nothing) and the `batch_id` that emitted it. On Kafka the key names the row's left and
//! right ids (see [`crate::event_time::join`]), so a repeat (at-least-once delivery after a
//! crash) carries the same key and value. The table is exactly once like a window's: each
//! batch's rows are one commit carrying the pipeline's commit mark, and a batch the table
//! already holds is not written again.

use serde_json::Value;

use super::Results;
use super::derived::{Derived, DerivedRow};
use crate::event_time::config::WindowKafkaConfig;
use crate::event_time::join::JoinRow;
use crate::event_time::join::config::JoinConfig;
use crate::iceberg::IcebergSinkConfig;

/// The configuration of a join's table, if it has one: in the catalog and warehouse of
/// the pipeline's `sink`, left-field types taken from the sink's columns.
pub fn table_config(config: &JoinConfig, sink: &IcebergSinkConfig) -> Option<IcebergSinkConfig> {
    config.iceberg.as_ref().map(|t| IcebergSinkConfig {
        namespace: t.namespace.clone().unwrap_or(sink.namespace.clone()),
        table: t.table.clone(),
        columns: config.columns(&sink.columns),
        partition_by: t.partition_by.clone(),
        ingestion_time_column: None,
        ..sink.clone()
    })
}

/// A joined row as a JSON object: the left columns, the right columns, `batch_id`.
pub fn row_json(config: &JoinConfig, row: &JoinRow, batch_id: u64) -> String {
    let mut out = String::from("{");
    let mut first = true;
    let mut put = |name: &str, text: Option<&str>| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&Value::String(name.to_string()).to_string());
        out.push(':');
        out.push_str(text.unwrap_or("null"));
    };
    for (f, v) in config.left_fields.iter().zip(row.left.values()) {
        put(f.column(), v);
    }
    let mut right = row.right.as_ref().map(|r| r.values());
    for f in &config.right_fields {
        let v = right.as_mut().and_then(|r| r.next().flatten());
        put(f.column(), v);
    }
    put("batch_id", Some(&batch_id.to_string()));
    out.push('}');
    out
}

/// The Kafka key of a joined row: its left and right ids.
pub fn row_key(row: &JoinRow) -> String {
    serde_json::json!({ "left_id": row.left_id, "right_id": row.right_id }).to_string()
}

/// The outputs of one join: its topic and its table.
pub type JoinOutput = Derived<JoinRow>;

/// Join rows, keyed on Kafka by their ids.
impl DerivedRow for JoinRow {
    type Config = JoinConfig;
    const KIND: &'static str = "join";
    const TAG: &'static str = "sluice.join";
    const ROW: &'static str = "a joined row";

    fn name(config: &JoinConfig) -> &str {
        &config.name
    }

    fn kafka(config: &JoinConfig) -> Option<&WindowKafkaConfig> {
        config.kafka.as_ref()
    }

    fn table_config(config: &JoinConfig, sink: &IcebergSinkConfig) -> Option<IcebergSinkConfig> {
        table_config(config, sink)
    }

    fn all(results: &Results) -> &[Vec<JoinRow>] {
        &results.joins
    }

    fn record(config: &JoinConfig, row: &JoinRow, batch_id: u64) -> (String, String) {
        (row_key(row), row_json(config, row, batch_id))
    }

    fn value(config: &JoinConfig, row: &JoinRow, batch_id: u64) -> String {
        row_json(config, row, batch_id)
    }
}
