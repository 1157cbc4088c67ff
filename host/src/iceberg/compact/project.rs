//! Rows of a data file written before the table's schema changed, as the current schema
//! has them: columns matched by field id (a renamed column keeps its values), widened
//! (int to long, float to double, a wider decimal), the fields a struct gained and the
//! columns added since filled with nulls, the columns dropped since left out. What a
//! reader's projection does, so that files of every schema compact into one.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, ListArray, MapArray, RecordBatch, RecordBatchOptions, StructArray,
    new_null_array,
};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Fields, SchemaRef};

/// The key of a field's Iceberg id in Arrow metadata, as iceberg-rust writes it.
const FIELD_ID: &str = "PARQUET:field_id";

fn id(field: &Field) -> Option<&str> {
    field.metadata().get(FIELD_ID).map(String::as_str)
}

/// `batch` (a file's rows, in the file's schema) in `target`'s schema (the table's).
pub fn project(batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let source = batch.schema();
    let columns = children(
        source.fields(),
        batch.columns(),
        target.fields(),
        batch.num_rows(),
    )?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(target.clone(), columns, &options)
}

/// The arrays of `to`'s fields, each from the array of `from` with its field id (or nulls).
fn children(
    from: &Fields,
    arrays: &[ArrayRef],
    to: &Fields,
    rows: usize,
) -> Result<Vec<ArrayRef>, ArrowError> {
    to.iter()
        .map(|target| {
            let found = id(target).and_then(|want| from.iter().position(|f| id(f) == Some(want)));
            match found {
                Some(i) => array(&arrays[i], &from[i], target),
                None if target.is_nullable() => Ok(new_null_array(target.data_type(), rows)),
                None => Err(ArrowError::SchemaError(format!(
                    "the required field `{}` is not in the file",
                    target.name()
                ))),
            }
        })
        .collect()
}

/// `values` (of field `from`) as field `to` has them.
fn array(values: &ArrayRef, from: &FieldRef, to: &FieldRef) -> Result<ArrayRef, ArrowError> {
    if from.data_type() == to.data_type() {
        return Ok(values.clone());
    }
    match (from.data_type(), to.data_type()) {
        (DataType::Struct(from_fields), DataType::Struct(to_fields)) => {
            let structs = values.as_struct();
            let columns = children(from_fields, structs.columns(), to_fields, structs.len())?;
            let nulls = structs.nulls().cloned();
            Ok(Arc::new(StructArray::try_new(
                to_fields.clone(),
                columns,
                nulls,
            )?))
        }
        (DataType::List(from_item), DataType::List(to_item)) => {
            let lists = values.as_list::<i32>();
            let items = array(lists.values(), from_item, to_item)?;
            let (offsets, nulls) = (lists.offsets().clone(), lists.nulls().cloned());
            Ok(Arc::new(ListArray::try_new(
                to_item.clone(),
                offsets,
                items,
                nulls,
            )?))
        }
        (DataType::Map(from_entries, _), DataType::Map(to_entries, sorted)) => {
            let maps = values.as_map();
            let entries: ArrayRef = Arc::new(maps.entries().clone());
            let entries = array(&entries, from_entries, to_entries)?;
            let (offsets, nulls) = (maps.offsets().clone(), maps.nulls().cloned());
            Ok(Arc::new(MapArray::try_new(
                to_entries.clone(),
                offsets,
                entries.as_struct().clone(),
                nulls,
                *sorted,
            )?))
        }
        (_, target) => arrow_cast::cast(values, target),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_array::{Int32Array, Int64Array, StringArray};
    use arrow_schema::Schema;

    use super::*;

    fn field(name: &str, ty: DataType, id: i32) -> Field {
        Field::new(name, ty, true)
            .with_metadata(HashMap::from([(FIELD_ID.to_string(), id.to_string())]))
    }

    #[test]
    fn columns_go_by_field_id_widened_with_added_ones_null_and_dropped_ones_gone() {
        let ctx_v1 = Fields::from(vec![field("os", DataType::Utf8, 5)]);
        let file = Arc::new(Schema::new(vec![
            field("qty", DataType::Int32, 2),
            field("gone", DataType::Utf8, 3),
            field("ctx", DataType::Struct(ctx_v1.clone()), 4),
        ]));
        let ctx = StructArray::new(
            ctx_v1,
            vec![Arc::new(StringArray::from(vec![Some("ios"), None]))],
            None,
        );
        let batch = RecordBatch::try_new(
            file,
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec!["x", "y"])),
                Arc::new(ctx),
            ],
        )
        .unwrap();
        // The table now: quantity (renamed, widened), ctx with a field more, a new column.
        let ctx_v2 = Fields::from(vec![
            field("os", DataType::Utf8, 5),
            field("v", DataType::Int64, 6),
        ]);
        let table = Arc::new(Schema::new(vec![
            field("quantity", DataType::Int64, 2),
            field("ctx", DataType::Struct(ctx_v2), 4),
            field("tier", DataType::Utf8, 7),
        ]));

        let projected = project(&batch, &table).unwrap();

        assert_eq!(projected.schema(), table);
        let quantity = projected.column(0).as_any().downcast_ref::<Int64Array>();
        assert_eq!(quantity.unwrap().values(), &[1, 2]);
        let ctx = projected.column(1).as_struct();
        assert_eq!(ctx.column(0).as_string::<i32>().value(0), "ios");
        assert_eq!(ctx.column(1).null_count(), 2);
        assert_eq!(projected.column(2).null_count(), 2);
    }

    #[test]
    fn a_required_column_the_file_lacks_cannot_be_projected() {
        let file = Arc::new(Schema::new(vec![field("a", DataType::Int32, 1)]));
        let batch = RecordBatch::try_new(file, vec![Arc::new(Int32Array::from(vec![1]))]).unwrap();
        let table = Arc::new(Schema::new(vec![
            field("a", DataType::Int32, 1),
            Field::new("b", DataType::Int32, false)
                .with_metadata(HashMap::from([(FIELD_ID.to_string(), "2".to_string())])),
        ]));
        assert!(project(&batch, &table).is_err());
    }
}
