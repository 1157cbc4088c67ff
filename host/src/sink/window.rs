//! Window results: to a Kafka topic as JSON, and/or to an Iceberg table.
//!
//! A row is `window_start`, `window_end` (RFC 3339, UTC), the group-by fields, the
//! aggregates, and the `batch_id` that emitted it. On Kafka the key is the window and the
//! group-by values, so a repeat (at-least-once delivery after a crash) carries the same
//! key and the same value, and a compacted topic keeps one copy. The table is exactly
//! once: each batch's rows are one commit carrying the pipeline's commit mark, and a batch
//! the table already holds is not written again.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use serde_json::{Map, Value};

use super::iceberg::{ColumnConfig, IcebergSink, IcebergSinkConfig, SinkError, Written};
use super::topic::{Outgoing, TopicError, TopicSink};
use crate::commit::CommitMark;
use crate::encode::{Encoder, SchemaError};
use crate::event_time::window::WindowRow;
use crate::event_time::config::WindowConfig;
use crate::event_time::extract::format_micros;

/// A window output failed.
#[derive(Debug, thiserror::Error)]
pub enum WindowSinkError {
    /// The topic failed.
    #[error("window `{window}`: {error}")]
    Topic {
        /// The window.
        window: String,
        /// Why.
        error: Box<TopicError>,
    },
    /// The table failed.
    #[error("window `{window}`: {error}")]
    Table {
        /// The window.
        window: String,
        /// Why.
        error: Box<SinkError>,
    },
    /// A row does not fit the table (its schema was changed by someone else).
    #[error("window `{window}`: {message}")]
    Schema {
        /// The window.
        window: String,
        /// Why.
        message: String,
    },
}

/// The outputs of one window.
pub struct WindowSink {
    config: WindowConfig,
    topic: Option<TopicSink>,
    table: Option<(IcebergSink, Encoder)>,
}

impl std::fmt::Debug for WindowSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowSink")
            .field("window", &self.config.name)
            .finish_non_exhaustive()
    }
}

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

impl WindowSink {
    /// Opens the outputs of `config`: its topic (on `bootstrap`) and its table (in the
    /// catalog and warehouse of `sink`).
    pub fn open(
        config: &WindowConfig,
        sink: &IcebergSinkConfig,
        bootstrap: &str,
        base: &Path,
    ) -> Result<Self, WindowSinkError> {
        let window = config.name.clone();
        let topic = match &config.kafka {
            Some(k) => Some(
                TopicSink::new(
                    bootstrap,
                    &k.topic,
                    &BTreeMap::new(),
                    Duration::from_secs(60),
                )
                .map_err(|error| WindowSinkError::Topic {
                    window: window.clone(),
                    error: Box::new(error),
                })?,
            ),
            None => None,
        };
        let table = match table_config(config, sink) {
            Some(table_config) => {
                let table = IcebergSink::open(table_config, base).map_err(|error| {
                    WindowSinkError::Table {
                        window: window.clone(),
                        error: Box::new(error),
                    }
                })?;
                let encoder = Encoder::new(table.schema(), &[]).map_err(|e: SchemaError| {
                    WindowSinkError::Schema {
                        window: window.clone(),
                        message: e.to_string(),
                    }
                })?;
                Some((table, encoder))
            }
            None => None,
        };
        Ok(WindowSink {
            config: config.clone(),
            topic,
            table,
        })
    }

    /// The window's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The latest batch of `pipeline` that the table holds.
    pub fn table_batch(&self, pipeline: &str) -> Result<Option<u64>, WindowSinkError> {
        match &self.table {
            Some((table, _)) => table
                .last_mark(pipeline)
                .map(|m| m.map(|m| m.batch_id))
                .map_err(|error| self.table_error(error)),
            None => Ok(None),
        }
    }

    fn table_error(&self, error: SinkError) -> WindowSinkError {
        WindowSinkError::Table {
            window: self.config.name.clone(),
            error: Box::new(error),
        }
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

    /// Sends `rows` to the topic, if any, and waits for the acknowledgement.
    pub fn send(
        &self,
        rows: &[WindowRow],
        pipeline: &str,
        batch_id: u64,
    ) -> Result<u64, WindowSinkError> {
        let Some(topic) = &self.topic else {
            return Ok(0);
        };
        let encoded: Vec<(String, String)> = rows
            .iter()
            .map(|row| {
                let (key, value) = self.to_json(row, batch_id);
                (
                    Value::Object(key).to_string(),
                    Value::Object(value).to_string(),
                )
            })
            .collect();
        let batch = batch_id.to_string();
        topic
            .send_all(encoded.iter().map(|(key, value)| {
                Outgoing {
                    key: Some(key.as_bytes()),
                    value: Some(value.as_bytes()),
                    headers: OwnedHeaders::new()
                        .insert(Header {
                            key: "sluice.pipeline",
                            value: Some(pipeline),
                        })
                        .insert(Header {
                            key: "sluice.batch-id",
                            value: Some(&batch),
                        })
                        .insert(Header {
                            key: "sluice.window",
                            value: Some(&self.config.name),
                        }),
                }
            }))
            .map_err(|error| WindowSinkError::Topic {
                window: self.config.name.clone(),
                error: Box::new(error),
            })
    }

    /// Appends `rows` to the table, if any, in one commit carrying `mark`, unless the
    /// table already holds this batch (a replay after a crash). A batch without rows is not
    /// committed. Returns the rows written.
    pub fn commit(
        &mut self,
        rows: &[WindowRow],
        mark: &CommitMark,
    ) -> Result<u64, WindowSinkError> {
        if self.table.is_none() || rows.is_empty() {
            return Ok(0);
        }
        if self
            .table_batch(&mark.pipeline)?
            .is_some_and(|b| b >= mark.batch_id)
        {
            tracing::info!(window = %self.config.name, batch_id = mark.batch_id, "the window table holds this batch already");
            return Ok(0);
        }
        let values: Vec<Vec<u8>> = rows
            .iter()
            .map(|row| {
                Value::Object(self.to_json(row, mark.batch_id).1)
                    .to_string()
                    .into_bytes()
            })
            .collect();
        let (table, encoder) = self.table.as_mut().expect("checked above");
        let window = self.config.name.clone();
        let schema_error = |message: String| WindowSinkError::Schema {
            window: window.clone(),
            message,
        };
        let encoded = encoder
            .encode(values.iter().map(|v| Some(v.as_slice())), 0)
            .map_err(|e| schema_error(e.to_string()))?;
        if let Some((_, error)) = encoded.errors.first() {
            return Err(schema_error(format!(
                "a result does not fit the table: {error}"
            )));
        }
        let written = if encoded.batch.num_rows() > 0 {
            table.write(vec![encoded.batch], mark.batch_id)
        } else {
            Ok(Written::default())
        }
        .map_err(|error| WindowSinkError::Table {
            window: window.clone(),
            error: Box::new(error),
        })?;
        let rows = written.rows;
        table
            .commit(written.files, mark, HashMap::new())
            .map_err(|error| WindowSinkError::Table {
                window,
                error: Box::new(error),
            })?;
        Ok(rows)
    }
}
