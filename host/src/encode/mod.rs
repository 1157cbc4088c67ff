//! Encoding: JSON event values to Arrow record batches against a table's schema.
//!
//! Columns follow the table's order. Each column is filled from the JSON field of the same
//! name (fields the table lacks are ignored), or by the host (`ingestion_time`). A value
//! that does not fit its column (a string for an int, an unparseable timestamp, a price
//! with three decimals) makes the whole event an [`EncodeError`] with a code, a message and
//! the field, so the pipeline can dead-letter it; the other events of the batch go on.

pub mod decimal;
#[cfg(test)]
mod props;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder, Int32Builder,
    Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, BooleanArray, RecordBatch};
use arrow_schema::SchemaRef;
use iceberg::spec::{PrimitiveType, Schema, Type};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use rustc_hash::FxHashMap;
use serde_json::value::RawValue;

/// Why one event could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError {
    /// Machine-readable code: `malformed_json`, `not_an_object`, `null_value`,
    /// `type_mismatch`, `invalid_timestamp`, `invalid_date`, `invalid_decimal`,
    /// `out_of_range` or `missing_required`.
    pub code: &'static str,
    /// What is wrong, for people.
    pub message: String,
    /// The offending field, when one is to blame.
    pub field: Option<String>,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{} ({field}): {}", self.code, self.message),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

/// Setting up an encoder failed.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// A column has a type sluice cannot fill from JSON.
    #[error("column `{column}` has type {ty}, which sluice cannot encode yet")]
    Unsupported {
        /// The column.
        column: String,
        /// Its type.
        ty: String,
    },
    /// A host-filled column is not a timestamp.
    #[error(
        "column `{0}` is filled with the ingestion time, so it must be a timestamp or timestamptz"
    )]
    GeneratedType(String),
    /// The table's schema has no Arrow equivalent.
    #[error("table schema: {0}")]
    Arrow(Box<iceberg::Error>),
    /// Arrow refused a batch (a bug: the builders follow the schema).
    #[error("building an Arrow batch: {0}")]
    Batch(#[from] arrow_schema::ArrowError),
}

/// The rows of `batch` where `keep` is true; `None` if there are none.
pub fn keep_rows(batch: RecordBatch, keep: Vec<bool>) -> Result<Option<RecordBatch>, SchemaError> {
    if keep.iter().all(|k| *k) {
        return Ok((batch.num_rows() > 0).then_some(batch));
    }
    let filtered = arrow_select::filter::filter_record_batch(&batch, &BooleanArray::from(keep))?;
    Ok((filtered.num_rows() > 0).then_some(filtered))
}

/// What fills a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// The JSON field.
    Field,
    /// The time the batch was processed.
    IngestionTime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnKind {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Decimal { precision: u32, scale: u32 },
    Date,
    Timestamp,
    Timestamptz,
    String,
}

#[derive(Debug, Clone)]
struct Column {
    name: String,
    kind: ColumnKind,
    required: bool,
    fill: Fill,
}

/// One parsed value; a string borrows from the event unless it had escapes.
#[derive(Debug, Clone, PartialEq)]
enum Cell<'a> {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    Decimal(i128),
    Date(i32),
    Micros(i64),
    Str(Cow<'a, str>),
}

/// Encodes JSON values to Arrow batches of one table schema. Cheap to share across
/// threads.
#[derive(Debug)]
pub struct Encoder {
    columns: Vec<Column>,
    /// Column index by field name (a fast hash: the lookup runs for every field of every
    /// event, and SipHash took ~4% of the CPU per event).
    by_name: FxHashMap<Box<str>, usize>,
    arrow: SchemaRef,
}

/// The result of encoding a batch.
#[derive(Debug)]
pub struct Encoded {
    /// The rows that fit, in input order.
    pub batch: RecordBatch,
    /// For each row of `batch`, the index of its input value.
    pub rows: Vec<usize>,
    /// The inputs that did not fit, by index.
    pub errors: Vec<(usize, EncodeError)>,
}

impl Encoder {
    /// An encoder for `schema` (the table's current schema). Columns named in `generated`
    /// are filled with the ingestion time instead of a JSON field.
    pub fn new(schema: &Schema, generated: &[String]) -> Result<Self, SchemaError> {
        let mut columns = Vec::new();
        for field in schema.as_struct().fields() {
            let unsupported = || SchemaError::Unsupported {
                column: field.name.clone(),
                ty: field.field_type.to_string(),
            };
            let Type::Primitive(p) = field.field_type.as_ref() else {
                return Err(unsupported());
            };
            let kind = match p {
                PrimitiveType::Boolean => ColumnKind::Boolean,
                PrimitiveType::Int => ColumnKind::Int,
                PrimitiveType::Long => ColumnKind::Long,
                PrimitiveType::Float => ColumnKind::Float,
                PrimitiveType::Double => ColumnKind::Double,
                PrimitiveType::Decimal { precision, scale } => ColumnKind::Decimal {
                    precision: *precision,
                    scale: *scale,
                },
                PrimitiveType::Date => ColumnKind::Date,
                PrimitiveType::Timestamp => ColumnKind::Timestamp,
                PrimitiveType::Timestamptz => ColumnKind::Timestamptz,
                PrimitiveType::String => ColumnKind::String,
                _ => return Err(unsupported()),
            };
            let fill = if generated.contains(&field.name) {
                if !matches!(kind, ColumnKind::Timestamp | ColumnKind::Timestamptz) {
                    return Err(SchemaError::GeneratedType(field.name.clone()));
                }
                Fill::IngestionTime
            } else {
                Fill::Field
            };
            columns.push(Column {
                name: field.name.clone(),
                kind,
                required: field.required,
                fill,
            });
        }
        let by_name = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.fill == Fill::Field)
            .map(|(i, c)| (c.name.as_str().into(), i))
            .collect();
        let arrow = Arc::new(
            iceberg::arrow::schema_to_arrow_schema(schema)
                .map_err(|e| SchemaError::Arrow(Box::new(e)))?,
        );
        Ok(Encoder {
            columns,
            by_name,
            arrow,
        })
    }

    /// The Arrow schema of the batches (with Iceberg field ids).
    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow
    }

    /// Parses one value into its row of cells.
    fn parse<'a>(&self, value: Option<&'a [u8]>) -> Result<Vec<Cell<'a>>, EncodeError> {
        let value = value.ok_or_else(|| EncodeError {
            code: "null_value",
            message: "the record has no value (a tombstone)".into(),
            field: None,
        })?;
        let text = utf8(value)?;
        let mut cells = vec![Cell::Null; self.columns.len()];
        let mut failure = None;
        let mut de = serde_json::Deserializer::from_str(text);
        let parsed = RowSeed {
            encoder: self,
            cells: &mut cells,
            failure: &mut failure,
        }
        .deserialize(&mut de)
        .and_then(|()| de.end());
        if let Some(error) = failure {
            return Err(error);
        }
        if let Err(error) = parsed {
            let not_object =
                error.is_data() && value.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{');
            return Err(if not_object {
                EncodeError {
                    code: "not_an_object",
                    message: format!("the value must be a JSON object: {error}"),
                    field: None,
                }
            } else {
                EncodeError {
                    code: "malformed_json",
                    message: format!("the value is not valid JSON: {error}"),
                    field: None,
                }
            });
        }
        for (column, cell) in self.columns.iter().zip(&cells) {
            if column.required && column.fill == Fill::Field && *cell == Cell::Null {
                return Err(EncodeError {
                    code: "missing_required",
                    message: format!("required column `{}` has no value", column.name),
                    field: Some(column.name.clone()),
                });
            }
        }
        Ok(cells)
    }

    /// Checks one value without building anything.
    pub fn check(&self, value: Option<&[u8]>) -> Result<(), EncodeError> {
        self.parse(value).map(drop)
    }

    /// Encodes `values`; `ingestion_micros` fills the host's timestamp columns.
    pub fn encode<'a>(
        &self,
        values: impl IntoIterator<Item = Option<&'a [u8]>>,
        ingestion_micros: i64,
    ) -> Result<Encoded, SchemaError> {
        let values = values.into_iter();
        let capacity = values.size_hint().0;
        let mut builders: Vec<ColumnBuilder> = self
            .columns
            .iter()
            .map(|c| ColumnBuilder::new(c.kind, capacity))
            .collect();
        let mut rows = Vec::with_capacity(capacity);
        let mut errors = Vec::new();
        for (i, value) in values.enumerate() {
            match self.parse(value) {
                Ok(cells) => {
                    for ((builder, column), cell) in
                        builders.iter_mut().zip(&self.columns).zip(cells)
                    {
                        let cell = match column.fill {
                            Fill::IngestionTime => Cell::Micros(ingestion_micros),
                            Fill::Field => cell,
                        };
                        builder.append(cell);
                    }
                    rows.push(i);
                }
                Err(error) => errors.push((i, error)),
            }
        }
        let arrays: Vec<ArrayRef> = builders
            .into_iter()
            .map(ColumnBuilder::finish)
            .collect::<Result<_, _>>()?;
        let batch = RecordBatch::try_new(self.arrow.clone(), arrays)?;
        Ok(Encoded {
            batch,
            rows,
            errors,
        })
    }
}

enum ColumnBuilder {
    Boolean(BooleanBuilder),
    Int(Int32Builder),
    Long(Int64Builder),
    Float(Float32Builder),
    Double(Float64Builder),
    Decimal(Decimal128Builder, u8, i8),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder, bool),
    String(StringBuilder),
}

impl ColumnBuilder {
    fn new(kind: ColumnKind, n: usize) -> Self {
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
        }
    }

    fn append(&mut self, cell: Cell<'_>) {
        match (self, cell) {
            (Self::Boolean(b), Cell::Bool(v)) => b.append_value(v),
            (Self::Int(b), Cell::Int(v)) => b.append_value(v),
            (Self::Long(b), Cell::Long(v)) => b.append_value(v),
            (Self::Float(b), Cell::Float(v)) => b.append_value(v),
            (Self::Double(b), Cell::Double(v)) => b.append_value(v),
            (Self::Decimal(b, ..), Cell::Decimal(v)) => b.append_value(v),
            (Self::Date(b), Cell::Date(v)) => b.append_value(v),
            (Self::Timestamp(b, _), Cell::Micros(v)) => b.append_value(v),
            (Self::String(b), Cell::Str(v)) => b.append_value(&*v),
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
        }
    }

    fn finish(self) -> Result<ArrayRef, arrow_schema::ArrowError> {
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
        })
    }
}

/// Parses a JSON object into the cells of a row.
struct RowSeed<'s, 'de> {
    encoder: &'s Encoder,
    cells: &'s mut [Cell<'de>],
    failure: &'s mut Option<EncodeError>,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(column) = map.next_key_seed(KeySeed(self.encoder))? {
            let Some(i) = column else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let raw: &'de RawValue = map.next_value()?;
            if self.failure.is_some() {
                continue; // keep parsing: the rest must still be valid JSON
            }
            let column = &self.encoder.columns[i];
            match cell(column.kind, raw.get()) {
                Ok(cell) => self.cells[i] = cell,
                Err((code, message)) => {
                    *self.failure = Some(EncodeError {
                        code,
                        message,
                        field: Some(column.name.clone()),
                    })
                }
            }
        }
        Ok(())
    }
}

/// Maps an object key to its column index (`None` for fields the table lacks).
struct KeySeed<'a>(&'a Encoder);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.by_name.get(v).copied())
    }
}

type CellError = (&'static str, String);

/// The value as text: JSON is UTF-8, checked whole (SIMD), not only in the strings of the
/// columns (serde_json skips the others unchecked), so a value with bytes that are not
/// UTF-8 in a field the table lacks is malformed too.
fn utf8(value: &[u8]) -> Result<&str, EncodeError> {
    simdutf8::basic::from_utf8(value).map_err(|_| {
        let detail = std::str::from_utf8(value).err().map(|e| e.to_string());
        EncodeError {
            code: "malformed_json",
            message: format!(
                "the value is not valid JSON: it is not UTF-8 ({})",
                detail.unwrap_or_default()
            ),
            field: None,
        }
    })
}

fn describe(raw: &str) -> String {
    let shown: String = raw.chars().take(60).collect();
    match raw.as_bytes().first() {
        Some(b'"') => format!("the string {shown}"),
        Some(b'{') => "an object".into(),
        Some(b'[') => "an array".into(),
        Some(b't' | b'f') => format!("the boolean {shown}"),
        _ => format!("the number {shown}"),
    }
}

fn mismatch(expected: &str, raw: &str) -> CellError {
    (
        "type_mismatch",
        format!("expected {expected}, found {}", describe(raw)),
    )
}

/// The text of a JSON string (`raw`, valid JSON): the bytes between its quotes unless it
/// has escapes to undo.
#[inline]
fn json_string(raw: &str) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
        Some(Cow::Borrowed(inner))
    } else {
        serde_json::from_str(raw).ok().map(Cow::Owned)
    }
}

/// The text of a JSON string, or a type mismatch saying what was `expected`.
fn string_for<'a>(expected: &str, raw: &'a str) -> Result<Cow<'a, str>, CellError> {
    json_string(raw).ok_or_else(|| mismatch(expected, raw))
}

fn out_of_range(raw: &str, bits: u8) -> CellError {
    (
        "out_of_range",
        format!("{raw} does not fit a {bits}-bit integer"),
    )
}

/// Converts one raw JSON value to a cell of `kind`.
#[inline]
fn cell(kind: ColumnKind, raw: &str) -> Result<Cell<'_>, CellError> {
    if raw == "null" {
        return Ok(Cell::Null);
    }
    let first = raw.as_bytes()[0];
    let is_number = first == b'-' || first.is_ascii_digit();
    match kind {
        ColumnKind::String => Ok(Cell::Str(string_cell(raw))),
        ColumnKind::Boolean => boolean_cell(raw),
        ColumnKind::Int | ColumnKind::Long if !is_number => Err(mismatch("an integer", raw)),
        ColumnKind::Int => int_cell(raw),
        ColumnKind::Long => long(raw).map(Cell::Long),
        ColumnKind::Float | ColumnKind::Double if !is_number => Err(mismatch("a number", raw)),
        ColumnKind::Float => float(raw).map(Cell::Float),
        ColumnKind::Double => double(raw).map(Cell::Double),
        ColumnKind::Decimal { precision, scale } => decimal_cell(raw, is_number, precision, scale),
        ColumnKind::Date => date_cell(raw),
        ColumnKind::Timestamptz => timestamptz_cell(raw),
        ColumnKind::Timestamp => timestamp_cell(raw),
    }
}

/// A JSON string's text; like Spark's from_json, a non-string value keeps its JSON text.
#[inline]
fn string_cell(raw: &str) -> Cow<'_, str> {
    json_string(raw).unwrap_or(Cow::Borrowed(raw))
}

#[inline]
fn boolean_cell(raw: &str) -> Result<Cell<'static>, CellError> {
    match raw {
        "true" => Ok(Cell::Bool(true)),
        "false" => Ok(Cell::Bool(false)),
        _ => Err(mismatch("a boolean", raw)),
    }
}

/// A JSON number that looks like an integer, as 64 bits.
#[inline]
fn long(raw: &str) -> Result<i64, CellError> {
    raw.parse().map_err(|_| {
        if raw.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
            out_of_range(raw, 64)
        } else {
            mismatch("an integer", raw)
        }
    })
}

#[inline]
fn int_cell(raw: &str) -> Result<Cell<'static>, CellError> {
    let v = long(raw)?;
    i32::try_from(v)
        .map(Cell::Int)
        .map_err(|_| out_of_range(raw, 32))
}

/// A JSON number as 64 bits; one too large for them (`1e400`) is out of range, not
/// infinity.
#[inline]
fn double(raw: &str) -> Result<f64, CellError> {
    let v: f64 = raw.parse().map_err(|_| mismatch("a number", raw))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(float_out_of_range(raw, 64))
    }
}

/// A JSON number as 32 bits, out of range beyond `f32::MAX` (it would be infinity).
#[inline]
fn float(raw: &str) -> Result<f32, CellError> {
    let v = raw.parse::<f64>().map_err(|_| mismatch("a number", raw))? as f32;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(float_out_of_range(raw, 32))
    }
}

fn float_out_of_range(raw: &str, bits: u8) -> CellError {
    (
        "out_of_range",
        format!("{raw} does not fit a {bits}-bit floating-point number"),
    )
}

/// A decimal from a JSON number or a string holding one.
fn decimal_cell(
    raw: &str,
    is_number: bool,
    precision: u32,
    scale: u32,
) -> Result<Cell<'static>, CellError> {
    let text = if is_number {
        Cow::Borrowed(raw)
    } else {
        string_for("a decimal number", raw)?
    };
    decimal::parse_decimal(&text, precision, scale)
        .map(Cell::Decimal)
        .map_err(|m| ("invalid_decimal", m))
}

/// Days since 1970-01-01 from a `YYYY-MM-DD` string.
fn date_cell(raw: &str) -> Result<Cell<'static>, CellError> {
    let text = string_for("a date string", raw)?;
    let date = chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d").map_err(|e| {
        (
            "invalid_date",
            format!("{text:?} is not a date (YYYY-MM-DD): {e}"),
        )
    })?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid");
    Ok(Cell::Date((date - epoch).num_days() as i32))
}

/// Microseconds since the epoch from an RFC 3339 string with a zone.
fn timestamptz_cell(raw: &str) -> Result<Cell<'static>, CellError> {
    let text = string_for("an RFC 3339 timestamp string", raw)?;
    let t = chrono::DateTime::parse_from_rfc3339(&text).map_err(|e| {
        (
            "invalid_timestamp",
            format!("{text:?} is not an RFC 3339 timestamp with a zone: {e}"),
        )
    })?;
    Ok(Cell::Micros(t.timestamp_micros()))
}

/// Microseconds since the epoch from a zoneless `T`- or space-separated timestamp string,
/// read as UTC.
fn timestamp_cell(raw: &str) -> Result<Cell<'static>, CellError> {
    let text = string_for("a timestamp string", raw)?;
    let t = chrono::NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(&text, "%Y-%m-%d %H:%M:%S%.f"))
        .map_err(|e| {
            (
                "invalid_timestamp",
                format!("{text:?} is not a timestamp: {e}"),
            )
        })?;
    Ok(Cell::Micros(t.and_utc().timestamp_micros()))
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Decimal128Type, Int32Type, TimestampMicrosecondType};
    use iceberg::spec::NestedField;

    use super::*;

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::required(
                    1,
                    "event_id",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::optional(
                    2,
                    "event_time",
                    Type::Primitive(PrimitiveType::Timestamptz),
                )),
                Arc::new(NestedField::optional(
                    3,
                    "ingestion_time",
                    Type::Primitive(PrimitiveType::Timestamptz),
                )),
                Arc::new(NestedField::optional(
                    4,
                    "quantity",
                    Type::Primitive(PrimitiveType::Int),
                )),
                Arc::new(NestedField::optional(
                    5,
                    "price",
                    Type::Primitive(PrimitiveType::Decimal {
                        precision: 10,
                        scale: 2,
                    }),
                )),
            ])
            .build()
            .unwrap()
    }

    fn encoder() -> Encoder {
        Encoder::new(&schema(), &["ingestion_time".to_string()]).unwrap()
    }

    #[test]
    fn encodes_in_table_order_ignoring_unknown_fields() {
        let values: Vec<&[u8]> = vec![
            br#"{"price": 18.0, "quantity": 2, "extra": {"x": [1]}, "event_time": "2026-01-09T10:04:00Z", "event_id": "e1"}"#,
            br#"{"event_id": "e2", "price": "0.10", "event_time": "2026-01-09T11:04:00.5+01:00"}"#,
        ];
        let out = encoder().encode(values.into_iter().map(Some), 42).unwrap();
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(out.rows, vec![0, 1]);
        let b = &out.batch;
        assert_eq!(b.column(0).as_string::<i32>().value(1), "e2");
        let times = b.column(1).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(times.value(0), 1_767_953_040_000_000);
        assert_eq!(times.value(1), 1_767_953_040_500_000);
        assert_eq!(
            b.column(2)
                .as_primitive::<TimestampMicrosecondType>()
                .value(1),
            42
        );
        let q = b.column(3).as_primitive::<Int32Type>();
        assert_eq!((q.value(0), q.is_null(1)), (2, true));
        let p = b.column(4).as_primitive::<Decimal128Type>();
        assert_eq!((p.value(0), p.value(1)), (1800, 10));
    }

    #[test]
    fn each_misfit_has_its_code_and_field() {
        let e = encoder();
        let cases: [(&[u8], &str, Option<&str>); 10] = [
            (
                br#"{"event_id": "a", "quantity": "several"}"#,
                "type_mismatch",
                Some("quantity"),
            ),
            (
                br#"{"event_id": "a", "quantity": 1.5}"#,
                "type_mismatch",
                Some("quantity"),
            ),
            (
                br#"{"event_id": "a", "quantity": 3000000000}"#,
                "out_of_range",
                Some("quantity"),
            ),
            (
                br#"{"event_id": "a", "event_time": "yesterday"}"#,
                "invalid_timestamp",
                Some("event_time"),
            ),
            (
                br#"{"event_id": "a", "price": 1.234}"#,
                "invalid_decimal",
                Some("price"),
            ),
            (
                br#"{"event_time": "2026-01-09T10:04:00Z"}"#,
                "missing_required",
                Some("event_id"),
            ),
            (br#"{"event_id": "a""#, "malformed_json", None),
            (br#"[1, 2]"#, "not_an_object", None),
            (b"{\"event_id\": \"\xff\"}", "malformed_json", None),
            // Found by the randomised property: not UTF-8 in a field the table lacks.
            (
                b"{\"event_id\": \"e\", \"extra\": \"\xff\"}",
                "malformed_json",
                None,
            ),
        ];
        for (value, code, field) in cases {
            let err = e.check(Some(value)).unwrap_err();
            assert_eq!((err.code, err.field.as_deref()), (code, field), "{err}");
        }
        assert_eq!(e.check(None).unwrap_err().code, "null_value");
        let out = e
            .encode([Some(&br#"{"event_id": 1}"#[..]), Some(b"nope")], 0)
            .unwrap();
        assert_eq!(out.batch.num_rows(), 1);
        assert_eq!(out.batch.column(0).as_string::<i32>().value(0), "1");
        assert_eq!(out.errors[0].0, 1);
    }

    const DEC: ColumnKind = ColumnKind::Decimal {
        precision: 10,
        scale: 2,
    };

    /// Every branch of `cell`: a kind, a raw JSON value, and the exact result or error.
    const CELLS: [(ColumnKind, &str, &str); 46] = [
        (ColumnKind::String, r#""a\"b\u00e9""#, r#"Ok(Str("a\"bé"))"#),
        (ColumnKind::String, r#"12"#, r#"Ok(Str("12"))"#),
        (
            ColumnKind::String,
            r#"{"x": [1]}"#,
            r#"Ok(Str("{\"x\": [1]}"))"#,
        ),
        (ColumnKind::String, r#"null"#, r#"Ok(Null)"#),
        (ColumnKind::Boolean, r#"true"#, r#"Ok(Bool(true))"#),
        (ColumnKind::Boolean, r#"false"#, r#"Ok(Bool(false))"#),
        (
            ColumnKind::Boolean,
            r#""true""#,
            r#"Err(("type_mismatch", "expected a boolean, found the string \"true\""))"#,
        ),
        (
            ColumnKind::Boolean,
            r#"1"#,
            r#"Err(("type_mismatch", "expected a boolean, found the number 1"))"#,
        ),
        (ColumnKind::Int, r#"7"#, r#"Ok(Int(7))"#),
        (ColumnKind::Int, r#"-7"#, r#"Ok(Int(-7))"#),
        (
            ColumnKind::Int,
            r#""7""#,
            r#"Err(("type_mismatch", "expected an integer, found the string \"7\""))"#,
        ),
        (
            ColumnKind::Int,
            r#"1.5"#,
            r#"Err(("type_mismatch", "expected an integer, found the number 1.5"))"#,
        ),
        (
            ColumnKind::Int,
            r#"1e3"#,
            r#"Err(("type_mismatch", "expected an integer, found the number 1e3"))"#,
        ),
        (
            ColumnKind::Int,
            r#"3000000000"#,
            r#"Err(("out_of_range", "3000000000 does not fit a 32-bit integer"))"#,
        ),
        (
            ColumnKind::Int,
            r#"-99999999999999999999"#,
            r#"Err(("out_of_range", "-99999999999999999999 does not fit a 64-bit integer"))"#,
        ),
        (ColumnKind::Long, r#"3000000000"#, r#"Ok(Long(3000000000))"#),
        (
            ColumnKind::Long,
            r#"99999999999999999999"#,
            r#"Err(("out_of_range", "99999999999999999999 does not fit a 64-bit integer"))"#,
        ),
        (
            ColumnKind::Long,
            r#"true"#,
            r#"Err(("type_mismatch", "expected an integer, found the boolean true"))"#,
        ),
        (ColumnKind::Long, r#"null"#, r#"Ok(Null)"#),
        (ColumnKind::Float, r#"1.5"#, r#"Ok(Float(1.5))"#),
        (ColumnKind::Float, r#"-0.25"#, r#"Ok(Float(-0.25))"#),
        (
            ColumnKind::Float,
            r#"1e39"#,
            r#"Err(("out_of_range", "1e39 does not fit a 32-bit floating-point number"))"#,
        ),
        (
            ColumnKind::Double,
            r#"-1e400"#,
            r#"Err(("out_of_range", "-1e400 does not fit a 64-bit floating-point number"))"#,
        ),
        (ColumnKind::Double, r#"1e308"#, r#"Ok(Double(1e308))"#),
        (
            ColumnKind::Float,
            r#""1.5""#,
            r#"Err(("type_mismatch", "expected a number, found the string \"1.5\""))"#,
        ),
        (ColumnKind::Double, r#"2.5e-3"#, r#"Ok(Double(0.0025))"#),
        (
            ColumnKind::Double,
            r#"[1]"#,
            r#"Err(("type_mismatch", "expected a number, found an array"))"#,
        ),
        (
            ColumnKind::Double,
            r#"-"#,
            r#"Err(("type_mismatch", "expected a number, found the number -"))"#,
        ),
        (DEC, r#"18.0"#, r#"Ok(Decimal(1800))"#),
        (DEC, r#""0.10""#, r#"Ok(Decimal(10))"#),
        (
            DEC,
            r#"1.234"#,
            r#"Err(("invalid_decimal", "1.234 has more than 2 decimal places"))"#,
        ),
        (
            DEC,
            r#""abc""#,
            r#"Err(("invalid_decimal", "\"abc\" is not a number"))"#,
        ),
        (
            DEC,
            r#"true"#,
            r#"Err(("type_mismatch", "expected a decimal number, found the boolean true"))"#,
        ),
        (
            DEC,
            r#"123456789012"#,
            r#"Err(("invalid_decimal", "123456789012 does not fit DECIMAL(10,2): at most 8 digits before the point"))"#,
        ),
        (ColumnKind::Date, r#""2026-01-09""#, r#"Ok(Date(20462))"#),
        (ColumnKind::Date, r#""1969-12-31""#, r#"Ok(Date(-1))"#),
        (
            ColumnKind::Date,
            r#""2026-13-01""#,
            r#"Err(("invalid_date", "\"2026-13-01\" is not a date (YYYY-MM-DD): input is out of range"))"#,
        ),
        (
            ColumnKind::Date,
            r#"20260109"#,
            r#"Err(("type_mismatch", "expected a date string, found the number 20260109"))"#,
        ),
        (
            ColumnKind::Timestamptz,
            r#""2026-01-09T11:04:00.5+01:00""#,
            r#"Ok(Micros(1767953040500000))"#,
        ),
        (
            ColumnKind::Timestamptz,
            r#""2026-01-09T10:04:00""#,
            r#"Err(("invalid_timestamp", "\"2026-01-09T10:04:00\" is not an RFC 3339 timestamp with a zone: premature end of input"))"#,
        ),
        (
            ColumnKind::Timestamptz,
            r#"5"#,
            r#"Err(("type_mismatch", "expected an RFC 3339 timestamp string, found the number 5"))"#,
        ),
        (
            ColumnKind::Timestamp,
            r#""2026-01-09T10:04:00.25""#,
            r#"Ok(Micros(1767953040250000))"#,
        ),
        (
            ColumnKind::Timestamp,
            r#""2026-01-09 10:04:00""#,
            r#"Ok(Micros(1767953040000000))"#,
        ),
        (
            ColumnKind::Timestamp,
            r#""yesterday""#,
            r#"Err(("invalid_timestamp", "\"yesterday\" is not a timestamp: input contains invalid characters"))"#,
        ),
        (
            ColumnKind::Timestamp,
            r#"false"#,
            r#"Err(("type_mismatch", "expected a timestamp string, found the boolean false"))"#,
        ),
        (
            ColumnKind::Boolean,
            r#""xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx""#,
            r#"Err(("type_mismatch", "expected a boolean, found the string \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"))"#,
        ),
    ];

    #[test]
    fn each_kind_parses_or_says_why_not() {
        for (kind, raw, expected) in CELLS {
            let got = format!("{:?}", cell(kind, raw));
            assert_eq!(got, expected, "{kind:?} {raw}");
        }
    }
}
