//! Finding the end of a string: 16 bytes at a time, and escapes.

/// The index of the first `"`, `\` or control character at or after `from`.
///
/// Looks at 16 bytes at a time. The first block is tested before the loop, so a string
/// shorter than 16 bytes is found without entering it; the bytes after the last whole
/// block are tested as part of the input's last 16 bytes.
#[inline(always)]
pub(super) fn find_special(bytes: &[u8], from: usize) -> Option<usize> {
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
pub(super) unsafe fn between_quotes(text: &str, start: usize, end: usize) -> &str {
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

pub(super) fn is_special(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// Decodes the escape after a backslash: the character and the length of the escape
/// (without the backslash). `None` for an invalid escape or a lone surrogate.
pub(super) fn unescape(rest: &[u8]) -> Option<(char, usize)> {
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
pub(super) mod simd {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[allow(unsafe_code)]
    #[inline(always)]
    pub(crate) fn special_mask(bytes: &[u8], at: usize) -> u32 {
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
    pub(crate) fn special_mask(bytes: &[u8], at: usize) -> u32 {
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
    pub(crate) use scalar_mask as special_mask;

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
    pub(crate) fn scalar_mask(bytes: &[u8], at: usize) -> u32 {
        bytes[at..at + 16]
            .iter()
            .enumerate()
            .filter(|&(_, &b)| super::is_special(b))
            .fold(0, |mask, (i, _)| mask | 1 << i)
    }
}
