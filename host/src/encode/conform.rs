//! Batches encoded against one schema, made to fit a later one of the same table: after a
//! schema change, the rows encoded before it (other slices of the batch, held triggers)
//! are written with the new schema.

use std::collections::HashMap;

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, ListArray, MapArray, RecordBatch, StructArray, new_null_array};
use arrow_schema::{ArrowError, DataType, Field, Fields, SchemaRef};

use super::SchemaError;

/// `batch` with the columns of `schema`, matched by Iceberg field id: a column `batch`
/// lacks (a new one) is null, one of a narrower type (`int` to `long`, `float` to
/// `double`, a smaller decimal precision) is cast, and a struct, list or map column is
/// rebuilt the same way inside (a struct field it lacks is null).
pub fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, SchemaError> {
    if batch.schema() == *schema {
        return Ok(batch);
    }
    let have = batch.schema();
    let columns = fit_fields(
        have.fields(),
        batch.columns(),
        schema.fields(),
        batch.num_rows(),
    )?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// The arrays of `want` fields, from the `arrays` of `have` fields matched by field id.
fn fit_fields(
    have: &Fields,
    arrays: &[ArrayRef],
    want: &Fields,
    rows: usize,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let by_id: HashMap<&str, usize> = have
        .iter()
        .enumerate()
        .filter_map(|(i, f)| Some((field_id(f)?, i)))
        .collect();
    want.iter()
        .map(|f| match field_id(f).and_then(|id| by_id.get(id)) {
            Some(&i) => fit(&arrays[i], f.data_type()),
            None => Ok(new_null_array(f.data_type(), rows)),
        })
        .collect()
}

/// `array` as an array of type `to`.
fn fit(array: &ArrayRef, to: &DataType) -> Result<ArrayRef, ArrowError> {
    if array.data_type() == to {
        return Ok(array.clone());
    }
    match (array.data_type(), to) {
        (DataType::Struct(have), DataType::Struct(want)) => {
            let s = array.as_struct();
            let children = fit_fields(have, s.columns(), want, s.len())?;
            Ok(Arc::new(StructArray::try_new(
                want.clone(),
                children,
                s.nulls().cloned(),
            )?))
        }
        (DataType::List(_), DataType::List(element)) => {
            let l = array.as_list::<i32>();
            let values = fit(l.values(), element.data_type())?;
            Ok(Arc::new(ListArray::try_new(
                element.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?))
        }
        (DataType::Map(_, _), DataType::Map(entries, sorted)) => {
            let m = array.as_map();
            let pairs: ArrayRef = Arc::new(m.entries().clone());
            let fitted = fit(&pairs, entries.data_type())?;
            Ok(Arc::new(MapArray::try_new(
                entries.clone(),
                m.offsets().clone(),
                fitted.as_struct().clone(),
                m.nulls().cloned(),
                *sorted,
            )?))
        }
        _ => arrow_cast::cast(array, to),
    }
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

    /// `values` encoded against `old`, then conformed to `new` (whose Arrow schema the
    /// batch then has).
    fn encoded_then_conformed(
        old: &Schema,
        new: &Schema,
        values: &[&[u8]],
    ) -> (RecordBatch, SchemaRef) {
        let encoded = Encoder::new(old, &[])
            .unwrap()
            .encode(values.iter().map(|v| Some(*v)), 0)
            .unwrap();
        let target = Encoder::new(new, &[]).unwrap().arrow_schema().clone();
        let batch = conform(encoded.batch, &target).unwrap();
        assert_eq!(batch.schema(), target);
        (batch, target)
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
        let values: [&[u8]; 2] = [br#"{"id": "a", "qty": 7}"#, br#"{"id": "b"}"#];
        let (batch, target) = encoded_then_conformed(&old, &new, &values);
        assert_eq!(batch.column(1).null_count(), 2);
        let qty = batch.column(2).as_primitive::<Int64Type>();
        assert_eq!((qty.value(0), qty.is_null(1)), (7, true));
        let same = conform(batch.clone(), &target).unwrap();
        assert_eq!(same, batch);
    }

    #[test]
    fn nested_columns_gain_fields_and_widen_inside() {
        let field = |id, name: &str, ty| Arc::new(NestedField::optional(id, name, ty));
        let prim = Type::Primitive;
        // ctx: struct<os, v, app?> (ids 2..4); items: list<struct<os, v, app?>> (6..9).
        let inner = |at: i32, v: PrimitiveType, more: bool| {
            let mut fields = vec![
                field(at, "os", prim(PrimitiveType::String)),
                field(at + 1, "v", prim(v)),
            ];
            if more {
                fields.push(field(at + 2, "app", prim(PrimitiveType::String)));
            }
            Type::Struct(iceberg::spec::StructType::new(fields))
        };
        let schema = |v: PrimitiveType, more: bool| {
            let element = Arc::new(NestedField::list_element(
                6,
                inner(7, v.clone(), more),
                false,
            ));
            Schema::builder()
                .with_fields(vec![
                    field(1, "ctx", inner(2, v, more)),
                    field(
                        5,
                        "items",
                        Type::List(iceberg::spec::ListType::new(element)),
                    ),
                ])
                .build()
                .unwrap()
        };
        let (old, new) = (
            schema(PrimitiveType::Int, false),
            schema(PrimitiveType::Long, true),
        );
        let values: [&[u8]; 2] = [
            br#"{"ctx": {"os": "ios", "v": 7}, "items": [{"v": 1}, null]}"#,
            br#"{}"#,
        ];
        let (batch, _) = encoded_then_conformed(&old, &new, &values);
        let ctx = batch.column(0).as_struct();
        assert_eq!(ctx.column(1).as_primitive::<Int64Type>().value(0), 7);
        assert_eq!(ctx.column(2).null_count(), 2);
        assert!(ctx.is_null(1));
        let items = batch.column(1).as_list::<i32>();
        let first = items.value(0);
        let first = first.as_struct();
        assert_eq!(first.len(), 2);
        assert_eq!(first.column(1).as_primitive::<Int64Type>().value(0), 1);
        assert!(first.is_null(1) && first.column(2).is_null(0));
        assert!(items.is_null(1));
    }
}
