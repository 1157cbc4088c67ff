//! An Avro datum as the JSON object plugin stages and event time read: a record is an
//! object, an array a list, a map an object, a union its branch's value (no `{"type":
//! value}` wrapper), an enum its symbol, a timestamp an RFC 3339 string (UTC for
//! `timestamp-*`, no offset for `local-timestamp-*`), a date `YYYY-MM-DD`, a decimal an
//! exact JSON number, bytes and fixed base64 text. These are the forms sluice's JSON
//! encoder reads back into the same column types, so a record that passes through a
//! plugin lands as it would have without one.

use std::io::Write;

use apache_avro::Schema;
use base64::Engine;
use chrono::{DateTime, NaiveDate, SecondsFormat};

use super::FormatError;
use super::read::{ReadError, Reader, Writer};

/// The JSON text of the Avro datum `payload`, written with `writer`.
pub fn to_json(writer: &Writer, payload: &[u8]) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::with_capacity(payload.len() * 2);
    let mut reader = Reader::new(payload);
    write_value(&mut reader, writer.schema(), writer, &mut out)?;
    if !reader.rest().is_empty() {
        return Err(FormatError::Undecodable(format!(
            "{} bytes follow the datum",
            reader.rest().len()
        )));
    }
    Ok(out)
}

fn write_value(
    r: &mut Reader<'_>,
    schema: &Schema,
    writer: &Writer,
    out: &mut Vec<u8>,
) -> Result<(), ReadError> {
    match writer.resolve(schema)? {
        Schema::Union(u) => {
            let branch = r.branch(u.variants())?;
            write_value(r, branch, writer, out)
        }
        Schema::Record(record) => {
            out.push(b'{');
            for (i, field) in record.fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(out, &field.name);
                out.push(b':');
                write_value(r, &field.schema, writer, out)?;
            }
            out.push(b'}');
            Ok(())
        }
        Schema::Array(a) => {
            out.push(b'[');
            let mut first = true;
            blocks(r, |r| {
                if !std::mem::take(&mut first) {
                    out.push(b',');
                }
                write_value(r, &a.items, writer, out)
            })?;
            out.push(b']');
            Ok(())
        }
        Schema::Map(m) => {
            out.push(b'{');
            let mut first = true;
            blocks(r, |r| {
                if !std::mem::take(&mut first) {
                    out.push(b',');
                }
                string(out, r.string()?);
                out.push(b':');
                write_value(r, &m.types, writer, out)
            })?;
            out.push(b'}');
            Ok(())
        }
        primitive => write_primitive(r, primitive, writer, out),
    }
}

/// One value of a primitive or logical type.
fn write_primitive(
    r: &mut Reader<'_>,
    schema: &Schema,
    writer: &Writer,
    out: &mut Vec<u8>,
) -> Result<(), ReadError> {
    match schema {
        Schema::Null => out.extend_from_slice(b"null"),
        Schema::Boolean => out.extend_from_slice(if r.boolean()? { b"true" } else { b"false" }),
        Schema::Int | Schema::TimeMillis => number(out, r.int()?),
        Schema::Long | Schema::TimeMicros => number(out, r.long()?),
        Schema::Float => float(out, f64::from(r.float()?))?,
        Schema::Double => float(out, r.double()?)?,
        Schema::String | Schema::Uuid => string(out, r.string()?),
        Schema::Bytes | Schema::BigDecimal => base64(out, r.bytes()?),
        Schema::Fixed(f) => base64(out, r.take(f.size)?),
        Schema::Duration => base64(out, r.take(12)?),
        Schema::Enum(e) => string(out, r.symbol(e)?),
        Schema::Decimal(d) => {
            let text = crate::decimal::format_decimal(r.decimal(d, writer)?, d.scale as u32);
            out.extend_from_slice(text.as_bytes());
        }
        Schema::Date => {
            let days = r.int()?;
            let date = NaiveDate::from_epoch_days(days)
                .ok_or_else(|| ReadError(format!("date {days} is out of range")))?;
            string(out, &date.format("%Y-%m-%d").to_string());
        }
        Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => timestamp(out, schema, r.long()?)?,
        Schema::Union(_) | Schema::Record(_) | Schema::Array(_) | Schema::Map(_) => {
            unreachable!("written by write_value")
        }
        Schema::Ref { .. } => unreachable!("resolved by write_value"),
    }
    Ok(())
}

/// Reads the blocks of an array or map, calling `item` for each item.
fn blocks<'a>(
    r: &mut Reader<'a>,
    mut item: impl FnMut(&mut Reader<'a>) -> Result<(), ReadError>,
) -> Result<(), ReadError> {
    loop {
        let n = r.block()?;
        if n == 0 {
            return Ok(());
        }
        for _ in 0..n {
            item(r)?;
        }
    }
}

fn number(out: &mut Vec<u8>, n: impl std::fmt::Display) {
    write!(out, "{n}").expect("a Vec takes every write");
}

fn float(out: &mut Vec<u8>, v: f64) -> Result<(), ReadError> {
    if !v.is_finite() {
        // JSON has no NaN or infinity: the value is written as null, as Kafka Connect's
        // JSON converter would refuse it outright.
        out.extend_from_slice(b"null");
        return Ok(());
    }
    serde_json::to_writer(&mut *out, &v).map_err(|e| ReadError(e.to_string()))
}

fn string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("a string serialises");
}

fn base64(out: &mut Vec<u8>, bytes: &[u8]) {
    string(
        out,
        &base64::engine::general_purpose::STANDARD.encode(bytes),
    );
}

/// A timestamp of `schema`'s unit as RFC 3339 text.
fn timestamp(out: &mut Vec<u8>, schema: &Schema, v: i64) -> Result<(), ReadError> {
    let micros = match schema {
        Schema::TimestampMillis | Schema::LocalTimestampMillis => v.checked_mul(1000),
        Schema::TimestampNanos | Schema::LocalTimestampNanos => Some(v.div_euclid(1000)),
        _ => Some(v),
    };
    let at = micros
        .and_then(DateTime::from_timestamp_micros)
        .ok_or_else(|| ReadError(format!("timestamp {v} is out of range")))?;
    let text = match schema {
        Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => at.naive_utc().format("%Y-%m-%dT%H:%M:%S%.f").to_string(),
        _ => at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
    };
    string(out, &text);
    Ok(())
}
