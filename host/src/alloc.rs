//! The global allocator: mimalloc instead of glibc's, for every binary that links sluice
//! (`sluice`, the tests' copy of it). With one glibc arena per thread, peak memory of the
//! ingest benchmark was twice what the data needs, and allocation took ~15% of the CPU per
//! event.
//!
//! mimalloc keeps freed memory for a while before giving it back to the system (its purge
//! delay), and a batch frees most of its memory at two points: its records once encoded,
//! its rows once committed. [`release`] gives that memory back there, rather than letting
//! the next phase's memory come on top of it.

#![allow(unsafe_code)]

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

unsafe extern "C" {
    /// mimalloc's collection of the calling thread's free memory; with `force`, also of
    /// the memory other threads freed, and memory waiting to be purged is given back to the
    /// system at once.
    fn mi_collect(force: bool);
}

/// Gives the memory freed so far back to the system.
pub fn release() {
    // SAFETY: `mi_collect` only walks mimalloc's own structures; it may be called from
    // any thread at any time (the allocator above is mimalloc).
    unsafe { mi_collect(true) }
}
