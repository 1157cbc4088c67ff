//! Event time on every core: the keyed state of dedup and windows is split into *shards*
//! by the hash of its key, and each shard runs on a thread of its own.
//!
//! A key is hashed once, where the event's fields are read (already on every core), with
//! SipHash under a key drawn at random for the process: the hash picks the shard and
//! finds the key in the shard's table, and a stream cannot choose keys that collide.
//! Hashes are never saved, so saved state does not depend on the process or on the
//! number of shards.
//!
//! Results do not depend on the number of shards either: a shard sees its keys' events in
//! batch order, which is all a key's dedup or window state depends on. (The rows a batch
//! emits come in no particular order, with one shard as with several.)

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// Shards work on threads of their own only for batches of at least this many events:
/// starting threads costs tens of microseconds.
pub const PARALLEL_MIN_EVENTS: usize = 4096;

/// The most shards per operator.
pub const MAX_SHARDS: usize = 64;

fn keys() -> &'static RandomState {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    KEYS.get_or_init(RandomState::new)
}

/// SipHash under the process's random key, as a `BuildHasher` of no size (for the sets
/// of distinct counts, one per window group).
#[derive(Debug, Clone, Copy, Default)]
pub struct Keyed;

impl BuildHasher for Keyed {
    type Hasher = DefaultHasher;

    fn build_hasher(&self) -> DefaultHasher {
        keys().build_hasher()
    }
}

/// The hash of a dedup key.
pub fn hash_str(key: &str) -> u64 {
    keys().hash_one(key)
}

/// The hash of bytes (a packed group key).
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    keys().hash_one(bytes)
}

/// The shard, of `shards`, that holds the key of hash `hash`. Taken from the hash's middle
/// bits: hash tables use its lowest bits (the bucket) and its highest (the tag).
pub fn shard_of(hash: u64, shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    ((u128::from(hash.rotate_left(24)) * shards as u128) >> 64) as usize
}

/// Runs `work` on each shard's part and returns the results in shard order: on threads of
/// their own (the first on this one) when `parallel`, otherwise one after the other.
pub fn each<T: Send, R: Send>(
    parts: Vec<T>,
    parallel: bool,
    work: impl Fn(usize, T) -> R + Sync,
) -> Vec<R> {
    if !parallel || parts.len() < 2 {
        return parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| work(i, part))
            .collect();
    }
    let work = &work;
    std::thread::scope(|scope| {
        let mut parts = parts.into_iter().enumerate();
        let first = parts.next();
        let handles: Vec<_> = parts
            .map(|(i, part)| scope.spawn(move || work(i, part)))
            .collect();
        let mut results = Vec::with_capacity(handles.len() + 1);
        results.extend(first.map(|(i, part)| work(i, part)));
        for handle in handles {
            match handle.join() {
                Ok(result) => results.push(result),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        results
    })
}

/// How many shards to use for `threads` threads.
pub fn shards_for(threads: usize) -> usize {
    threads.clamp(1, MAX_SHARDS)
}

#[cfg(test)]
mod tests;
