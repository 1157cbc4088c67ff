//! Window results: to a Kafka topic as JSON, and/or to an Iceberg table.
//!
//! A row is `window_start`, `window_end` (RFC 3339, UTC), the group-by fields, the
//! aggregates, and the `batch_id` that emitted it. On Kafka the key is the window and the
//! group-by values, so a repeat (at-least-once delivery after a crash) carries the same
//! key and the same value, and a compacted topic keeps one copy. The table is exactly
//! once: each batch's rows are one commit carrying the pipeline's commit mark, and a batch
//! the table already holds is not written again.

use arrow_array::RecordBatch;
use serde_json::{Map, Value};

use super::derived::{self, DerivedTable};
use super::topic::{Topic, Topics};
use super::{Commit, Delivered, Output, OutputError, Results};
use crate::encode::Encoder;
use crate::event_time::config::WindowConfig;
use crate::event_time::extract::format_micros;
use crate::event_time::window::WindowRow;
use crate::iceberg::{ColumnConfig, IcebergCatalog, IcebergSinkConfig, IcebergTable};
use crate::kafka::Connection;

/// What a window's table holds, in logs and errors.
const KIND: &str = "window";

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
    columns.extend(config.group_by.iter().map(|g| column(g, "string", false)));
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
pub struct WindowOutput {
    config: WindowConfig,
    /// Which of the batch's window results are this window's.
    index: usize,
    topic: Option<Box<dyn Topic>>,
    table: Option<(IcebergTable, Encoder)>,
}

impl std::fmt::Debug for WindowOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowOutput")
            .field("window", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl WindowOutput {
    /// Opens the outputs of `config`, the `index`th window: its topic (through `topics`, on
    /// the `source`'s cluster with its properties) and its table (in `catalog`, beside the
    /// pipeline's `sink`).
    pub fn open(
        config: &WindowConfig,
        index: usize,
        topics: &dyn Topics,
        source: &Connection,
        catalog: &IcebergCatalog,
        sink: &IcebergSinkConfig,
    ) -> Result<Self, OutputError> {
        let output = format!("window `{}`", config.name);
        let topic = match &config.kafka {
            Some(k) => {
                Some(
                    topics
                        .open(&k.target(source))
                        .map_err(|error| OutputError::Topic {
                            output: output.clone(),
                            error: Box::new(error),
                        })?,
                )
            }
            None => None,
        };
        let table = match table_config(config, sink) {
            Some(table_config) => Some(open_table(catalog, table_config, &output)?),
            None => None,
        };
        Ok(WindowOutput {
            config: config.clone(),
            index,
            topic,
            table,
        })
    }

    /// A row as a JSON object (the value), and its key.
    pub fn to_json(
        &self,
        row: &WindowRow,
        batch_id: u64,
    ) -> (Map<String, Value>, Map<String, Value>) {
        let mut key = Map::new();
        key.insert("window_start".into(), format_micros(row.start).into());
        key.insert("window_end".into(), format_micros(row.end).into());
        for (name, value) in self.config.group_by.iter().zip(&row.key) {
            key.insert(
                name.clone(),
                value.clone().map_or(Value::Null, Value::String),
            );
        }
        let mut value = key.clone();
        for (aggregate, v) in self.config.aggregates.iter().zip(&row.values) {
            value.insert(aggregate.name.clone(), v.clone());
        }
        value.insert("batch_id".into(), batch_id.into());
        (key, value)
    }

    fn rows<'a>(&self, results: &'a Results) -> &'a [WindowRow] {
        results.windows.get(self.index).map_or(&[], Vec::as_slice)
    }

    fn schema_error(&self, message: String) -> OutputError {
        OutputError::Schema {
            output: self.name(),
            message,
        }
    }

    /// The rows as a table batch.
    fn encode(&self, rows: &[WindowRow], batch_id: u64) -> Result<RecordBatch, OutputError> {
        let values: Vec<Vec<u8>> = rows
            .iter()
            .map(|row| {
                Value::Object(self.to_json(row, batch_id).1)
                    .to_string()
                    .into_bytes()
            })
            .collect();
        let (_, encoder) = self.table.as_ref().expect("only called with a table");
        let encoded = encoder
            .encode(values.iter().map(|v| Some(v.as_slice())), 0)
            .map_err(|e| self.schema_error(e.to_string()))?;
        match encoded.errors.first() {
            Some((_, error)) => {
                Err(self.schema_error(format!("a result does not fit the table: {error}")))
            }
            None => Ok(encoded.batch),
        }
    }
}

fn open_table(
    catalog: &IcebergCatalog,
    config: IcebergSinkConfig,
    output: &str,
) -> Result<(IcebergTable, Encoder), OutputError> {
    let table = IcebergTable::open(catalog, config).map_err(|error| OutputError::Table {
        output: output.to_string(),
        error: Box::new(error),
    })?;
    let encoder = Encoder::new(table.schema(), &[]).map_err(|e| OutputError::Schema {
        output: output.to_string(),
        message: e.to_string(),
    })?;
    Ok((table, encoder))
}

impl Output for WindowOutput {
    fn name(&self) -> String {
        format!("window `{}`", self.config.name)
    }

    /// Sends the batch's rows to the topic, if any, keyed by window and group.
    fn send(&mut self, results: &Results) -> Result<Delivered, OutputError> {
        let Some(topic) = &self.topic else {
            return Ok(Delivered::default());
        };
        let encoded: Vec<(String, String)> = self
            .rows(results)
            .iter()
            .map(|row| {
                let (key, value) = self.to_json(row, results.batch_id);
                (
                    Value::Object(key).to_string(),
                    Value::Object(value).to_string(),
                )
            })
            .collect();
        let tag = ("sluice.window", self.config.name.as_str());
        derived::send_json(topic.as_ref(), self.name(), results, tag, &encoded)
    }

    /// Appends the batch's rows to the table, if any, in one commit carrying the mark,
    /// unless the table already holds this batch (a replay after a crash). A batch without
    /// rows is not committed.
    fn commit(&mut self, results: &Results, commit: Commit<'_>) -> Result<Delivered, OutputError> {
        let rows = self.rows(results);
        if self.table.is_none() || rows.is_empty() {
            return Ok(Delivered::default());
        }
        let mark = commit.mark;
        let name = &self.config.name;
        if let Some(held) = derived::holds(self.table.as_ref().map(|t| &t.0), KIND, name, mark)? {
            return Ok(held);
        }
        let batch = self.encode(rows, mark.batch_id)?;
        let (table, _) = self.table.as_mut().expect("checked above");
        let name = &self.config.name;
        DerivedTable {
            kind: KIND,
            name,
            table,
        }
        .commit(batch, mark)
    }

    fn expire_snapshots(&mut self, cutoff_ms: i64, retain_last: usize) -> Result<u64, OutputError> {
        let Some((table, _)) = self.table.as_mut() else {
            return Ok(0);
        };
        let name = &self.config.name;
        DerivedTable {
            kind: KIND,
            name,
            table,
        }
        .expire(cutoff_ms, retain_last)
    }

    fn held_batch(&self, pipeline: &str) -> Result<Option<u64>, OutputError> {
        let table = self.table.as_ref().map(|t| &t.0);
        derived::held_batch(table, KIND, &self.config.name, pipeline)
    }
}
