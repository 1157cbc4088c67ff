//! serde_json's path through an event, for what the flat one ([`super::flat`]) gives
//! up on: nested values, escapes, and malformed text (judged here, by one parser).

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::cells::Cell;
use super::encoder::{Encoder, RowExtra};
use super::infer::Inferred;
use super::{EncodeError, UnknownFields};
use crate::record::Patch;

impl Encoder {
    /// Parses `text` with serde_json into `cells`, with `patch`'s fields in place of its
    /// own; a field that does not fit is put in `failure`, what else it finds in `extra`.
    pub(super) fn parse_slow<'a>(
        &self,
        text: &'a str,
        patch: Option<&'a Patch>,
        cells: &mut [Cell<'a>],
        failure: &mut Option<EncodeError>,
        extra: &mut RowExtra<'a>,
    ) -> Result<(), serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        RowSeed {
            encoder: self,
            patch,
            cells,
            failure,
            extra,
        }
        .deserialize(&mut de)
        .and_then(|()| de.end())
    }
}

/// Parses a JSON object into the cells of a row.
struct RowSeed<'s, 'de> {
    encoder: &'s Encoder,
    /// Fields set in place of the value's own of the same names.
    patch: Option<&'de Patch>,
    cells: &'s mut [Cell<'de>],
    failure: &'s mut Option<EncodeError>,
    extra: &'s mut RowExtra<'de>,
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
        while let Some(key) = map.next_key_seed(KeySeed(self.encoder))? {
            if let Some(patch) = self.patch {
                let name = match &key {
                    Key::Column(i) => self.encoder.columns[*i].name.as_str(),
                    Key::Unknown(name) => name,
                };
                if patch.sets(name) {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            }
            // After a failure, parsing goes on: the rest must still be valid JSON.
            match key {
                Key::Column(i) => {
                    let raw: &'de RawValue = map.next_value()?;
                    let extra = &mut *self.extra;
                    self.encoder
                        .field(i, raw.get(), self.cells, self.failure, extra);
                }
                Key::Unknown(name) if self.encoder.unknown == UnknownFields::Add => {
                    let raw: &'de RawValue = map.next_value()?;
                    let infer = || self.encoder.infer(raw.get());
                    self.encoder.unknown(name, infer, self.extra, self.failure);
                }
                Key::Unknown(name) => {
                    map.next_value::<IgnoredAny>()?;
                    let nothing = || Inferred::Null; // not asked for: not adding columns
                    self.encoder
                        .unknown(name, nothing, self.extra, self.failure);
                }
            }
        }
        Ok(())
    }
}

/// An object key: the index of its column, or the name of a field the table lacks.
enum Key<'de> {
    Column(usize),
    Unknown(Cow<'de, str>),
}

/// Maps an object key to its column.
struct KeySeed<'a>(&'a Encoder);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key<'de>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(match self.0.by_name.get(v) {
            Some(&i) => Key::Column(i),
            None => Key::Unknown(Cow::Borrowed(v)),
        })
    }

    /// A key with escapes, unescaped into a scratch buffer.
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(match self.0.by_name.get(v) {
            Some(&i) => Key::Column(i),
            None => Key::Unknown(Cow::Owned(v.to_string())),
        })
    }
}
