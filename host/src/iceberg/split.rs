//! Cutting a batch by the table's partitions, with a fast path for the common case: a
//! stream partitioned by day (or hour) whose batch falls in one partition.
//!
//! iceberg-rust's `RecordBatchPartitionSplitter` makes a literal of every row's partition
//! value, hashes it into a map, and copies the batch through a filter per partition, even
//! when there is one. Here the partition values are computed once (vectorised), and a batch
//! whose rows all have the first row's values goes to the writer whole; anything else
//! (several partitions, null values) goes through iceberg-rust's splitter.

use arrow_array::{Array, ArrayRef, RecordBatch, Scalar, StructArray};
use iceberg::arrow::{
    PartitionValueCalculator, RecordBatchPartitionSplitter, arrow_struct_to_literal,
};
use iceberg::spec::{Literal, PartitionKey, PartitionSpecRef, SchemaRef, StructType};
use iceberg::{Error, ErrorKind};

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
        match self.one_partition(&values)? {
            Some(key) => Ok(vec![(key, batch.clone())]),
            None => self.general.split(batch),
        }
    }

    /// The partition of every row, if they all have the same one (and no null value).
    fn one_partition(&self, values: &ArrayRef) -> iceberg::Result<Option<PartitionKey>> {
        let Some(fields) = values.as_any().downcast_ref::<StructArray>() else {
            return Ok(None);
        };
        if fields.is_empty() || fields.null_count() > 0 {
            return Ok(None);
        }
        for column in fields.columns() {
            if !all_equal(column)? {
                return Ok(None);
            }
        }
        let first = arrow_struct_to_literal(&values.slice(0, 1), &self.partition_type)?;
        let Some(Some(Literal::Struct(row))) = first.into_iter().next() else {
            return Ok(None);
        };
        Ok(Some(PartitionKey::new(
            self.spec.as_ref().clone(),
            self.schema.clone(),
            row,
        )))
    }
}

/// Whether every value of `column` equals its first, none null.
fn all_equal(column: &ArrayRef) -> iceberg::Result<bool> {
    if column.null_count() > 0 {
        return Ok(false);
    }
    let first = Scalar::new(column.slice(0, 1));
    let same = arrow_ord::cmp::eq(column, &first).map_err(|e| {
        Error::new(ErrorKind::Unexpected, "comparing partition values").with_source(e)
    })?;
    Ok(same.true_count() == column.len())
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
        let cases: [&[(i32, Option<i64>)]; 4] = [
            &[(2, Some(5)), (2, Some(DAY - 1)), (2, Some(7))],
            &[(2, Some(5)), (2, Some(DAY + 1)), (2, Some(7))],
            &[(1, Some(5)), (2, Some(6)), (3, Some(7)), (4, Some(8))],
            &[(2, Some(5)), (2, None), (2, Some(7))],
        ];
        for (i, rows) in cases.into_iter().enumerate() {
            let input = batch(&schema, rows);
            let ours = sorted(splitter.split(&input).unwrap());
            let theirs = sorted(general.split(&input).unwrap());
            assert_eq!(ours, theirs, "case {i}");
            if i == 0 {
                assert_eq!(ours.len(), 1);
                assert_eq!(ours[0].1, input, "one partition: the batch itself");
            } else {
                assert!(ours.len() > 1, "case {i}: {ours:?}");
            }
        }
    }
}
