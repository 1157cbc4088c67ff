//! Cutting a batch by the table's partitions, with a fast path for the common case: a
//! stream partitioned by day (or hour) whose batch falls in one partition.
//!
//! iceberg-rust's `RecordBatchPartitionSplitter` makes a literal of every row's partition
//! value, hashes it into a map, and copies the batch through a filter per partition, even
//! when there is one. Here the partition values are computed once (vectorised), and a batch
//! whose rows all have the first row's values goes to the writer whole. A batch of a few
//! partitions (a day's or an hour's boundary, late events) is cut by comparing every row
//! with the first row of each partition in turn, also vectorised; anything else (more than
//! [`FEW`] partitions, null values) goes through iceberg-rust's splitter.

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, Scalar, StructArray};
use arrow_buffer::BooleanBuffer;
use arrow_select::filter::filter_record_batch;
use iceberg::arrow::{
    PartitionValueCalculator, RecordBatchPartitionSplitter, arrow_struct_to_literal,
};
use iceberg::spec::{Literal, PartitionKey, PartitionSpecRef, SchemaRef, StructType};

use super::arrow_error;

/// The most partitions a batch is cut into by comparing its rows with each partition's
/// first (one vectorised pass over the batch per partition); past it, iceberg-rust's
/// splitter (one hash per row) is cheaper.
const FEW: usize = 16;

/// Splits batches by the partitions of one spec.
pub(super) struct Splitter {
    calculator: PartitionValueCalculator,
    partition_type: StructType,
    spec: PartitionSpecRef,
    schema: SchemaRef,
    general: RecordBatchPartitionSplitter,
}

impl Splitter {
    pub(super) fn new(schema: SchemaRef, spec: PartitionSpecRef) -> iceberg::Result<Self> {
        Ok(Splitter {
            calculator: PartitionValueCalculator::try_new(&spec, &schema)?,
            partition_type: spec.partition_type(&schema)?,
            general: RecordBatchPartitionSplitter::try_new_with_computed_values(
                schema.clone(),
                spec.clone(),
            )?,
            spec,
            schema,
        })
    }

    /// The parts of `batch`, each with its partition.
    pub(super) fn split(
        &self,
        batch: &RecordBatch,
    ) -> iceberg::Result<Vec<(PartitionKey, RecordBatch)>> {
        let values = self.calculator.calculate(batch)?;
        match self.few_partitions(batch, &values)? {
            Some(parts) => Ok(parts),
            None => self.general.split(batch),
        }
    }

    /// The parts of `batch` if its rows fall in at most [`FEW`] partitions and no
    /// partition value is null; the batch itself when they all fall in one.
    fn few_partitions(
        &self,
        batch: &RecordBatch,
        values: &ArrayRef,
    ) -> iceberg::Result<Option<Vec<(PartitionKey, RecordBatch)>>> {
        let Some(fields) = values.as_any().downcast_ref::<StructArray>() else {
            return Ok(None);
        };
        let nulls = fields.null_count() > 0 || fields.columns().iter().any(|c| c.null_count() > 0);
        if fields.is_empty() || nulls {
            return Ok(None);
        }
        let Some(found) = partitions(fields)? else {
            return Ok(None);
        };
        let whole = found.len() == 1;
        let mut parts = Vec::with_capacity(found.len());
        for (first, rows) in found {
            let Some(key) = self.key_of(values, first)? else {
                return Ok(None);
            };
            let part = if whole {
                batch.clone()
            } else {
                filter_record_batch(batch, &BooleanArray::new(rows, None))
                    .map_err(arrow_error("cutting a batch by partition"))?
            };
            parts.push((key, part));
        }
        Ok(Some(parts))
    }

    /// The partition key of row `row` (`None` for a row whose values are null).
    fn key_of(&self, values: &ArrayRef, row: usize) -> iceberg::Result<Option<PartitionKey>> {
        let literal = arrow_struct_to_literal(&values.slice(row, 1), &self.partition_type)?;
        let Some(Some(Literal::Struct(data))) = literal.into_iter().next() else {
            return Ok(None);
        };
        Ok(Some(PartitionKey::new(
            self.spec.as_ref().clone(),
            self.schema.clone(),
            data,
        )))
    }
}

/// The partitions of the rows of `fields` (no value null), in order of first appearance:
/// each partition's first row and its rows; `None` past [`FEW`] partitions.
fn partitions(fields: &StructArray) -> iceberg::Result<Option<Vec<(usize, BooleanBuffer)>>> {
    let mut found = Vec::new();
    let mut rest: Option<BooleanBuffer> = None; // the rows of no partition found yet
    let mut first = 0;
    while found.len() < FEW {
        // No row of an earlier partition has these values: `same` is this partition's.
        let same = same_as(fields, first)?;
        let left = match &rest {
            None => !&same,
            Some(rest) => rest & &!&same,
        };
        found.push((first, same));
        match left.set_indices().next() {
            None => return Ok(Some(found)),
            Some(next) => first = next,
        }
        rest = Some(left);
    }
    Ok(None)
}

/// The rows of `fields` whose values all equal those of row `row` (no value null).
fn same_as(fields: &StructArray, row: usize) -> iceberg::Result<BooleanBuffer> {
    let mut same = BooleanBuffer::new_set(fields.len());
    for column in fields.columns() {
        let value = Scalar::new(column.slice(row, 1));
        let equal = arrow_ord::cmp::eq(column, &value)
            .map_err(arrow_error("comparing partition values"))?;
        same = &same & equal.values();
    }
    Ok(same)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, TimestampMicrosecondArray};
    use iceberg::arrow::schema_to_arrow_schema;
    use iceberg::spec::{
        NestedField, PartitionSpec, PrimitiveType, Schema, Transform, Type, UnboundPartitionField,
    };

    use super::*;

    const DAY: i64 = 86_400_000_000;

    fn table() -> (SchemaRef, PartitionSpecRef) {
        let schema = Arc::new(
            Schema::builder()
                .with_fields(vec![
                    NestedField::required(1, "id", Type::Primitive(PrimitiveType::Int)).into(),
                    NestedField::optional(2, "ts", Type::Primitive(PrimitiveType::Timestamptz))
                        .into(),
                ])
                .build()
                .unwrap(),
        );
        let field = |source_id, name: &str, transform| UnboundPartitionField {
            source_id,
            field_id: None,
            name: name.into(),
            transform,
        };
        let spec = PartitionSpec::builder(schema.clone())
            .add_unbound_field(field(2, "ts_day", Transform::Day))
            .unwrap()
            .add_unbound_field(field(1, "id_bucket", Transform::Bucket(2)))
            .unwrap()
            .build()
            .unwrap();
        (schema, Arc::new(spec))
    }

    fn batch(schema: &SchemaRef, rows: &[(i32, Option<i64>)]) -> RecordBatch {
        let arrow = Arc::new(schema_to_arrow_schema(schema).unwrap());
        let ids = Int32Array::from_iter_values(rows.iter().map(|r| r.0));
        let ts = TimestampMicrosecondArray::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())
            .with_timezone("+00:00");
        RecordBatch::try_new(arrow, vec![Arc::new(ids), Arc::new(ts)]).unwrap()
    }

    /// The parts, by partition, in a comparable order.
    fn sorted(parts: Vec<(PartitionKey, RecordBatch)>) -> Vec<(String, RecordBatch)> {
        let mut parts: Vec<(String, RecordBatch)> = parts
            .into_iter()
            .map(|(key, batch)| (format!("{:?}", key.data()), batch))
            .collect();
        parts.sort_by(|a, b| a.0.cmp(&b.0));
        parts
    }

    /// One partition: the batch goes through whole, with the key iceberg-rust's splitter
    /// gives it. Several partitions, or a null partition value: the same parts as
    /// iceberg-rust's splitter.
    #[test]
    fn a_batch_of_one_partition_goes_whole_and_others_split_as_iceberg_does() {
        let (schema, spec) = table();
        let splitter = Splitter::new(schema.clone(), spec.clone()).unwrap();
        let general =
            RecordBatchPartitionSplitter::try_new_with_computed_values(schema.clone(), spec)
                .unwrap();
        // Ids 2 and 4 fall in one bucket of two (checked by iceberg's splitter below).
        // Days 0 to 19, each twice, interleaved: more partitions than `FEW`.
        let many: Vec<(i32, Option<i64>)> = (0..40).map(|i| (2, Some(i % 20 * DAY))).collect();
        let cases: [&[(i32, Option<i64>)]; 6] = [
            &[(2, Some(5)), (2, Some(DAY - 1)), (2, Some(7))],
            &[(2, Some(5)), (2, Some(DAY + 1)), (2, Some(7))],
            &[(1, Some(5)), (2, Some(6)), (3, Some(7)), (4, Some(8))],
            &[(2, Some(5)), (2, None), (2, Some(7))],
            &[
                (2, Some(DAY + 3)),
                (1, Some(5)),
                (2, Some(6)),
                (3, Some(2 * DAY)),
                (2, Some(DAY)),
                (4, Some(7)),
            ],
            &many,
        ];
        // Which cases the comparisons cut (the rest go to iceberg-rust's splitter).
        let cut_here = [true, true, true, false, true, false];
        for (i, rows) in cases.into_iter().enumerate() {
            let input = batch(&schema, rows);
            let ours = sorted(splitter.split(&input).unwrap());
            let theirs = sorted(general.split(&input).unwrap());
            assert_eq!(ours, theirs, "case {i}");
            let values = splitter.calculator.calculate(&input).unwrap();
            let few = splitter.few_partitions(&input, &values).unwrap();
            assert_eq!(few.is_some(), cut_here[i], "case {i}");
            if i == 0 {
                assert_eq!(ours.len(), 1);
                assert_eq!(ours[0].1, input, "one partition: the batch itself");
            } else {
                assert!(ours.len() > 1, "case {i}: {ours:?}");
            }
        }
    }
}
