//! Deduplication within the watermark (Spark's `dropDuplicatesWithinWatermark`).
//!
//! An event whose `[dedup] keys` were seen, while the first copy is not behind the
//! watermark, is a duplicate. Keys behind the watermark are forgotten, so the state is
//! bounded by the watermark, not by the stream.

use hashbrown::HashTable;

use super::outcome::StateSize;
use super::shard::{hash_str, shard_of};
use crate::units::Micros;

/// A key seen and the event time of its first copy.
#[derive(Debug, Clone)]
struct Seen {
    key: Box<str>,
    time: Micros,
}

/// One shard of the keys (see [`super::shard`]).
#[derive(Debug, Clone, Default)]
pub struct DedupShard {
    seen: HashTable<Seen>,
    /// Keys added since the last save, while tracking (some may be forgotten since).
    added: Vec<Box<str>>,
    tracking: bool,
}

impl DedupShard {
    /// Whether `key` (of hash `hash`, see [`hash_str`]) was seen; if not, remembers it with
    /// the event time `time`.
    pub fn is_repeat(&mut self, key: &str, hash: u64, time: Micros) -> bool {
        let entry = self
            .seen
            .entry(hash, |s| &*s.key == key, |s| hash_str(&s.key));
        let hashbrown::hash_table::Entry::Vacant(vacant) = entry else {
            return true;
        };
        let key: Box<str> = key.into();
        if self.tracking {
            self.added.push(key.clone());
        }
        vacant.insert(Seen { key, time });
        false
    }

    /// Forgets the keys whose first copy is behind `watermark`.
    pub fn forget_behind(&mut self, watermark: Micros) {
        self.seen.retain(|s| s.time >= watermark);
    }

    fn get(&self, key: &str) -> Option<&Seen> {
        self.seen.find(hash_str(key), |s| &*s.key == key)
    }

    fn insert(&mut self, key: Box<str>, time: Micros) {
        let hash = hash_str(&key);
        let entry = self
            .seen
            .entry(hash, |s| s.key == key, |s| hash_str(&s.key));
        entry.insert(Seen { key, time });
    }

    fn remove(&mut self, key: &str) {
        if let Ok(found) = self.seen.find_entry(hash_str(key), |s| &*s.key == key) {
            found.remove();
        }
    }

    fn track(&mut self) {
        self.tracking = true;
        self.added.clear();
    }
}

/// The keys seen within the watermark, with the event time of their first copy, in
/// shards.
#[derive(Debug, Clone)]
pub struct Dedup {
    shards: Box<[DedupShard]>,
}

impl Default for Dedup {
    fn default() -> Self {
        Dedup::new(1)
    }
}

impl Dedup {
    /// No keys, in `shards` shards.
    pub fn new(shards: usize) -> Self {
        Dedup {
            shards: (0..shards.max(1)).map(|_| DedupShard::default()).collect(),
        }
    }

    /// The shards, for the operators to run on threads of their own.
    pub fn shards_mut(&mut self) -> &mut [DedupShard] {
        &mut self.shards
    }

    fn shard_mut(&mut self, key: &str) -> &mut DedupShard {
        let n = self.shards.len();
        &mut self.shards[shard_of(hash_str(key), n)]
    }

    /// Whether `key` was seen; if not, remembers it with the event time `time`.
    pub fn is_repeat(&mut self, key: &str, time: Micros) -> bool {
        self.shard_mut(key).is_repeat(key, hash_str(key), time)
    }

    /// Forgets the keys whose first copy is behind `watermark`.
    pub fn forget_behind(&mut self, watermark: Micros) {
        for shard in self.shards.iter_mut() {
            shard.forget_behind(watermark);
        }
    }

    /// Starts (afresh) recording the keys that change, for [`Dedup::delta`]: called after
    /// each save.
    pub fn track(&mut self) {
        self.shards.iter_mut().for_each(DedupShard::track);
    }

    /// The keys added since [`Dedup::track`] and still held, with their times, in no
    /// order (sorting would cost more than the delta is worth). Keys forgotten are not
    /// listed: they are those behind the watermark (see [`Dedup::apply`]).
    pub fn delta(&self) -> Vec<(&str, Micros)> {
        let mut added = Vec::new();
        for shard in self.shards.iter() {
            let present = shard.added.iter().filter_map(|k| shard.get(k));
            added.extend(present.map(|s| (&*s.key, s.time)));
        }
        added
    }

    /// Applies saved changes: the keys `removed` (listed by older versions of sluice),
    /// the keys `added` (see [`Dedup::delta`]), then forgets the keys behind the
    /// `watermark` the changes were saved with, as the batch that made them did.
    pub fn apply(
        &mut self,
        added: Vec<(String, Micros)>,
        removed: Vec<String>,
        watermark: Option<Micros>,
    ) {
        for key in removed {
            self.shard_mut(&key).remove(&key);
        }
        for (key, time) in added {
            self.shard_mut(&key).insert(key.into_boxed_str(), time);
        }
        if let Some(w) = watermark {
            self.forget_behind(w);
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.seen.len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys added since [`Dedup::track`].
    pub fn changed(&self) -> usize {
        self.shards.iter().map(|s| s.added.len()).sum()
    }

    /// Keys held and their bytes in memory: the tables (a slot and a control byte per
    /// bucket) and the keys' text.
    pub fn size(&self) -> StateSize {
        let slot = std::mem::size_of::<Seen>() as u64 + 1;
        let tables: u64 = self
            .shards
            .iter()
            .map(|s| s.seen.capacity() as u64 * slot)
            .sum();
        let text: u64 = self
            .shards
            .iter()
            .flat_map(|s| s.seen.iter())
            .map(|s| s.key.len() as u64)
            .sum();
        StateSize {
            rows: self.len() as u64,
            bytes: tables + text,
        }
    }

    /// The keys and their times, in no order (for saving).
    pub fn save_ref(&self) -> Vec<(&str, Micros)> {
        let keys = self.shards.iter().flat_map(|s| s.seen.iter());
        keys.map(|s| (&*s.key, s.time)).collect()
    }

    /// Restores saved keys; changes are not recorded until [`Dedup::track`].
    pub fn restore(&mut self, saved: Vec<(String, Micros)>) {
        *self = Dedup::new(self.shards.len());
        for (key, time) in saved {
            self.shard_mut(&key).insert(key.into_boxed_str(), time);
        }
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
    fn changes_since_tracking_and_the_watermark_give_the_state() {
        let mut d = Dedup::default();
        assert!(!d.is_repeat("old", Micros(1)));
        assert!(!d.is_repeat("kept", Micros(50)));
        d.track();
        assert!(!d.is_repeat("new", Micros(60)));
        assert!(!d.is_repeat("brief", Micros(2)));
        d.forget_behind(Micros(10)); // forgets "old" (saved) and "brief" (never saved)
        let added = d.delta();
        assert_eq!(added, vec![("new", Micros(60))]);
        let mut other = Dedup::new(3);
        other.restore(vec![("kept".into(), Micros(50)), ("old".into(), Micros(1))]);
        let added = added.into_iter().map(|(k, t)| (k.to_string(), t));
        other.apply(added.collect(), Vec::new(), Some(Micros(10)));
        let sorted = |d: &Dedup| {
            let mut keys: Vec<(String, Micros)> = d
                .save_ref()
                .iter()
                .map(|(k, t)| (k.to_string(), *t))
                .collect();
            keys.sort_unstable();
            keys
        };
        assert_eq!(sorted(&other), sorted(&d));
    }
}
