//! Some top-level fields of a table's value, for the `lookup-fields` import: where each
//! field's JSON text lies in the value, found with one pass over it, so a plugin that copies
//! a few fields of a looked-up value into its events gets their text without parsing the
//! value itself.
//!
//! The pass is the encoder's scanner for flat objects (`encode::flat_fields`) when the value
//! is one, and serde_json (values borrowed, nothing built) for the rest: nested values and
//! escapes. The scanner accepts only valid JSON and reads what serde_json reads, so the two
//! paths give the same spans.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A value whose fields cannot be read: not a JSON object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the value is not a JSON object: {0}")]
pub struct NotAnObject(String);

/// Sets `spans[n]` to where the JSON text of field `names[n]` lies in `value`, or `None`
/// when it has no such field. A field named twice counts at its last place (as serde_json
/// reads an object into a map).
pub fn find<N: AsRef<str>>(
    value: &[u8],
    names: &[N],
    spans: &mut [Option<Range<usize>>],
) -> Result<(), NotAnObject> {
    debug_assert_eq!(names.len(), spans.len());
    spans.fill(None);
    let base = value.as_ptr() as usize;
    if let Ok(text) = simdutf8::basic::from_utf8(value) {
        let flat = crate::encode::flat_fields(text, |key, text| {
            if let Some(n) = names.iter().position(|n| n.as_ref() == key) {
                let from = text.as_ptr() as usize - base;
                spans[n] = Some(from..from + text.len());
            }
        });
        if flat.is_some() {
            return Ok(());
        }
    }
    find_with_serde(value, names, spans)
}

/// [`find`] with serde_json alone: for values the flat scanner leaves, and as its measure.
fn find_with_serde<N: AsRef<str>>(
    value: &[u8],
    names: &[N],
    spans: &mut [Option<Range<usize>>],
) -> Result<(), NotAnObject> {
    spans.fill(None);
    let mut de = serde_json::Deserializer::from_slice(value);
    let finder = Finder {
        base: value.as_ptr() as usize,
        names,
        spans,
    };
    finder
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| NotAnObject(e.to_string()))
}

/// Asks the CPU to start loading the first two cache lines of `bytes`, which will be read
/// soon: a hint, which never faults and changes nothing else.
#[inline]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64).take(2) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch reads nothing into the program and cannot fault; the pointer
        // is that of a live slice.
        #[allow(unsafe_code)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// The serde visitor of [`find`].
struct Finder<'a, N> {
    /// Where the value starts in memory, to turn a field's text into a range.
    base: usize,
    names: &'a [N],
    spans: &'a mut [Option<Range<usize>>],
}

impl<'de, N: AsRef<str>> DeserializeSeed<'de> for Finder<'_, N> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, N: AsRef<str>> Visitor<'de> for Finder<'_, N> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let text: &'de RawValue = map.next_value()?;
            if let Some(n) = self.names.iter().position(|n| n.as_ref() == key) {
                let from = text.get().as_ptr() as usize - self.base;
                self.spans[n] = Some(from..from + text.get().len());
            }
        }
        Ok(())
    }
}

/// An object's key, borrowed from the value unless it has escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }

            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'v>(value: &'v str, names: &[&str]) -> Result<Vec<Option<&'v str>>, NotAnObject> {
        let mut spans = vec![Some(0..0); names.len()];
        find(value.as_bytes(), names, &mut spans)?;
        Ok(spans.into_iter().map(|s| s.map(|r| &value[r])).collect())
    }

    #[test]
    fn finds_the_fields_asked_for_as_their_text() {
        let value =
            r#" { "user_id": "u1", "tier" : "gold", "n": 2.50, "o": {"tier": 1}, "z": null } "#;
        assert_eq!(
            fields(value, &["tier", "n", "o", "z", "absent"]).unwrap(),
            [
                Some(r#""gold""#),
                Some("2.50"),
                Some(r#"{"tier": 1}"#),
                Some("null"),
                None
            ]
        );
        assert_eq!(fields("{}", &["tier"]).unwrap(), [None]);
        assert_eq!(fields(value, &[]).unwrap(), Vec::<Option<&str>>::new());
    }

    #[test]
    fn escaped_names_match_and_the_last_of_a_name_twice_counts() {
        let value = r#"{"ti\u0065r":"a","say \"hi\"":"b\n","tier":"c"}"#;
        assert_eq!(
            fields(value, &["tier", "say \"hi\""]).unwrap(),
            [Some(r#""c""#), Some(r#""b\n""#)]
        );
        assert_eq!(
            fields(r#"{"tier":"c","ti\u0065r":"a"}"#, &["tier"]).unwrap(),
            [Some(r#""a""#)]
        );
    }

    /// The flat scanner and serde_json find the same spans: every value of the generated
    /// tables, and values the scanner leaves to serde_json.
    #[test]
    fn the_flat_scanner_and_serde_json_agree() {
        use crate::generate::{Generator, GeneratorConfig, Shape};
        let names = [
            "tier",
            "country",
            "category",
            "list_price",
            "user_id",
            "absent",
        ];
        let by_serde = |value: &[u8]| {
            let mut spans = vec![None; names.len()];
            find_with_serde(value, &names, &mut spans).unwrap();
            spans
        };
        let mut flat = 0;
        for shape in [Shape::Customers, Shape::Products, Shape::Retail] {
            let config = GeneratorConfig {
                shape,
                invalid_share: 0.0,
                ..GeneratorConfig::default()
            };
            for event in Generator::new(config).take(500) {
                let value = event.value.as_bytes();
                let mut spans = vec![None; names.len()];
                find(value, &names, &mut spans).unwrap();
                assert_eq!(spans, by_serde(value), "{}", event.value);
                flat += usize::from(crate::encode::flat_fields(&event.value, |_, _| ()).is_some());
            }
        }
        assert!(flat > 1000, "most generated values are flat: {flat}");
        let value = br#"{"tier":"a","o":{"tier":1},"tier":"b"}"#;
        let mut spans = vec![None; names.len()];
        find(value, &names, &mut spans).unwrap();
        assert_eq!(spans, by_serde(value));
    }

    #[test]
    fn a_value_that_is_not_an_object_is_an_error() {
        for bad in ["[1]", "\"gold\"", "{\"open\":", "{} x", "", "{\"a\":tru}"] {
            assert!(fields(bad, &["a"]).is_err(), "{bad}");
        }
    }
}
