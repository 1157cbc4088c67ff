//! State that moves with its partitions (issue 35): in a group whose members each own the
//! state of their partitions, each member saves the state it holds, and every commit
//! records which file holds the state of each partition (`sluice.state-shares`, merged
//! at commit time as the offsets are, see [`crate::iceberg::fence`]). A member given
//! partitions reads the files that hold them and keeps their share ([`split`]): the keys
//! its partitions own, and their watermark clocks.
//!
//! [`split`]: super::split

use std::collections::{BTreeMap, BTreeSet};

use super::{SavedState, StateError, StateStore};
use crate::event_time::EventTime;

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

impl EventTime {
    /// Restores the state of the partitions `owns` accepts from the files `shares` names
    /// for them: each file's state (a snapshot, or a delta and its chain) cut to the keys
    /// `keep` accepts and the clocks of owned partitions, the cuts put together. Returns
    /// the files read. The next save is a snapshot.
    pub fn recover_shares(
        &mut self,
        store: &dyn StateStore,
        shares: &Shares,
        keep: &dyn Fn(&[u8]) -> bool,
        owns: &dyn Fn(&str) -> bool,
    ) -> Result<usize, StateError> {
        let files: BTreeSet<&String> = shares
            .iter()
            .filter(|(partition, _)| owns(partition))
            .map(|(_, path)| path)
            .collect();
        let mut state = SavedState::default();
        for path in &files {
            let mut one = self.emptied();
            one.load(store, path)?;
            let mut share = one.saved()?;
            share.retain(keep, owns);
            state.absorb(share);
        }
        self.restore(state);
        tracing::info!(
            files = files.len(),
            partitions = shares.keys().filter(|p| owns(p)).count(),
            "restored the event-time state of the partitions assigned"
        );
        Ok(files.len())
    }

    /// The same operators, empty.
    pub(crate) fn emptied(&self) -> EventTime {
        let mut empty = self.clone();
        empty.restore(SavedState::default());
        empty
    }

    /// The state as saved, owned.
    pub(crate) fn saved(&self) -> Result<SavedState, StateError> {
        let bytes = postcard::to_allocvec(&self.save_ref()).map_err(StateError::Encode)?;
        postcard::from_bytes(&bytes).map_err(StateError::Encode)
    }
}
