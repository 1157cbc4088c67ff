//! Deduplication within the watermark (Spark's `dropDuplicatesWithinWatermark`).
//!
//! An event whose `[dedup] keys` were seen, while the first copy is not behind the
//! watermark, is a duplicate. Keys behind the watermark are forgotten, so the state is
//! bounded by the watermark, not by the stream.

use std::collections::{HashMap, HashSet};

use super::StateSize;
use crate::units::Micros;

/// The keys seen within the watermark, with the event time of their first copy.
#[derive(Debug, Clone, Default)]
pub struct Dedup {
    seen: HashMap<Box<str>, Micros>,
    /// Keys added or forgotten since the last save, while [`Dedup::track`] is on.
    dirty: HashSet<Box<str>>,
    tracking: bool,
}

impl Dedup {
    /// Whether `key` was seen; if not, remembers it with the event time `time`.
    pub fn is_repeat(&mut self, key: &str, time: Micros) -> bool {
        if self.seen.contains_key(key) {
            return true;
        }
        self.seen.insert(key.into(), time);
        if self.tracking {
            self.dirty.insert(key.into());
        }
        false
    }

    /// Forgets the keys whose first copy is behind `watermark`.
    pub fn forget_behind(&mut self, watermark: Micros) {
        if !self.tracking {
            self.seen.retain(|_, t| *t >= watermark);
            return;
        }
        let dirty = &mut self.dirty;
        self.seen.retain(|k, t| {
            let keep = *t >= watermark;
            if !keep {
                dirty.insert(k.clone());
            }
            keep
        });
    }

    /// Starts (afresh) recording the keys that change, for [`Dedup::delta`]: called after
    /// each save.
    pub fn track(&mut self) {
        self.tracking = true;
        self.dirty.clear();
    }

    /// The changes since [`Dedup::track`]: keys added (with their times) and keys
    /// forgotten, in no order (sorting would cost more than the delta is worth).
    pub fn delta(&self) -> (Vec<(&str, Micros)>, Vec<&str>) {
        let (mut added, mut removed) = (Vec::new(), Vec::new());
        for key in &self.dirty {
            match self.seen.get_key_value(&**key) {
                Some((k, t)) => added.push((&**k, *t)),
                None => removed.push(&**key),
            }
        }
        (added, removed)
    }

    /// Applies saved changes (see [`Dedup::delta`]).
    pub fn apply(&mut self, added: Vec<(String, Micros)>, removed: Vec<String>) {
        for key in removed {
            self.seen.remove(key.as_str());
        }
        self.seen
            .extend(added.into_iter().map(|(k, t)| (k.into_boxed_str(), t)));
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Keys added or forgotten since [`Dedup::track`].
    pub fn changed(&self) -> usize {
        self.dirty.len()
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

    /// Restores saved keys; changes are not recorded until [`Dedup::track`].
    pub fn restore(&mut self, saved: Vec<(String, Micros)>) {
        self.tracking = false;
        self.dirty.clear();
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

    #[test]
    fn changes_since_tracking_are_the_net_difference() {
        let mut d = Dedup::default();
        assert!(!d.is_repeat("old", Micros(1)));
        assert!(!d.is_repeat("kept", Micros(50)));
        d.track();
        assert!(!d.is_repeat("new", Micros(60)));
        assert!(!d.is_repeat("brief", Micros(2)));
        d.forget_behind(Micros(10)); // forgets "old" (saved) and "brief" (never saved)
        let (added, mut removed) = d.delta();
        removed.sort_unstable();
        assert_eq!(added, vec![("new", Micros(60))]);
        assert_eq!(removed, vec!["brief", "old"]);
        let mut other = Dedup::default();
        other.restore(vec![("kept".into(), Micros(50)), ("old".into(), Micros(1))]);
        let added = added.into_iter().map(|(k, t)| (k.to_string(), t));
        other.apply(
            added.collect(),
            removed.into_iter().map(String::from).collect(),
        );
        assert_eq!(other.save_ref(), d.save_ref());
    }
}
