//! Rewriting a group's small files into files of about the target size, one record batch
//! at a time: memory holds a batch and the Parquet writer's open row group, whatever the
//! partition's size (with `sort-by`, one output file's rows).
//!
//! Each file is read with the schema it was written with (its Parquet schema, field ids
//! and all) and its rows are written in the table's current schema ([`super::project`]),
//! so that files of every schema compact together. Rows that cannot be (a required column
//! added since) are written in their own schema, as Iceberg allows; a batch in another
//! schema than the previous one closes the output file.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef as ArrowSchemaRef;
use futures::TryStreamExt;
use iceberg::arrow::{ArrowFileReader, arrow_schema_to_schema, schema_to_arrow_schema};
use iceberg::io::FileMetadata;
use iceberg::spec::{DataFile, DataFileFormat, PartitionKey, Schema};
use iceberg::table::Table;
use iceberg::writer::base_writer::data_file_writer::{DataFileWriter, DataFileWriterBuilder};
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Error, ErrorKind};
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::file::properties::WriterProperties;

use super::config::SortKey;
use super::plan::Group;
use super::project::project;
use crate::iceberg::arrow_error;

/// Rows per record batch read.
const BATCH_ROWS: usize = 8192;

type Writer =
    DataFileWriter<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

/// How a run rewrites its groups.
pub(super) struct Rewrite<'a> {
    /// The table, as planned.
    pub table: &'a Table,
    /// The Parquet settings (the sink's).
    pub properties: WriterProperties,
    /// The size of the files written.
    pub target: u64,
    /// The order of the rows in each file written, if any.
    pub sort: &'a [SortKey],
    /// Starts the names of the files written: unique to the run, so that the files of a
    /// crashed run never collide with a later one's.
    pub prefix: String,
    /// Set to give up between two record batches (the process is stopping).
    pub stop: &'a AtomicBool,
}

/// What rewriting a group wrote.
#[derive(Debug, Default)]
pub(super) struct Rewritten {
    /// The files written, not yet committed.
    pub files: Vec<DataFile>,
    /// Rows read.
    pub rows_read: u64,
}

impl Rewrite<'_> {
    /// Rewrites `group`'s files (`index` numbers the group in the run, for file names).
    pub async fn group(&self, group: &Group, index: usize) -> iceberg::Result<Rewritten> {
        let mut out = Output::new(self, group, index)?;
        for file in &group.files {
            let mut batches = self.open(file).await?;
            while let Some(batch) = batches.try_next().await.map_err(parquet_error)? {
                if self.stop.load(Ordering::Relaxed) {
                    return Err(Error::new(ErrorKind::Unexpected, "the process is stopping"));
                }
                out.rewritten.rows_read += batch.num_rows() as u64;
                out.write(batch).await?;
            }
            out.read_bytes += file.file_size_in_bytes();
            if !self.sort.is_empty() && out.read_bytes >= self.target {
                out.flush_sorted().await?;
            }
        }
        out.close().await
    }

    async fn open(
        &self,
        file: &DataFile,
    ) -> iceberg::Result<parquet::arrow::async_reader::ParquetRecordBatchStream<ArrowFileReader>>
    {
        if file.file_format() != DataFileFormat::Parquet {
            return Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!("{} is not a Parquet file", file.file_path()),
            ));
        }
        let input = self.table.file_io().new_input(file.file_path())?;
        let meta = FileMetadata {
            size: file.file_size_in_bytes(),
        };
        let reader = ArrowFileReader::new(meta, input.reader().await?);
        ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(parquet_error)?
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(parquet_error)
    }
}

/// The file being written, and what was written.
struct Output<'a> {
    how: &'a Rewrite<'a>,
    key: Option<PartitionKey>,
    location: DefaultLocationGenerator,
    names: DefaultFileNameGenerator,
    /// The table's current schema, in both forms.
    table: (ArrowSchemaRef, Arc<Schema>),
    /// The schema of the rows being written (the table's, or a file's), in both forms.
    schema: Option<(ArrowSchemaRef, Arc<Schema>)>,
    writer: Option<Writer>,
    /// With `sort-by`: the rows of the next file, and the bytes of the files they came
    /// from since the last file was written.
    held: Vec<RecordBatch>,
    read_bytes: u64,
    rewritten: Rewritten,
}

impl<'a> Output<'a> {
    fn new(how: &'a Rewrite<'a>, group: &Group, index: usize) -> iceberg::Result<Self> {
        let metadata = how.table.metadata();
        let spec = metadata
            .partition_spec_by_id(group.spec_id)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!("partition spec {} is not in the table", group.spec_id),
                )
            })?;
        let key = (!spec.is_unpartitioned()).then(|| {
            PartitionKey::new(
                (**spec).clone(),
                metadata.current_schema().clone(),
                group.partition.clone(),
            )
        });
        let schema = metadata.current_schema().clone();
        let table = (Arc::new(schema_to_arrow_schema(&schema)?), schema);
        Ok(Output {
            how,
            table,
            key,
            location: DefaultLocationGenerator::new(metadata)?,
            names: DefaultFileNameGenerator::new(
                format!("{}-{index:04}", how.prefix),
                None,
                DataFileFormat::Parquet,
            ),
            schema: None,
            writer: None,
            held: Vec::new(),
            read_bytes: 0,
            rewritten: Rewritten::default(),
        })
    }

    /// Makes `arrow` the schema of the rows that follow (the table's, or a file's whose
    /// rows cannot take it), closing the file being written if it had another.
    async fn switch_to(&mut self, arrow: ArrowSchemaRef) -> iceberg::Result<()> {
        if self.schema.as_ref().is_some_and(|(a, _)| *a == arrow) {
            return Ok(());
        }
        self.finish_file().await?;
        let schema = if arrow == self.table.0 {
            self.table.1.clone()
        } else {
            Arc::new(arrow_schema_to_schema(&arrow)?)
        };
        self.schema = Some((arrow, schema));
        Ok(())
    }

    /// Writes a file's rows: in the table's schema if they can be, else in their own.
    async fn write(&mut self, batch: RecordBatch) -> iceberg::Result<()> {
        let batch = match project(&batch, &self.table.0) {
            Ok(projected) => projected,
            Err(error) => {
                tracing::debug!(%error, "rows kept in their file's schema");
                batch
            }
        };
        self.switch_to(batch.schema()).await?;
        if !self.how.sort.is_empty() {
            self.held.push(batch);
            return Ok(());
        }
        let batch = self.as_written(batch)?;
        self.writer().await?.write(batch).await
    }

    /// The writer of the current file, opened on first use.
    async fn writer(&mut self) -> iceberg::Result<&mut Writer> {
        if self.writer.is_none() {
            let (_, schema) = self.schema.as_ref().expect("a schema before rows");
            let rolling = RollingFileWriterBuilder::new(
                ParquetWriterBuilder::new(self.how.properties.clone(), schema.clone()),
                usize::try_from(self.how.target).unwrap_or(usize::MAX),
                self.how.table.file_io().clone(),
                self.location.clone(),
                self.names.clone(),
            );
            let writer = DataFileWriterBuilder::new(rolling)
                .build(self.key.clone())
                .await?;
            self.writer = Some(writer);
        }
        Ok(self.writer.as_mut().expect("opened above"))
    }

    /// `batch` as the writer takes it: its columns in the types the file's Iceberg schema
    /// maps back to (a file written by another engine may spell a type differently).
    fn as_written(&self, batch: RecordBatch) -> iceberg::Result<RecordBatch> {
        let (_, schema) = self.schema.as_ref().expect("a schema before rows");
        let arrow = Arc::new(schema_to_arrow_schema(schema)?);
        if batch.schema() == arrow {
            return Ok(batch);
        }
        let columns = batch
            .columns()
            .iter()
            .zip(arrow.fields())
            .map(|(column, field)| arrow_cast::cast(column, field.data_type()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(arrow_error(REWRITING))?;
        RecordBatch::try_new(arrow, columns).map_err(arrow_error(REWRITING))
    }

    /// With `sort-by`: sorts the rows held and writes them as a file of their own.
    async fn flush_sorted(&mut self) -> iceberg::Result<()> {
        self.read_bytes = 0;
        if self.held.is_empty() {
            return Ok(());
        }
        let held = std::mem::take(&mut self.held);
        let batch = arrow_select::concat::concat_batches(&held[0].schema(), &held)
            .map_err(arrow_error(REWRITING))?;
        drop(held);
        let sorted = sort(&batch, self.how.sort)?;
        let sorted = self.as_written(sorted)?;
        self.writer().await?.write(sorted).await?;
        self.close_writer().await
    }

    /// Ends the file being written (sorted: after writing the rows held).
    async fn finish_file(&mut self) -> iceberg::Result<()> {
        if !self.how.sort.is_empty() {
            self.flush_sorted().await?;
        }
        self.close_writer().await
    }

    async fn close_writer(&mut self) -> iceberg::Result<()> {
        if let Some(mut writer) = self.writer.take() {
            self.rewritten.files.extend(writer.close().await?);
        }
        Ok(())
    }

    async fn close(mut self) -> iceberg::Result<Rewritten> {
        self.finish_file().await?;
        Ok(self.rewritten)
    }
}

/// `batch`'s rows in `keys`' order (nulls first); a key column the batch lacks (added
/// after its files were written: all null) is passed over.
fn sort(batch: &RecordBatch, keys: &[SortKey]) -> iceberg::Result<RecordBatch> {
    let columns: Vec<arrow_ord::sort::SortColumn> = keys
        .iter()
        .filter_map(|key| {
            let column = batch.column_by_name(&key.column)?;
            Some(arrow_ord::sort::SortColumn {
                values: column.clone(),
                options: Some(arrow_schema::SortOptions {
                    descending: key.descending,
                    nulls_first: true,
                }),
            })
        })
        .collect();
    if columns.is_empty() {
        return Ok(batch.clone());
    }
    let order =
        arrow_ord::sort::lexsort_to_indices(&columns, None).map_err(arrow_error(REWRITING))?;
    arrow_select::take::take_record_batch(batch, &order).map_err(arrow_error(REWRITING))
}

/// What an Arrow error of a rewrite says was being done.
const REWRITING: &str = "rewriting rows";

fn parquet_error(error: parquet::errors::ParquetError) -> Error {
    Error::new(ErrorKind::Unexpected, "reading a data file").with_source(error)
}

/// Counts the rows of `files` (what their manifests say).
pub(super) fn rows(files: &[DataFile]) -> u64 {
    files.iter().map(DataFile::record_count).sum()
}

/// Reads every row of `files` back, for tests: one batch per record batch read.
#[cfg(test)]
pub(super) async fn read_back(table: &Table, files: &[DataFile]) -> Vec<RecordBatch> {
    use futures::StreamExt;
    let stop = AtomicBool::new(false);
    let how = Rewrite {
        table,
        properties: WriterProperties::default(),
        target: 0,
        sort: &[],
        prefix: String::new(),
        stop: &stop,
    };
    let mut all = Vec::new();
    for file in files {
        let stream = how.open(file).await.unwrap();
        all.extend(stream.map(|b| b.unwrap()).collect::<Vec<_>>().await);
    }
    all
}
