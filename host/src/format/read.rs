//! The Avro binary encoding, read in place: zig-zag varints, length-prefixed bytes and
//! strings, blocked arrays and maps, union branches, and named types resolved through the
//! writer schema's names (see the [specification]). The decoders to JSON (`json.rs`) and
//! to Arrow (`encode/avro.rs`) both walk a datum with it; nothing is copied but what a
//! value needs.
//!
//! [specification]: https://avro.apache.org/docs/1.12.0/specification/#binary-encoding

use std::collections::HashMap;

use apache_avro::Schema;
use apache_avro::schema::{DecimalSchema, EnumSchema, Name, ResolvedSchema};

/// A parsed Avro writer schema, with the named types its references point to.
#[derive(Debug)]
pub struct Writer {
    schema: Schema,
    names: HashMap<Name, Schema>,
}

impl Writer {
    /// Parses the Avro schema `text` (JSON).
    pub fn parse(text: &str) -> Result<Writer, String> {
        let schema = Schema::parse_str(text).map_err(|e| e.to_string())?;
        let names = ResolvedSchema::try_from(&schema)
            .map_err(|e| e.to_string())?
            .get_names()
            .iter()
            .map(|(name, schema)| (name.clone(), (*schema).clone()))
            .collect();
        Ok(Writer { schema, names })
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// `schema`, or the named type it refers to.
    pub fn resolve<'s>(&'s self, schema: &'s Schema) -> Result<&'s Schema, ReadError> {
        match schema {
            Schema::Ref { name } => self
                .names
                .get(name)
                .ok_or_else(|| ReadError(format!("the schema has no type named {name}"))),
            other => Ok(other),
        }
    }
}

/// Why a datum could not be read: it ends early, or holds what its schema forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

fn truncated() -> ReadError {
    ReadError("the payload ends in the middle of a value (truncated)".into())
}

/// A cursor over one Avro datum.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    /// What is left unread.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    /// A zig-zag varint `long`.
    pub fn long(&mut self) -> Result<i64, ReadError> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.bytes.split_first().ok_or_else(truncated)?;
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err(ReadError("a varint runs over 10 bytes".into()))
    }

    /// A zig-zag varint `int`.
    pub fn int(&mut self) -> Result<i32, ReadError> {
        let value = self.long()?;
        i32::try_from(value).map_err(|_| ReadError(format!("int {value} is out of range")))
    }

    /// A `boolean`.
    pub fn boolean(&mut self) -> Result<bool, ReadError> {
        match self.take(1)? {
            [0] => Ok(false),
            [1] => Ok(true),
            [b] => Err(ReadError(format!("boolean byte {b} is neither 0 nor 1"))),
            _ => unreachable!("took one byte"),
        }
    }

    /// A `float`.
    pub fn float(&mut self) -> Result<f32, ReadError> {
        let bytes = self.take(4)?;
        Ok(f32::from_le_bytes(bytes.try_into().expect("four bytes")))
    }

    /// A `double`.
    pub fn double(&mut self) -> Result<f64, ReadError> {
        let bytes = self.take(8)?;
        Ok(f64::from_le_bytes(bytes.try_into().expect("eight bytes")))
    }

    /// `bytes`: a length, then that many bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8], ReadError> {
        let len = self.long()?;
        let len = usize::try_from(len).map_err(|_| ReadError(format!("negative length {len}")))?;
        self.take(len)
    }

    /// A `string` (UTF-8 checked).
    pub fn string(&mut self) -> Result<&'a str, ReadError> {
        let bytes = self.bytes()?;
        simdutf8::basic::from_utf8(bytes)
            .map_err(|_| ReadError("a string is not valid UTF-8".into()))
    }

    /// The next `n` bytes (a `fixed`).
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        if self.bytes.len() < n {
            return Err(truncated());
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }

    /// The count of the next block of an array or map (0 at the end); a negative count's
    /// byte size is read and ignored, as the specification allows.
    pub fn block(&mut self) -> Result<usize, ReadError> {
        let count = self.long()?;
        if count < 0 {
            self.long()?;
        }
        let count = count.unsigned_abs();
        // Every item takes at least a byte, but for a block of nulls or empty records:
        // the bound keeps a hostile count from reserving memory it cannot fill.
        usize::try_from(count)
            .ok()
            .filter(|&n| n <= self.bytes.len().max(1) * 8 + 1024)
            .ok_or_else(|| ReadError(format!("a block claims {count} items")))
    }

    /// The branch a union's value takes.
    pub fn branch<'s>(&mut self, variants: &'s [Schema]) -> Result<&'s Schema, ReadError> {
        let index = self.long()?;
        usize::try_from(index)
            .ok()
            .and_then(|i| variants.get(i))
            .ok_or_else(|| ReadError(format!("union branch {index} does not exist")))
    }

    /// An enum's symbol.
    pub fn symbol<'s>(&mut self, e: &'s EnumSchema) -> Result<&'s str, ReadError> {
        let index = self.int()?;
        usize::try_from(index)
            .ok()
            .and_then(|i| e.symbols.get(i))
            .map(String::as_str)
            .ok_or_else(|| ReadError(format!("enum {} has no symbol {index}", e.name)))
    }

    /// A decimal's unscaled value, from its `fixed` or `bytes`.
    pub fn decimal(&mut self, d: &DecimalSchema, writer: &Writer) -> Result<i128, ReadError> {
        let bytes = match writer.resolve(&d.inner)? {
            Schema::Fixed(f) => self.take(f.size)?,
            _ => self.bytes()?,
        };
        unscaled(bytes)
    }

    /// Reads past one value of `schema`.
    pub fn skip(&mut self, schema: &Schema, writer: &Writer) -> Result<(), ReadError> {
        match writer.resolve(schema)? {
            Schema::Null => {}
            Schema::Boolean => {
                self.boolean()?;
            }
            Schema::Int
            | Schema::Long
            | Schema::Date
            | Schema::TimeMillis
            | Schema::TimeMicros
            | Schema::Enum(_)
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => {
                self.long()?;
            }
            Schema::Float => {
                self.take(4)?;
            }
            Schema::Double => {
                self.take(8)?;
            }
            Schema::Bytes | Schema::String | Schema::Uuid | Schema::BigDecimal => {
                self.bytes()?;
            }
            Schema::Fixed(f) => {
                self.take(f.size)?;
            }
            Schema::Duration => {
                self.take(12)?;
            }
            Schema::Decimal(d) => self.skip(&d.inner, writer)?,
            Schema::Union(u) => {
                let branch = self.branch(u.variants())?;
                self.skip(branch, writer)?;
            }
            Schema::Record(r) => {
                for field in &r.fields {
                    self.skip(&field.schema, writer)?;
                }
            }
            Schema::Array(a) => loop {
                let n = self.block()?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    self.skip(&a.items, writer)?;
                }
            },
            Schema::Map(m) => loop {
                let n = self.block()?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    self.bytes()?;
                    self.skip(&m.types, writer)?;
                }
            },
            Schema::Ref { .. } => unreachable!("resolved above"),
        }
        Ok(())
    }
}

/// A decimal's unscaled value from its big-endian two's-complement bytes, if it fits 128
/// bits.
pub fn unscaled(bytes: &[u8]) -> Result<i128, ReadError> {
    let Some(&first) = bytes.first() else {
        return Ok(0);
    };
    let sign = if first & 0x80 != 0 { 0xff } else { 0 };
    if bytes.len() > 16 {
        let (head, tail) = bytes.split_at(bytes.len() - 16);
        if head.iter().any(|&b| b != sign) || (tail[0] & 0x80 != 0) != (sign == 0xff) {
            return Err(ReadError("a decimal has more than 38 digits".into()));
        }
        return Ok(i128::from_be_bytes(tail.try_into().expect("16 bytes")));
    }
    let mut buf = [sign; 16];
    buf[16 - bytes.len()..].copy_from_slice(bytes);
    Ok(i128::from_be_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_zig_zag() {
        for (bytes, want) in [
            (&[0x00][..], 0),
            (&[0x01], -1),
            (&[0x02], 1),
            (&[0x7f], -64),
            (&[0x80, 0x01], 64),
            (
                &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                i64::MAX,
            ),
        ] {
            assert_eq!(Reader::new(bytes).long(), Ok(want), "{bytes:?}");
        }
        assert!(Reader::new(&[0x80]).long().is_err());
        assert_eq!(Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x00]).int(), Ok(0));
    }

    #[test]
    fn strings_are_length_prefixed_and_checked() {
        let mut r = Reader::new(&[0x06, b'a', b'b', b'c', 0x02]);
        assert_eq!(r.string(), Ok("abc"));
        assert!(r.string().is_err(), "truncated");
        assert!(Reader::new(&[0x02, 0xff]).string().is_err(), "not UTF-8");
        assert!(Reader::new(&[0x01]).bytes().is_err(), "negative length");
    }

    #[test]
    fn decimals_sign_extend() {
        assert_eq!(unscaled(&[0x30, 0x39]), Ok(12345));
        assert_eq!(unscaled(&[0xcf, 0xc7]), Ok(-12345));
        assert_eq!(unscaled(&[0xff, 0xff, 0xff, 0xcf, 0xc7]), Ok(-12345));
        assert_eq!(unscaled(&[0x00, 0x00, 0x80]), Ok(128));
        assert_eq!(unscaled(&[]), Ok(0));
        assert!(unscaled(&[0x01; 17]).is_err());
        assert_eq!(unscaled(&[0xff, 0xff, 0x7f]), Ok(-129));
    }

    #[test]
    fn hostile_block_counts_are_refused() {
        // A count of 2^40 items with two bytes behind it.
        let mut r = Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0, 0]);
        assert!(r.block().is_err());
    }
}
