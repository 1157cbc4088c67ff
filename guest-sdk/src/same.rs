//! Equality of short byte strings (field names, table names, lookup keys) without a call.
//!
//! In a plugin, `a == b` on slices calls the C library's `memcmp`, which in `wasm32-wasip2`
//! is a byte loop, and every loop iteration carries a CPU-deadline check: comparing names
//! took ~4% of the retail enricher's run. Names and keys are short, so this compares up to
//! 16 bytes with at most four word loads and no loop, and only longer strings fall back to
//! the slice comparison.

/// Whether `a` and `b` hold the same bytes.
#[inline]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4),
        8..=16 => word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8),
        _ => a == b,
    }
}

/// Whether strings `a` and `b` are equal ([`same`] on their bytes).
#[inline]
pub(crate) fn same_str(a: &str, b: &str) -> bool {
    same(a.as_bytes(), b.as_bytes())
}

#[inline]
fn word4(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

#[inline]
fn word8(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// It agrees with `==` for every length up to past 16 and bytes that differ
        /// anywhere, once or twice.
        #[test]
        fn agrees_with_slice_equality(
            a in proptest::collection::vec(0u8..4, 0..24),
            flips in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..3),
            longer in proptest::bool::ANY,
        ) {
            let mut b = a.clone();
            if !b.is_empty() {
                for f in flips {
                    let at = f.index(b.len());
                    b[at] ^= 1;
                }
            }
            if longer {
                b.push(0);
            }
            proptest::prop_assert_eq!(same(&a, &b), a == b, "{:?} {:?}", a, b);
            proptest::prop_assert!(same(&a, &a));
        }
    }
}
