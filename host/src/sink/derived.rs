//! The outputs derived from a batch (window results, join rows), as one generic output
//! [`Derived`]: keyed JSON records to a topic, at least once, and a table that takes each
//! batch exactly once, in one commit carrying the pipeline's commit mark (a batch it
//! already holds is not written again: its files, if written, stay unreferenced). What
//! differs per kind of row (its configuration, table, key and value) is a [`DerivedRow`].

use std::collections::HashMap;

use arrow_array::RecordBatch;
use iceberg::spec::DataFile;

use super::topic::{Outgoing, Topic, Topics};
use super::{Commit, Delivered, Output, OutputError, Results, send_to};
use crate::checkpoint::CommitMark;
use crate::encode::Encoder;
use crate::event_time::config::WindowKafkaConfig;
use crate::iceberg::compact::KeyedCommit;
use crate::iceberg::{
    Fence, IcebergCatalog, IcebergError, IcebergSinkConfig, IcebergTable, Landed,
};
use crate::kafka::Connection;

/// A kind of row a derived output writes: what is particular to window results, or to
/// join rows.
pub trait DerivedRow: Sized + 'static {
    /// The configuration of one output of this kind (`[[windows]]`, `[[joins]]`).
    type Config: Clone + Send + Sync;
    /// What the outputs hold, in names, logs and errors: `window` or `join`.
    const KIND: &'static str;
    /// The header that tags each record with the output's name: `sluice.window`, …
    const TAG: &'static str;
    /// What one row is called in an error: `a result`, `a joined row`.
    const ROW: &'static str;

    /// The output's name.
    fn name(config: &Self::Config) -> &str;
    /// Its topic, if it has one.
    fn kafka(config: &Self::Config) -> Option<&WindowKafkaConfig>;
    /// Its table's configuration, if it has one, beside the pipeline's `sink`.
    fn table_config(config: &Self::Config, sink: &IcebergSinkConfig) -> Option<IcebergSinkConfig>;
    /// The rows of this kind in a batch's results, by output.
    fn all(results: &Results) -> &[Vec<Self>];
    /// A row's Kafka record: its key and its value (JSON texts).
    fn record(config: &Self::Config, row: &Self, batch_id: u64) -> (String, String);
    /// A row's value alone (what the table takes): the record's value.
    fn value(config: &Self::Config, row: &Self, batch_id: u64) -> String {
        Self::record(config, row, batch_id).1
    }
}

/// The outputs of one window or join (`R` says which): its topic and its table.
pub struct Derived<R: DerivedRow> {
    config: R::Config,
    /// Which of the batch's results of its kind are this output's.
    index: usize,
    topic: Option<Box<dyn Topic>>,
    table: Option<(IcebergTable, Encoder)>,
    /// The last keyed commit this output made, to take back if its batch is fenced off
    /// the main table: the mark it landed with, the batch's key, the files it added.
    landed: Option<(CommitMark, String, Vec<DataFile>)>,
}

impl<R: DerivedRow> std::fmt::Debug for Derived<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Derived")
            .field(R::KIND, &R::name(&self.config))
            .finish_non_exhaustive()
    }
}

impl<R: DerivedRow> Derived<R> {
    /// Opens the outputs of `config`, the `index`th of its kind: its topic (through
    /// `topics`, on the `source`'s cluster with its properties) and its table (in
    /// `catalog`, beside the pipeline's `sink`).
    pub fn open(
        config: &R::Config,
        index: usize,
        topics: &dyn Topics,
        source: &Connection,
        catalog: &IcebergCatalog,
        sink: &IcebergSinkConfig,
    ) -> Result<Self, OutputError> {
        let output = format!("{} `{}`", R::KIND, R::name(config));
        let topic = match R::kafka(config) {
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
        let table = match R::table_config(config, sink) {
            Some(table_config) => Some(open_table(catalog, table_config, &output)?),
            None => None,
        };
        Ok(Derived {
            config: config.clone(),
            index,
            topic,
            table,
            landed: None,
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &R::Config {
        &self.config
    }

    fn rows<'a>(&self, results: &'a Results) -> &'a [R] {
        R::all(results).get(self.index).map_or(&[], Vec::as_slice)
    }

    fn schema_error(&self, message: String) -> OutputError {
        OutputError::Schema {
            output: self.name(),
            message,
        }
    }

    /// The rows as a table batch.
    fn encode(&self, rows: &[R], batch_id: u64) -> Result<RecordBatch, OutputError> {
        let values: Vec<String> = rows
            .iter()
            .map(|row| R::value(&self.config, row, batch_id))
            .collect();
        let (_, encoder) = self.table.as_ref().expect("only called with a table");
        let encoded = encoder
            .encode(values.iter().map(|v| Some(v.as_bytes())), 0)
            .map_err(|e| self.schema_error(e.to_string()))?;
        match encoded.errors.first() {
            Some((_, error)) => {
                Err(self.schema_error(format!("{} does not fit the table: {error}", R::ROW)))
            }
            None => Ok(encoded.batch),
        }
    }

    /// The table, named for logs and errors.
    fn derived_table(&mut self) -> Option<DerivedTable<'_>> {
        let (table, _) = self.table.as_mut()?;
        Some(DerivedTable {
            kind: R::KIND,
            name: R::name(&self.config),
            table,
        })
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

impl<R: DerivedRow> Output for Derived<R> {
    fn name(&self) -> String {
        format!("{} `{}`", R::KIND, R::name(&self.config))
    }

    /// Sends the batch's rows to the topic, if any, keyed as the kind says.
    fn send(&mut self, results: &Results) -> Result<Delivered, OutputError> {
        let Some(topic) = &self.topic else {
            return Ok(Delivered::default());
        };
        let encoded: Vec<(String, String)> = self
            .rows(results)
            .iter()
            .map(|row| R::record(&self.config, row, results.batch_id))
            .collect();
        let tag = (R::TAG, R::name(&self.config));
        send_json(topic.as_ref(), self.name(), results, tag, &encoded)
    }

    /// Appends the batch's rows to the table, if any, in one commit carrying the mark,
    /// unless the table already holds this batch (a replay after a crash). A batch without
    /// rows is not committed.
    fn commit(&mut self, results: &Results, commit: Commit<'_>) -> Result<Delivered, OutputError> {
        self.landed = None;
        let rows = self.rows(results);
        if self.table.is_none() || rows.is_empty() {
            return Ok(Delivered::default());
        }
        let mark = commit.mark;
        let table = self.table.as_ref().map(|t| &t.0);
        // A group's members number their batches each their own way: a keyed fence
        // finds a replayed batch by its key instead.
        let keyed = matches!(commit.fence, Fence::Keyed { .. });
        if !keyed && let Some(held) = holds(table, R::KIND, R::name(&self.config), mark)? {
            return Ok(held);
        }
        let batch = self.encode(rows, mark.batch_id)?;
        let table = self.derived_table().expect("checked above");
        let fence = if keyed { commit.fence } else { &Fence::NotHeld };
        let (delivered, landed) = table.commit(batch, mark, fence, commit.properties)?;
        if let (Fence::Keyed { key, .. }, Some((mark, files))) = (fence, landed) {
            self.landed = Some((mark, key.clone(), files));
        }
        Ok(delivered)
    }

    fn undo(&mut self, batch: &str) -> Result<bool, OutputError> {
        // The last commit may be an earlier batch's (this one fenced off before its own).
        let Some((mark, key, files)) = self.landed.take().filter(|(_, key, _)| key == batch) else {
            return Ok(false);
        };
        let (kind, name) = (R::KIND, R::name(&self.config));
        let Some((table, _)) = self.table.as_mut() else {
            return Ok(false);
        };
        let undone = table
            .undo_keyed(&mark, &key, &files)
            .map_err(|e| table_error(kind, name, e))?;
        if undone {
            tracing::warn!(output = %format!("{kind} `{name}`"), commit_id = %mark.commit_id(), rows = files.iter().map(DataFile::record_count).sum::<u64>(), "the batch was fenced off the main table after its window commit: its rows were taken back");
        }
        Ok(undone)
    }

    fn fencing_commit(
        &self,
        pipeline: &str,
        fence: &Fence,
    ) -> Result<Option<KeyedCommit>, OutputError> {
        let Some((table, _)) = &self.table else {
            return Ok(None);
        };
        table
            .fencing_commit(pipeline, fence)
            .map_err(|e| table_error(R::KIND, R::name(&self.config), e))
    }

    fn take_back(&mut self, pipeline: &str, commit: &KeyedCommit) -> Result<bool, OutputError> {
        let (kind, name) = (R::KIND, R::name(&self.config));
        let Some((table, _)) = self.table.as_mut() else {
            return Ok(false);
        };
        let taken = table
            .take_back(pipeline, commit)
            .map_err(|e| table_error(kind, name, e))?;
        if taken {
            tracing::warn!(output = %format!("{kind} `{name}`"), commit_id = %commit.commit_id, key = %commit.key, "a window commit of a batch that never counted (its member stopped before taking it back) fenced this batch off: taken back");
        }
        Ok(taken)
    }

    fn expire_snapshots(&mut self, cutoff_ms: i64, retain_last: usize) -> Result<u64, OutputError> {
        match self.derived_table() {
            Some(table) => table.expire(cutoff_ms, retain_last),
            None => Ok(0),
        }
    }

    fn held_batch(&self, pipeline: &str) -> Result<Option<u64>, OutputError> {
        let table = self.table.as_ref().map(|t| &t.0);
        held_batch(table, R::KIND, R::name(&self.config), pipeline)
    }
}

/// Sends `records` (key, value) to `topic`, each with the pipeline's and batch's headers
/// and `tag` (`("sluice.window", name)`, for example).
fn send_json(
    topic: &dyn Topic,
    output: String,
    results: &Results,
    tag: (&str, &str),
    records: &[(String, String)],
) -> Result<Delivered, OutputError> {
    let batch = results.batch_id.to_string();
    let headers = [
        ("sluice.pipeline", results.pipeline.as_str()),
        ("sluice.batch-id", batch.as_str()),
        tag,
    ];
    let outgoing = records
        .iter()
        .map(|(key, value)| Outgoing {
            partition: None,
            key: Some(key.as_bytes()),
            value: Some(value.as_bytes()),
            headers: headers
                .iter()
                .map(|(k, v)| (*k, Some(v.as_bytes())))
                .collect(),
        })
        .collect();
    send_to(topic, output, outgoing)
}

/// A commit that landed: the mark it landed with and the files it added.
type Landing = (CommitMark, Vec<DataFile>);

/// A derived output's table, named for logs and errors as `KIND `NAME``.
struct DerivedTable<'a> {
    /// What the table holds: `window` or `join`.
    kind: &'static str,
    /// The window's or join's name.
    name: &'a str,
    /// The table.
    table: &'a mut IcebergTable,
}

impl DerivedTable<'_> {
    /// Appends `batch` in one commit carrying `mark` behind `fence` (a table that turns out
    /// to hold the batch already, committed by another attempt, is left as it is). Returns
    /// too, if this commit landed it, the mark it landed with and the files it added.
    fn commit(
        self,
        batch: RecordBatch,
        mark: &CommitMark,
        fence: &Fence,
        properties: &HashMap<String, String>,
    ) -> Result<(Delivered, Option<Landing>), OutputError> {
        let error = |e| table_error(self.kind, self.name, e);
        let written = self
            .table
            .write(vec![batch], mark.batch_id)
            .map_err(error)?;
        let delivered = Delivered {
            records: written.rows,
            files: written.files.len() as u64,
            bytes: written.bytes,
            retries: 0,
        };
        let files = written.files.clone();
        let landed = self
            .table
            .commit(written.files, mark, properties.clone(), fence)
            .map_err(error)?;
        Ok(match landed {
            Landed::Committed { retries, mark } => (
                Delivered {
                    retries: u64::from(retries),
                    ..delivered
                },
                Some((mark, files)),
            ),
            Landed::AlreadyHeld => (held(self.kind, self.name, mark.batch_id), None),
        })
    }

    /// Expires snapshots older than `cutoff_ms` beyond the last `retain_last`; returns how
    /// many went.
    fn expire(self, cutoff_ms: i64, retain_last: usize) -> Result<u64, OutputError> {
        let expiry = self
            .table
            .expire_snapshots(cutoff_ms, retain_last, false)
            .map_err(|e| table_error(self.kind, self.name, e))?;
        Ok(expiry.removed.len() as u64)
    }
}

/// Whether `table` holds the batch of `mark` already (a replay after a crash): then what
/// the batch delivered there, nothing, logged.
fn holds(
    table: Option<&IcebergTable>,
    kind: &'static str,
    name: &str,
    mark: &CommitMark,
) -> Result<Option<Delivered>, OutputError> {
    let last = held_batch(table, kind, name, &mark.pipeline)?;
    Ok(last
        .is_some_and(|b| b >= mark.batch_id)
        .then(|| held(kind, name, mark.batch_id)))
}

/// The last batch of `pipeline` that `table` holds, if it has one.
fn held_batch(
    table: Option<&IcebergTable>,
    kind: &'static str,
    name: &str,
    pipeline: &str,
) -> Result<Option<u64>, OutputError> {
    match table {
        Some(table) => table
            .last_mark(pipeline)
            .map(|m| m.map(|m: CommitMark| m.batch_id))
            .map_err(|e| table_error(kind, name, e)),
        None => Ok(None),
    }
}

/// A batch the table holds already: nothing delivered.
fn held(kind: &str, name: &str, batch_id: u64) -> Delivered {
    tracing::info!(
        kind,
        name,
        batch_id,
        "the {kind} table holds this batch already"
    );
    Delivered::default()
}

/// An error of the table of `KIND `NAME``.
fn table_error(kind: &str, name: &str, error: IcebergError) -> OutputError {
    OutputError::Table {
        output: format!("{kind} `{name}`"),
        error: Box::new(error),
    }
}
