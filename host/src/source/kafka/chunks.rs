//! Where the keys and values of the records read are copied: large buffers shared by the
//! records whose bytes they hold, reused once those records are gone.
//!
//! A buffer per record (a `Vec` each) made the reading thread call the allocator once per
//! key and value, and the memory of a batch's values came back from the allocator to the
//! system between batches and was faulted in again for the next: together a fifth of the
//! reading thread's time in the ingest benchmark. Here a record's bytes are a slice of a
//! [`CHUNK`]-sized buffer ([`Bytes`], reference-counted), and a buffer whose records have
//! all been dropped is filled again from its start.
//!
//! A record kept beyond its batch keeps its whole buffer: whatever keeps records copies
//! their bytes first ([`crate::record::Record::own_bytes`]; dead letters do).

use bytes::{Bytes, BytesMut};

/// The size of one buffer: ~800 records of the benchmark's 320 bytes. 1 MiB buffers were
/// no faster (ingest benchmark, two rounds), and the 8 kept held 8 MiB, a third of the live
/// heap at 10 000 records per batch (heaptrack); peak RSS moved inside its noise either way.
const CHUNK: usize = 256 << 10;
/// Keys and values larger than this get a buffer of their own (a large value would leave
/// much of a chunk unused).
const OWN_BUFFER: usize = CHUNK / 16;
/// The most filled buffers kept for reuse; beyond it the oldest is let go (freed when its
/// records are). Measured in the ingest benchmark with 1 MiB buffers (100 000 records of
/// ~320 bytes per batch, ~32 buffers): keeping 64 raised peak RSS by ~25 MiB (memory the
/// later phases of a batch could have used sat idle), keeping 8 left it as it was, at the
/// same CPU cost.
const MAX_KEPT: usize = 8;

/// Buffers for records' bytes (see the module's documentation).
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    /// The buffer being filled: what is left of it after the records' slices were split off.
    current: BytesMut,
    /// Filled buffers, oldest first; each is reused once its records have all been dropped.
    filled: Vec<BytesMut>,
    /// Whether `current` is a buffer yet (it starts empty, with no memory).
    started: bool,
}

impl Chunks {
    /// `bytes`, copied into a buffer shared with other records.
    pub(crate) fn copy(&mut self, bytes: &[u8]) -> Bytes {
        if bytes.len() > OWN_BUFFER {
            return Bytes::copy_from_slice(bytes);
        }
        if self.current.capacity() - self.current.len() < bytes.len() {
            self.next_buffer();
        }
        self.current.extend_from_slice(bytes);
        self.current.split().freeze()
    }

    /// Retires the current buffer and takes a free one: a filled buffer whose records are
    /// all gone, or a new one.
    fn next_buffer(&mut self) {
        let free = self.filled.iter_mut().position(|b| b.try_reclaim(CHUNK));
        let next = match free {
            Some(i) => self.filled.remove(i),
            None => BytesMut::with_capacity(CHUNK),
        };
        let filled = std::mem::replace(&mut self.current, next);
        if std::mem::replace(&mut self.started, true) {
            self.filled.push(filled);
        }
        if self.filled.len() > MAX_KEPT {
            self.filled.remove(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_share_a_buffer_and_a_freed_buffer_is_filled_again() {
        let mut chunks = Chunks::default();
        let value = [7u8; 1000];
        let first: Vec<Bytes> = (0..10).map(|_| chunks.copy(&value)).collect();
        assert!(first.iter().all(|b| b[..] == value[..]));
        // Consecutive records lie side by side in one buffer.
        assert_eq!(first[1].as_ptr(), first[0].as_ptr().wrapping_add(1000));
        let start = first[0].as_ptr();
        // Fill the rest of the first buffer and start a second one.
        let rest: Vec<Bytes> = (0..CHUNK / 1000).map(|_| chunks.copy(&value)).collect();
        drop(first);
        drop(rest);
        // The first buffer's records are gone: when the second is full, the first is
        // filled again from its start.
        let more: Vec<Bytes> = (0..CHUNK / 1000).map(|_| chunks.copy(&value)).collect();
        assert!(more.iter().any(|b| b.as_ptr() == start));
        assert!(more.iter().all(|b| b[..] == value[..]));
    }

    #[test]
    fn a_buffer_with_a_record_alive_is_not_reused() {
        let mut chunks = Chunks::default();
        let value = [1u8; 1000];
        let kept = chunks.copy(&value);
        let rest: Vec<Bytes> = (0..3 * CHUNK / 1000).map(|_| chunks.copy(&value)).collect();
        drop(rest);
        let more: Vec<Bytes> = (0..2 * CHUNK / 1000)
            .map(|_| chunks.copy(&[2u8; 1000]))
            .collect();
        assert!(more.iter().all(|b| {
            let at = b.as_ptr() as usize;
            let start = kept.as_ptr() as usize;
            !(start..start + CHUNK).contains(&at)
        }));
        assert_eq!(kept[..], value[..]);
    }

    #[test]
    fn large_values_get_a_buffer_of_their_own() {
        let mut chunks = Chunks::default();
        let small = chunks.copy(b"small");
        let large = chunks.copy(&vec![3u8; OWN_BUFFER + 1]);
        let after = chunks.copy(b"after");
        assert_eq!(after.as_ptr(), small.as_ptr().wrapping_add(5));
        assert_eq!(large.len(), OWN_BUFFER + 1);
    }
}
