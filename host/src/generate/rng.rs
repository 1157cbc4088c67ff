//! SplitMix64, the small seedable pseudo-random sequence the generator draws from.

/// A small, fast, seedable pseudo-random generator (also used by tests that need
/// reproducible randomness).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `p`.
    pub(super) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.below(1_000_000) as f64) < p * 1_000_000.0
    }
}
