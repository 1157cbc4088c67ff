//! Nested columns: `struct<...>`, `list<...>` and `map<...>`, to any depth.
//!
//! A JSON object fills a struct (by field name), an array a list, an object a map (its keys
//! converted to the key type). Primitives inside convert as top-level cells do
//! ([`cells::cell`]). A missing field or a JSON `null` is null; a field the struct lacks
//! (unless it is null, which holds nothing), a value that does not fit, or a null where the type requires a value makes the event an
//! error whose path points into the column: `.name` for a struct field, `[i]` for a list
//! element (from 0), `["key"]` for a map entry (the key as a JSON string), so the
//! dead-letter's field reads `items[3].qty`, `context.os` or `utm["k"]`.
//!
//! The Arrow arrays are assembled from their children's (struct, list and map arrays over
//! the builders of `columns.rs`), with the fields of the table's Arrow schema, so every
//! nested field, list element and map key and value keeps its Iceberg field id.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use arrow_array::builder::{NullBufferBuilder, OffsetBufferBuilder};
use arrow_array::{ArrayRef, ListArray, MapArray, StructArray};
use arrow_schema::{ArrowError, DataType, FieldRef, Fields};
use iceberg::spec::{NestedFieldRef, Type};
use rustc_hash::FxHashMap;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::SchemaError;
use super::cells::{self, Cell, CellError, ColumnKind, mismatch};
use super::columns::{Column, ColumnBuilder, Fill};

/// What a column holds: a primitive, or a nested type with the Arrow fields it is built
/// with (their names, nullability and field ids).
#[derive(Debug, Clone)]
pub(super) enum Shape {
    Leaf(ColumnKind),
    Struct {
        fields: Fields,
        shapes: Vec<Shape>,
    },
    List {
        element: FieldRef,
        shape: Box<Shape>,
    },
    Map {
        /// The `key_value` field of the Arrow map type.
        entries: FieldRef,
        /// Its `key` and `value` fields.
        pairs: Fields,
        key: ColumnKind,
        value: Box<Shape>,
    },
}

impl Shape {
    /// The shape of Iceberg type `ty`, whose Arrow type is `arrow`; `None` if a primitive
    /// inside is one sluice does not fill from JSON.
    fn of(ty: &Type, arrow: &DataType) -> Option<Shape> {
        Some(match (ty, arrow) {
            (Type::Primitive(p), _) => Shape::Leaf(ColumnKind::of(p)?),
            (Type::Struct(s), DataType::Struct(fields)) => Shape::Struct {
                fields: fields.clone(),
                shapes: s
                    .fields()
                    .iter()
                    .zip(fields.iter())
                    .map(|(f, a)| Shape::of(&f.field_type, a.data_type()))
                    .collect::<Option<_>>()?,
            },
            (Type::List(l), DataType::List(element)) => Shape::List {
                element: element.clone(),
                shape: Box::new(Shape::of(&l.element_field.field_type, element.data_type())?),
            },
            (Type::Map(m), DataType::Map(entries, _)) => {
                let DataType::Struct(pairs) = entries.data_type() else {
                    return None;
                };
                let (Type::Primitive(key), [_, value]) = (&*m.key_field.field_type, &pairs[..])
                else {
                    return None;
                };
                Shape::Map {
                    entries: entries.clone(),
                    pairs: pairs.clone(),
                    key: ColumnKind::of(key)?,
                    value: Box::new(Shape::of(&m.value_field.field_type, value.data_type())?),
                }
            }
            _ => return None,
        })
    }
}

/// The column of a struct, list or map table field.
pub(super) fn column(field: &NestedFieldRef, generated: &[String]) -> Result<Column, SchemaError> {
    if generated.contains(&field.name) {
        return Err(SchemaError::GeneratedType(field.name.clone()));
    }
    let arrow = iceberg::arrow::type_to_arrow_type(&field.field_type)
        .map_err(|e| SchemaError::Arrow(Box::new(e)))?;
    let shape = Shape::of(&field.field_type, &arrow).ok_or_else(|| SchemaError::Unsupported {
        column: field.name.clone(),
        ty: field.field_type.to_string(),
    })?;
    Ok(Column {
        name: field.name.clone(),
        shape,
        required: field.required,
        fill: Fill::Field,
    })
}

/// Why a nested value does not fit, and where inside the column (`[3].qty`).
#[derive(Debug)]
pub(super) struct NestedError {
    pub(super) code: &'static str,
    pub(super) message: String,
    pub(super) path: String,
}

impl NestedError {
    fn new((code, message): CellError) -> Self {
        NestedError {
            code,
            message,
            path: String::new(),
        }
    }

    /// The error, one step further from the column.
    fn under(mut self, step: impl fmt::Display) -> Self {
        self.path.insert_str(0, &step.to_string());
        self
    }
}

/// A null where the type requires a value.
fn missing(what: &str) -> NestedError {
    NestedError::new(("missing_required", format!("{what} may not be null")))
}

/// Converts raw JSON value `raw` to a cell of the nested `shape`.
pub(super) fn cell<'a>(shape: &Shape, raw: &'a str) -> Result<Cell<'a>, NestedError> {
    if raw == "null" {
        return Ok(Cell::Null);
    }
    match shape {
        Shape::Leaf(kind) => cells::cell(*kind, raw).map_err(NestedError::new),
        Shape::Struct { fields, shapes } => struct_cell(fields, shapes, raw),
        Shape::List { element, shape } => list_cell(element, shape, raw),
        Shape::Map {
            pairs, key, value, ..
        } => map_cell(!pairs[1].is_nullable(), *key, value, raw),
    }
}

fn struct_cell<'a>(
    fields: &Fields,
    shapes: &[Shape],
    raw: &'a str,
) -> Result<Cell<'a>, NestedError> {
    if !raw.starts_with('{') {
        return Err(NestedError::new(mismatch("an object", raw)));
    }
    let mut cells = vec![Cell::Null; fields.len()];
    for (name, value) in entries(raw)? {
        let Some(i) = fields.iter().position(|f| f.name() == &*name) else {
            if value.get() == "null" {
                continue; // nothing to keep
            }
            let message = format!("the struct has no field `{name}` (add it to the column's type)");
            return Err(NestedError::new(("unknown_field", message)).under(format!(".{name}")));
        };
        cells[i] = cell(&shapes[i], value.get()).map_err(|e| e.under(format!(".{name}")))?;
    }
    for (field, cell) in fields.iter().zip(&cells) {
        if !field.is_nullable() && *cell == Cell::Null {
            let what = format!("required field `{}`", field.name());
            return Err(missing(&what).under(format!(".{}", field.name())));
        }
    }
    Ok(Cell::Struct(cells))
}

fn list_cell<'a>(element: &FieldRef, shape: &Shape, raw: &'a str) -> Result<Cell<'a>, NestedError> {
    if !raw.starts_with('[') {
        return Err(NestedError::new(mismatch("an array", raw)));
    }
    let items: Vec<&'a RawValue> = serde_json::from_str(raw).map_err(malformed)?;
    let mut cells = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let cell = cell(shape, item.get()).map_err(|e| e.under(format!("[{i}]")))?;
        if !element.is_nullable() && cell == Cell::Null {
            return Err(missing("an element of this list").under(format!("[{i}]")));
        }
        cells.push(cell);
    }
    Ok(Cell::List(cells))
}

fn map_cell<'a>(
    value_required: bool,
    key_kind: ColumnKind,
    shape: &Shape,
    raw: &'a str,
) -> Result<Cell<'a>, NestedError> {
    if !raw.starts_with('{') {
        return Err(NestedError::new(mismatch("an object", raw)));
    }
    let mut entries = entries(raw)?;
    dedup_keys(&mut entries);
    let mut cells = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        let step = || format!("[{}]", serde_json::Value::String(name.to_string()));
        let value = cell(shape, value.get()).map_err(|e| e.under(step()))?;
        if value_required && value == Cell::Null {
            return Err(missing("a value of this map").under(step()));
        }
        let key =
            key_cell(key_kind, name.clone()).map_err(|e| NestedError::new(e).under(step()))?;
        cells.push((key, value));
    }
    Ok(Cell::Map(cells))
}

/// Keeps the last of entries with the same key, as a JSON object's value is its last.
fn dedup_keys(entries: &mut Vec<(Cow<'_, str>, &RawValue)>) {
    if entries.len() < 2 {
        return;
    }
    let mut last: FxHashMap<&str, usize> = FxHashMap::default();
    for (i, (name, _)) in entries.iter().enumerate() {
        last.insert(&**name, i);
    }
    if last.len() == entries.len() {
        return;
    }
    let keep: Vec<bool> = (0..entries.len())
        .map(|i| last[&*entries[i].0] == i)
        .collect();
    let mut i = 0;
    entries.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

/// A map key (an object's key) as a cell of the key's kind: a string as it is, a number or
/// boolean from its text, a date, timestamp or decimal from the text as a string.
fn key_cell<'a>(kind: ColumnKind, name: Cow<'a, str>) -> Result<Cell<'a>, CellError> {
    let bare = match kind {
        ColumnKind::String => return Ok(Cell::Str(name)),
        ColumnKind::Boolean => name == "true" || name == "false",
        ColumnKind::Int | ColumnKind::Long | ColumnKind::Float | ColumnKind::Double => name
            .as_bytes()
            .first()
            .is_some_and(|b| *b == b'-' || b.is_ascii_digit()),
        _ => false,
    };
    let text = if bare {
        name.into_owned()
    } else {
        serde_json::Value::String(name.into_owned()).to_string()
    };
    cells::cell(kind, &text).map(Cell::into_owned)
}

fn malformed(e: serde_json::Error) -> NestedError {
    NestedError::new((
        "malformed_json",
        format!("the value is not valid JSON: {e}"),
    ))
}

/// An object's entries, in order: each key (borrowed unless it had escapes) and raw value.
fn entries(raw: &str) -> Result<Vec<(Cow<'_, str>, &RawValue)>, NestedError> {
    serde_json::from_str::<Entries>(raw)
        .map(|e| e.0)
        .map_err(malformed)
}

struct Entries<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EntriesVisitor)
    }
}

struct EntriesVisitor;

impl<'de> Visitor<'de> for EntriesVisitor {
    type Value = Entries<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
        let mut entries = Vec::new();
        while let Some((Key(name), value)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
            entries.push((name, value));
        }
        Ok(Entries(entries))
    }
}

/// An object key, borrowed from the event when it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_string())))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v)))
    }
}

/// The Arrow builder of a nested column: its children's builders, its offsets (a list's
/// or map's) and its validity.
pub(super) enum NestedBuilder {
    Struct {
        fields: Fields,
        children: Vec<ColumnBuilder>,
        nulls: NullBufferBuilder,
    },
    List {
        element: FieldRef,
        offsets: OffsetBufferBuilder<i32>,
        values: ColumnBuilder,
        nulls: NullBufferBuilder,
    },
    Map {
        entries: FieldRef,
        pairs: Fields,
        offsets: OffsetBufferBuilder<i32>,
        keys: ColumnBuilder,
        values: ColumnBuilder,
        nulls: NullBufferBuilder,
    },
}

impl NestedBuilder {
    pub(super) fn structure(fields: &Fields, shapes: &[Shape], n: usize) -> Self {
        NestedBuilder::Struct {
            fields: fields.clone(),
            children: shapes.iter().map(|s| ColumnBuilder::new(s, n)).collect(),
            nulls: NullBufferBuilder::new(n),
        }
    }

    pub(super) fn list(element: &FieldRef, shape: &Shape, n: usize) -> Self {
        NestedBuilder::List {
            element: element.clone(),
            offsets: OffsetBufferBuilder::new(n),
            values: ColumnBuilder::new(shape, n),
            nulls: NullBufferBuilder::new(n),
        }
    }

    pub(super) fn map(
        entries: &FieldRef,
        pairs: &Fields,
        key: ColumnKind,
        value: &Shape,
        n: usize,
    ) -> Self {
        NestedBuilder::Map {
            entries: entries.clone(),
            pairs: pairs.clone(),
            offsets: OffsetBufferBuilder::new(n),
            keys: ColumnBuilder::new(&Shape::Leaf(key), n),
            values: ColumnBuilder::new(value, n),
            nulls: NullBufferBuilder::new(n),
        }
    }

    /// Appends one value; a null (or, by a bug, a cell of another shape) appends a null.
    pub(super) fn append(&mut self, cell: &Cell<'_>) {
        match (self, cell) {
            (
                Self::Struct {
                    children, nulls, ..
                },
                Cell::Struct(cells),
            ) => {
                for (child, cell) in children.iter_mut().zip(cells) {
                    child.append(cell);
                }
                nulls.append_non_null();
            }
            (
                Self::Struct {
                    children, nulls, ..
                },
                _,
            ) => {
                // A null struct still has a slot in each child (arrays of one length).
                for child in children {
                    child.append(&Cell::Null);
                }
                nulls.append_null();
            }
            (
                Self::List {
                    offsets,
                    values,
                    nulls,
                    ..
                },
                Cell::List(cells),
            ) => {
                offsets.push_length(cells.len());
                for cell in cells {
                    values.append(cell);
                }
                nulls.append_non_null();
            }
            (
                Self::Map {
                    offsets,
                    keys,
                    values,
                    nulls,
                    ..
                },
                Cell::Map(cells),
            ) => {
                offsets.push_length(cells.len());
                for (key, value) in cells {
                    keys.append(key);
                    values.append(value);
                }
                nulls.append_non_null();
            }
            (Self::List { offsets, nulls, .. } | Self::Map { offsets, nulls, .. }, _) => {
                offsets.push_length(0);
                nulls.append_null();
            }
        }
    }

    pub(super) fn finish(self) -> Result<ArrayRef, ArrowError> {
        Ok(match self {
            Self::Struct {
                fields,
                children,
                mut nulls,
            } => {
                let arrays = children
                    .into_iter()
                    .map(ColumnBuilder::finish)
                    .collect::<Result<Vec<_>, _>>()?;
                Arc::new(StructArray::try_new(fields, arrays, nulls.finish())?)
            }
            Self::List {
                element,
                offsets,
                values,
                mut nulls,
            } => Arc::new(ListArray::try_new(
                element,
                offsets.finish(),
                values.finish()?,
                nulls.finish(),
            )?),
            Self::Map {
                entries,
                pairs,
                offsets,
                keys,
                values,
                mut nulls,
            } => {
                let pairs =
                    StructArray::try_new(pairs, vec![keys.finish()?, values.finish()?], None)?;
                Arc::new(MapArray::try_new(
                    entries,
                    offsets.finish(),
                    pairs,
                    nulls.finish(),
                    false,
                )?)
            }
        })
    }
}
