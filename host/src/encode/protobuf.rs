//! Protobuf messages straight into a table's columns: each field of the decoded message
//! into the cell of the column of its name (see `format/protobuf.rs` for the types), with
//! fields the table lacks and misfits handled as for Avro (`avro.rs`).

use std::borrow::Cow;

use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage, Value,
};

use super::avro::{Misfit, column_name, out_of_range};
use super::cells::{Cell, ColumnKind};
use super::columns::Fill;
use super::encoder::RowExtra;
use super::infer::Inferred;
use super::nested::Shape;
use super::{EncodeError, Encoder};
use crate::format::protobuf::{decode, field_type};

impl Encoder {
    /// Reads one message into its row of cells.
    pub(super) fn parse_protobuf<'a>(
        &self,
        message: &MessageDescriptor,
        payload: &[u8],
        extra: &mut RowExtra<'a>,
    ) -> Result<Vec<Cell<'a>>, EncodeError> {
        let decoded = decode(message, payload).map_err(|e| EncodeError {
            code: e.code(),
            message: e.to_string(),
            field: None,
        })?;
        let mut cells = extra.row(self.columns.len());
        let mut failure = None;
        for field in message.fields() {
            let column = self.by_name.get(field.name()).copied();
            let Some(i) = column.filter(|&i| self.columns[i].fill == Fill::Field) else {
                if column.is_none() && failure.is_none() && decoded.has_field(&field) {
                    let name = Cow::Owned(field.name().to_string());
                    let ty = || field_type(&field, &mut || 0);
                    let infer = || ty().map_or(Inferred::Empty, Inferred::Type);
                    self.unknown(name, infer, extra, &mut failure);
                }
                continue;
            };
            if field.supports_presence() && !decoded.has_field(&field) {
                continue;
            }
            let shape = &self.columns[i].shape;
            match field_cell(&decoded.get_field(&field), &field, shape) {
                Ok(cell) => cells[i] = cell,
                Err(misfit) => {
                    let value = || field_type(&field, &mut || 0);
                    self.misfit(i, field.name(), misfit, value, extra, &mut failure);
                }
            }
        }
        self.complete(cells, failure, extra.unplanned.take())
    }
}

/// The cell of `field`'s `value` (a list, a map, or one value) in a column of `shape`.
fn field_cell(
    value: &Value,
    field: &FieldDescriptor,
    shape: &Shape,
) -> Result<Cell<'static>, Misfit> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return Err(Misfit::wrong("a map without its entry type", "map"));
        };
        let (key_kind, value_field) = (
            entry.map_entry_key_field().kind(),
            entry.map_entry_value_field(),
        );
        let (
            Value::Map(map),
            Shape::Map {
                key, value: shape, ..
            },
        ) = (value, shape)
        else {
            return Err(Misfit::wrong(
                &format!("a Protobuf map of {}", name(&key_kind)),
                &shape_name(shape),
            ));
        };
        // In key order: a map's entries have none of their own.
        let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let mut cells = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let k = map_key(k, *key)?;
            let v = single(v, &value_field.kind(), shape).map_err(|m| m.within("{}"))?;
            cells.push((k, v));
        }
        return Ok(Cell::Map(cells));
    }
    if field.is_list() {
        let (Value::List(items), Shape::List { shape, .. }) = (value, shape) else {
            return Err(Misfit::wrong(
                &format!("a repeated {}", name(&field.kind())),
                &shape_name(shape),
            ));
        };
        let kind = field.kind();
        let cells = items
            .iter()
            .map(|item| single(item, &kind, shape).map_err(|m| m.within("[]")))
            .collect::<Result<_, _>>()?;
        return Ok(Cell::List(cells));
    }
    single(value, &field.kind(), shape)
}

/// The cell of one value of `kind` in a column of `shape`.
fn single(value: &Value, kind: &Kind, shape: &Shape) -> Result<Cell<'static>, Misfit> {
    use ColumnKind as K;
    let leaf = match shape {
        Shape::Leaf(k) => *k,
        Shape::Struct { fields, shapes } => {
            let Value::Message(m) = value else {
                return Err(Misfit::wrong(
                    &format!("a Protobuf {}", name(kind)),
                    "struct",
                ));
            };
            return message_struct(m, fields, shapes);
        }
        _ => {
            return Err(Misfit::wrong(
                &format!("a Protobuf {}", name(kind)),
                &shape_name(shape),
            ));
        }
    };
    Ok(match (value, leaf) {
        (Value::Message(m), _) => return well_known(m, shape),
        (Value::Bool(v), K::Boolean) => Cell::Bool(*v),
        (Value::I32(v), K::Int) => Cell::Int(*v),
        (Value::I32(v), K::Long) => Cell::Long(i64::from(*v)),
        (Value::I32(v), K::Double) => Cell::Double(f64::from(*v)),
        (Value::I64(v), K::Long) => Cell::Long(*v),
        (Value::I64(v), K::Double) => Cell::Double(*v as f64),
        (Value::U32(v), K::Long) => Cell::Long(i64::from(*v)),
        (Value::U64(v), K::Long) => Cell::Long(i64::try_from(*v).map_err(|_| out_of_range(-1))?),
        (Value::F32(v), K::Float) => Cell::Float(*v),
        (Value::F32(v), K::Double) => Cell::Double(f64::from(*v)),
        (Value::F64(v), K::Double) => Cell::Double(*v),
        (Value::String(v), K::String) => Cell::Str(Cow::Owned(v.clone())),
        (Value::Bytes(v), K::Binary) => Cell::Bytes(Cow::Owned(v.to_vec())),
        (Value::EnumNumber(n), K::String) => {
            let symbol = match kind {
                Kind::Enum(e) => e.get_value(*n).map(|v| v.name().to_string()),
                _ => None,
            };
            Cell::Str(Cow::Owned(symbol.unwrap_or_else(|| n.to_string())))
        }
        _ => {
            return Err(Misfit::wrong(
                &format!("a Protobuf {}", name(kind)),
                &column_name(leaf),
            ));
        }
    })
}

/// A `Timestamp` or a wrapper in a primitive column.
fn well_known(m: &DynamicMessage, shape: &Shape) -> Result<Cell<'static>, Misfit> {
    let descriptor = m.descriptor();
    let field = |number| descriptor.get_field(number);
    match (descriptor.full_name(), shape) {
        (
            "google.protobuf.Timestamp",
            Shape::Leaf(ColumnKind::Timestamp | ColumnKind::Timestamptz),
        ) => {
            let seconds = field(1).and_then(|f| m.get_field(&f).as_i64()).unwrap_or(0);
            let nanos = field(2).and_then(|f| m.get_field(&f).as_i32()).unwrap_or(0);
            let micros = seconds
                .checked_mul(1_000_000)
                .and_then(|s| s.checked_add(i64::from(nanos / 1000)))
                .ok_or_else(|| out_of_range(seconds))?;
            Ok(Cell::Micros(micros))
        }
        (name, _) if name.starts_with("google.protobuf.") && name.ends_with("Value") => {
            let Some(inner) = field(1) else {
                return Err(Misfit::wrong(name, &shape_name(shape)));
            };
            single(&m.get_field(&inner), &inner.kind(), shape)
        }
        (name, _) => Err(Misfit::wrong(&format!("a {name}"), &shape_name(shape))),
    }
}

/// A message in a struct column, field by field.
fn message_struct(
    m: &DynamicMessage,
    fields: &arrow_schema::Fields,
    shapes: &[Shape],
) -> Result<Cell<'static>, Misfit> {
    let descriptor = m.descriptor();
    for f in descriptor.fields() {
        if m.has_field(&f) && !fields.iter().any(|a| a.name() == f.name()) {
            return Err(Misfit::Type {
                code: "unknown_field",
                message: format!("the struct has no field `{}`", f.name()),
                path: format!(".{}", f.name()),
            });
        }
    }
    let mut cells = Vec::with_capacity(shapes.len());
    for (arrow, shape) in fields.iter().zip(shapes) {
        let cell = match descriptor.get_field_by_name(arrow.name()) {
            Some(f) if !f.supports_presence() || m.has_field(&f) => {
                field_cell(&m.get_field(&f), &f, shape)
                    .map_err(|e| e.within(&format!(".{}", f.name())))?
            }
            _ => Cell::Null,
        };
        cells.push(cell);
    }
    Ok(Cell::Struct(cells))
}

/// A map key in a key column of `kind`.
fn map_key(key: &MapKey, kind: ColumnKind) -> Result<Cell<'static>, Misfit> {
    Ok(match (key, kind) {
        (MapKey::String(s), ColumnKind::String) => Cell::Str(Cow::Owned(s.clone())),
        (MapKey::I32(v), ColumnKind::Int) => Cell::Int(*v),
        (MapKey::I32(v), ColumnKind::Long) => Cell::Long(i64::from(*v)),
        (MapKey::I64(v), ColumnKind::Long) => Cell::Long(*v),
        (MapKey::U32(v), ColumnKind::Long) => Cell::Long(i64::from(*v)),
        (MapKey::U64(v), ColumnKind::Long) => {
            Cell::Long(i64::try_from(*v).map_err(|_| out_of_range(-1))?)
        }
        (MapKey::Bool(v), ColumnKind::Boolean) => Cell::Bool(*v),
        (key, kind) => {
            return Err(Misfit::wrong(
                &format!("a map key {key:?}"),
                &column_name(kind),
            ));
        }
    })
}

fn name(kind: &Kind) -> String {
    match kind {
        Kind::Message(m) => m.full_name().to_string(),
        Kind::Enum(e) => e.full_name().to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

fn shape_name(shape: &Shape) -> String {
    match shape {
        Shape::Leaf(kind) => column_name(*kind),
        Shape::Struct { .. } => "struct column".into(),
        Shape::List { .. } => "list column".into(),
        Shape::Map { .. } => "map column".into(),
    }
}
