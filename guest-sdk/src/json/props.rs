//! Randomised properties of the fast path (proptest): on generated documents (strings
//! with every kind of escape, numbers of every shape, odd white space), on damaged ones and
//! on arbitrary bytes (invalid UTF-8 included), `Event::json` gives serde_json's answer,
//! and whatever the fast path accepts alone is what serde_json reads; the scalar fallback
//! of the string scan agrees with the SIMD one. `PROPTEST_CASES` cases each (256 by
//! default); `scripts/fuzz` runs them for as long as it is asked to.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Deserialize;
use serde_json::Value;

use super::tests::Click;
use super::{find_special, from_spans, from_str, is_special, simd};
use crate::Event;
use crate::event::{ChunkValues, InChunk, Scanned};

/// The keys the documents use: `Click`'s fields and others.
const KEYS: [&str; 11] = [
    "event_id", "user_id", "quantity", "price", "raw", "tags", "kind", "nested", "a", "b", "é\"",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1000i32..1000).prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (-1_000_000i64..1_000_000, 0..4u32)
            .prop_map(|(n, p)| Value::from(n as f64 / 10f64.powi(p as i32))),
        any::<String>().prop_map(Value::String),
        "[a-zé😀\"\\\\/\u{0}-\u{1f}\u{7f}]{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(proptest::sample::select(&KEYS[..]), inner, 0..6)
                .prop_map(|m| Value::Object(
                    m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                )),
        ]
    })
}

/// The next choice, round and round.
fn choose(choices: &[u8], at: &mut usize) -> u8 {
    let c = choices
        .get(*at % choices.len().max(1))
        .copied()
        .unwrap_or(0);
    *at += 1;
    c
}

/// Writes `value` as JSON, choosing from `choices` (round and round) the white space
/// between tokens and how each character of a string is written: as it is, with a short
/// escape, or as `\uXXXX` (a surrogate pair beyond the first plane).
fn render(value: &Value, choices: &[u8], at: &mut usize, out: &mut String) {
    let ws = |c: u8| [" ", "", "", "\n\t ", "", "\r\n"][usize::from(c) % 6];
    match value {
        Value::String(s) => {
            out.push('"');
            for ch in s.chars() {
                let c = choose(choices, at);
                let short = match ch {
                    '"' => Some("\\\""),
                    '\\' => Some("\\\\"),
                    '/' => Some("\\/"),
                    '\n' => Some("\\n"),
                    '\t' => Some("\\t"),
                    '\r' => Some("\\r"),
                    '\u{8}' => Some("\\b"),
                    '\u{c}' => Some("\\f"),
                    _ => None,
                };
                let must = matches!(ch, '"' | '\\') || u32::from(ch) < 0x20;
                match short {
                    _ if c % 4 == 0 => escape_utf16(ch, out),
                    Some(short) if must || c % 4 == 1 => out.push_str(short),
                    _ if must => escape_utf16(ch, out),
                    _ => out.push(ch),
                }
            }
            out.push('"');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws(choose(choices, at)));
                render(item, choices, at, out);
            }
            out.push(']');
        }
        Value::Object(fields) => {
            out.push('{');
            for (i, (key, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws(choose(choices, at)));
                render(&Value::String(key.clone()), choices, at, out);
                out.push_str(ws(choose(choices, at)));
                out.push(':');
                render(item, choices, at, out);
                out.push_str(ws(choose(choices, at)));
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// `ch` as `\uXXXX`, a surrogate pair beyond the first plane.
fn escape_utf16(ch: char, out: &mut String) {
    let mut units = [0u16; 2];
    for unit in ch.encode_utf16(&mut units) {
        out.push_str(&format!("\\u{unit:04x}"));
    }
}

/// A flat object (the shape the host reads, mostly), written as [`render`] writes it.
fn flat_document() -> impl Strategy<Value = String> {
    let leaf = json_value().prop_filter("a scalar", |v| !v.is_array() && !v.is_object());
    (
        proptest::collection::btree_map(proptest::sample::select(&KEYS[..]), leaf, 0..8),
        proptest::collection::vec(any::<u8>(), 1..32),
    )
        .prop_map(|(fields, choices)| {
            let fields = fields.into_iter().map(|(k, v)| (k.to_string(), v));
            let mut text = String::new();
            render(
                &Value::Object(fields.collect()),
                &choices,
                &mut 0,
                &mut text,
            );
            text
        })
}

fn document() -> impl Strategy<Value = (Value, String)> {
    (json_value(), proptest::collection::vec(any::<u8>(), 1..32)).prop_map(|(value, choices)| {
        let mut text = String::new();
        render(&value, &choices, &mut 0, &mut text);
        (value, text)
    })
}

/// Bytes near JSON: documents damaged at a few places (cut, JSON's own characters and
/// bytes that are not UTF-8 inserted or put in place of others), and arbitrary bytes.
fn bytes_near_json() -> impl Strategy<Value = Vec<u8>> {
    const PIECES: [&[u8]; 20] = [
        b"\"", b"\\", b"{", b"}", b"[", b"]", b",", b":", b"0", b"-", b".", b"e", b"+", b" ",
        b"\\u00e9", b"\\ud83d", b"\\ude00", b"\xff", b"\xc3", b"\x01",
    ];
    let damaged = (
        document(),
        proptest::collection::vec(any::<(usize, u8, u8)>(), 1..4),
    )
        .prop_map(|((_, text), edits)| {
            let mut bytes = text.into_bytes();
            for (at, what, piece) in edits {
                let at = at % (bytes.len() + 1);
                let piece = PIECES[usize::from(piece) % PIECES.len()];
                match what % 3 {
                    0 => bytes.truncate(at),
                    1 => drop(bytes.splice(at..at, piece.iter().copied())),
                    _ => drop(bytes.splice(at..(at + 1).min(bytes.len()), piece.iter().copied())),
                }
            }
            bytes
        });
    prop_oneof![damaged, proptest::collection::vec(any::<u8>(), 0..48)]
}

/// serde_json's reading of `bytes` as text, as `Event::json` documents it.
fn serde_json_reads<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Option<T> {
    serde_json::from_str(std::str::from_utf8(bytes).ok()?).ok()
}

/// `Event::json` gives serde_json's answer, and what the fast path accepts alone (whole)
/// is serde_json's value.
fn agrees<'a, T: Deserialize<'a> + PartialEq + std::fmt::Debug>(
    bytes: &'a [u8],
) -> Result<(), TestCaseError> {
    let expected = serde_json_reads::<T>(bytes);
    let event = Event::new(bytes);
    prop_assert_eq!(
        event.json::<T>().ok(),
        serde_json_reads::<T>(bytes),
        "{:?}",
        String::from_utf8_lossy(bytes)
    );
    if let Ok(text) = std::str::from_utf8(bytes) {
        let mut complete = false;
        let fast = from_str::<T>(text, &mut complete).ok().filter(|_| complete);
        if fast.is_some() {
            prop_assert_eq!(fast, expected, "the fast path accepted {:?}", text);
        }
    }
    Ok(())
}

/// The host's reading of `text` (the `scan` import), made here with serde_json: where each
/// field lies, if `text` is an object of the shape the host reads (keys and strings without
/// escapes or control characters, no nested values).
pub(super) fn host_spans(text: &str) -> Option<Vec<u32>> {
    struct Fields<'a>(Vec<(&'a str, &'a serde_json::value::RawValue)>);
    impl<'de> Deserialize<'de> for Fields<'de> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Fields<'de>;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Fields<'de>, A::Error> {
                    let mut all = Vec::new();
                    while let Some(entry) = map.next_entry()? {
                        all.push(entry);
                    }
                    Ok(Fields(all))
                }
            }
            d.deserialize_map(V)
        }
    }
    let fields: Fields<'_> = serde_json::from_str(text).ok()?;
    let base = text.as_ptr() as usize;
    let at = |part: &str| (part.as_ptr() as usize - base) as u32;
    let mut spans = Vec::new();
    for (key, raw) in fields.0 {
        let raw = raw.get();
        let plain = |s: &str| !s.bytes().any(|b| b == b'\\' || b < 0x20);
        if !plain(key) || !plain(raw) || raw.starts_with(['{', '[']) {
            return None;
        }
        spans.extend([at(key), key.len() as u32, at(raw), raw.len() as u32]);
    }
    Some(spans)
}

/// [`agrees`], with the host's reading of the fields (where the host would read them):
/// `Event::json` gives serde_json's answer, and what the indexed path accepts alone is
/// serde_json's value.
fn agrees_indexed<'a, T: Deserialize<'a> + PartialEq + std::fmt::Debug>(
    bytes: &'a [u8],
) -> Result<(), TestCaseError> {
    let Some((text, spans)) = std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| Some((text, host_spans(text)?)))
    else {
        return Ok(());
    };
    let expected = serde_json_reads::<T>(bytes);
    let count = (spans.len() / 4) as i32;
    // Leaked: the event borrows its chunk for as long as the value it gives (`'a`).
    let scanned = Scanned::new(&[count], spans.clone(), 1).unwrap();
    let values: &'a ChunkValues<'a> = Box::leak(Box::new(ChunkValues::scanned(bytes, scanned)));
    let mut event = Event::new(bytes);
    event.in_chunk = Some(InChunk {
        values,
        start: 0,
        end: bytes.len(),
        event: 0,
    });
    prop_assert_eq!(
        event.json::<T>().ok(),
        serde_json_reads::<T>(bytes),
        "{:?}",
        text
    );
    let mut complete = false;
    let fast = from_spans::<T>(text, &spans, &mut complete)
        .ok()
        .filter(|_| complete);
    if fast.is_some() {
        prop_assert_eq!(fast, expected, "the indexed path accepted {:?}", text);
    }
    Ok(())
}

proptest! {
    #[test]
    fn documents_read_from_the_hosts_spans_as_serde_json_reads_them(text in flat_document()) {
        agrees_indexed::<Value>(text.as_bytes())?;
        agrees_indexed::<Click<'_>>(text.as_bytes())?;
        agrees_indexed::<BTreeMap<String, Value>>(text.as_bytes())?;
    }

    #[test]
    fn documents_read_as_serde_json_reads_them((value, text) in document()) {
        // The document is valid, and means the value (floats aside: serde_json's reading
        // of a float may be an ulp off).
        let read: Value = serde_json::from_str(&text).unwrap();
        prop_assert!(read == value || text.contains('.') || text.contains('e'), "{}", text);
        agrees::<Value>(text.as_bytes())?;
        agrees::<Click<'_>>(text.as_bytes())?;
    }

    #[test]
    fn damaged_documents_and_any_bytes_get_serde_json_answer(bytes in bytes_near_json()) {
        agrees::<Value>(&bytes)?;
        agrees::<Click<'_>>(&bytes)?;
        agrees::<BTreeMap<String, Value>>(&bytes)?;
    }

    #[test]
    fn the_scalar_fallback_agrees_with_simd(
        bytes in proptest::collection::vec(prop_oneof![any::<u8>(), Just(b'"'), Just(b'\\'), 0u8..0x20, Just(0x7f)], 16..80),
        from in 0..80usize,
    ) {
        for at in 0..=bytes.len() - 16 {
            prop_assert_eq!(simd::special_mask(&bytes, at), simd::scalar_mask(&bytes, at), "at {}", at);
        }
        let from = from % (bytes.len() + 1);
        let naive = bytes[from..].iter().position(|&b| is_special(b)).map(|i| from + i);
        prop_assert_eq!(find_special(&bytes, from), naive);
    }
}
