//! A fast path for [`Event::json`](crate::Event::json): a serde deserializer for the common
//! shape of event JSON, written for WebAssembly's cost model.
//!
//! In a plugin, every loop iteration and every function entry carries a CPU-deadline check
//! (wasmtime's epoch interruption), so a parser that enters a small loop for each piece of
//! white space and each string pays for it on every field. This one decides white space
//! with one comparison, finds the end of a string 16 bytes at a time (SIMD), and runs no
//! loop at all for a string shorter than 16 bytes.
//!
//! It never decides alone: whenever it meets something it does not handle, or the input is
//! invalid, or the target type refuses a value, it gives up with [`Bail`] and the caller
//! parses the value again with serde_json, whose answer (value or error) is the one used.
//! So this module only has to be right when it succeeds, and the tests compare it with
//! serde_json on that: every value it produces is the one serde_json produces.
//!
//! It gives up on: strings with invalid escapes or control characters; keys with escapes;
//! number values with an exponent or more than 15 significant digits (where serde_json's
//! rounding differs from Rust's; skipped and raw numbers are only checked); integers beyond
//! 64 bits; `-0`; keys that are not plain strings to the target type; enums that are not
//! unit variants; bytes, chars, i128 and u128; nesting deeper than serde_json allows.

use std::fmt;

use serde::Deserialize;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// serde_json's private name for `RawValue`: a newtype struct of this name is asked for
/// the raw text of the next value.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";
/// serde_json's default recursion limit; deeper values are left to it.
const MAX_DEPTH: u32 = 128;
/// More significant digits than this, and an f64 may round differently from serde_json.
const MAX_FLOAT_DIGITS: usize = 15;

/// Parses `text` into `T`. The value counts only when it is `Ok` and `complete` is set
/// (the whole text was read, every object and array to its closing bracket); otherwise
/// serde_json must decide.
///
/// Completeness is reported beside the value, not by replacing it with an error: that
/// would make the compiler build the value aside and copy it, and in a plugin a large
/// copy is a call out of the sandbox (about 20 ns).
pub(crate) fn from_str<'de, T: Deserialize<'de>>(
    text: &'de str,
    complete: &mut bool,
) -> Result<T, Bail> {
    let mut de = Fast {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
        unclosed: false,
        scratch: String::new(),
    };
    let result = T::deserialize(&mut de);
    de.skip_ws();
    *complete = !de.unclosed && de.pos == de.bytes.len();
    result
}

/// "Let serde_json decide": the only error of the fast path.
#[derive(Debug, PartialEq)]
pub(crate) struct Bail;

impl fmt::Display for Bail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("left to serde_json")
    }
}

impl std::error::Error for Bail {}

impl de::Error for Bail {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Bail
    }
}

struct Fast<'de> {
    text: &'de str,
    bytes: &'de [u8],
    pos: usize,
    depth: u32,
    /// A visitor stopped reading an object or array before its closing bracket: the whole
    /// value is left to serde_json. (The bracket is read by the entries themselves and
    /// this flag checked at the end: checking the bracket after the visitor makes the
    /// compiler build the value aside and copy it; see `from_str`.)
    unclosed: bool,
    /// Unescaped strings are built here.
    scratch: String,
}

/// A string of the input: borrowed when it has no escapes, else unescaped into the scratch
/// buffer (valid until the next string is read).
enum Str<'de, 's> {
    Borrowed(&'de str),
    Copied(&'s str),
}

enum Number {
    U(u64),
    I(i64),
    F(f64),
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

impl<'de> Fast<'de> {
    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skips white space. Compact JSON has none, so one comparison decides; the loop is
    /// entered only when there is some.
    #[inline(always)]
    fn skip_ws(&mut self) {
        if self.peek().is_some_and(is_ws) {
            self.skip_ws_loop();
        }
    }

    #[inline(never)]
    fn skip_ws_loop(&mut self) {
        while self.peek().is_some_and(is_ws) {
            self.pos += 1;
        }
    }

    #[inline(always)]
    fn next_non_ws(&mut self) -> Result<u8, Bail> {
        self.skip_ws();
        self.peek().ok_or(Bail)
    }

    #[inline(always)]
    fn literal(&mut self, word: &[u8]) -> Result<(), Bail> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end) == Some(word) {
            self.pos = end;
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// Reads the string that starts at the current position (at its opening quote).
    /// Always inlined: in a plugin a call costs more than the scan of a short string.
    #[inline(always)]
    fn string<'s>(&'s mut self) -> Result<Str<'de, 's>, Bail> {
        // Every caller has just seen the quote (the compiler drops this test again); the
        // slicing below relies on it.
        if self.peek() != Some(b'"') {
            return Err(Bail);
        }
        let start = self.pos + 1;
        let end = find_special(self.bytes, start).ok_or(Bail)?;
        if self.bytes[end] == b'"' {
            self.pos = end + 1;
            #[allow(unsafe_code)]
            // SAFETY: the byte before `start` is the opening quote tested above, and the
            // one at `end` is the quote just tested.
            let text = unsafe { between_quotes(self.text, start, end) };
            return Ok(Str::Borrowed(text));
        }
        self.unescape_string(start, end)?;
        Ok(Str::Copied(&self.scratch))
    }

    /// The rest of a string that has an escape (or a control character) at `at`,
    /// unescaped into the scratch buffer. Returns nothing in memory, so that the hot code
    /// that calls it needs no stack memory of the plugin's.
    #[inline(never)]
    fn unescape_string(&mut self, start: usize, mut at: usize) -> Result<(), Bail> {
        self.scratch.clear();
        let mut from = start;
        loop {
            self.scratch.push_str(self.text.get(from..at).ok_or(Bail)?);
            match self.bytes[at] {
                b'"' => {
                    self.pos = at + 1;
                    return Ok(());
                }
                b'\\' => {
                    let (c, len) = unescape(&self.bytes[at + 1..]).ok_or(Bail)?;
                    self.scratch.push(c);
                    from = at + 1 + len;
                }
                // A control character: JSON forbids them unescaped.
                _ => return Err(Bail),
            }
            at = find_special(self.bytes, from).ok_or(Bail)?;
        }
    }

    /// Reads a number: the JSON grammar exactly, as u64, i64 or f64 the way serde_json
    /// reports it.
    fn number(&mut self) -> Result<Number, Bail> {
        let start = self.pos;
        let (negative, int_digits, frac_digits, exponent) = self.scan_number()?;
        if exponent {
            return Err(Bail);
        }
        let text = &self.text[start..self.pos];
        if frac_digits > 0 {
            if int_digits + frac_digits > MAX_FLOAT_DIGITS || keeps_number_text() {
                return Err(Bail);
            }
            return text.parse().map(Number::F).map_err(|_| Bail);
        }
        if negative {
            match text.parse::<i64>() {
                Ok(0) | Err(_) => Err(Bail),
                Ok(n) => Ok(Number::I(n)),
            }
        } else {
            text.parse().map(Number::U).map_err(|_| Bail)
        }
    }

    /// Moves past a number, checking the JSON grammar
    /// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`). Returns the sign, the numbers of
    /// integer and fraction digits, and whether it has an exponent.
    #[inline(always)]
    fn scan_number(&mut self) -> Result<(bool, usize, usize, bool), Bail> {
        let start = self.pos;
        let b = self.bytes;
        let mut at = start;
        let negative = b.get(at) == Some(&b'-');
        if negative {
            at += 1;
        }
        let int_start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        let int_digits = at - int_start;
        if int_digits == 0 || (int_digits > 1 && b[int_start] == b'0') {
            return Err(Bail);
        }
        let mut frac_digits = 0;
        if b.get(at) == Some(&b'.') {
            at += 1;
            let frac_start = at;
            while b.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            frac_digits = at - frac_start;
            if frac_digits == 0 {
                return Err(Bail);
            }
        }
        let exponent = matches!(b.get(at), Some(b'e' | b'E'));
        if exponent {
            at += 1;
            if matches!(b.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            let exp_start = at;
            while b.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            if at == exp_start {
                return Err(Bail);
            }
        }
        self.pos = at;
        Ok((negative, int_digits, frac_digits, exponent))
    }

    fn enter(&mut self) -> Result<(), Bail> {
        self.depth += 1;
        if self.depth >= MAX_DEPTH {
            return Err(Bail);
        }
        self.pos += 1;
        Ok(())
    }

    /// Skips one value, checking its syntax as strictly as serde_json does.
    fn skip_value(&mut self) -> Result<(), Bail> {
        match self.next_non_ws()? {
            b'"' => self.string().map(drop),
            b'{' => {
                self.enter()?;
                let mut entries = Entries::new(self);
                while let Some(de::IgnoredAny) = entries.next_key()? {
                    entries.next_value::<de::IgnoredAny>()?;
                }
                Ok(())
            }
            b'[' => {
                self.enter()?;
                let mut elements = Elements::new(self);
                while let Some(de::IgnoredAny) = elements.next_element()? {}
                Ok(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.scan_number().map(drop),
            _ => Err(Bail),
        }
    }

    fn visit_number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Bail> {
        match self.number()? {
            Number::U(n) => visitor.visit_u64(n),
            Number::I(n) => visitor.visit_i64(n),
            Number::F(n) => visitor.visit_f64(n),
        }
    }

    #[inline(always)]
    fn visit_string<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Bail> {
        match self.string()? {
            Str::Borrowed(s) => visitor.visit_borrowed_str(s),
            Str::Copied(s) => visitor.visit_str(s),
        }
    }
}

/// Deserializer methods that only hand over to another one of the same signature.
macro_rules! delegate {
    ($to:ident: $($name:ident)*) => {$(
        fn $name<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
            self.$to(visitor)
        }
    )*};
}

/// Deserializer methods that leave the value to serde_json.
macro_rules! bail {
    ($($name:ident)*) => {$(
        fn $name<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Bail> {
            Err(Bail)
        }
    )*};
}

/// Whether serde_json keeps numbers as their text (its `arbitrary_precision` feature, which
/// a plugin may turn on): then an f64 would not give the same `Number` ("18.50" would
/// become "18.5"), so decimal values are left to it.
fn keeps_number_text() -> bool {
    static KEEPS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KEEPS.get_or_init(|| {
        serde_json::from_str::<serde_json::Number>("0.10").is_ok_and(|n| n.to_string() == "0.10")
    })
}

/// The index of the first `"`, `\` or control character at or after `from`.
///
/// Looks at 16 bytes at a time. The first block is tested before the loop, so a string
/// shorter than 16 bytes is found without entering it; the bytes after the last whole
/// block are tested as part of the input's last 16 bytes.
#[inline(always)]
fn find_special(bytes: &[u8], from: usize) -> Option<usize> {
    let len = bytes.len();
    if len < 16 {
        return match find_special_short(bytes, from) {
            usize::MAX => None,
            at => Some(at),
        };
    }
    let mut at = from;
    if at + 16 <= len {
        let mask = simd::special_mask(bytes, at);
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
        at += 16;
        while at + 16 <= len {
            let mask = simd::special_mask(bytes, at);
            if mask != 0 {
                return Some(at + mask.trailing_zeros() as usize);
            }
            at += 16;
        }
    }
    if at >= len {
        return None;
    }
    let last = len - 16;
    let mask = simd::special_mask(bytes, last) >> (at - last);
    (mask != 0).then(|| at + mask.trailing_zeros() as usize)
}

/// `text[start..end]` for a string's content: `start` is just after its opening quote and
/// `end` at its closing one. Slicing without `str::get`'s checks of both ends, which cost
/// a plugin 2–3% of its time on the validator: they cannot fail here.
///
/// # Safety
///
/// The bytes of `text` at `start - 1` and at `end` are quotes.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn between_quotes(text: &str, start: usize, end: usize) -> &str {
    let bytes = text.as_bytes();
    assert!(start <= end && end < bytes.len());
    debug_assert!(bytes[start - 1] == b'"' && bytes[end] == b'"');
    // SAFETY: `start <= end <= text.len()`, and both are character boundaries: the bytes
    // at `start - 1` and at `end` are quotes (the caller's promise), which are ASCII, so a
    // character ends just before `start` and one starts at `end`.
    unsafe { text.get_unchecked(start..end) }
}

/// [`find_special`] for an input shorter than one block (rare: out of the hot code);
/// `usize::MAX` when there is none (an `Option` would be returned in the plugin's stack
/// memory, which the hot code that calls this would then have to set up).
#[cold]
#[inline(never)]
fn find_special_short(bytes: &[u8], from: usize) -> usize {
    bytes
        .get(from..)
        .and_then(|rest| rest.iter().position(|&b| is_special(b)))
        .map_or(usize::MAX, |i| from + i)
}

fn is_special(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// Decodes the escape after a backslash: the character and the length of the escape
/// (without the backslash). `None` for an invalid escape or a lone surrogate.
fn unescape(rest: &[u8]) -> Option<(char, usize)> {
    let c = match rest.first()? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let high = hex4(rest.get(1..5)?)?;
            if !(0xD800..0xE000).contains(&high) {
                return Some((char::from_u32(high)?, 5));
            }
            // A surrogate: only a high one followed by a low one makes a character.
            if high >= 0xDC00 || rest.get(5..7)? != b"\\u" {
                return None;
            }
            let low = hex4(rest.get(7..11)?)?;
            if !(0xDC00..0xE000).contains(&low) {
                return None;
            }
            let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
            return Some((char::from_u32(c)?, 11));
        }
        _ => return None,
    };
    Some((c, 1))
}

fn hex4(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0, |n, &d| Some(n * 16 + char::from(d).to_digit(16)?))
}

/// 16-byte blocks: a bit per byte that is `"`, `\` or below 0x20.
mod simd {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[allow(unsafe_code)]
    #[inline(always)]
    pub(super) fn special_mask(bytes: &[u8], at: usize) -> u32 {
        use core::arch::wasm32::*;
        let block = &bytes[at..at + 16];
        // SAFETY: `block` is 16 readable bytes; `v128_load` has no alignment requirement.
        let v = unsafe { v128_load(block.as_ptr().cast()) };
        let quote = u8x16_eq(v, u8x16_splat(b'"'));
        let backslash = u8x16_eq(v, u8x16_splat(b'\\'));
        let control = u8x16_lt(v, u8x16_splat(0x20));
        u32::from(u8x16_bitmask(v128_or(v128_or(quote, backslash), control)))
    }

    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    #[inline(always)]
    pub(super) fn special_mask(bytes: &[u8], at: usize) -> u32 {
        use core::arch::x86_64::*;
        let block = &bytes[at..at + 16];
        // SAFETY: `block` is 16 readable bytes; `_mm_loadu_si128` has no alignment
        // requirement; SSE2 is part of every x86_64 target.
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().cast());
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // v <= 0x1f (unsigned) exactly when min(v, 0x1f) == v.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
        }
    }

    #[cfg(not(any(
        all(target_arch = "wasm32", target_feature = "simd128"),
        target_arch = "x86_64"
    )))]
    pub(super) use scalar_mask as special_mask;

    /// The scalar fallback, for targets without SIMD (a plugin built without `simd128`).
    /// Compiled for the tests too, which check that it agrees with the SIMD versions.
    #[cfg(any(
        test,
        not(any(
            all(target_arch = "wasm32", target_feature = "simd128"),
            target_arch = "x86_64"
        ))
    ))]
    #[inline(always)]
    pub(super) fn scalar_mask(bytes: &[u8], at: usize) -> u32 {
        bytes[at..at + 16]
            .iter()
            .enumerate()
            .filter(|&(_, &b)| super::is_special(b))
            .fold(0, |mask, (i, _)| mask | 1 << i)
    }
}

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
struct Items<'a, 'de, const CLOSE: u8> {
    de: &'a mut Fast<'de>,
    first: bool,
    /// The closing bracket has been read.
    closed: bool,
}

type Entries<'a, 'de> = Items<'a, 'de, b'}'>;
type Elements<'a, 'de> = Items<'a, 'de, b']'>;

impl<'a, 'de, const CLOSE: u8> Items<'a, 'de, CLOSE> {
    fn new(de: &'a mut Fast<'de>) -> Self {
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
struct Key<'de>(&'de str);

impl<'de> de::Deserializer<'de> for Key<'de> {
    type Error = Bail;

    // What serde_json's own key deserializer hands to `deserialize_any`.
    serde::forward_to_deserialize_any! {
        char str string unit unit_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
    bail!(deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_f32
        deserialize_f64 deserialize_bytes deserialize_byte_buf deserialize_option);

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

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Bail> {
        Err(Bail)
    }
}

/// What serde_json's `RawValue` asks for: a map with one entry, the token and the text.
struct RawValue<'de> {
    text: Option<&'de str>,
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

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::collections::BTreeMap;
    use std::fmt::Debug;

    use serde::Deserialize;
    use serde_json::Value;
    use serde_json::value::RawValue;

    use super::{find_special, from_str};

    /// A seeded pseudo-random sequence (xorshift64).
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// Every input the fast path accepts gives serde_json's value; returns whether it did.
    fn agrees<'a, T>(text: &'a str) -> bool
    where
        T: Deserialize<'a> + PartialEq + Debug,
    {
        let mut complete = false;
        let fast = from_str::<T>(text, &mut complete).ok().filter(|_| complete);
        let slow = serde_json::from_str::<T>(text);
        if let Some(fast) = &fast {
            assert_eq!(
                Some(fast),
                slow.as_ref().ok(),
                "the fast path accepted {text:?}, serde_json says {slow:?}"
            );
        }
        fast.is_some()
    }

    /// A typed event: borrowed strings, numbers, a raw value, a list, an enum, nesting
    /// (the randomised properties read it too).
    #[derive(Deserialize, PartialEq, Debug)]
    pub(super) struct Click<'a> {
        #[serde(borrow)]
        event_id: Option<Cow<'a, str>>,
        user_id: Option<String>,
        quantity: Option<i32>,
        price: Option<f64>,
        #[serde(borrow)]
        raw: Option<Raw<'a>>,
        tags: Option<Vec<String>>,
        kind: Option<EventType>,
        nested: Option<Box<Nested>>,
    }

    #[derive(Deserialize, Debug)]
    struct Raw<'a>(#[serde(borrow)] &'a RawValue);

    impl PartialEq for Raw<'_> {
        fn eq(&self, other: &Self) -> bool {
            self.0.get() == other.0.get()
        }
    }

    #[derive(Deserialize, PartialEq, Debug)]
    #[serde(rename_all = "snake_case")]
    enum EventType {
        PageView,
        Purchase,
    }

    #[derive(Deserialize, PartialEq, Debug)]
    struct Nested {
        a: u8,
        b: Option<bool>,
    }

    #[test]
    fn agrees_with_serde_json_on_what_it_accepts() {
        let accepted = [
            r#"{"event_id":"e1","user_id":"u1","quantity":2,"price":18.99}"#,
            r#" { "event_id" : "e1" , "unknown" : [1, {"x": null}, "s", true, -3.5] } "#,
            r#"{"raw": {"a": [1, 2]} , "price": 0}"#,
            r#"{"raw":"text","tags":["a","b"],"kind":"page_view"}"#,
            r#"{"nested":{"a":255,"b":false},"price":-0.25}"#,
            r#"{"raw":-1.5E+3,"unknown":[1e9,2E-7,0.1234567890123456789e1]}"#,
            r#"{"event_id":"caf\u00e9 \"quoted\" \\ \/ \n","user_id":"\ud83d\ude00"}"#,
            r#"{"event_id":"a string that is longer than sixteen bytes, with more to come"}"#,
            r#"{"quantity":null,"price":null,"kind":null}"#,
            // Characters of several bytes right after and before the quotes.
            r#"{"event_id":"é","user_id":"日本語のテキスト、十六バイトより長い","raw":"€"}"#,
            r#"{"é":"x","unknown":"😀😀😀😀😀","event_id":"ü\n日"}"#,
            "{}",
        ];
        for text in accepted {
            assert!(agrees::<Click<'_>>(text), "not accepted: {text}");
        }
    }

    #[test]
    fn leaves_what_it_does_not_handle_or_what_is_wrong_to_serde_json() {
        let left = [
            // Invalid JSON.
            "",
            "{",
            r#"{"event_id":"e1",}"#,
            r#"{"event_id":"e1" "user_id":"u1"}"#,
            r#"{"event_id":"e1"} x"#,
            r#"{"quantity":01}"#,
            r#"{"quantity":1.}"#,
            r#"{"price":.5}"#,
            r#"{"event_id":"bad \x escape"}"#,
            r#"{"event_id":"lone \ud800 surrogate"}"#,
            "{\"event_id\":\"tab\tinside\"}",
            r#"{"unknown":tru}"#,
            r#"{"unknown":[1,]}"#,
            r#"{"unknown":1e}"#,
            r#"{"raw":1E+}"#,
            r#"{"unknown":1.e5}"#,
            // Valid, but the type refuses it (serde_json gives the error).
            r#"{"quantity":"2"}"#,
            r#"{"quantity":2.5}"#,
            r#"{"quantity":4294967296}"#,
            r#"{"nested":{"a":256}}"#,
            r#"{"kind":"refund"}"#,
            r#"{"event_id":"e1","event_id":"e2"}"#,
            // Valid, and left to serde_json on purpose.
            r#"{"price":1e3}"#,
            r#"{"price":0.1234567890123456}"#,
            r#"{"quantity":-0}"#,
            r#"["e1","u1",null,null,null,null,null,null]"#,
        ];
        for text in left {
            assert!(!agrees::<Click<'_>>(text), "accepted: {text}");
        }
        // A visitor that stops before the closing bracket (a pair from a longer array).
        assert!(agrees::<(u8, u8)>("[1, 2]"));
        for text in ["[1,2,3]", "[1,2", "[[1,2,3],4]", "[1,2]]", "{\"a\":[1,2]"] {
            assert!(!agrees::<(u8, u8)>(text), "accepted: {text}");
        }
        assert!(!agrees::<((u8, u8), u8)>("[[1,2,3],4]"));
        assert!(agrees::<((u8, u8), u8)>("[[1,2],4]"));
    }

    #[test]
    fn any_value_agrees() {
        for text in [
            r#"{"a":[1,-2,3.25,"x",true,false,null,{"b":{}}],"c":"d"}"#,
            "[]",
            "  \"just a string\"  ",
            "18446744073709551615",
            "-9223372036854775808",
        ] {
            assert!(agrees::<Value>(text), "not accepted: {text}");
        }
        assert!(agrees::<BTreeMap<String, Value>>(
            r#"{"key":1,"b":"\"2\""}"#
        ));
        assert!(!agrees::<BTreeMap<String, Value>>(r#"{"k\"ey":1}"#));
        assert!(!agrees::<BTreeMap<u32, Value>>(r#"{"1":1}"#));
        assert!(!agrees::<Value>("18446744073709551616"));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(!agrees::<Value>(&deep));
    }

    /// Mutates JSON documents at random (bytes replaced by JSON's own characters, cuts,
    /// white space, escapes) and checks that whatever the fast path accepts, serde_json
    /// reads the same way.
    #[test]
    fn agrees_with_serde_json_on_mutated_documents() {
        let seeds = [
            r#"{"event_id":"evt_0001","user_id":"user_42","quantity":3,"price":18.99,"raw":[1,{"a":"b"}],"tags":["x","y"],"kind":"purchase","nested":{"a":7,"b":true},"page_url":"/products/trail-mug?ref=home"}"#,
            r#"{"event_id":"a\"b","price":-0.5,"raw":null,"unknown":{"deep":[[],{},"",0]}}"#,
        ];
        let pieces: [&str; 24] = [
            "\"",
            "\\",
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "0",
            "7",
            "-",
            ".",
            "e",
            "E",
            "+",
            " ",
            "\t",
            "\n",
            "\\u00e9",
            "\\ud83d\\ude00",
            "\\/",
            "null",
            "é",
            "\u{1}",
        ];
        let mut random = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut next = |bound: usize| (random() % bound as u64) as usize;
        let (mut accepted, mut total) = (0, 0);
        for seed in seeds {
            for _ in 0..4000 {
                let mut text = seed.to_string();
                for _ in 0..1 + next(3) {
                    let mut at = next(text.len() + 1);
                    while !text.is_char_boundary(at) {
                        at -= 1;
                    }
                    match next(4) {
                        0 => text.truncate(at),
                        1 => text.insert_str(at, pieces[next(pieces.len())]),
                        _ => {
                            let mut end = (at + 1).min(text.len());
                            while !text.is_char_boundary(end) {
                                end += 1;
                            }
                            text.replace_range(at..end, pieces[next(pieces.len())]);
                        }
                    }
                }
                total += 1;
                accepted += usize::from(agrees::<Click<'_>>(&text));
                agrees::<Value>(&text);
            }
        }
        // Both outcomes occur, so both were checked.
        assert!(
            accepted > total / 20 && accepted < total,
            "{accepted} of {total}"
        );
    }

    /// Decimals of up to 15 digits read to the same f64 as serde_json's (which divides the
    /// digits by a power of ten, exact up to there).
    #[test]
    fn decimals_read_as_serde_json_reads_them() {
        let mut next = xorshift(0x0123_4567_89ab_cdef);
        for _ in 0..20_000 {
            let int = next() % 100_000_000;
            let frac_digits = 1 + (next() % 7) as usize;
            let frac = next() % 10u64.pow(frac_digits as u32);
            let sign = if next() % 2 == 0 { "-" } else { "" };
            let text = format!("{sign}{int}.{frac:0frac_digits$}");
            assert!(agrees::<f64>(&text), "not accepted: {text}");
        }
    }

    #[test]
    fn decimal_values_are_read_only_when_serde_json_reads_them_as_f64() {
        assert!(
            !super::keeps_number_text(),
            "built without arbitrary_precision"
        );
        assert!(agrees::<Value>(r#"{"price":18.50}"#));
    }

    #[test]
    fn finds_special_bytes_at_every_position() {
        for len in 0..40 {
            for at in 0..len {
                for special in [b'"', b'\\', 0x1f, 0] {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = special;
                    for from in 0..=at {
                        assert_eq!(find_special(&bytes, from), Some(at), "{len} {at} {from}");
                    }
                    assert_eq!(find_special(&bytes, at + 1), None, "{len} {at}");
                }
            }
            let plain = vec![0x7fu8; len];
            assert_eq!(find_special(&plain, 0), None);
            let high = vec![0xc3u8; len];
            assert_eq!(find_special(&high, 0), None);
        }
    }
}
