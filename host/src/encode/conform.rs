//! Batches encoded against one schema, made to fit a later one of the same table: after a
//! schema change, the rows encoded before it (other slices of the batch, held triggers)
//! are written with the new schema.

use std::collections::HashMap;

use arrow_array::{ArrayRef, RecordBatch, new_null_array};
use arrow_schema::{Field, SchemaRef};

use super::SchemaError;

/// `batch` with the columns of `schema`, matched by Iceberg field id: a column `batch`
/// lacks (a new one) is null, one of a narrower type (`int` to `long`, `float` to
/// `double`, a smaller decimal precision) is cast.
pub fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, SchemaError> {
    if batch.schema() == *schema {
        return Ok(batch);
    }
    let have = batch.schema();
    let by_id: HashMap<&str, usize> = have
        .fields()
        .iter()
        .enumerate()
        .filter_map(|(i, f)| Some((field_id(f)?, i)))
        .collect();
    let columns = schema
        .fields()
        .iter()
        .map(|f| match field_id(f).and_then(|id| by_id.get(id)) {
            Some(&i) if batch.column(i).data_type() == f.data_type() => Ok(batch.column(i).clone()),
            Some(&i) => arrow_cast::cast(batch.column(i), f.data_type()),
            None => Ok(new_null_array(f.data_type(), batch.num_rows())),
        })
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// The Iceberg field id of an Arrow field, as iceberg-rust writes it.
fn field_id(field: &Field) -> Option<&str> {
    field
        .metadata()
        .get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

    use super::*;
    use crate::encode::Encoder;

    fn arrow(fields: Vec<(i32, &str, PrimitiveType)>) -> Schema {
        Schema::builder()
            .with_fields(
                fields
                    .into_iter()
                    .map(|(id, n, t)| Arc::new(NestedField::optional(id, n, Type::Primitive(t))))
                    .collect::<Vec<_>>(),
            )
            .build()
            .unwrap()
    }

    #[test]
    fn rows_of_an_older_schema_fit_a_newer_one_by_field_id() {
        let old = arrow(vec![
            (1, "id", PrimitiveType::String),
            (2, "qty", PrimitiveType::Int),
        ]);
        // qty renamed and widened, a column added before it.
        let new = arrow(vec![
            (1, "id", PrimitiveType::String),
            (3, "tier", PrimitiveType::String),
            (2, "quantity", PrimitiveType::Long),
        ]);
        let values: Vec<&[u8]> = vec![br#"{"id": "a", "qty": 7}"#, br#"{"id": "b"}"#];
        let encoded = Encoder::new(&old, &[])
            .unwrap()
            .encode(values.into_iter().map(Some), 0)
            .unwrap();
        let target = Encoder::new(&new, &[]).unwrap().arrow_schema().clone();
        let batch = conform(encoded.batch, &target).unwrap();
        assert_eq!(batch.schema(), target);
        assert_eq!(batch.column(1).null_count(), 2);
        let qty = batch.column(2).as_primitive::<Int64Type>();
        assert_eq!((qty.value(0), qty.is_null(1)), (7, true));
        let same = conform(batch.clone(), &target).unwrap();
        assert_eq!(same, batch);
    }
}
