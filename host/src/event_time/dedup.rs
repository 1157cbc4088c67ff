//! Deduplication within the watermark (Spark's `dropDuplicatesWithinWatermark`).
//!
//! An event whose `[dedup] keys` were seen, while the first copy is not behind the
//! watermark, is a duplicate. Keys behind the watermark are forgotten, so the state is
//! bounded by the watermark, not by the stream.

use std::collections::HashMap;

use super::StateSize;
use crate::units::Micros;

/// The keys seen within the watermark, with the event time of their first copy.
#[derive(Debug, Clone, Default)]
pub struct Dedup {
    seen: HashMap<Box<str>, Micros>,
}

impl Dedup {
    /// Whether `key` was seen; if not, remembers it with the event time `time`.
    pub fn is_repeat(&mut self, key: &str, time: Micros) -> bool {
        if self.seen.contains_key(key) {
            return true;
        }
        self.seen.insert(key.into(), time);
        false
    }

    /// Forgets the keys whose first copy is behind `watermark`.
    pub fn forget_behind(&mut self, watermark: Micros) {
        self.seen.retain(|_, t| *t >= watermark);
    }

    /// Keys held and their estimated bytes.
    pub fn size(&self) -> StateSize {
        StateSize {
            rows: self.seen.len() as u64,
            bytes: self.seen.keys().map(|k| k.len() as u64 + 40).sum(),
        }
    }

    /// The keys and their times, sorted (for saving).
    pub fn save_ref(&self) -> Vec<(&str, Micros)> {
        let mut keys: Vec<(&str, Micros)> = self.seen.iter().map(|(k, t)| (&**k, *t)).collect();
        keys.sort_unstable();
        keys
    }

    /// Restores saved keys.
    pub fn restore(&mut self, saved: Vec<(String, Micros)>) {
        self.seen = saved
            .into_iter()
            .map(|(k, t)| (k.into_boxed_str(), t))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_found_until_forgotten() {
        let mut d = Dedup::default();
        assert!(!d.is_repeat("a", Micros(10)));
        assert!(d.is_repeat("a", Micros(99)));
        assert!(!d.is_repeat("b", Micros(20)));
        d.forget_behind(Micros(15));
        assert_eq!(d.save_ref(), vec![("b", Micros(20))]);
        assert!(!d.is_repeat("a", Micros(30)));
        assert_eq!(d.size().rows, 2);
    }
}
