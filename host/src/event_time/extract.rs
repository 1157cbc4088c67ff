//! Reads the few JSON fields the event-time operators need (event time, dedup keys,
//! group-by fields, aggregated fields) from an event, skipping the rest without building
//! it.
//!
//! A field is named by a path: `user_id` is a top-level key, `context.device.os` the key
//! `os` of the object `device` of the object `context`. A missing object on the way, or a
//! value on the way that is not an object (an array, a string, null), leaves the field
//! absent, like a missing top-level key. An event whose top level has a key spelled
//! exactly like the whole path (`"context.device.os": ...`) is read from that key instead,
//! even if its value is null: the exact top-level match wins, so a key holding a dot can
//! still be named (and a pipeline written before paths reads what it always read). Top-level
//! keys are matched in the one pass over the event; an object on the way to a path is kept
//! as its raw text in that pass and read again, once for all the paths under it.

use std::collections::HashMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::units::{Micros, Millis};

/// A scalar read from an event. Objects and arrays keep their JSON text.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A string.
    Str(String),
    /// A number, with its JSON text.
    Num(f64, String),
    /// Anything else that is not null: `true`, `false`, an object, an array.
    Other(String),
}

impl Scalar {
    fn from_raw(raw: &RawValue) -> Option<Scalar> {
        let text = raw.get();
        match text.as_bytes().first()? {
            b'n' => None,
            b'"' => serde_json::from_str(text).ok().map(Scalar::Str),
            b'-' | b'0'..=b'9' => Some(Scalar::Num(
                text.parse().unwrap_or(f64::NAN),
                text.to_string(),
            )),
            _ => Some(Scalar::Other(text.to_string())),
        }
    }

    /// The value as text: a string's content, otherwise the JSON text.
    pub fn text(&self) -> &str {
        match self {
            Scalar::Str(s) | Scalar::Num(_, s) | Scalar::Other(s) => s,
        }
    }

    /// The value as a number: a JSON number or a string that parses as one.
    pub fn number(&self) -> Option<f64> {
        match self {
            Scalar::Num(n, _) => Some(*n).filter(|n| n.is_finite()),
            Scalar::Str(s) => s.trim().parse().ok().filter(|n: &f64| n.is_finite()),
            Scalar::Other(_) => None,
        }
    }
}

/// Why an event's fields could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExtractError {
    /// `malformed_json`, `not_an_object`, `missing_event_time` or `invalid_event_time`.
    pub code: &'static str,
    /// For people.
    pub message: String,
    /// The field to blame, if any.
    pub field: Option<String>,
}

/// The output column a field path names: its last segment (`context.device.os` → `os`),
/// as Spark names `col("context.device.os")`.
pub fn path_column(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// Checks a field path: no empty segment (`a..b`, `.a`, `a.`).
pub fn check_path(path: &str) -> Result<(), String> {
    if path.split('.').any(str::is_empty) {
        return Err(format!(
            "`{path}` is not a field path: a dot separates non-empty keys (`a.b.c`)"
        ));
    }
    Ok(())
}

/// What one key of an object leads to: a value kept here, keys read inside it, or both.
#[derive(Debug, Clone, Default)]
struct Target {
    /// Where the value goes among the raw values read: `2 * slot` for a path's value
    /// reached through its segments, `2 * slot + 1` for a top-level key spelled like the
    /// whole dotted path (which wins when present).
    at: Option<usize>,
    children: Option<Box<Keys>>,
}

/// The keys read in one object, by name.
type Keys = HashMap<String, Target>;

/// Reads a fixed set of fields, each a top-level key or a dotted path (see the module).
#[derive(Debug, Clone)]
pub struct Extractor {
    names: Vec<String>,
    index: Keys,
}

impl Extractor {
    /// An extractor of `names` (duplicates are read once).
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut extractor = Extractor {
            names: Vec::new(),
            index: HashMap::new(),
        };
        for name in names {
            extractor.position(name);
        }
        extractor
    }

    /// The slot of the field path `name`, adding it if new.
    pub fn position(&mut self, name: &str) -> usize {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            return i;
        }
        let slot = self.names.len();
        self.names.push(name.to_string());
        if name.contains('.') {
            self.index.entry(name.to_string()).or_default().at = Some(2 * slot + 1);
        }
        let mut keys = &mut self.index;
        let mut segments = name.split('.').peekable();
        while let Some(segment) = segments.next() {
            let target = keys.entry(segment.to_string()).or_default();
            if segments.peek().is_none() {
                target.at = Some(2 * slot);
                break;
            }
            keys = target.children.get_or_insert_with(Box::default);
        }
        slot
    }

    /// The values of the fields, by slot (`None`: missing or null).
    pub fn read(&self, value: Option<&[u8]>) -> Result<Vec<Option<Scalar>>, ExtractError> {
        let value = value.ok_or_else(|| ExtractError {
            code: "not_an_object",
            message: "the record has no value".into(),
            field: None,
        })?;
        let mut raw: Vec<Option<&RawValue>> = vec![None; 2 * self.names.len()];
        let mut de = serde_json::Deserializer::from_slice(value);
        let malformed = |e: serde_json::Error| ExtractError {
            code: if e.is_data() {
                "not_an_object"
            } else {
                "malformed_json"
            },
            message: format!("the value is not a JSON object: {e}"),
            field: None,
        };
        de.deserialize_map(Fields {
            index: &self.index,
            out: &mut raw,
        })
        .map_err(malformed)?;
        de.end().map_err(malformed)?;
        Ok(raw
            .chunks_exact(2)
            .map(|r| r[1].or(r[0]).and_then(Scalar::from_raw))
            .collect())
    }
}

struct Fields<'x, 'de> {
    index: &'x Keys,
    out: &'x mut Vec<Option<&'de RawValue>>,
}

/// Reads the keys of `children` inside `raw`; a `raw` that is not an object holds none.
fn read_inside<'de>(raw: &'de RawValue, children: &Keys, out: &mut Vec<Option<&'de RawValue>>) {
    if !raw.get().starts_with('{') {
        return;
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    // The outer pass already checked the text: an object reads without error.
    let _ = de.deserialize_map(Fields {
        index: children,
        out,
    });
}

impl<'de> Visitor<'de> for Fields<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<KeyText<'de>>()? {
            match self.index.get(key.as_str()) {
                Some(Target { at, children }) => {
                    let raw = map.next_value::<&'de RawValue>()?;
                    if let Some(at) = at {
                        self.out[*at] = Some(raw);
                    }
                    if let Some(children) = children {
                        read_inside(raw, children, self.out);
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A key, borrowed from the input unless it has escapes.
enum KeyText<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl KeyText<'_> {
    fn as_str(&self) -> &str {
        match self {
            KeyText::Borrowed(s) => s,
            KeyText::Owned(s) => s,
        }
    }
}

impl<'de> serde::Deserialize<'de> for KeyText<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(KeyText::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(KeyText::Owned(v.to_string()))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> DeserializeSeed<'de> for Fields<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

/// Reads an event time: an RFC 3339 string, a `YYYY-MM-DD HH:MM:SS[.f]` string (UTC), or
/// milliseconds since 1970.
pub fn event_time(field: &str, value: Option<&Scalar>) -> Result<Micros, ExtractError> {
    let invalid = |message: String| ExtractError {
        code: "invalid_event_time",
        message,
        field: Some(field.to_string()),
    };
    match value {
        None => Err(ExtractError {
            code: "missing_event_time",
            message: format!("the event has no `{field}` (its event time)"),
            field: Some(field.to_string()),
        }),
        Some(Scalar::Str(text)) => parse_time(text).map(Micros).ok_or_else(|| {
            invalid(format!(
                "`{field}` = {text:?} is not a timestamp (RFC 3339, or YYYY-MM-DD HH:MM:SS in UTC)"
            ))
        }),
        Some(Scalar::Num(n, text)) => {
            if n.fract() == 0.0 && n.abs() < 1e15 {
                Ok(Millis(*n as i64).as_micros())
            } else {
                Err(invalid(format!(
                    "`{field}` = {text} is not a whole number of milliseconds since 1970"
                )))
            }
        }
        Some(Scalar::Other(text)) => Err(invalid(format!("`{field}` = {text} is not a timestamp"))),
    }
}

fn parse_time(text: &str) -> Option<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_micros());
    }
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(text, f).ok())
        .map(|t| t.and_utc().timestamp_micros())
}

/// Formats a time as RFC 3339 in UTC, e.g. `2026-07-29T10:05:00Z`.
pub fn format_micros(Micros(micros): Micros) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .unwrap_or_else(|| micros.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_named_fields() {
        let ex = Extractor::new(["a", "b", "c", "d"]);
        let v = ex
            .read(Some(
                br#"{"x":{"deep":[1,2]},"a":"s\"q","b":12.5,"c":null,"e":true,"d":[1]}"#,
            ))
            .unwrap();
        assert_eq!(v[0], Some(Scalar::Str("s\"q".into())));
        assert_eq!(v[1], Some(Scalar::Num(12.5, "12.5".into())));
        assert_eq!(v[2], None);
        assert_eq!(v[3], Some(Scalar::Other("[1]".into())));
        assert_eq!(ex.read(Some(b"{}")).unwrap(), vec![None; 4]);
        assert_eq!(ex.read(Some(b"[1]")).unwrap_err().code, "not_an_object");
        assert_eq!(
            ex.read(Some(b"{\"a\":")).unwrap_err().code,
            "malformed_json"
        );
        assert_eq!(ex.read(Some(b"{} x")).unwrap_err().code, "malformed_json");
        assert_eq!(ex.read(None).unwrap_err().code, "not_an_object");
        // An escaped key still matches.
        let v = ex.read(Some(br#"{"\u0061":"yes"}"#)).unwrap();
        assert_eq!(v[0], Some(Scalar::Str("yes".into())));
    }

    #[test]
    fn reads_paths_into_objects() {
        let ex = Extractor::new(["context.device.os", "context.page", "user", "a.b"]);
        let v = ex
            .read(Some(
                br#"{"context":{"page":"/home","device":{"os":"ios","v":[1]}},"user":"u1","a":{"b":2}}"#,
            ))
            .unwrap();
        assert_eq!(v[0], Some(Scalar::Str("ios".into())));
        assert_eq!(v[1], Some(Scalar::Str("/home".into())));
        assert_eq!(v[2], Some(Scalar::Str("u1".into())));
        assert_eq!(v[3], Some(Scalar::Num(2.0, "2".into())));
        // An object as a path's value keeps its JSON text, like a top-level one.
        let ex = Extractor::new(["context.device"]);
        let v = ex
            .read(Some(br#"{"context":{"device":{"os":"ios"}}}"#))
            .unwrap();
        assert_eq!(v[0], Some(Scalar::Other(r#"{"os":"ios"}"#.into())));
    }

    #[test]
    fn a_missing_or_non_object_step_leaves_the_path_absent() {
        let ex = Extractor::new(["context.device.os", "n"]);
        for value in [
            &br#"{"n":1}"#[..],
            br#"{"n":1,"context":null}"#,
            br#"{"n":1,"context":{}}"#,
            br#"{"n":1,"context":{"device":"ios"}}"#,
            br#"{"n":1,"context":{"device":[{"os":"ios"}]}}"#,
            br#"{"n":1,"context":[{"device":{"os":"ios"}}]}"#,
            br#"{"n":1,"context":{"device":{"os":null}}}"#,
            br#"{"n":1,"context":7}"#,
        ] {
            let v = ex.read(Some(value)).unwrap();
            assert_eq!(v[0], None, "{}", String::from_utf8_lossy(value));
            assert_eq!(v[1], Some(Scalar::Num(1.0, "1".into())));
        }
        // An array step is not indexed: `items.0` is the key "0" of an object.
        let ex = Extractor::new(["items.0"]);
        assert_eq!(ex.read(Some(br#"{"items":["x"]}"#)).unwrap()[0], None);
        let v = ex.read(Some(br#"{"items":{"0":"x"}}"#)).unwrap();
        assert_eq!(v[0], Some(Scalar::Str("x".into())));
    }

    #[test]
    fn paths_with_escaped_keys_and_a_top_level_namesake() {
        // Escaped keys match at every level.
        let ex = Extractor::new(["ctx.os"]);
        let v = ex
            .read(Some(br#"{"\u0063tx":{"o\u0073":"android"}}"#))
            .unwrap();
        assert_eq!(v[0], Some(Scalar::Str("android".into())));
        // A top-level field named like a path's first segment is read too, each into its
        // own slot, whichever is asked first.
        for names in [["ctx", "ctx.os"], ["ctx.os", "ctx"]] {
            let ex = Extractor::new(names);
            let v = ex.read(Some(br#"{"ctx":{"os":"ios"}}"#)).unwrap();
            let (whole, os) = if names[0] == "ctx" { (0, 1) } else { (1, 0) };
            assert_eq!(v[whole], Some(Scalar::Other(r#"{"os":"ios"}"#.into())));
            assert_eq!(v[os], Some(Scalar::Str("ios".into())));
            let v = ex.read(Some(br#"{"ctx":"flat"}"#)).unwrap();
            assert_eq!(v[whole], Some(Scalar::Str("flat".into())));
            assert_eq!(v[os], None);
        }
        let ex = Extractor::new(["a.b"]);
        // Malformed JSON inside an object on the way is still an error of the event.
        assert_eq!(
            ex.read(Some(br#"{"a":{"b":}}"#)).unwrap_err().code,
            "malformed_json"
        );
    }

    #[test]
    fn a_top_level_key_spelled_like_the_path_wins() {
        let ex = Extractor::new(["a.b", "a.c", "x"]);
        let read = |json: &str| ex.read(Some(json.as_bytes())).unwrap();
        // Only the dotted key: it is the field (as before paths existed).
        let v = read(r#"{"a.b":1,"x":0}"#);
        assert_eq!(v[0], Some(Scalar::Num(1.0, "1".into())));
        assert_eq!(v[1], None);
        // Both, in either order: the exact top-level key wins, per field.
        for json in [
            r#"{"a.b":"top","a":{"b":"nested","c":"c"}}"#,
            r#"{"a":{"b":"nested","c":"c"},"a.b":"top"}"#,
        ] {
            let v = read(json);
            assert_eq!(v[0], Some(Scalar::Str("top".into())), "{json}");
            assert_eq!(v[1], Some(Scalar::Str("c".into())), "{json}");
        }
        // Present but null still wins: the event says the field is null.
        assert_eq!(read(r#"{"a.b":null,"a":{"b":"nested"}}"#)[0], None);
        // Absent: the path is read.
        let v = read(r#"{"a":{"b":"nested"}}"#);
        assert_eq!(v[0], Some(Scalar::Str("nested".into())));
        // A top-level key holding a dot is not split: `a.b` in `{"a.b":{"c":1}}` is no
        // step towards `a.b.c`.
        let ex = Extractor::new(["a.b.c"]);
        assert_eq!(ex.read(Some(br#"{"a.b":{"c":1}}"#)).unwrap()[0], None);
    }

    #[test]
    fn path_names_and_checks() {
        assert_eq!(path_column("context.device.os"), "os");
        assert_eq!(path_column("user_id"), "user_id");
        assert!(check_path("a.b.c").is_ok());
        for bad in ["a..b", ".a", "a.", ""] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn numbers_and_text() {
        assert_eq!(Scalar::Str(" 2.5".into()).number(), Some(2.5));
        assert_eq!(Scalar::Str("several".into()).number(), None);
        assert_eq!(Scalar::Other("true".into()).number(), None);
        assert_eq!(Scalar::Num(3.0, "3".into()).text(), "3");
    }

    #[test]
    fn event_times() {
        let t = |s: &str| event_time("ts", Some(&Scalar::Str(s.into())));
        let base = Micros(1_785_319_500_000_000); // 2026-07-29T10:05:00Z
        assert_eq!(t("2026-07-29T10:05:00Z"), Ok(base));
        assert_eq!(t("2026-07-29T10:05:00.000Z"), Ok(base));
        assert_eq!(t("2026-07-29T12:05:00+02:00"), Ok(base));
        assert_eq!(t("2026-07-29 10:05:00"), Ok(base));
        assert_eq!(
            t("2026-07-29T10:05:00.5"),
            Ok(base.saturating_add(Micros(500_000)))
        );
        assert_eq!(
            event_time(
                "ts",
                Some(&Scalar::Num(1.7853195e12, "1785319500000".into()))
            ),
            Ok(base)
        );
        assert_eq!(t("yesterday").unwrap_err().code, "invalid_event_time");
        let missing = event_time("ts", None).unwrap_err();
        assert_eq!(
            (missing.code, missing.field.as_deref()),
            ("missing_event_time", Some("ts"))
        );
        assert_eq!(format_micros(base), "2026-07-29T10:05:00Z");
        assert_eq!(
            format_micros(base.saturating_add(Micros(250_000))),
            "2026-07-29T10:05:00.250Z"
        );
    }
}
