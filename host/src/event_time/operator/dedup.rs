//! Deduplication as an [`Operator`]: an on-time event whose dedup key was seen, and
//! whose first copy is not behind the watermark, is a duplicate; keys behind the
//! watermark are forgotten. Each shard looks at its own keys.

use super::{Batch, Operator};
use super::{EventTimeOutcome, Fields};
use crate::event_time::dedup::Dedup;
use crate::event_time::delta::{StateDelta, StateDeltaRef};
use crate::event_time::extract::Scalar;
use crate::event_time::outcome::{Arrival, StateSize};
use crate::event_time::shard;
use crate::event_time::state::{SavedState, SavedStateRef};
use crate::units::Micros;

/// The dedup keys of a pipeline: always in the list, so that saved keys are kept (and
/// forgotten) as before even when `[dedup]` is no longer configured.
#[derive(Debug, Clone, Default)]
pub struct DedupStage {
    /// The slots of the key fields; `None` without `[dedup]`.
    slots: Option<Vec<usize>>,
    dedup: Dedup,
}

impl DedupStage {
    /// Deduplication on the fields at `slots` (`None`: none), with no keys.
    pub fn new(slots: Option<Vec<usize>>) -> Self {
        DedupStage {
            slots,
            dedup: Dedup::default(),
        }
    }
}

impl Operator for DedupStage {
    fn read(&self, values: &[Option<Scalar>], fields: &mut Fields) {
        // An event without one of the key fields is not deduplicated.
        let dedup_key = self.slots.as_ref().and_then(|slots| {
            let mut key = String::new();
            for (i, &slot) in slots.iter().enumerate() {
                if i > 0 {
                    key.push('\u{1f}');
                }
                key.push_str(values[slot].as_ref()?.text());
            }
            Some(key.into_boxed_str())
        });
        fields.dedup_hash = dedup_key.as_deref().map_or(0, shard::hash_str);
        fields.dedup_key = dedup_key;
    }

    /// Marks the repeats among the events still on time.
    fn process(&mut self, batch: &Batch<'_>, outcome: &mut EventTimeOutcome) {
        if self.slots.is_none() {
            return;
        }
        let shards = self.dedup.shards_mut();
        let n = shards.len();
        let on_time: &[Arrival] = &outcome.verdicts;
        let repeats = shard::each(shards.iter_mut().collect(), batch.parallel, |i, shard| {
            let mut repeats = Vec::new();
            for (at, f) in batch.fields.iter().enumerate() {
                if on_time[at] == Arrival::OnTime
                    && let Some(key) = &f.dedup_key
                    && shard::shard_of(f.dedup_hash, n) == i
                    && shard.is_repeat(key, f.dedup_hash, f.time)
                {
                    repeats.push(at);
                }
            }
            repeats
        });
        for at in repeats.into_iter().flatten() {
            outcome.verdicts[at] = Arrival::Duplicate;
            outcome.duplicates += 1;
        }
    }

    /// Forgets the keys behind the watermark, each shard on its own.
    fn advance(&mut self, batch: &Batch<'_>, outcome: &mut EventTimeOutcome) {
        let Some(w) = outcome.watermark else {
            return;
        };
        let shards = self.dedup.shards_mut().iter_mut().collect();
        shard::each(shards, batch.parallel, |_, shard| shard.forget_behind(w));
    }

    fn set_shards(&mut self, shards: usize) {
        self.dedup = Dedup::new(shards);
    }

    fn size(&self) -> Option<(String, StateSize)> {
        self.slots.as_ref()?;
        Some(("dedup".to_string(), self.dedup.size()))
    }

    fn rows(&self) -> usize {
        self.dedup.len()
    }

    fn changed(&self) -> usize {
        self.dedup.changed()
    }

    fn track(&mut self) {
        self.dedup.track();
    }

    fn save<'a>(&'a self, into: &mut SavedStateRef<'a>) {
        into.dedup = self.dedup.save_ref();
    }

    fn delta<'a>(&'a self, into: &mut StateDeltaRef<'a>) {
        into.dedup_added = self.dedup.delta();
    }

    fn restore(&mut self, saved: &mut SavedState) {
        self.dedup.restore(std::mem::take(&mut saved.dedup));
    }

    fn apply(&mut self, delta: &mut StateDelta, watermark: Option<Micros>) {
        let added = std::mem::take(&mut delta.dedup_added);
        let removed = std::mem::take(&mut delta.dedup_removed);
        self.dedup.apply(added, removed, watermark);
    }

    fn clone_box(&self) -> Box<dyn Operator> {
        Box::new(self.clone())
    }
}
