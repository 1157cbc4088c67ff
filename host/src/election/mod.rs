//! Which process runs an event-time pipeline: one **active** process, any number of
//! **standbys**.
//!
//! Windows and dedup need every partition in one place, so an event-time pipeline with
//! `[source] mode = "group"` is not split between processes: they elect one. The election
//! is Kafka's consumer-group protocol, nothing of our own ([`KafkaElection`]): every
//! process joins the group `<group-id>-active` on the first source topic, without reading
//! it, and the one the group assigns partition 0 is active. When it dies its session
//! times out, the group gives partition 0 to a standby, and that standby resumes from the
//! table (positions and event-time state) and runs the pipeline. Two processes that both
//! believe they are active for a moment (a frozen process that thaws) cannot both commit:
//! every commit is fenced on the table's offsets ([`crate::iceberg`]).
//!
//! [`MemoryElection`] is the in-memory twin for engine tests: a test says who is active.

mod kafka;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use self::kafka::KafkaElection;

/// Who runs the pipeline. Polled between batches (every 100 ms at most) by a thread of its
/// own while active, and by the waiting loop while standby.
pub trait Election: Send {
    /// Serves the group and says whether this process is the active one now.
    fn active(&mut self) -> bool;

    /// Changes of the group (rebalances) seen since the start.
    fn changes(&self) -> u64;
}

/// An election a test decides: clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct MemoryElection {
    active: Arc<AtomicBool>,
    changes: Arc<std::sync::atomic::AtomicU64>,
}

impl MemoryElection {
    /// Makes this process active (`true`) or standby.
    pub fn set(&self, active: bool) {
        if self.active.swap(active, Ordering::SeqCst) != active {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Election for MemoryElection {
    fn active(&mut self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }
}
