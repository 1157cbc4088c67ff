//! Avro datums (and, through `protobuf.rs`, Protobuf messages) straight into a table's
//! columns: each field of the writer's record is read
//! in place (`format::read`) into the cell of the column of its name, with no JSON in
//! between. A field the table lacks, or a value its column cannot hold, is handled as the
//! JSON path handles it (`[sink] unknown-fields`): dropped and counted, a dead letter, or,
//! with `add`, the schema change it asks for (a new column of the field's Avro type, an
//! `int` column widened to `long`, a struct column that gains fields), planned from the
//! writer schema rather than inferred from a value.

use std::borrow::Cow;

use apache_avro::Schema;
use apache_avro::schema::SchemaKind;
use iceberg::spec::{PrimitiveType, Type};

use super::cells::{Cell, ColumnKind};
use super::columns::Fill;
use super::encoder::RowExtra;
use super::infer::{self, Inferred};
use super::nested::Shape;
use super::{EncodeError, Encoded, Encoder, SchemaError, UnknownFields};
use crate::format::read::{ReadError, Reader};
use crate::format::{FormatError, Framed, Writer, iceberg::field_type};

/// Why a value did not become a cell.
pub(super) enum Misfit {
    /// The datum is broken: the rest of it cannot be read.
    Read(ReadError),
    /// The value's type does not fit its column; `path` leads to it inside the column.
    Type {
        code: &'static str,
        message: String,
        path: String,
    },
}

impl From<ReadError> for Misfit {
    fn from(e: ReadError) -> Self {
        Misfit::Read(e)
    }
}

impl Misfit {
    fn mismatch(schema: &Schema, want: &str) -> Misfit {
        Misfit::wrong(&format!("an Avro {}", kind(schema)), want)
    }

    /// `what` does not fit a `want` column.
    pub(super) fn wrong(what: &str, want: &str) -> Misfit {
        Misfit::Type {
            code: "type_mismatch",
            message: format!("{what} cannot fill a {want}"),
            path: String::new(),
        }
    }

    /// The misfit, inside `segment` (`.name`, `[]`, `{}`).
    pub(super) fn within(self, segment: &str) -> Misfit {
        match self {
            Misfit::Type {
                code,
                message,
                path,
            } => Misfit::Type {
                code,
                message,
                path: format!("{segment}{path}"),
            },
            read => read,
        }
    }
}

fn kind(schema: &Schema) -> String {
    format!("{:?}", SchemaKind::from(schema)).to_lowercase()
}

pub(super) fn undecodable(e: ReadError) -> EncodeError {
    let e = FormatError::from(e);
    EncodeError {
        code: e.code(),
        message: e.to_string(),
        field: None,
    }
}

impl Encoder {
    /// Encodes Avro datums, each with its writer schema (or why it has none, which makes
    /// it a dead letter); `ingestion_micros` fills the host's timestamp columns.
    pub fn encode_avro<'a>(
        &self,
        values: impl IntoIterator<Item = Result<(&'a Writer, &'a [u8]), FormatError>>,
        ingestion_micros: i64,
    ) -> Result<Encoded, SchemaError> {
        let framed = values
            .into_iter()
            .map(|v| v.map(|(writer, payload)| Framed::Avro(writer, payload)));
        self.encode_framed(framed, ingestion_micros)
    }

    /// Encodes Avro datums and Protobuf messages, each with its writer schema (or why it
    /// has none, which makes it a dead letter); `ingestion_micros` fills the host's
    /// timestamp columns.
    pub fn encode_framed<'a>(
        &self,
        values: impl IntoIterator<Item = Result<Framed<'a, 'a>, FormatError>>,
        ingestion_micros: i64,
    ) -> Result<Encoded, SchemaError> {
        self.encode_rows(values, ingestion_micros, |value, extra| match value {
            Ok(Framed::Avro(writer, payload)) => self.parse_avro(writer, payload, extra),
            Ok(Framed::Protobuf(message, payload)) => self.parse_protobuf(&message, payload, extra),
            Err(e) => Err(EncodeError {
                code: e.code(),
                message: e.to_string(),
                field: None,
            }),
        })
    }

    /// Reads one datum into its row of cells.
    fn parse_avro<'a>(
        &self,
        writer: &'a Writer,
        payload: &'a [u8],
        extra: &mut RowExtra<'a>,
    ) -> Result<Vec<Cell<'a>>, EncodeError> {
        let Schema::Record(record) = writer.resolve(writer.schema()).map_err(undecodable)? else {
            return Err(EncodeError {
                code: "not_an_object",
                message: format!(
                    "the writer schema is an Avro {}, not a record",
                    kind(writer.schema())
                ),
                field: None,
            });
        };
        let mut r = Reader::new(payload);
        let mut cells = extra.row(self.columns.len());
        let mut failure = None;
        for field in &record.fields {
            let column = self.by_name.get(field.name.as_str()).copied();
            let Some(i) = column.filter(|&i| self.columns[i].fill == Fill::Field) else {
                r.skip(&field.schema, writer).map_err(undecodable)?;
                if column.is_none() && failure.is_none() {
                    let ty = || field_type(&field.schema, writer, &mut || 0);
                    let name = Cow::Borrowed(field.name.as_str());
                    let infer = || ty().map_or(Inferred::Empty, Inferred::Type);
                    self.unknown(name, infer, extra, &mut failure);
                }
                continue;
            };
            let start = r;
            match read_cell(&mut r, &field.schema, &self.columns[i].shape, writer) {
                Ok(cell) => cells[i] = cell,
                Err(Misfit::Read(e)) => return Err(undecodable(e)),
                Err(misfit) => {
                    r = start;
                    r.skip(&field.schema, writer).map_err(undecodable)?;
                    let value = || field_type(&field.schema, writer, &mut || 0);
                    self.misfit(i, &field.name, misfit, value, extra, &mut failure);
                }
            }
        }
        if !r.rest().is_empty() {
            return Err(undecodable(ReadError(format!(
                "{} bytes follow the datum",
                r.rest().len()
            ))));
        }
        self.complete(cells, failure, extra.unplanned.take())
    }

    /// A value of field `name` that does not fit column `i`: with `unknown-fields =
    /// "add"`, the column's growth to the writer's type `value` is asked for; otherwise
    /// it is the row's failure (unless an earlier field failed).
    pub(super) fn misfit(
        &self,
        i: usize,
        name: &str,
        misfit: Misfit,
        value: impl FnOnce() -> Result<Type, String>,
        extra: &mut RowExtra<'_>,
        failure: &mut Option<EncodeError>,
    ) {
        let (code, message, path) = match misfit {
            Misfit::Type {
                code,
                message,
                path,
            } => (code, message, path),
            Misfit::Read(e) => ("undecodable", e.0, String::new()),
        };
        if failure.is_none() && !self.widen(i, value(), extra) {
            *failure = Some(EncodeError {
                code,
                message,
                field: Some(format!("{name}{path}")),
            });
        }
    }

    /// With `unknown-fields = "add"`, asks for column `i` to grow to hold values of the
    /// writer's type `value` (a wider primitive, a struct with more fields); whether it
    /// did.
    fn widen(&self, i: usize, value: Result<Type, String>, extra: &mut RowExtra<'_>) -> bool {
        if self.unknown != UnknownFields::Add || self.evolving.frozen {
            return false;
        }
        let Ok(value) = value else {
            return false;
        };
        let column = &self.schema.as_struct().fields()[i];
        let grown = infer::grow(&column.field_type, &value);
        if grown == *column.field_type {
            return false;
        }
        match grown {
            Type::Primitive(p) => extra.wanted.promote(column.name.clone(), p),
            ty => extra.wanted.grow(column.name.clone(), ty),
        }
        true
    }
}

/// Reads one value of Avro type `schema` into a cell of `shape`.
fn read_cell<'a>(
    r: &mut Reader<'a>,
    schema: &'a Schema,
    shape: &Shape,
    writer: &'a Writer,
) -> Result<Cell<'a>, Misfit> {
    let schema = writer.resolve(schema)?;
    match (schema, shape) {
        (Schema::Null, _) => Ok(Cell::Null),
        (Schema::Union(u), _) => {
            let branch = r.branch(u.variants())?;
            read_cell(r, branch, shape, writer)
        }
        (_, Shape::Leaf(kind)) => leaf(r, schema, *kind, writer),
        (Schema::Record(record), Shape::Struct { fields, shapes }) => {
            let mut cells = vec![Cell::Null; shapes.len()];
            for f in &record.fields {
                let Some(j) = fields.iter().position(|a| a.name() == &f.name) else {
                    return Err(Misfit::Type {
                        code: "unknown_field",
                        message: format!("the struct has no field `{}`", f.name),
                        path: format!(".{}", f.name),
                    });
                };
                cells[j] = read_cell(r, &f.schema, &shapes[j], writer)
                    .map_err(|m| m.within(&format!(".{}", f.name)))?;
            }
            Ok(Cell::Struct(cells))
        }
        (Schema::Array(a), Shape::List { shape, .. }) => list_cell(r, &a.items, shape, writer),
        (
            Schema::Map(m),
            Shape::Map {
                key: ColumnKind::String,
                value,
                ..
            },
        ) => map_cell(r, &m.types, value, writer),
        (_, Shape::Struct { .. }) => Err(Misfit::mismatch(schema, "struct")),
        (_, Shape::List { .. }) => Err(Misfit::mismatch(schema, "list")),
        (_, Shape::Map { .. }) => Err(Misfit::mismatch(schema, "map with string keys")),
    }
}

/// Reads an array of `items` into a list cell of elements of `shape`.
fn list_cell<'a>(
    r: &mut Reader<'a>,
    items: &'a Schema,
    shape: &Shape,
    writer: &'a Writer,
) -> Result<Cell<'a>, Misfit> {
    let mut cells = Vec::new();
    loop {
        let n = r.block()?;
        if n == 0 {
            return Ok(Cell::List(cells));
        }
        cells.reserve(n);
        for _ in 0..n {
            cells.push(read_cell(r, items, shape, writer).map_err(|m| m.within("[]"))?);
        }
    }
}

/// Reads a map of `values` into a map cell of string keys and values of `shape`.
fn map_cell<'a>(
    r: &mut Reader<'a>,
    values: &'a Schema,
    shape: &Shape,
    writer: &'a Writer,
) -> Result<Cell<'a>, Misfit> {
    let mut entries = Vec::new();
    loop {
        let n = r.block()?;
        if n == 0 {
            return Ok(Cell::Map(entries));
        }
        for _ in 0..n {
            let key = Cell::Str(Cow::Borrowed(r.string()?));
            let value = read_cell(r, values, shape, writer).map_err(|m| m.within("{}"))?;
            entries.push((key, value));
        }
    }
}

/// Reads one primitive value into a cell of `kind`.
fn leaf<'a>(
    r: &mut Reader<'a>,
    schema: &'a Schema,
    kind: ColumnKind,
    writer: &'a Writer,
) -> Result<Cell<'a>, Misfit> {
    use ColumnKind as K;
    Ok(match (schema, kind) {
        (Schema::Boolean, K::Boolean) => Cell::Bool(r.boolean()?),
        (Schema::Int, K::Int) => Cell::Int(r.int()?),
        (Schema::Int | Schema::Long, K::Long) => Cell::Long(r.long()?),
        (Schema::Int | Schema::Long, K::Double) => Cell::Double(r.long()? as f64),
        (Schema::Float, K::Float) => Cell::Float(r.float()?),
        (Schema::Float, K::Double) => Cell::Double(f64::from(r.float()?)),
        (Schema::Double, K::Double) => Cell::Double(r.double()?),
        (Schema::String | Schema::Uuid, K::String) => Cell::Str(Cow::Borrowed(r.string()?)),
        (Schema::Bytes, K::Binary) => Cell::Bytes(Cow::Borrowed(r.bytes()?)),
        (Schema::Fixed(f), K::Binary) => Cell::Bytes(Cow::Borrowed(r.take(f.size)?)),
        (Schema::Enum(e), K::String) => Cell::Str(Cow::Borrowed(r.symbol(e)?)),
        (Schema::Date, K::Date) => Cell::Date(r.int()?),
        (Schema::TimestampMillis | Schema::LocalTimestampMillis, K::Timestamp | K::Timestamptz) => {
            let v = r.long()?;
            Cell::Micros(v.checked_mul(1000).ok_or_else(|| out_of_range(v))?)
        }
        (Schema::TimestampMicros | Schema::LocalTimestampMicros, K::Timestamp | K::Timestamptz) => {
            Cell::Micros(r.long()?)
        }
        (Schema::TimestampNanos | Schema::LocalTimestampNanos, K::Timestamp | K::Timestamptz) => {
            Cell::Micros(r.long()?.div_euclid(1000))
        }
        (Schema::Decimal(d), K::Decimal { precision, scale }) => {
            decimal(r.decimal(d, writer)?, d.scale as u32, precision, scale)?
        }
        _ => return Err(Misfit::mismatch(schema, &column_name(kind))),
    })
}

pub(super) fn out_of_range(v: i64) -> Misfit {
    Misfit::Type {
        code: "out_of_range",
        message: format!("timestamp {v} is out of range"),
        path: String::new(),
    }
}

/// An unscaled decimal of scale `from` as one of `precision` and `scale`, exactly.
fn decimal(value: i128, from: u32, precision: u32, scale: u32) -> Result<Cell<'static>, Misfit> {
    let refuse = |message: String| Misfit::Type {
        code: "invalid_decimal",
        message,
        path: String::new(),
    };
    let scaled = if from <= scale {
        10i128
            .checked_pow(scale - from)
            .and_then(|f| value.checked_mul(f))
    } else {
        None
    };
    let scaled = scaled.ok_or_else(|| {
        refuse(format!(
            "a decimal of scale {from} does not fit decimal({precision}, {scale}) exactly"
        ))
    })?;
    let digits = scaled.unsigned_abs().checked_ilog10().map_or(1, |d| d + 1);
    if digits > precision {
        return Err(refuse(format!(
            "{} has more than {precision} digits",
            crate::decimal::format_decimal(scaled, scale)
        )));
    }
    Ok(Cell::Decimal(scaled))
}

pub(super) fn column_name(kind: ColumnKind) -> String {
    let p = match kind {
        ColumnKind::Boolean => PrimitiveType::Boolean,
        ColumnKind::Int => PrimitiveType::Int,
        ColumnKind::Long => PrimitiveType::Long,
        ColumnKind::Float => PrimitiveType::Float,
        ColumnKind::Double => PrimitiveType::Double,
        ColumnKind::Decimal { precision, scale } => PrimitiveType::Decimal { precision, scale },
        ColumnKind::Date => PrimitiveType::Date,
        ColumnKind::Timestamp => PrimitiveType::Timestamp,
        ColumnKind::Timestamptz => PrimitiveType::Timestamptz,
        ColumnKind::String => PrimitiveType::String,
        ColumnKind::Binary => PrimitiveType::Binary,
    };
    format!("{p} column")
}
