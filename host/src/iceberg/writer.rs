//! Parquet data files for a batch, through the writer stack described in [`super`].

use arrow_array::RecordBatch;
use iceberg::spec::{DataFile, DataFileFormat, SchemaRef};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::split::Splitter;
use super::{IcebergError, IcebergTable, iceberg_err};

/// A column chunk's dictionary page limit, past which its values are written plain.
const DICTIONARY_PAGE_LIMIT: usize = 256 * 1024;

/// Writes of data files so far in this process: each write's files are named after its
/// number too. A batch id and a run are not enough: one process replays a batch planned by
/// another on some partitions, then again on others (a rebalance gave it more), both with
/// the plan's batch id; the second write would replace the first one's files, committed
/// by then, and the table would name a file of another size (a corrupt footer).
static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What a batch wrote.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// The data files, not yet committed.
    pub files: Vec<DataFile>,
    /// Rows in them.
    pub rows: u64,
    /// Bytes in them.
    pub bytes: u64,
}

type Builder =
    DataFileWriterBuilder<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

impl IcebergTable {
    /// Writes `batches` as Parquet data files (not yet visible: see
    /// [`IcebergTable::commit`]).
    pub fn write(&self, batches: Vec<RecordBatch>, batch_id: u64) -> Result<Written, IcebergError> {
        let schema = self.table.metadata().current_schema().clone();
        self.write_as(batches, batch_id, schema)
    }

    /// Writes `batches` as data files of `schema` (the table's, or the one a schema change
    /// committed with them will make current: see [`super::evolve`]).
    pub fn write_as(
        &self,
        batches: Vec<RecordBatch>,
        batch_id: u64,
        schema: SchemaRef,
    ) -> Result<Written, IcebergError> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows == 0 {
            return Ok(Written::default());
        }
        let builder = self.writer_builder(batch_id, schema.clone())?;
        let spec = self.table.metadata().default_partition_spec().clone();
        let files = if spec.is_unpartitioned() {
            self.catalog.block_on(write_unpartitioned(builder, batches))
        } else {
            let splitter = Splitter::new(schema, spec).map_err(iceberg_err("partitioning"))?;
            self.catalog
                .block_on(write_partitioned(builder, &splitter, batches))
        }?;
        let bytes = files.iter().map(|f| f.file_size_in_bytes()).sum();
        Ok(Written {
            files,
            rows: rows as u64,
            bytes,
        })
    }

    /// The data file writer (steps 2 to 4 of the stack) for a batch's files.
    fn writer_builder(&self, batch_id: u64, schema: SchemaRef) -> Result<Builder, IcebergError> {
        let metadata = self.table.metadata();
        let properties = self.writer_properties()?;
        let location =
            DefaultLocationGenerator::new(metadata).map_err(iceberg_err("locating data files"))?;
        let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let names = DefaultFileNameGenerator::new(
            format!("{batch_id:010}-{}-{write}", self.run_id),
            None,
            DataFileFormat::Parquet,
        );
        let rolling = RollingFileWriterBuilder::new(
            ParquetWriterBuilder::new(properties, schema),
            self.config.target_file_size.as_usize(),
            self.table.file_io().clone(),
            location,
            names,
        );
        Ok(DataFileWriterBuilder::new(rolling))
    }
}

impl IcebergTable {
    /// The Parquet settings of every data file sluice writes (batches and compaction).
    pub(super) fn writer_properties(&self) -> Result<WriterProperties, IcebergError> {
        Ok(WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(self.config.zstd_level)
                    .map_err(|e| IcebergError::Config(format!("sink.zstd-level: {e}")))?,
            ))
            // Columns of mostly distinct values (ids, timestamps) give up on their
            // dictionary after 256 KiB rather than 1 MiB: interning values that end up
            // written plain took ~5% of the CPU per event.
            .set_dictionary_page_size_limit(DICTIONARY_PAGE_LIMIT)
            .build())
    }
}

async fn write_unpartitioned(
    builder: Builder,
    batches: Vec<RecordBatch>,
) -> Result<Vec<DataFile>, IcebergError> {
    let mut writer = builder
        .build(None)
        .await
        .map_err(iceberg_err("opening a data file"))?;
    for batch in batches {
        writer
            .write(batch)
            .await
            .map_err(iceberg_err("writing a data file"))?;
    }
    writer
        .close()
        .await
        .map_err(iceberg_err("closing a data file"))
}

async fn write_partitioned(
    builder: Builder,
    splitter: &Splitter,
    batches: Vec<RecordBatch>,
) -> Result<Vec<DataFile>, IcebergError> {
    let mut fanout = FanoutWriter::new(builder);
    for batch in batches {
        for (key, part) in splitter
            .split(&batch)
            .map_err(iceberg_err("partitioning a batch"))?
        {
            fanout
                .write(key, part)
                .await
                .map_err(iceberg_err("writing a data file"))?;
        }
    }
    fanout
        .close()
        .await
        .map_err(iceberg_err("closing data files"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{RecordBatch, StringArray};

    use crate::iceberg::IcebergTable;

    #[test]
    fn two_writes_of_one_batch_id_never_share_a_file() {
        let (dir, catalog, config) = crate::iceberg::test_table("writes");
        let table = IcebergTable::open(&catalog, config).unwrap();
        let schema = table.table().metadata().current_schema().clone();
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).unwrap());
        let rows = |value: &str| {
            let column = Arc::new(StringArray::from(vec![value]));
            RecordBatch::try_new(arrow.clone(), vec![column]).unwrap()
        };
        // Batch 5 replayed on some partitions, then on others, by one process.
        let first = table.write(vec![rows("x")], 5).unwrap();
        let second = table.write(vec![rows("yy")], 5).unwrap();
        let path = |w: &super::Written| w.files[0].file_path().to_string();
        assert_ne!(path(&first), path(&second));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
