//! A chunk's announced lookup keys for one table: each distinct key once, in the order
//! first announced (the order the host answers them in), found again by hash, or without
//! hashing when lookups come in the order they were announced (as a [`crate::Processor`]'s
//! do: the SDK processes a chunk's events in the order it prefetched them).

use std::cell::{Cell, RefCell};
use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

/// The most spare key buffers kept: a few chunks' worth of distinct keys.
const MOST_SPARE: usize = 8192;

/// The largest key buffer kept, in bytes: large keys do not hold on to the plugin's memory.
const LARGEST_SPARE: usize = 256;

thread_local! {
    /// Emptied buffers of the keys of chunks already answered, for the next chunks' keys:
    /// a key copied into a buffer of its own, freed after its chunk, took ~3% of the retail
    /// enricher's time.
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Distinct keys in the order first announced, and the order of every announcement.
#[derive(Debug, Default)]
pub(crate) struct KeySet {
    keys: Vec<Vec<u8>>,
    /// Each key's place in `keys`, by the key's hash.
    index: HashTable<u32>,
    /// For each announcement, its key's place in `keys`.
    order: Vec<u32>,
    /// The announcement the next lookup is expected to follow.
    next: Cell<usize>,
}

impl KeySet {
    /// No keys yet; room for `announcements` of them.
    pub(crate) fn with_room(announcements: usize) -> Self {
        KeySet {
            keys: Vec::with_capacity(announcements),
            index: HashTable::with_capacity(announcements),
            order: Vec::with_capacity(announcements),
            next: Cell::new(0),
        }
    }

    /// Announces `key` (kept once however often it is announced).
    pub(crate) fn announce(&mut self, key: &[u8]) {
        let KeySet {
            keys, index, order, ..
        } = self;
        let hash = FxBuildHasher.hash_one(key);
        let at = match index.find(hash, |&i| keys[i as usize] == key) {
            Some(&i) => i,
            None => {
                let i = keys.len() as u32;
                keys.push(copied(key));
                index.insert_unique(hash, i, |&i| FxBuildHasher.hash_one(&keys[i as usize][..]));
                i
            }
        };
        order.push(at);
    }

    /// The distinct keys, in the order first announced.
    pub(crate) fn keys(&self) -> &[Vec<u8>] {
        &self.keys
    }

    /// The place of `key` in [`KeySet::keys`], if it was announced: without hashing when it
    /// is the next announcement's key (or the one after, when an event announced a key it
    /// then did not look up).
    pub(crate) fn find(&self, key: &[u8]) -> Option<usize> {
        let next = self.next.get();
        for ahead in 0..2 {
            if let Some(&i) = self.order.get(next + ahead)
                && self.keys[i as usize] == key
            {
                self.next.set(next + ahead + 1);
                return Some(i as usize);
            }
        }
        let hash = FxBuildHasher.hash_one(key);
        self.index
            .find(hash, |&i| self.keys[i as usize] == key)
            .map(|&i| i as usize)
    }
}

impl Drop for KeySet {
    fn drop(&mut self) {
        let keys = std::mem::take(&mut self.keys);
        // A set dropped while the thread ends finds no spare buffers left: freed then.
        let _ = SPARE.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            for mut key in keys {
                if spare.len() >= MOST_SPARE {
                    break;
                }
                if key.capacity() > LARGEST_SPARE {
                    continue;
                }
                key.clear();
                spare.push(key);
            }
        });
    }
}

/// `key` in a buffer of its own: a spare one if there is.
fn copied(key: &[u8]) -> Vec<u8> {
    let mut buffer = SPARE
        .try_with(|s| s.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default();
    buffer.extend_from_slice(key);
    buffer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spare() -> usize {
        SPARE.with_borrow(Vec::len)
    }

    #[test]
    fn keys_are_kept_once_and_found_in_any_order() {
        let mut set = KeySet::with_room(4);
        for key in ["u1", "u2", "u1", "u3", "u2"] {
            set.announce(key.as_bytes());
        }
        assert_eq!(set.keys(), [b"u1".to_vec(), b"u2".to_vec(), b"u3".to_vec()]);
        // In announcement order, then out of it, then a key never announced.
        let found: Vec<_> = ["u1", "u2", "u1", "u3", "u2", "u3", "u1", "u9"]
            .iter()
            .map(|k| set.find(k.as_bytes()))
            .collect();
        assert_eq!(
            found,
            [
                Some(0),
                Some(1),
                Some(0),
                Some(2),
                Some(1),
                Some(2),
                Some(0),
                None
            ]
        );
    }

    #[test]
    fn an_announcement_not_looked_up_is_stepped_over() {
        let mut set = KeySet::with_room(4);
        for key in ["a", "b", "c", "d"] {
            set.announce(key.as_bytes());
        }
        assert_eq!(set.find(b"a"), Some(0));
        assert_eq!(set.find(b"c"), Some(2), "b skipped");
        assert_eq!(set.next.get(), 3);
        assert_eq!(set.find(b"d"), Some(3));
    }

    #[test]
    fn large_keys_are_not_kept() {
        let before = spare();
        let mut set = KeySet::with_room(1);
        set.announce(&[b'k'; LARGEST_SPARE + 1]);
        drop(set);
        assert_eq!(spare(), before);
    }

    #[test]
    fn a_dropped_sets_buffers_serve_the_next_sets_keys() {
        let before = spare();
        let mut set = KeySet::with_room(2);
        set.announce(b"first");
        set.announce(b"second");
        drop(set);
        assert_eq!(spare(), before + 2, "both buffers kept");
        let mut next = KeySet::with_room(1);
        next.announce(b"k");
        assert_eq!(spare(), before + 1, "one taken");
        assert_eq!(next.keys(), [b"k".to_vec()], "emptied before reuse");
    }
}
