//! Cells: one raw JSON value converted to the kind of its column ([`ColumnKind`]), or the
//! code and message saying why it does not fit.

use std::borrow::Cow;

use iceberg::spec::PrimitiveType;

use super::EncodeError;
use crate::decimal;

/// The Iceberg type of a column, among those sluice fills from JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ColumnKind {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Decimal {
        precision: u32,
        scale: u32,
    },
    Date,
    Timestamp,
    Timestamptz,
    String,
    /// Bytes: base64 text in JSON, `bytes` and `fixed` in Avro and Protobuf.
    Binary,
}

impl ColumnKind {
    /// The kind of an Iceberg primitive, if sluice fills it from JSON.
    pub(super) fn of(ty: &PrimitiveType) -> Option<ColumnKind> {
        Some(match ty {
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
            PrimitiveType::Binary => ColumnKind::Binary,
            _ => return None,
        })
    }
}

/// One parsed value; a string borrows from the event unless it had escapes. The last
/// three are the values of nested columns (see `nested.rs`): a struct's fields in its
/// type's order, a list's elements, a map's keys and values.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell<'a> {
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
    Bytes(Cow<'a, [u8]>),
    Struct(Vec<Cell<'a>>),
    List(Vec<Cell<'a>>),
    Map(Vec<(Cell<'a>, Cell<'a>)>),
}

impl Cell<'_> {
    /// Makes the cell null. Most cells own no memory, and for them this is a store: a
    /// plain assignment calls the cell's drop for every cell of every row (2% of the
    /// ingest benchmark's CPU, the encoder's rows being reused).
    #[inline]
    pub(super) fn clear(&mut self) {
        match self {
            Cell::Str(Cow::Owned(_))
            | Cell::Bytes(Cow::Owned(_))
            | Cell::Struct(_)
            | Cell::List(_)
            | Cell::Map(_) => *self = Cell::Null,
            Cell::Null
            | Cell::Bool(_)
            | Cell::Int(_)
            | Cell::Long(_)
            | Cell::Float(_)
            | Cell::Double(_)
            | Cell::Decimal(_)
            | Cell::Date(_)
            | Cell::Micros(_)
            | Cell::Str(Cow::Borrowed(_))
            | Cell::Bytes(Cow::Borrowed(_)) => {
                std::mem::forget(std::mem::replace(self, Cell::Null))
            }
        }
    }

    /// The cell, borrowing nothing.
    pub(super) fn into_owned(self) -> Cell<'static> {
        match self {
            Cell::Null => Cell::Null,
            Cell::Bool(v) => Cell::Bool(v),
            Cell::Int(v) => Cell::Int(v),
            Cell::Long(v) => Cell::Long(v),
            Cell::Float(v) => Cell::Float(v),
            Cell::Double(v) => Cell::Double(v),
            Cell::Decimal(v) => Cell::Decimal(v),
            Cell::Date(v) => Cell::Date(v),
            Cell::Micros(v) => Cell::Micros(v),
            Cell::Str(v) => Cell::Str(Cow::Owned(v.into_owned())),
            Cell::Bytes(v) => Cell::Bytes(Cow::Owned(v.into_owned())),
            Cell::Struct(v) => Cell::Struct(v.into_iter().map(Cell::into_owned).collect()),
            Cell::List(v) => Cell::List(v.into_iter().map(Cell::into_owned).collect()),
            Cell::Map(v) => Cell::Map(
                v.into_iter()
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect(),
            ),
        }
    }
}

pub(super) type CellError = (&'static str, String);

/// The value as text: JSON is UTF-8, checked whole (SIMD), not only in the strings of the
/// columns (serde_json skips the others unchecked), so a value with bytes that are not
/// UTF-8 in a field the table lacks is malformed too.
pub(super) fn utf8(value: &[u8]) -> Result<&str, EncodeError> {
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

pub(super) fn mismatch(expected: &str, raw: &str) -> CellError {
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
    // In the text of a valid JSON string the first special byte can only be a backslash
    // (and the word-at-a-time search costs less than memchr's set-up on short strings).
    if super::flat::special(inner.as_bytes()).is_none() {
        Some(Cow::Borrowed(inner))
    } else {
        serde_json::from_str(raw).ok().map(Cow::Owned)
    }
}

/// The text of a JSON string, or a type mismatch saying what was `expected`.
fn string_for<'a>(expected: &str, raw: &'a str) -> Result<Cow<'a, str>, CellError> {
    json_string(raw).ok_or_else(|| mismatch(expected, raw))
}

/// Bytes from a JSON string of their base64 text (standard alphabet, padded), as Kafka
/// Connect's JSON converter writes them.
fn binary_cell(raw: &str) -> Result<Cell<'_>, CellError> {
    use base64::Engine;
    let text = string_for("base64 text", raw)?;
    base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map(|bytes| Cell::Bytes(Cow::Owned(bytes)))
        .map_err(|e| ("invalid_binary", format!("the string is not base64: {e}")))
}

fn out_of_range(raw: &str, bits: u8) -> CellError {
    (
        "out_of_range",
        format!("{raw} does not fit a {bits}-bit integer"),
    )
}

/// Converts one raw JSON value to a cell of `kind`.
#[inline]
pub(super) fn cell(kind: ColumnKind, raw: &str) -> Result<Cell<'_>, CellError> {
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
        ColumnKind::Binary => binary_cell(raw),
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
