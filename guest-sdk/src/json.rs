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
use serde::de::{self, MapAccess, SeqAccess, Visitor};

use deserializer::{Elements, Entries};
pub(crate) use indexed::from_spans;
use scan::{between_quotes, find_special, unescape};
#[cfg(test)]
use scan::{is_special, simd};

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
    let mut de = Fast::new(text);
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
    fn new(text: &'de str) -> Self {
        Fast {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            depth: 0,
            unclosed: false,
            scratch: String::new(),
        }
    }

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

/// Deserializer methods that leave the value to serde_json (with the types of their
/// arguments, if any, between parentheses: `deserialize_tuple(usize)`).
macro_rules! bail {
    ($($name:ident $(($($ty:ty),*))?)*) => {$(
        fn $name<V: Visitor<'de>>(self, $($(_: $ty,)*)? _: V) -> Result<V::Value, Bail> {
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

mod deserializer;
mod indexed;
#[cfg(test)]
mod props;
mod scan;
#[cfg(test)]
mod tests;
