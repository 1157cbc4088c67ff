//! A fast path for the common event: a flat JSON object whose keys and strings have no
//! escapes, and whose values are strings, numbers, booleans or null.
//!
//! Hand-written because it was measured: with serde_json (a raw value per field, a key
//! deserialised through a visitor) parsing took ~15% of the CPU per event of the ingest
//! benchmark. It only ever accepts valid JSON, and gives up (`None`) on anything else —
//! nested values, escapes, control characters, malformed text — which the encoder then
//! hands to serde_json, so errors and rare shapes are judged by one parser only.

use std::sync::Arc;

use crate::record::{FieldSpans, Record};

/// Calls `field(key, raw_value)` for each field of `text`, in order, if `text` is a flat
/// object of the common shape; `None` (after some calls, maybe) if it is not.
pub(crate) fn each_field<'a>(text: &'a str, mut field: impl FnMut(&'a str, &'a str)) -> Option<()> {
    let mut s = Scan {
        b: text.as_bytes(),
        i: 0,
    };
    s.ws();
    s.byte(b'{')?;
    s.ws();
    if s.peek()? == b'}' {
        s.i += 1;
    } else {
        loop {
            let (start, end) = s.string()?;
            let key = &text[start..end];
            s.ws();
            s.byte(b':')?;
            s.ws();
            let (start, end) = s.value()?;
            field(key, &text[start..end]);
            s.ws();
            match s.next()? {
                b',' => s.ws(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    s.ws();
    (s.i == s.b.len()).then_some(())
}

/// Reads the fields of each record's value once (see [`spans`]) and gives each record
/// that is a flat object of the common shape its [`FieldSpans`], for the plugins and the
/// encoder to use instead of reading the value again. One buffer holds the spans of all.
pub fn index_fields(records: &mut [Record]) {
    // A retail event has eighteen fields of four numbers.
    let mut all = Vec::with_capacity(records.len() * 72);
    let mut found = Vec::with_capacity(records.len());
    for record in records.iter() {
        let first = (all.len() / 4) as u32;
        let count = record.value.as_deref().and_then(|v| spans(v, &mut all));
        found.push(count.map(|count| (first, count)));
    }
    let all = Arc::new(all);
    for (record, found) in records.iter_mut().zip(found) {
        record.spans = match (found, record.value.as_deref()) {
            (Some((first, count)), Some(value)) => {
                Some(FieldSpans::new(all.clone(), first, count, value))
            }
            _ => None,
        };
    }
}

/// Calls `field(key, raw_value)` for each field of `text` that `spans` (made by [`spans`]
/// for this text) names; `None` if a span does not fit the text.
pub(crate) fn each_span<'a>(
    text: &'a str,
    spans: &[u32],
    mut field: impl FnMut(&'a str, &'a str),
) -> Option<()> {
    for span in spans.chunks_exact(4) {
        let [key, key_len, raw, raw_len] = [span[0], span[1], span[2], span[3]].map(|n| n as usize);
        field(text.get(key..key + key_len)?, text.get(raw..raw + raw_len)?);
    }
    Some(())
}

/// Appends to `spans` where the fields of `value` lie, four numbers per field (the key's
/// offset in `value` and length, the raw value's offset and length), and returns their
/// number, if `value` is UTF-8 and a flat object of the common shape (see
/// [`each_field`]); otherwise leaves `spans` as it was and returns `None`.
pub(crate) fn spans(value: &[u8], spans: &mut Vec<u32>) -> Option<u32> {
    let text = simdutf8::basic::from_utf8(value).ok()?;
    let before = spans.len();
    let base = text.as_ptr() as usize;
    let mut count = 0u32;
    let at = |part: &str| (part.as_ptr() as usize - base) as u32;
    let read = each_field(text, |key, raw| {
        spans.extend([at(key), key.len() as u32, at(raw), raw.len() as u32]);
        count += 1;
    });
    if read.is_none() || u32::try_from(value.len()).is_err() {
        spans.truncate(before);
        return None;
    }
    Some(count)
}

/// Its small steps are always inlined: called a few times per field, as calls they cost a
/// sixth of the scan (measured: 266 → 223 ns per retail event).
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    #[inline(always)]
    fn byte(&mut self, expected: u8) -> Option<()> {
        (self.next()? == expected).then_some(())
    }

    #[inline(always)]
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// A string without escapes or control characters: the range between its quotes.
    #[inline(always)]
    fn string(&mut self) -> Option<(usize, usize)> {
        self.byte(b'"')?;
        let start = self.i;
        // Eight bytes at a time (SWAR): no set-up, so short strings pay nothing for it,
        // and a long one is read at a word a step. Measured against a byte at a time.
        let end = start + special(&self.b[start..])?;
        if self.b[end] != b'"' {
            return None;
        }
        self.i = end + 1;
        Some((start, end))
    }

    /// A string, number, boolean or null: its range, quotes included.
    #[inline(always)]
    fn value(&mut self) -> Option<(usize, usize)> {
        let start = self.i;
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'-' | b'0'..=b'9' => self.number()?,
            b't' => self.word(b"true")?,
            b'f' => self.word(b"false")?,
            b'n' => self.word(b"null")?,
            _ => return None,
        }
        Some((start, self.i))
    }

    #[inline(always)]
    fn word(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// JSON's number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    #[inline(always)]
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    #[inline(always)]
    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    #[inline(always)]
    fn some_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }
}

/// The place of the first quote, backslash or control character in `b`, if any.
#[inline]
pub(super) fn special(b: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    /// The high bit of each byte of `x` that is zero, and maybe of bytes after one that
    /// is (a borrow), never before: the lowest set bit marks the first zero byte.
    fn zero_bytes(x: u64) -> u64 {
        x.wrapping_sub(ONES) & !x & HIGHS
    }
    let mut at = 0;
    while let Some(word) = b.get(at..at + 8) {
        let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let found = zero_bytes(x ^ (ONES * u64::from(b'"')))
            | zero_bytes(x ^ (ONES * u64::from(b'\\')))
            // Bytes below 0x20: the same trick with 0x20 for 0x01 (exact for the first).
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    b[at..]
        .iter()
        .position(|&c| matches!(c, b'"' | b'\\' | 0..=0x1f))
        .map(|i| at + i)
}

#[cfg(test)]
mod tests {
    use super::spans as spans_of;
    use super::*;

    fn fields(text: &str) -> Option<Vec<(&str, &str)>> {
        let mut all = Vec::new();
        each_field(text, |k, v| all.push((k, v)))?;
        Some(all)
    }

    #[test]
    fn reads_flat_objects_and_gives_up_on_the_rest() {
        let text = r#" { "a" : "x y", "b":-1.5e+3,"c":true,"d":null, "e":0, "f":"é"} "#;
        assert_eq!(
            fields(text).unwrap(),
            [
                ("a", "\"x y\""),
                ("b", "-1.5e+3"),
                ("c", "true"),
                ("d", "null"),
                ("e", "0"),
                ("f", "\"é\"")
            ]
        );
        assert_eq!(fields("{}").unwrap(), []);
        for other in [
            r#"{"a":"x\"y"}"#,
            r#"{"a\n":1}"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"a":{"b":1}}"#,
            r#"{"a":[1]}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":1e}"#,
            r#"{"a":tru}"#,
            r#"{"a":1,}"#,
            r#"{"a":1} x"#,
            r#"{"a" 1}"#,
            r#"{"a":1"#,
            r#"["a"]"#,
            "",
        ] {
            assert_eq!(fields(other), None, "{other}");
        }
    }

    #[test]
    fn spans_point_at_each_key_and_value() {
        let value = br#" {"a" : "x y","bc":-1.5}"#;
        let mut spans = vec![7];
        assert_eq!(spans_of(value, &mut spans), Some(2));
        assert_eq!(spans, [7, 3, 1, 8, 5, 15, 2, 19, 4]);
        let text = std::str::from_utf8(value).unwrap();
        assert_eq!(&text[3..4], "a");
        assert_eq!(&text[8..13], "\"x y\"");
        assert_eq!(&text[19..23], "-1.5");
        for other in [&br#"{"a":{"b":1}}"#[..], b"{\"a\":\"\xff\"}", b"[1]"] {
            assert_eq!(spans_of(other, &mut spans), None);
            assert_eq!(
                spans.len(),
                9,
                "spans of a value that is not indexed are taken back"
            );
        }
    }

    proptest::proptest! {
        /// The word-at-a-time search finds what a byte-at-a-time one finds, wherever in
        /// the words it is and whatever surrounds it (multibyte characters included).
        #[test]
        fn special_finds_the_first_quote_backslash_or_control(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => 0x20u8..0x7f,
                    2 => 0x80u8..=0xff,
                    1 => proptest::sample::select(vec![b'"', b'\\', 0, 0x1f, 0x20, 0x7f, 0xa0, 0xdc]),
                ],
                0..40,
            ),
        ) {
            let naive = bytes.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
            proptest::prop_assert_eq!(special(&bytes), naive, "{:?}", bytes);
        }

        /// Whatever it accepts is valid JSON, with the fields serde_json reads in it:
        /// objects of awkward keys and values, some with one character replaced.
        #[test]
        fn accepts_only_what_serde_json_reads_the_same(
            parts in proptest::collection::vec((
                "[ab\\\\\"é]{0,3}",
                "\"[ab\\\\ é\u{1}]{0,3}\"|-?[0-9]{1,3}(\\.[0-9]{0,2})?([eE][+-]?[0-9]{0,2})?|true|false|null|tru|\\{\\}|\\[\\]",
            ), 0..4),
            replace in proptest::option::of((0usize..64, "[{}\":, a\\\\0.e-]")),
        ) {
            let body: Vec<String> = parts.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let mut chars: Vec<char> = format!("{{{}}}", body.join(",")).chars().collect();
            if let Some((at, c)) = replace {
                let at = at % chars.len();
                chars[at] = c.chars().next().unwrap();
            }
            let text: String = chars.into_iter().collect();
            // The spans name the same fields, for the same texts.
            let mut spans = Vec::new();
            let read = spans_of(text.as_bytes(), &mut spans).map(|_| {
                let mut named = Vec::new();
                each_span(&text, &spans, |k, v| named.push((k, v))).expect("spans fit");
                named
            });
            proptest::prop_assert_eq!(&read, &fields(&text), "{:?}", text);
            if let Some(got) = fields(&text) {
                let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                    proptest::test_runner::TestCaseError::fail(format!("{text:?}: {e}"))
                })?;
                let mut expected = serde_json::Map::new();
                for (k, v) in got {
                    expected.insert(k.to_string(), serde_json::from_str(v).unwrap());
                }
                proptest::prop_assert_eq!(value, serde_json::Value::Object(expected), "{:?}", text);
            }
        }
    }
}
