//! The Iceberg type of an Avro schema: the columns of a table created from a topic's
//! schema, and the type of a field a newer schema version adds.
//!
//! | Avro | Iceberg |
//! |---|---|
//! | `boolean`, `int`, `long`, `float`, `double`, `string` | the same |
//! | `enum`, `string` with `uuid` | `string` |
//! | `bytes`, `fixed` | `binary` |
//! | `bytes`/`fixed` with `decimal(P,S)` | `decimal(P,S)` (P ≤ 38) |
//! | `int` with `date` | `date` |
//! | `long` with `timestamp-millis`/`-micros`/`-nanos` | `timestamptz` (micros) |
//! | `long` with `local-timestamp-*` | `timestamp` (micros) |
//! | `record` | `struct` |
//! | `array` | `list` |
//! | `map` | `map<string, …>` |
//! | `["null", T]`, `[T, "null"]` | `T` |
//!
//! Every column and nested field is optional, as Kafka Connect's Iceberg sink makes them:
//! a later schema version may drop a field (a compatible change), and its column is then
//! null. Other types (`time-*`, `duration`, `big-decimal`, unions of several types, a type
//! that contains itself) have no column: a table made from the schema leaves
//! them out, and their values are counted as dropped fields.

use std::sync::Arc;

use apache_avro::Schema;
use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, StructType, Type,
};

use super::read::Writer;

/// The deepest nesting followed (a type that contains itself goes no further).
const MAX_DEPTH: usize = 32;

/// The Iceberg type of a field of Avro type `schema`, its nested fields numbered by
/// `ids` (a counter, or always 0 for a type the schema evolution numbers); `Err` says why
/// it has none.
pub fn field_type(
    schema: &Schema,
    writer: &Writer,
    ids: &mut dyn FnMut() -> i32,
) -> Result<Type, String> {
    type_at(schema, writer, ids, 0)
}

/// The top-level fields of a record schema as the columns of a new table: ids 1..=n for
/// the columns, the ids after for their nested fields. Fields without a type are left out,
/// named in the second list with the reason.
pub fn columns(writer: &Writer) -> Result<(Vec<NestedFieldRef>, Vec<String>), String> {
    let Schema::Record(record) = writer.resolve(writer.schema()).map_err(|e| e.0)? else {
        return Err("the schema is not a record, so it has no columns".into());
    };
    let mut next_id = record.fields.len() as i32;
    let mut ids = || {
        next_id += 1;
        next_id
    };
    let mut fields = Vec::new();
    let mut skipped = Vec::new();
    for field in &record.fields {
        match field_type(&field.schema, writer, &mut ids) {
            Ok(ty) => {
                let id = fields.len() as i32 + 1;
                let mut column = NestedField::optional(id, &field.name, ty);
                if let Some(doc) = &field.doc {
                    column = column.with_doc(doc);
                }
                fields.push(Arc::new(column));
            }
            Err(reason) => skipped.push(format!("{}: {reason}", field.name)),
        }
    }
    Ok((fields, skipped))
}

fn type_at(
    schema: &Schema,
    writer: &Writer,
    ids: &mut dyn FnMut() -> i32,
    depth: usize,
) -> Result<Type, String> {
    if depth > MAX_DEPTH {
        return Err(format!("it nests deeper than {MAX_DEPTH} levels"));
    }
    let schema = writer.resolve(schema).map_err(|e| e.0)?;
    let primitive = |p: PrimitiveType| Ok(Type::Primitive(p));
    match schema {
        Schema::Boolean => primitive(PrimitiveType::Boolean),
        Schema::Int => primitive(PrimitiveType::Int),
        Schema::Long => primitive(PrimitiveType::Long),
        Schema::Float => primitive(PrimitiveType::Float),
        Schema::Double => primitive(PrimitiveType::Double),
        Schema::String | Schema::Uuid | Schema::Enum(_) => primitive(PrimitiveType::String),
        Schema::Date => primitive(PrimitiveType::Date),
        Schema::TimestampMillis | Schema::TimestampMicros | Schema::TimestampNanos => {
            primitive(PrimitiveType::Timestamptz)
        }
        Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => primitive(PrimitiveType::Timestamp),
        Schema::Decimal(d) if d.precision <= 38 && d.scale <= d.precision => {
            primitive(PrimitiveType::Decimal {
                precision: d.precision as u32,
                scale: d.scale as u32,
            })
        }
        Schema::Decimal(d) => Err(format!(
            "decimal({}, {}) is wider than Iceberg's 38 digits",
            d.precision, d.scale
        )),
        Schema::Union(_) | Schema::Record(_) | Schema::Array(_) | Schema::Map(_) => {
            composite_type(schema, writer, ids, depth)
        }
        Schema::Null => Err("a field that is always null has no Iceberg type".into()),
        Schema::Bytes | Schema::Fixed(_) => primitive(PrimitiveType::Binary),
        Schema::BigDecimal => Err("big-decimal has no column yet".into()),
        Schema::TimeMillis | Schema::TimeMicros | Schema::Duration => {
            Err("time and duration have no column yet".into())
        }
        Schema::Ref { .. } => unreachable!("resolved above"),
    }
}

/// The type of a union with null, a record, an array or a map.
fn composite_type(
    schema: &Schema,
    writer: &Writer,
    ids: &mut dyn FnMut() -> i32,
    depth: usize,
) -> Result<Type, String> {
    match schema {
        Schema::Union(u) => {
            let branches: Vec<&Schema> = u
                .variants()
                .iter()
                .filter(|s| **s != Schema::Null)
                .collect();
            match branches[..] {
                [only] => type_at(only, writer, ids, depth + 1),
                _ => Err("a union of several types has no Iceberg type".into()),
            }
        }
        Schema::Record(record) => {
            let mut fields = Vec::with_capacity(record.fields.len());
            for field in &record.fields {
                let id = ids();
                let ty = type_at(&field.schema, writer, ids, depth + 1)
                    .map_err(|e| format!("{}: {e}", field.name))?;
                fields.push(Arc::new(NestedField::optional(id, &field.name, ty)));
            }
            Ok(Type::Struct(StructType::new(fields)))
        }
        Schema::Array(a) => {
            let id = ids();
            let element = type_at(&a.items, writer, ids, depth + 1)?;
            let field = NestedField::list_element(id, element, false);
            Ok(Type::List(ListType::new(Arc::new(field))))
        }
        Schema::Map(m) => {
            let (key_id, value_id) = (ids(), ids());
            let value = type_at(&m.types, writer, ids, depth + 1)?;
            Ok(Type::Map(MapType::optional(
                key_id,
                Type::Primitive(PrimitiveType::String),
                value_id,
                value,
            )))
        }
        _ => unreachable!("type_at passes composite types only"),
    }
}
