//! The columns of a table as the encoder sees them: what kind of value each holds, what
//! fills it (a JSON field or the host), and the Arrow builder that collects its cells.

use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder, Int32Builder,
    Int64Builder, LargeBinaryBuilder, StringBuilder, TimestampMicrosecondBuilder,
};

use super::EncodeError;
pub(super) use super::cells::ColumnKind;
use super::cells::{Cell, cell};
use super::nested::{self, NestedBuilder, Shape};

/// What fills a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fill {
    /// The JSON field.
    Field,
    /// The time the batch was processed.
    IngestionTime,
}

/// One column of the table: its name, shape (a primitive kind, or a nested type), whether
/// it is required, and what fills it.
#[derive(Debug, Clone)]
pub(super) struct Column {
    pub(super) name: String,
    pub(super) shape: Shape,
    pub(super) required: bool,
    pub(super) fill: Fill,
}

impl Column {
    /// Converts the raw JSON value of the column's field into its cell; a misfit names the
    /// column, and for a nested one the path inside it (`items[3].qty`).
    #[inline]
    pub(super) fn cell<'a>(&self, raw: &'a str) -> Result<Cell<'a>, EncodeError> {
        match &self.shape {
            Shape::Leaf(kind) => cell(*kind, raw).map_err(|(code, message)| EncodeError {
                code,
                message,
                field: Some(self.name.clone()),
            }),
            shape => nested::cell(shape, raw).map_err(|e| EncodeError {
                code: e.code,
                message: e.message,
                field: Some(format!("{}{}", self.name, e.path)),
            }),
        }
    }
}

/// The Arrow builder of one column.
pub(super) enum ColumnBuilder {
    Boolean(BooleanBuilder),
    Int(Int32Builder),
    Long(Int64Builder),
    Float(Float32Builder),
    Double(Float64Builder),
    Decimal(Decimal128Builder, u8, i8),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder, bool),
    String(StringBuilder),
    Binary(LargeBinaryBuilder),
    /// A struct, list or map column (or one nested in another).
    Nested(Box<NestedBuilder>),
}

impl ColumnBuilder {
    /// A builder for `n` cells of `shape`.
    pub(super) fn new(shape: &Shape, n: usize) -> Self {
        match shape {
            Shape::Leaf(kind) => Self::leaf(*kind, n),
            Shape::Struct { fields, shapes } => {
                Self::Nested(Box::new(NestedBuilder::structure(fields, shapes, n)))
            }
            Shape::List { element, shape } => {
                Self::Nested(Box::new(NestedBuilder::list(element, shape, n)))
            }
            Shape::Map {
                entries,
                pairs,
                key,
                value,
            } => Self::Nested(Box::new(NestedBuilder::map(entries, pairs, *key, value, n))),
        }
    }

    fn leaf(kind: ColumnKind, n: usize) -> Self {
        match kind {
            ColumnKind::Boolean => Self::Boolean(BooleanBuilder::with_capacity(n)),
            ColumnKind::Int => Self::Int(Int32Builder::with_capacity(n)),
            ColumnKind::Long => Self::Long(Int64Builder::with_capacity(n)),
            ColumnKind::Float => Self::Float(Float32Builder::with_capacity(n)),
            ColumnKind::Double => Self::Double(Float64Builder::with_capacity(n)),
            ColumnKind::Decimal { precision, scale } => Self::Decimal(
                Decimal128Builder::with_capacity(n),
                precision as u8,
                scale as i8,
            ),
            ColumnKind::Date => Self::Date(Date32Builder::with_capacity(n)),
            ColumnKind::Timestamp => {
                Self::Timestamp(TimestampMicrosecondBuilder::with_capacity(n), false)
            }
            ColumnKind::Timestamptz => {
                Self::Timestamp(TimestampMicrosecondBuilder::with_capacity(n), true)
            }
            ColumnKind::String => Self::String(StringBuilder::with_capacity(n, n * 16)),
            ColumnKind::Binary => Self::Binary(LargeBinaryBuilder::with_capacity(n, n * 16)),
        }
    }

    /// Appends `cell` (borrowed: a row's cells are read where they lie, not moved out).
    pub(super) fn append(&mut self, cell: &Cell<'_>) {
        match (self, cell) {
            (Self::Boolean(b), Cell::Bool(v)) => b.append_value(*v),
            (Self::Int(b), Cell::Int(v)) => b.append_value(*v),
            (Self::Long(b), Cell::Long(v)) => b.append_value(*v),
            (Self::Float(b), Cell::Float(v)) => b.append_value(*v),
            (Self::Double(b), Cell::Double(v)) => b.append_value(*v),
            (Self::Decimal(b, ..), Cell::Decimal(v)) => b.append_value(*v),
            (Self::Date(b), Cell::Date(v)) => b.append_value(*v),
            (Self::Timestamp(b, _), Cell::Micros(v)) => b.append_value(*v),
            (Self::String(b), Cell::Str(v)) => b.append_value(&**v),
            (Self::Binary(b), Cell::Bytes(v)) => b.append_value(&**v),
            (Self::Nested(b), cell) => b.append(cell),
            (this, _) => this.append_null(),
        }
    }

    fn append_null(&mut self) {
        match self {
            Self::Boolean(b) => b.append_null(),
            Self::Int(b) => b.append_null(),
            Self::Long(b) => b.append_null(),
            Self::Float(b) => b.append_null(),
            Self::Double(b) => b.append_null(),
            Self::Decimal(b, ..) => b.append_null(),
            Self::Date(b) => b.append_null(),
            Self::Timestamp(b, _) => b.append_null(),
            Self::String(b) => b.append_null(),
            Self::Binary(b) => b.append_null(),
            Self::Nested(b) => b.append(&Cell::Null),
        }
    }

    pub(super) fn finish(self) -> Result<ArrayRef, arrow_schema::ArrowError> {
        Ok(match self {
            Self::Boolean(mut b) => Arc::new(b.finish()),
            Self::Int(mut b) => Arc::new(b.finish()),
            Self::Long(mut b) => Arc::new(b.finish()),
            Self::Float(mut b) => Arc::new(b.finish()),
            Self::Double(mut b) => Arc::new(b.finish()),
            Self::Decimal(mut b, p, s) => Arc::new(b.finish().with_precision_and_scale(p, s)?),
            Self::Date(mut b) => Arc::new(b.finish()),
            Self::Timestamp(mut b, tz) => {
                let array = b.finish();
                if tz {
                    Arc::new(array.with_timezone(iceberg::arrow::UTC_TIME_ZONE))
                } else {
                    Arc::new(array)
                }
            }
            Self::String(mut b) => Arc::new(b.finish()),
            Self::Binary(mut b) => Arc::new(b.finish()),
            Self::Nested(b) => (*b).finish()?,
        })
    }
}
