//! Generated events as Avro datums, for `sluice produce --format avro`: one writer schema
//! per shape (`retail.avsc`, `analytics.avsc`), and the generator's JSON events written
//! with it by apache-avro.
//!
//! The generator makes JSON text, so an event is turned into an Avro value field by field,
//! guided by the schema: an RFC 3339 text to `timestamp-micros`, a JSON number to a
//! `decimal` (exactly, through [`crate::decimal`]), an absent or null field to the null
//! branch of `["null", T]`. Neither shape has nested objects.
//!
//! Some invalid events cannot be written in Avro at all: a `quantity` of `"several"`, an
//! `event_time` of `yesterday`, a missing `user_id` (required in the schema), JSON that
//! stops half-way. Such an event is sent as the datum of the fields before the first one
//! Avro cannot express: a **truncated datum**, framed with the registered schema's id, which
//! a reader refuses (sluice dead-letters it as `undecodable`), as it refuses the JSON
//! event's broken text. Invalid events Avro can express (an unknown `event_type`, a
//! negative `price`) are written as they are, for the validator to refuse.

use apache_avro::schema::{DecimalSchema, Schema};
use apache_avro::types::Value;
use apache_avro::{Decimal, to_avro_datum};

use super::Shape;

/// The writer schema of the retail shape's events.
pub const RETAIL_SCHEMA: &str = include_str!("retail.avsc");
/// The writer schema of the analytics shape's events.
pub const ANALYTICS_SCHEMA: &str = include_str!("analytics.avsc");

/// The first byte of a value in the Confluent wire format (then the 4-byte schema id).
const MAGIC: u8 = 0;

/// Why an event cannot be written with a schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AvroError {
    /// The shape has no Avro schema.
    #[error("`--format avro` has schemas for the retail and analytics shapes, not {0:?}")]
    NoSchema(Shape),
    /// The schema's text does not parse (a bug in the `.avsc` files).
    #[error("the Avro schema does not parse: {0}")]
    BadSchema(String),
    /// A field's value cannot be given in Avro.
    #[error("field `{field}`: {reason}")]
    NotExpressible {
        /// The field.
        field: String,
        /// Why.
        reason: String,
    },
}

/// The Avro schema text of `shape`'s events, if it has one.
pub fn schema_text(shape: Shape) -> Result<&'static str, AvroError> {
    match shape {
        Shape::Retail => Ok(RETAIL_SCHEMA),
        Shape::Analytics => Ok(ANALYTICS_SCHEMA),
        other => Err(AvroError::NoSchema(other)),
    }
}

/// Writes generated JSON events as Avro datums of one schema, framed in the Confluent wire
/// format once the schema's registry id is known.
#[derive(Debug, Clone)]
pub struct AvroEncoder {
    schema: Schema,
    /// The registry id of the schema; `None` writes bare datums.
    id: Option<u32>,
}

/// One event as Avro.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// The record value: the framed datum (or the bare one, without an id).
    pub value: Vec<u8>,
    /// Why the datum is cut short, if Avro cannot express the event.
    pub truncated: Option<AvroError>,
}

impl AvroEncoder {
    /// An encoder of `shape`'s events, writing bare datums until [`AvroEncoder::with_id`].
    pub fn new(shape: Shape) -> Result<Self, AvroError> {
        let schema = Schema::parse_str(schema_text(shape)?)
            .map_err(|e| AvroError::BadSchema(e.to_string()))?;
        Ok(AvroEncoder { schema, id: None })
    }

    /// The same encoder, framing each datum with the registry id `id`.
    pub fn with_id(mut self, id: u32) -> Self {
        self.id = Some(id);
        self
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The Avro record value of the JSON event `json`: its datum, or the truncated datum
    /// of the fields before the first one Avro cannot express.
    pub fn encode(&self, json: &str) -> Encoded {
        let mut value = Vec::with_capacity(json.len() / 2 + 5);
        if let Some(id) = self.id {
            value.push(MAGIC);
            value.extend_from_slice(&id.to_be_bytes());
        }
        let truncated = write_fields(&self.schema, json, &mut value).err();
        Encoded { value, truncated }
    }
}

/// Appends the datum of the JSON object `json` to `out`, field by field (a record's
/// encoding is its fields' encodings one after the other); stops at the first field that
/// cannot be written, leaving the ones before it (none for a field the schema lacks, or
/// text that is not a JSON object).
fn write_fields(schema: &Schema, json: &str, out: &mut Vec<u8>) -> Result<(), AvroError> {
    let Schema::Record(record) = schema else {
        return Err(AvroError::BadSchema("the schema is not a record".into()));
    };
    let first = || record.fields.first().map_or("", |f| f.name.as_str());
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(json).map_err(|e| not_expressible(first(), e))?;
    if let Some(extra) = object
        .keys()
        .find(|k| !record.fields.iter().any(|f| &f.name == *k))
    {
        return Err(not_expressible(extra, "the schema has no such field"));
    }
    for field in &record.fields {
        let json = object.get(&field.name).unwrap_or(&serde_json::Value::Null);
        let value = to_value(&field.schema, json).map_err(|r| not_expressible(&field.name, r))?;
        let datum =
            to_avro_datum(&field.schema, value).map_err(|e| not_expressible(&field.name, e))?;
        out.extend_from_slice(&datum);
    }
    Ok(())
}

fn not_expressible(field: &str, reason: impl ToString) -> AvroError {
    AvroError::NotExpressible {
        field: field.to_string(),
        reason: reason.to_string(),
    }
}

/// The Avro value of `json` for a field of type `schema` (the types the shapes use).
fn to_value(schema: &Schema, json: &serde_json::Value) -> Result<Value, String> {
    use serde_json::Value as J;
    match (schema, json) {
        (Schema::Union(union), _) => {
            let variants = union.variants();
            let null = variants.iter().position(|v| *v == Schema::Null);
            match (json, null) {
                (J::Null, Some(i)) => Ok(Value::Union(i as u32, Box::new(Value::Null))),
                _ => {
                    let (i, branch) = variants
                        .iter()
                        .enumerate()
                        .find(|(_, v)| **v != Schema::Null)
                        .ok_or("a union of null only")?;
                    Ok(Value::Union(i as u32, Box::new(to_value(branch, json)?)))
                }
            }
        }
        (Schema::String, J::String(s)) => Ok(Value::String(s.clone())),
        (Schema::Int, J::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Value::Int)
            .ok_or_else(|| format!("{n} is not an int")),
        (Schema::Long, J::Number(n)) => n
            .as_i64()
            .map(Value::Long)
            .ok_or_else(|| format!("{n} is not a long")),
        (Schema::TimestampMicros, J::String(s)) => chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| Value::TimestampMicros(t.timestamp_micros()))
            .map_err(|e| format!("{s:?} is not an RFC 3339 time ({e})")),
        (Schema::Decimal(d), J::Number(n)) => decimal(d, &n.to_string()),
        (_, J::Null) => Err("is missing or null, and the schema requires it".into()),
        (schema, json) => Err(format!("{json} is not a {schema:?}")),
    }
}

/// A decimal of `d`'s precision and scale from its text, as the big-endian two's
/// complement bytes Avro stores (no more bytes than the value needs).
fn decimal(d: &DecimalSchema, text: &str) -> Result<Value, String> {
    let unscaled = crate::decimal::parse_decimal(text, d.precision as u32, d.scale as u32)?;
    let bytes = unscaled.to_be_bytes();
    // Drop leading bytes that only repeat the sign of the next one.
    let keep = bytes
        .windows(2)
        .take_while(|w| (w[0] == 0 && w[1] < 0x80) || (w[0] == 0xff && w[1] >= 0x80))
        .count();
    Ok(Value::Decimal(Decimal::from(bytes[keep..].to_vec())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_take_the_fewest_bytes_of_their_sign() {
        let d = DecimalSchema {
            precision: 10,
            scale: 2,
            inner: Box::new(Schema::Bytes),
        };
        let bytes = |text: &str| match decimal(&d, text).unwrap() {
            Value::Decimal(d) => <Vec<u8>>::try_from(d).unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(bytes("18"), vec![0x07, 0x08], "1800");
        assert_eq!(bytes("1.27"), vec![0x7f]);
        assert_eq!(bytes("1.28"), vec![0x00, 0x80]);
        assert_eq!(bytes("-5.00"), vec![0xfe, 0x0c], "-500");
        assert_eq!(bytes("-1.28"), vec![0x80]);
        assert_eq!(bytes("0"), vec![0x00]);
        assert!(decimal(&d, "123456789.00").is_err(), "11 digits");
    }

    #[test]
    fn shapes_without_a_schema_are_refused() {
        assert_eq!(
            AvroEncoder::new(Shape::Products).unwrap_err(),
            AvroError::NoSchema(Shape::Products)
        );
    }
}
