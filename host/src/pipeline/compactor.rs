//! The pipeline's compaction (`[sink.compact]`): a thread of its own that compacts the
//! pipeline's tables every `every`, beside the batches (see [`crate::iceberg::compact`]
//! for why that is safe). A failed run is logged and counted, never fails a batch; the
//! counts reach the progress line, `/status` and the metrics with the next batch.
//!
//! One process compacts: alone, the process running the pipeline; in a consumer group,
//! the member that reads partition 0 of the first source topic (the others would only
//! take each other's files); with an election, the active process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::iceberg::compact::{CompactConfig, Compaction};
use crate::iceberg::{IcebergCatalog, IcebergSinkConfig, IcebergTable};
use crate::progress::Role;
use crate::record::TopicPartition;

/// What the thread and the pipeline share.
#[derive(Default)]
struct Shared {
    /// Counts not yet reported.
    counts: Mutex<Compaction>,
    /// Set to stop; the thread waits on `wake` between runs.
    stopping: Mutex<bool>,
    wake: Condvar,
    /// Set to make a run give up between two record batches.
    abort: AtomicBool,
    /// Whether this process is the one that compacts now.
    active: AtomicBool,
}

/// The running compaction thread; stopped when dropped.
pub(super) struct Compactor {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Compactor {
    /// Starts compacting `tables` every `config.every`, once this process is made active.
    pub fn start(
        catalog: IcebergCatalog,
        tables: Vec<IcebergSinkConfig>,
        config: CompactConfig,
    ) -> std::io::Result<Compactor> {
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("sluice-compact".into())
                .spawn(move || run(&shared, &catalog, &tables, &config))?
        };
        Ok(Compactor {
            shared,
            thread: Some(thread),
        })
    }

    /// Makes this process the one that compacts, or not.
    pub fn set_active(&self, active: bool) {
        self.shared.active.store(active, Ordering::Relaxed);
    }

    /// The counts since the last call.
    pub fn take(&self) -> Compaction {
        std::mem::take(&mut *lock(&self.shared.counts))
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        *lock(&self.shared.stopping) = true;
        self.shared.abort.store(true, Ordering::Relaxed);
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether a process with `role`, whose last batch read `partitions`, is the one that
/// compacts: alone or active, yes; standing by, no; in a consumer group, the member that
/// read partition 0 of `first_topic`.
pub(super) fn compacts(role: Role, partitions: &[TopicPartition], first_topic: &str) -> bool {
    match role {
        Role::Single | Role::Active => true,
        Role::Standby => false,
        Role::Member => partitions
            .iter()
            .any(|tp| &*tp.topic == first_topic && tp.partition == 0),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run(
    shared: &Shared,
    catalog: &IcebergCatalog,
    tables: &[IcebergSinkConfig],
    config: &CompactConfig,
) {
    loop {
        let stopping = lock(&shared.stopping);
        let (stopping, _) = shared
            .wake
            .wait_timeout_while(stopping, config.every, |stop| !*stop)
            .unwrap_or_else(PoisonError::into_inner);
        if *stopping {
            return;
        }
        drop(stopping);
        if !shared.active.load(Ordering::Relaxed) {
            continue;
        }
        for table in tables {
            let counts = compact(catalog, table, config, &shared.abort);
            lock(&shared.counts).add(&counts);
        }
    }
}

/// One run on one table; a failure is logged and counted.
fn compact(
    catalog: &IcebergCatalog,
    table: &IcebergSinkConfig,
    config: &CompactConfig,
    abort: &AtomicBool,
) -> Compaction {
    let result = IcebergTable::open_existing(catalog, table.clone())
        .and_then(|mut table| table.compact(config, abort));
    match result {
        Ok(compacted) => compacted.counts,
        Err(error) => {
            if !abort.load(Ordering::Relaxed) {
                tracing::warn!(table = %format!("{}.{}", table.namespace, table.table), %error, "compaction failed; the pipeline goes on");
            }
            Compaction {
                failures: 1,
                ..Compaction::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    #[test]
    fn one_process_compacts_in_a_group_the_reader_of_the_first_partition() {
        let first = [tp("events", 0), tp("events", 1)];
        let others = [tp("events", 2), tp("clicks", 0)];
        assert!(compacts(Role::Single, &[], "events"));
        assert!(compacts(Role::Active, &[], "events"));
        assert!(!compacts(Role::Standby, &first, "events"));
        assert!(compacts(Role::Member, &first, "events"));
        assert!(!compacts(Role::Member, &others, "events"));
    }
}
