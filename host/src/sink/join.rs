//! Join results: to an Iceberg table, exactly once, and/or to a Kafka topic as JSON.
//!
//! A row is the left fields, the right fields (null in a left-outer row that matched
//! nothing) and the `batch_id` that emitted it. On Kafka the key names the row's left and
//! right ids (see [`crate::event_time::join`]), so a repeat (at-least-once delivery after a
//! crash) carries the same key and value. The table is exactly once like a window's: each
//! batch's rows are one commit carrying the pipeline's commit mark, and a batch the table
//! already holds is not written again.

use arrow_array::RecordBatch;
use serde_json::Value;

use super::derived::{self, DerivedTable};
use super::topic::{Topic, Topics};
use super::{Commit, Delivered, Output, OutputError, Results};
use crate::encode::Encoder;
use crate::event_time::join::JoinRow;
use crate::event_time::join::config::JoinConfig;
use crate::iceberg::{IcebergCatalog, IcebergSinkConfig, IcebergTable};
use crate::kafka::Connection;

/// What the join's table holds, in logs and errors.
const KIND: &str = "join";

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
pub struct JoinOutput {
    config: JoinConfig,
    /// Which of the batch's join results are this join's.
    index: usize,
    topic: Option<Box<dyn Topic>>,
    table: Option<(IcebergTable, Encoder)>,
}

impl std::fmt::Debug for JoinOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinOutput")
            .field("join", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl JoinOutput {
    /// Opens the outputs of `config`, the `index`th join: its topic (through `topics`, on
    /// the `source`'s cluster) and its table (in `catalog`, beside the pipeline's `sink`).
    pub fn open(
        config: &JoinConfig,
        index: usize,
        topics: &dyn Topics,
        source: &Connection,
        catalog: &IcebergCatalog,
        sink: &IcebergSinkConfig,
    ) -> Result<Self, OutputError> {
        let output = format!("join `{}`", config.name);
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
            Some(table_config) => {
                let table = IcebergTable::open(catalog, table_config).map_err(|error| {
                    OutputError::Table {
                        output: output.clone(),
                        error: Box::new(error),
                    }
                })?;
                let encoder =
                    Encoder::new(table.schema(), &[]).map_err(|e| OutputError::Schema {
                        output: output.clone(),
                        message: e.to_string(),
                    })?;
                Some((table, encoder))
            }
            None => None,
        };
        Ok(JoinOutput {
            config: config.clone(),
            index,
            topic,
            table,
        })
    }

    fn rows<'a>(&self, results: &'a Results) -> &'a [JoinRow] {
        results.joins.get(self.index).map_or(&[], Vec::as_slice)
    }

    fn schema_error(&self, message: String) -> OutputError {
        OutputError::Schema {
            output: self.name(),
            message,
        }
    }

    /// The rows as a table batch.
    fn encode(&self, rows: &[JoinRow], batch_id: u64) -> Result<RecordBatch, OutputError> {
        let values: Vec<String> = rows
            .iter()
            .map(|row| row_json(&self.config, row, batch_id))
            .collect();
        let (_, encoder) = self.table.as_ref().expect("only called with a table");
        let encoded = encoder
            .encode(values.iter().map(|v| Some(v.as_bytes())), 0)
            .map_err(|e| self.schema_error(e.to_string()))?;
        match encoded.errors.first() {
            Some((_, error)) => {
                Err(self.schema_error(format!("a joined row does not fit the table: {error}")))
            }
            None => Ok(encoded.batch),
        }
    }
}

impl Output for JoinOutput {
    fn name(&self) -> String {
        format!("join `{}`", self.config.name)
    }

    /// Sends the batch's rows to the topic, if any, keyed by their ids.
    fn send(&mut self, results: &Results) -> Result<Delivered, OutputError> {
        let Some(topic) = &self.topic else {
            return Ok(Delivered::default());
        };
        let encoded: Vec<(String, String)> = self
            .rows(results)
            .iter()
            .map(|row| (row_key(row), row_json(&self.config, row, results.batch_id)))
            .collect();
        let tag = ("sluice.join", self.config.name.as_str());
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
