//! Which tasks flush at the end of a run (`at-end = "flush"`).

use std::collections::BTreeSet;

/// Which partitions' tasks close every open window at the end of a batch (`at-end =
/// "flush"` at the end of an `available-now` run): stage two of a repartition topic
/// flushes a partition only once every source partition ended (see
/// [`crate::event_time::repartition::Seen::all_ended`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flush {
    /// None: the batch is not the end of a run that flushes.
    None,
    /// Every one.
    All,
    /// These (`topic/partition`).
    Only(BTreeSet<String>),
}

impl Flush {
    /// Whether the task of `partition` flushes.
    pub fn of(&self, partition: &str) -> bool {
        match self {
            Flush::None => false,
            Flush::All => true,
            Flush::Only(these) => these.contains(partition),
        }
    }
}
