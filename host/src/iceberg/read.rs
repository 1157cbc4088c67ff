//! Reading a table back, and the other files sluice keeps beside a table's data.

use arrow_array::RecordBatch;
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;
use iceberg::io::FileIO;
use iceberg::scan::FileScanTask;
use iceberg::spec::{Schema, Type};
use iceberg::table::Table;
use serde_json::{Map, Value};

use super::{IcebergCatalog, IcebergError, IcebergTable, iceberg_err};

impl IcebergTable {
    /// Reads the whole table (current snapshot) as JSON objects, columns in table order:
    /// integers as numbers, other values as their text (timestamps in RFC 3339, decimals
    /// with their scale). For `sluice show` and tests; not for large tables.
    pub fn read_rows(&self) -> Result<Vec<Map<String, Value>>, IcebergError> {
        let batches = self
            .catalog
            .block_on(scan_all(&self.table, None))
            .map_err(iceberg_err(format!("reading table {}", self.ident)))?;
        let mut rows = Vec::new();
        for batch in batches {
            rows.extend(json_rows(&batch)?);
        }
        Ok(rows)
    }

    /// The table's storage, for files kept beside its data.
    pub fn files(&self) -> TableFiles {
        TableFiles {
            io: self.table.file_io().clone(),
            catalog: self.catalog.clone(),
        }
    }
}

/// Whole files in a table's storage (any warehouse, local or not): where the event-time
/// state is kept.
#[derive(Clone)]
pub struct TableFiles {
    io: FileIO,
    catalog: IcebergCatalog,
}

impl std::fmt::Debug for TableFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFiles").finish_non_exhaustive()
    }
}

impl TableFiles {
    /// Writes a whole file.
    pub fn put(&self, path: &str, bytes: Vec<u8>) -> Result<(), IcebergError> {
        self.catalog
            .block_on(async { self.io.new_output(path)?.write(bytes.into()).await })
            .map_err(iceberg_err(format!("writing {path}")))
    }

    /// Reads a whole file; `None` if it does not exist.
    pub fn get(&self, path: &str) -> Result<Option<Vec<u8>>, IcebergError> {
        self.catalog
            .block_on(async {
                if !self.io.exists(path).await? {
                    return Ok(None);
                }
                self.io
                    .new_input(path)?
                    .read()
                    .await
                    .map(|b| Some(b.to_vec()))
            })
            .map_err(iceberg_err(format!("reading {path}")))
    }

    /// Deletes a file.
    pub fn delete(&self, path: &str) -> Result<(), IcebergError> {
        self.catalog
            .block_on(self.io.delete(path))
            .map_err(iceberg_err(format!("deleting {path}")))
    }
}

/// The rows of `batch` as JSON objects (see [`IcebergTable::read_rows`]).
/// `batch` with the columns of `arrow` it lacks (see `read_task`) added, null, by name.
/// Every row of `table` at snapshot `snapshot_id` (the current one if `None`), in
/// batches with every column of that snapshot's schema: a data file that lacks a list
/// or map column (one added after it was written) reads it as nulls, which iceberg-rust
/// 0.10 cannot do itself (apache/iceberg-rust#2618; see [`read_task`]).
pub async fn scan_all(
    table: &Table,
    snapshot_id: Option<i64>,
) -> iceberg::Result<Vec<RecordBatch>> {
    use futures::TryStreamExt;
    let metadata = table.metadata();
    let schema = match snapshot_id.and_then(|id| metadata.snapshot_by_id(id)) {
        Some(snapshot) => snapshot.schema(metadata)?,
        None => metadata.current_schema().clone(),
    };
    let arrow = iceberg::arrow::schema_to_arrow_schema(&schema)?;
    let mut builder = table.scan().select_all();
    if let Some(id) = snapshot_id {
        builder = builder.snapshot_id(id);
    }
    let tasks: Vec<FileScanTask> = builder.build()?.plan_files().await?.try_collect().await?;
    let mut batches = Vec::new();
    for task in tasks {
        for batch in read_task(table, &schema, task).await? {
            batches.push(with_all_columns(batch, &arrow));
        }
    }
    Ok(batches)
}

/// The rows of one data file. iceberg-rust 0.10 cannot fill a list or map column that
/// a file lacks (one added after it was written) with nulls: such a file is read
/// without the list and map columns of `schema` it lacks, which the caller fills with
/// nulls.
async fn read_task(
    table: &Table,
    schema: &Schema,
    task: FileScanTask,
) -> iceberg::Result<Vec<RecordBatch>> {
    use futures::TryStreamExt;
    let read = |task: FileScanTask| async {
        let tasks = futures::stream::iter([Ok(task)]);
        let reader = table.reader_builder().build();
        let batches: Vec<RecordBatch> =
            reader.read(Box::pin(tasks))?.stream().try_collect().await?;
        iceberg::Result::Ok(batches)
    };
    let error = match read(task.clone()).await {
        Ok(batches) => return Ok(batches),
        Err(error) => error,
    };
    let mut kept = Vec::new();
    for &id in &task.project_field_ids {
        let nested = schema
            .field_by_id(id)
            .is_some_and(|f| matches!(*f.field_type, Type::List(_) | Type::Map(_)));
        let mut alone = task.clone();
        alone.project_field_ids = vec![id];
        if !nested || read(alone).await.is_ok() {
            kept.push(id);
        }
    }
    if kept.len() == task.project_field_ids.len() {
        return Err(error);
    }
    let mut narrow = task;
    narrow.project_field_ids = kept;
    read(narrow).await
}

fn with_all_columns(batch: RecordBatch, arrow: &arrow_schema::Schema) -> RecordBatch {
    if batch.num_columns() == arrow.fields().len() {
        return batch;
    }
    let have = batch.schema();
    let (fields, columns): (Vec<_>, Vec<_>) = arrow
        .fields()
        .iter()
        .map(|f| match have.index_of(f.name()) {
            Ok(i) => (have.field(i).clone(), batch.column(i).clone()),
            Err(_) => (
                (**f).clone(),
                arrow_array::new_null_array(f.data_type(), batch.num_rows()),
            ),
        })
        .unzip();
    let schema = std::sync::Arc::new(arrow_schema::Schema::new(fields));
    RecordBatch::try_new(schema, columns).unwrap_or(batch)
}

fn json_rows(batch: &RecordBatch) -> Result<Vec<Map<String, Value>>, IcebergError> {
    let options = FormatOptions::default();
    let formatters = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| IcebergError::Config(format!("cannot display a column: {e}")))?;
    let schema = batch.schema();
    let mut rows = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        let mut object = Map::new();
        for (i, (field, column)) in schema.fields().iter().zip(batch.columns()).enumerate() {
            let value = if column.is_null(row) {
                Value::Null
            } else {
                let text = formatters[i].value(row).to_string();
                match field.data_type() {
                    DataType::Int32 | DataType::Int64 | DataType::Boolean => {
                        serde_json::from_str(&text).unwrap_or(Value::String(text))
                    }
                    _ => Value::String(text),
                }
            };
            object.insert(field.name().clone(), value);
        }
        rows.push(object);
    }
    Ok(rows)
}
