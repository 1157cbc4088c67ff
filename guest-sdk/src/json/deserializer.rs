//! The fast path as a serde `Deserializer`, and the accesses to objects' entries, arrays'
//! elements, keys and raw values it hands to visitors.

use serde::Deserialize;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::{Bail, Fast, RAW_VALUE_TOKEN, Str};

impl<'de> de::Deserializer<'de> for &mut Fast<'de> {
    type Error = Bail;

    delegate!(deserialize_i64: deserialize_i8 deserialize_i16 deserialize_i32 deserialize_u8
        deserialize_u16 deserialize_u32 deserialize_u64 deserialize_f32 deserialize_f64);
    bail!(deserialize_char deserialize_bytes deserialize_byte_buf deserialize_i128
        deserialize_u128);

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.next_non_ws()? {
            b'"' => self.visit_string(visitor),
            b'{' => self.deserialize_map(visitor),
            b'[' => self.deserialize_seq(visitor),
            b't' | b'f' => self.deserialize_bool(visitor),
            b'n' => self.deserialize_unit(visitor),
            b'-' | b'0'..=b'9' => self.visit_number(visitor),
            _ => Err(Bail),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.next_non_ws()? {
            b't' => self
                .literal(b"true")
                .and_then(|()| visitor.visit_bool(true)),
            b'f' => self
                .literal(b"false")
                .and_then(|()| visitor.visit_bool(false)),
            _ => Err(Bail),
        }
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.next_non_ws()? {
            b'-' | b'0'..=b'9' => self.visit_number(visitor),
            _ => Err(Bail),
        }
    }

    #[inline(always)]
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.next_non_ws()? {
            b'"' => self.visit_string(visitor),
            _ => Err(Bail),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_str(visitor)
    }

    #[inline(always)]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        if self.next_non_ws()? == b'n' {
            self.literal(b"null")?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.skip_ws();
        self.literal(b"null")?;
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        if name != RAW_VALUE_TOKEN {
            return visitor.visit_newtype_struct(self);
        }
        // serde_json's RawValue: the value's text, without the white space around it.
        self.skip_ws();
        let start = self.pos;
        self.skip_value()?;
        visitor.visit_map(RawValue {
            text: Some(&self.text[start..self.pos]),
        })
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        if self.next_non_ws()? != b'[' {
            return Err(Bail);
        }
        self.enter()?;
        let open = self.depth;
        let result = visitor.visit_seq(Elements::new(self));
        if self.depth == open {
            // The visitor stopped before the bracket, as a tuple does after its elements.
            if self.next_non_ws() == Ok(b']') {
                self.pos += 1;
                self.depth -= 1;
            } else {
                self.unclosed = true;
            }
        }
        result
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        if self.next_non_ws()? != b'{' {
            return Err(Bail);
        }
        self.enter()?;
        let open = self.depth;
        let result = visitor.visit_map(Entries::new(self));
        self.unclosed |= self.depth == open;
        result
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Bail> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Bail> {
        // Only unit variants, written as a string without escapes.
        if self.next_non_ws()? != b'"' {
            return Err(Bail);
        }
        match self.string()? {
            Str::Borrowed(s) => visitor.visit_enum(BorrowedStrDeserializer::new(s)),
            Str::Copied(_) => Err(Bail),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.skip_value()?;
        visitor.visit_unit()
    }
}

/// The entries of an object (after its `{`) or the elements of an array (after its `[`):
/// `CLOSE` is the bracket that ends them.
pub(super) struct Items<'a, 'de, const CLOSE: u8> {
    de: &'a mut Fast<'de>,
    first: bool,
    /// The closing bracket has been read.
    closed: bool,
}

pub(super) type Entries<'a, 'de> = Items<'a, 'de, b'}'>;
pub(super) type Elements<'a, 'de> = Items<'a, 'de, b']'>;

impl<'a, 'de, const CLOSE: u8> Items<'a, 'de, CLOSE> {
    pub(super) fn new(de: &'a mut Fast<'de>) -> Self {
        Items {
            de,
            first: true,
            closed: false,
        }
    }

    /// Moves to the next item: `false` past the closing bracket (which ends the container:
    /// one level less deep), past a comma otherwise (no comma before the first item, and
    /// none before the bracket).
    #[inline(always)]
    fn next_item(&mut self) -> Result<bool, Bail> {
        if self.closed {
            return Ok(false);
        }
        let de = &mut *self.de;
        match de.next_non_ws()? {
            b if b == CLOSE => {
                de.pos += 1;
                de.depth -= 1;
                self.closed = true;
                return Ok(false);
            }
            b',' if !self.first => {
                de.pos += 1;
                de.skip_ws();
            }
            _ if self.first => {}
            _ => return Err(Bail),
        }
        self.first = false;
        Ok(true)
    }
}

impl<'de> Entries<'_, 'de> {
    /// Moves past the colon between a key and its value.
    #[inline(always)]
    fn colon(&mut self) -> Result<&mut Fast<'de>, Bail> {
        let de = &mut *self.de;
        if de.next_non_ws()? != b':' {
            return Err(Bail);
        }
        de.pos += 1;
        Ok(de)
    }
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = Bail;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Bail> {
        if !self.next_item()? {
            return Ok(None);
        }
        let de = &mut *self.de;
        if de.peek() != Some(b'"') {
            return Err(Bail);
        }
        // A key with escapes is left to serde_json: keys almost never have any, and one
        // way of reading keys lets the compiler inline the type's key matching (about 8% of
        // a plugin's time on the validator).
        match de.string()? {
            Str::Borrowed(key) => seed.deserialize(Key(key)).map(Some),
            Str::Copied(_) => Err(Bail),
        }
    }

    // The colon and the reading of the value are always inlined (so are
    // `deserialize_option`, `deserialize_str` and `visit_string`): a field's value is then
    // read by one call of the value type's `deserialize` rather than a chain of calls,
    // each of which costs a plugin a stack frame and a CPU-deadline check. (Validator:
    // 6 214 -> 6 061 instructions per event.) Inlining the value type's `deserialize`
    // too, into the struct's field loop, made that loop slower in a plugin (6 571).
    #[inline(always)]
    fn next_value<V: Deserialize<'de>>(&mut self) -> Result<V, Bail> {
        V::deserialize(self.colon()?)
    }

    #[inline(always)]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Bail> {
        seed.deserialize(self.colon()?)
    }
}

impl<'de> SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Bail;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Bail> {
        if !self.next_item()? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.de).map(Some)
    }
}

/// An object key, read as serde_json reads a key that has no escapes: as a string, except
/// when the type asks for a number, a boolean, an option, an enum or bytes, which serde_json
/// reads differently and which are left to it.
pub(super) struct Key<'de>(pub(super) &'de str);

impl<'de> de::Deserializer<'de> for Key<'de> {
    type Error = Bail;

    // What serde_json's own key deserializer hands to `deserialize_any`.
    serde::forward_to_deserialize_any! {
        char str string unit unit_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
    bail!(deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_f32
        deserialize_f64 deserialize_bytes deserialize_byte_buf deserialize_option
        deserialize_enum(&'static str, &'static [&'static str]));

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        visitor.visit_newtype_struct(self)
    }
}

/// What serde_json's `RawValue` asks for: a map with one entry, the token and the text.
pub(super) struct RawValue<'de> {
    pub(super) text: Option<&'de str>,
}

impl<'de> MapAccess<'de> for RawValue<'de> {
    type Error = Bail;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Bail> {
        if self.text.is_none() {
            return Ok(None);
        }
        seed.deserialize(BorrowedStrDeserializer::new(RAW_VALUE_TOKEN))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Bail> {
        let text = self.text.take().ok_or(Bail)?;
        seed.deserialize(BorrowedStrDeserializer::new(text))
    }
}
