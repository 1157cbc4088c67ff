//! A patch: fields a plugin adds to or replaces in a record's value (a JSON object), kept
//! beside the value rather than printed into it. The encoder reads the value and the patch
//! together (one parse of the value, none of a new text); anything else that needs the
//! value as bytes (a later stage, event time, a dead letter) asks for [`Patch::apply`].
//!
//! The fields of a whole chunk share one [`PatchFields`], as they crossed the boundary: a
//! patch is a range of its entries, so patching costs no allocation per record.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The patch fields of a chunk: names and JSON values, concatenated.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PatchFields {
    names: String,
    values: Vec<u8>,
    /// For each field, where its name lies in `names` and its value in `values`.
    entries: Vec<(Range<u32>, Range<u32>)>,
}

impl PatchFields {
    /// Adds a field; its value must be JSON text (see [`PatchFields::check`]).
    pub fn push(&mut self, name: &str, value: &[u8]) {
        let n = self.names.len() as u32;
        let v = self.values.len() as u32;
        self.names.push_str(name);
        self.values.extend_from_slice(value);
        self.entries
            .push((n..self.names.len() as u32, v..self.values.len() as u32));
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Field `i`: its name and its value's JSON text.
    pub fn get(&self, i: usize) -> (&str, &[u8]) {
        let (name, value) = &self.entries[i];
        (
            &self.names[name.start as usize..name.end as usize],
            &self.values[value.start as usize..value.end as usize],
        )
    }

    /// Why field `i` cannot be applied: its value is not JSON text.
    pub fn check(&self, i: usize) -> Result<(), String> {
        let (name, value) = self.get(i);
        if plainly_json(value) {
            return Ok(());
        }
        serde_json::from_slice::<&RawValue>(value)
            .map(drop)
            .map_err(|e| format!("the value of patched field `{name}` is not JSON: {e}"))
    }
}

/// Whether `value` is JSON text of the shapes enrichments copy most (an ASCII string
/// without escapes, a number, `true`, `false`, `null`), seen without serde_json: checking
/// patched values with it took ~5% of the retail enricher's time. `false` says nothing: the
/// value is then checked by serde_json.
fn plainly_json(value: &[u8]) -> bool {
    match value {
        [b'"', inner @ .., b'"'] => inner
            .iter()
            .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'),
        b"true" | b"false" | b"null" => true,
        _ => plain_number(value),
    }
}

/// Whether `value` is a JSON number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
fn plain_number(value: &[u8]) -> bool {
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let mut rest = value.strip_prefix(b"-").unwrap_or(value);
    match digits(rest) {
        0 => return false,
        n if n > 1 && rest[0] == b'0' => return false,
        n => rest = &rest[n..],
    }
    if let Some(fraction) = rest.strip_prefix(b".") {
        match digits(fraction) {
            0 => return false,
            n => rest = &fraction[n..],
        }
    }
    if let Some(exponent) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
        let exponent = exponent
            .strip_prefix(b"+")
            .or_else(|| exponent.strip_prefix(b"-"))
            .unwrap_or(exponent);
        match digits(exponent) {
            0 => return false,
            n => rest = &exponent[n..],
        }
    }
    rest.is_empty()
}

/// Fields to add to or replace in one record's value: a range of a chunk's [`PatchFields`].
#[derive(Clone, PartialEq, Eq)]
pub struct Patch {
    fields: Arc<PatchFields>,
    range: Range<usize>,
}

impl fmt::Debug for Patch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (name, value) in self.fields() {
            map.entry(&name, &String::from_utf8_lossy(value));
        }
        map.finish()
    }
}

/// Why a patch could not be applied to a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PatchError {
    /// Machine-readable reason: `null_value`, `not_an_object` or `malformed_json`.
    pub code: &'static str,
    /// What was wrong.
    pub message: String,
}

impl Patch {
    /// The patch of entries `range` of `fields`.
    pub fn new(fields: Arc<PatchFields>, range: Range<usize>) -> Self {
        assert!(range.end <= fields.len(), "a patch lies within its fields");
        Patch { fields, range }
    }

    /// A patch of its own fields (names and JSON values), for tests and tools.
    pub fn of<'a>(fields: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut all = PatchFields::default();
        for (name, value) in fields {
            all.push(name, value.as_bytes());
        }
        let n = all.len();
        Patch::new(Arc::new(all), 0..n)
    }

    /// The fields, in the order given: name and JSON text.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.range.clone().map(|i| self.fields.get(i))
    }

    /// Whether it sets field `name`.
    #[inline]
    pub fn sets(&self, name: &str) -> bool {
        self.fields().any(|(n, _)| n == name)
    }

    /// `value` (a JSON object) with the patch applied: each field of the value in its
    /// place (a patched one with its new value), then the fields it did not have, in the
    /// patch's order.
    pub fn apply(&self, value: Option<&[u8]>) -> Result<Vec<u8>, PatchError> {
        let value = value.ok_or_else(|| PatchError {
            code: "null_value",
            message: "a patch needs a value, and the record has none (a tombstone)".into(),
        })?;
        let malformed = |e: serde_json::Error| {
            let not_object =
                e.is_data() && value.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{');
            PatchError {
                code: if not_object {
                    "not_an_object"
                } else {
                    "malformed_json"
                },
                message: format!("a patch needs a JSON object value: {e}"),
            }
        };
        let mut de = serde_json::Deserializer::from_slice(value);
        let fields = de.deserialize_map(Fields).map_err(malformed)?;
        de.end().map_err(malformed)?;
        let mut out = Vec::with_capacity(value.len() + 64);
        out.push(b'{');
        let comma = |out: &mut Vec<u8>| {
            if out.len() > 1 {
                out.push(b',');
            }
        };
        let patched = |name: &str| self.fields().find(|(n, _)| *n == name).map(|(_, v)| v);
        for (name, raw) in &fields {
            comma(&mut out);
            write_name(&mut out, name);
            match patched(name) {
                Some(new) => out.extend_from_slice(new),
                None => out.extend_from_slice(raw.get().as_bytes()),
            }
        }
        for (name, new) in self.fields() {
            if !fields.iter().any(|(n, _)| n == name) {
                comma(&mut out);
                write_name(&mut out, name);
                out.extend_from_slice(new);
            }
        }
        out.push(b'}');
        Ok(out)
    }
}

fn write_name(out: &mut Vec<u8>, name: &str) {
    serde_json::to_writer(&mut *out, name).expect("a string serialises");
    out.push(b':');
}

/// A JSON object's fields, in order, as raw text.
struct Fields;

impl<'de> Visitor<'de> for Fields {
    type Value = Vec<(Cow<'de, str>, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::new();
        while let Some(name) = map.next_key::<Cow<'de, str>>()? {
            fields.push((name, map.next_value()?));
        }
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn applied(patch: &Patch, value: &str) -> Result<Value, PatchError> {
        patch
            .apply(Some(value.as_bytes()))
            .map(|v| serde_json::from_slice(&v).unwrap())
    }

    #[test]
    fn the_shapes_enrichments_copy_are_seen_as_json_at_once() {
        for plain in [
            r#""gold""#,
            r#""""#,
            "18.5",
            "-0",
            "0.25e-3",
            "7E+2",
            "true",
            "null",
        ] {
            assert!(plainly_json(plain.as_bytes()), "{plain}");
        }
        for other in [
            r#""a\"b""#,
            "\"é\"",
            "01",
            "1.",
            "-",
            "1e",
            ".5",
            "[1]",
            "nul",
            "\"",
            "",
        ] {
            assert!(!plainly_json(other.as_bytes()), "{other}");
        }
    }

    proptest::proptest! {
        /// What the quick look calls JSON, serde_json does too (it may leave some JSON to
        /// serde_json; it never lets through what is not).
        #[test]
        fn what_is_plainly_json_is_json(value in proptest::prop_oneof![
            "\"[a-z \"\\\\\u{1}\u{7f}é]{0,6}\"",
            "-?[0-9]{0,3}(\\.[0-9]{0,2})?([eE][+-]?[0-9]{0,2})?",
            "-?[0-9.eE+-]{1,8}",
            "[-+0-9.eE\"a-z\\\\ \u{1}é]{0,10}",
        ]) {
            if plainly_json(value.as_bytes()) {
                proptest::prop_assert!(
                    serde_json::from_slice::<&RawValue>(value.as_bytes()).is_ok(),
                    "{value:?}"
                );
            }
        }
    }

    #[test]
    fn fields_are_replaced_in_place_and_added_at_the_end() {
        let patch = Patch::of([("tier", r#""gold""#), ("a", "[1, 2]"), ("q\"", "null")]);
        let out = patch
            .apply(Some(br#"{"a": 1, "say \"hi\"": "x\ny", "b": 2.50}"#))
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":[1, 2],"say \"hi\"":"x\ny","b":2.50,"tier":"gold","q\"":null}"#
        );
        assert_eq!(
            applied(&patch, "{}").unwrap(),
            json!({"tier": "gold", "a": [1, 2], "q\"": null})
        );
    }

    #[test]
    fn only_objects_are_patched() {
        let patch = Patch::of([("a", "1")]);
        assert_eq!(patch.apply(None).unwrap_err().code, "null_value");
        assert_eq!(applied(&patch, "[1]").unwrap_err().code, "not_an_object");
        assert_eq!(
            applied(&patch, r#"{"a": "#).unwrap_err().code,
            "malformed_json"
        );
        assert_eq!(
            applied(&patch, r#"{} x"#).unwrap_err().code,
            "malformed_json"
        );
    }

    #[test]
    fn patches_share_their_chunks_fields() {
        let mut all = PatchFields::default();
        all.push("a", b"1");
        all.push("b", b"tru");
        all.push("c", b"{}");
        let all = Arc::new(all);
        let second = Patch::new(all.clone(), 1..3);
        assert_eq!(
            second.fields().collect::<Vec<_>>(),
            vec![("b", &b"tru"[..]), ("c", &b"{}"[..])]
        );
        assert!(second.sets("c") && !second.sets("a"));
        assert!(all.check(0).is_ok());
        assert!(all.check(1).unwrap_err().contains("`b` is not JSON"));
    }
}
