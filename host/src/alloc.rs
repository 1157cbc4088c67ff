//! The global allocator: mimalloc instead of glibc's, for every binary that links sluice
//! (`sluice`, the tests' copy of it). With one glibc arena per thread, peak memory of the
//! ingest benchmark was twice what the data needs, and allocation took ~15% of the CPU per
//! event. It is built without transparent huge pages (`no_thp` in `Cargo.toml`): asking
//! for them made every touched 2 MiB resident, ~50 MiB more peak RSS in that benchmark.
//!
//! Giving freed memory back after each batch's process and commit phases (`mi_collect`)
//! took another ~12 MiB off the peak but cost ~1 s of system CPU per million events
//! (~12%), so mimalloc purges on its own schedule.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
