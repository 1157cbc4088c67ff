//! State that moves with its partitions (issue 35): in a group whose members each own the
//! state of their partitions, every commit records which file holds the state of each
//! partition (`sluice.state-shares`, merged at commit time as the offsets are, see
//! [`crate::iceberg::fence`]); a member given a partition restores its state from there
//! (see [`crate::event_time::tasks`]).

use std::collections::BTreeMap;

/// Partition (`topic/partition`) → the state file that holds its share, as a commit
/// records it.
pub type Shares = BTreeMap<String, String>;

pub use crate::checkpoint::STATE_SHARES;

/// `shares` as the summary property's value.
pub fn shares_to_json(shares: &Shares) -> String {
    serde_json::to_string(shares).unwrap_or_else(|_| "{}".into())
}

/// The summary property's value read back; `None` if it is not a JSON object of texts.
pub fn shares_from_json(text: &str) -> Option<Shares> {
    serde_json::from_str(text).ok()
}
