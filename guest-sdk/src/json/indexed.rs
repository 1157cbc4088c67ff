//! The fast path over the host's reading of an event (the `scan` import, contract
//! `0.2.2`): where each top-level field's key and value lie. Keys are taken where they lie
//! and fields the type does not name are skipped without reading a byte of them; string
//! values and raw values are taken whole (the host read them: no escapes, valid JSON);
//! numbers, booleans and whatever else a type asks for are read by the fast path, at
//! their place.
//!
//! As with the fast path, anything unexpected gives up with [`Bail`] and serde_json decides:
//! a span outside the text or off a character boundary, a type that wants something other
//! than an object, a value the fast path refuses.

use serde::Deserialize;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};

use super::deserializer::{Key, RawValue};
use super::{Bail, Fast, RAW_VALUE_TOKEN};

/// Parses the object `text` into `T` from `spans` (four numbers per field: key offset and
/// length, value offset and length). The value counts only when it is `Ok` and `complete`
/// is set (every field was read, each value to its end), as with [`super::from_str`].
pub(crate) fn from_spans<'de, T: Deserialize<'de>>(
    text: &'de str,
    spans: &[u32],
    complete: &mut bool,
) -> Result<T, Bail> {
    let mut de = Indexed {
        fast: Fast::new(text),
        spans,
        at: 0,
        read_all: false,
        off: false,
    };
    let result = T::deserialize(&mut de);
    *complete = de.read_all && !de.off && !de.fast.unclosed;
    result
}

struct Indexed<'s, 'de> {
    fast: Fast<'de>,
    spans: &'s [u32],
    /// The next field's first number in `spans`.
    at: usize,
    /// The visitor asked past the last field.
    read_all: bool,
    /// A value's reading did not end where its span does.
    off: bool,
}

impl<'de> Indexed<'_, 'de> {
    /// The text at `start..start + len` of the event.
    #[inline(always)]
    fn text(&self, start: u32, len: u32) -> Result<&'de str, Bail> {
        let start = start as usize;
        self.fast.text.get(start..start + len as usize).ok_or(Bail)
    }
}

impl<'de> de::Deserializer<'de> for &mut Indexed<'_, 'de> {
    type Error = Bail;

    bail!(deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_f32
        deserialize_f64 deserialize_char deserialize_str deserialize_string deserialize_bytes
        deserialize_byte_buf deserialize_unit deserialize_seq deserialize_identifier
        deserialize_ignored_any deserialize_i128 deserialize_u128
        deserialize_unit_struct(&'static str) deserialize_tuple(usize)
        deserialize_tuple_struct(&'static str, usize)
        deserialize_enum(&'static str, &'static [&'static str]));

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_map(self)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_map(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Bail> {
        visitor.visit_map(self)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        if name == RAW_VALUE_TOKEN {
            return Err(Bail);
        }
        visitor.visit_newtype_struct(self)
    }
}

impl<'de> MapAccess<'de> for Indexed<'_, 'de> {
    type Error = Bail;

    #[inline(always)]
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Bail> {
        let Some(&[start, len, ..]) = self.spans.get(self.at..self.at + 4) else {
            self.read_all = true;
            return Ok(None);
        };
        let key = self.text(start, len)?;
        seed.deserialize(Key(key)).map(Some)
    }

    #[inline(always)]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Bail> {
        let Some(&[_, _, start, len]) = self.spans.get(self.at..self.at + 4) else {
            return Err(Bail);
        };
        self.at += 4;
        let text = self.text(start, len)?;
        let start = start as usize;
        seed.deserialize(Value {
            de: self,
            text,
            start,
        })
    }
}

/// One field's value: its text, and where it starts in the event.
struct Value<'a, 's, 'de> {
    de: &'a mut Indexed<'s, 'de>,
    text: &'de str,
    start: usize,
}

/// Deserializer methods that the fast path answers, reading the value at its place (with
/// the arguments, if any, between parentheses).
macro_rules! at_place {
    ($($name:ident($($arg:ident: $ty:ty),*))*) => {$(
        fn $name<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Bail> {
            self.at_place(|fast| de::Deserializer::$name(fast, $($arg,)* visitor))
        }
    )*};
}

impl<'de> Value<'_, '_, 'de> {
    /// What the fast path reads at the value's place; it must end where the value does.
    #[inline(always)]
    fn at_place<R>(self, read: impl FnOnce(&mut Fast<'de>) -> Result<R, Bail>) -> Result<R, Bail> {
        let de = self.de;
        de.fast.pos = self.start;
        let result = read(&mut de.fast);
        de.off |= de.fast.pos != self.start + self.text.len();
        result
    }

    /// A string value's text between its quotes (the host read it: no escapes).
    #[inline(always)]
    fn string(&self) -> Option<&'de str> {
        let inner = self.text.strip_prefix('"')?.strip_suffix('"')?;
        Some(inner)
    }
}

impl<'de> de::Deserializer<'de> for Value<'_, '_, 'de> {
    type Error = Bail;

    at_place!(deserialize_bool() deserialize_i8() deserialize_i16() deserialize_i32()
        deserialize_i64() deserialize_u8() deserialize_u16() deserialize_u32() deserialize_u64()
        deserialize_f32() deserialize_f64() deserialize_char() deserialize_bytes()
        deserialize_byte_buf() deserialize_unit() deserialize_seq() deserialize_map()
        deserialize_i128() deserialize_u128()
        deserialize_unit_struct(name: &'static str)
        deserialize_tuple(len: usize)
        deserialize_tuple_struct(name: &'static str, len: usize)
        deserialize_struct(name: &'static str, fields: &'static [&'static str]));

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.string() {
            Some(s) => visitor.visit_borrowed_str(s),
            None => self.at_place(|fast| de::Deserializer::deserialize_any(fast, visitor)),
        }
    }

    #[inline(always)]
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.string() {
            Some(s) => visitor.visit_borrowed_str(s),
            None => Err(Bail),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_str(visitor)
    }

    #[inline(always)]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        if self.text == "null" {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        if name != RAW_VALUE_TOKEN {
            return visitor.visit_newtype_struct(self);
        }
        visitor.visit_map(RawValue {
            text: Some(self.text),
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Bail> {
        // Only unit variants, as the fast path reads them.
        match self.string() {
            Some(s) => visitor.visit_enum(BorrowedStrDeserializer::new(s)),
            None => Err(Bail),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        // The host checked the value's syntax: nothing to read.
        visitor.visit_unit()
    }
}
