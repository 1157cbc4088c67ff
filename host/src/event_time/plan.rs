//! What a batch read and when it ran (its *plan*): enough to replay it exactly after a
//! crash (see [`super::state`]). Below the state files and their deltas, which both
//! carry it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::checkpoint::lookups::Version;
use crate::units::Millis;

/// What a batch read and when it ran: enough to replay it exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The batch id.
    pub batch_id: u64,
    /// Offsets the batch starts from, as JSON (see [`crate::record::Offsets::to_json`]).
    pub start: String,
    /// Offsets the batch ends at.
    pub end: String,
    /// Processing time of the batch.
    pub now_ms: Millis,
    /// When the run that planned the batch started (see
    /// [`super::watermark::Clock::session_start`]).
    pub session_start_ms: Millis,
    /// Whether the batch closed every open window (`at-end = "flush"`).
    pub flush: bool,
    /// With a commit cadence, the triggers held before the last one, in order (`end`,
    /// `now_ms` and `flush` are the last one's): a replay runs each as it ran. Kept in the
    /// plan's pointer ([`PlanFile`]) alone, so that the state files' layout (a snapshot's
    /// is binary) does not change.
    #[serde(skip)]
    pub held: Vec<TriggerPlan>,
    /// The version of every lookup table the batch saw (see [`crate::lookup`]): a replay
    /// rebuilds them there. Kept in the plan's pointer alone, as [`Plan::held`] is.
    #[serde(skip)]
    pub lookups: BTreeMap<String, Version>,
    /// For a replay of a batch on some of its partitions (whose offsets are then others'):
    /// that batch's key, so that the replay, and a replay of it, is the same batch. Kept in
    /// the plan's pointer alone, as [`Plan::held`] is.
    #[serde(skip)]
    pub key: Option<String>,
}

/// One trigger of a batch that held several (see [`Plan::held`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerPlan {
    /// Offsets the trigger ended at.
    pub end: String,
    /// Its processing time.
    pub now_ms: Millis,
    /// Whether it closed every open window.
    pub flush: bool,
}

impl Plan {
    /// Every trigger of the batch, in order: the held ones, then the last.
    pub fn triggers(&self) -> Vec<TriggerPlan> {
        let mut all = self.held.clone();
        all.push(TriggerPlan {
            end: self.end.clone(),
            now_ms: self.now_ms,
            flush: self.flush,
        });
        all
    }

    /// Adds a later trigger to a batch held for the commit cadence: this one's last
    /// trigger joins the held ones.
    pub fn then(&mut self, later: &Plan) {
        self.held.push(TriggerPlan {
            end: std::mem::replace(&mut self.end, later.end.clone()),
            now_ms: self.now_ms,
            flush: self.flush,
        });
        (self.now_ms, self.flush) = (later.now_ms, later.flush);
        self.held.extend(later.held.iter().cloned());
    }
}
