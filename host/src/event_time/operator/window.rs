//! A window (`[[windows]]`) as an [`Operator`]: the events on time go into every window
//! that holds them and is still open, each shard taking its own keys; once the watermark
//! moved, closed windows are emitted (`on-window-close`), or those that changed are
//! (`update`).

use super::{Batch, Operator};
use super::{EventTimeOutcome, Fields};
use crate::event_time::config::{EmitMode, WindowConfig};
use crate::event_time::delta::{StateDelta, StateDeltaRef};
use crate::event_time::extract::Scalar;
use crate::event_time::outcome::{Arrival, StateSize};
use crate::event_time::shard;
use crate::event_time::state::{SavedState, SavedStateRef};
use crate::event_time::window::{Slots, WindowOperator, merge_rows};
use crate::units::{Micros, Millis};

/// One window of a pipeline: its operator, the slots of the fields it reads, and where
/// its input sits in an event's [`Fields::windows`].
#[derive(Debug, Clone)]
pub struct WindowStage {
    slots: Slots,
    /// Its position among the windows.
    index: usize,
    op: WindowOperator,
}

impl WindowStage {
    /// The window `index` (in configured order), reading fields at the slots `slot` gives.
    pub fn new(config: &WindowConfig, index: usize, slot: impl FnMut(&str) -> usize) -> Self {
        WindowStage {
            slots: Slots::new(config, slot),
            index,
            op: WindowOperator::new(config.clone()),
        }
    }

    fn name(&self) -> &str {
        &self.op.config().name
    }
}

impl Operator for WindowStage {
    fn read(&self, values: &[Option<Scalar>], fields: &mut Fields) {
        fields.windows.push(self.slots.input(values));
    }

    /// Adds the events on time to the window: each shard takes its own keys.
    fn process(&mut self, batch: &Batch<'_>, outcome: &mut EventTimeOutcome) {
        let before = outcome.watermark_before;
        let verdicts = &outcome.verdicts;
        let index = self.index;
        let (shape, shards) = self.op.shards_mut();
        let n = shards.len();
        shard::each(shards.iter_mut().collect(), batch.parallel, |i, shard| {
            let on_time = batch.fields.iter().zip(verdicts);
            for (f, _) in on_time.filter(|(_, v)| **v == Arrival::OnTime) {
                let input = &f.windows[index];
                if shard::shard_of(input.hash, n) == i {
                    shard.add(shape, f.time, input, before);
                }
            }
        });
    }

    fn flush_to(&self) -> Option<Micros> {
        self.op.last_end()
    }

    /// Ends the batch on every shard; pushes the rows emitted.
    fn advance(&mut self, batch: &Batch<'_>, outcome: &mut EventTimeOutcome) {
        let watermark = outcome.watermark;
        let (shape, shards) = self.op.shards_mut();
        let rows = shard::each(shards.iter_mut().collect(), batch.parallel, |_, shard| {
            shard.finish_batch(shape, watermark)
        });
        outcome.emitted.push(merge_rows(rows));
    }

    fn due(&self, _now: Millis, flush: bool, left: Option<Micros>) -> bool {
        if flush {
            return self.op.rows() > 0;
        }
        self.op.config().emit == EmitMode::OnWindowClose
            && left.is_some_and(|w| self.op.closes_any(w))
    }

    fn set_shards(&mut self, shards: usize) {
        self.op = WindowOperator::with_shards(self.op.config().clone(), shards);
    }

    fn size(&self) -> Option<(String, StateSize)> {
        let size = StateSize {
            rows: self.op.rows() as u64,
            bytes: self.op.bytes() as u64,
        };
        Some((format!("window:{}", self.name()), size))
    }

    fn rows(&self) -> usize {
        self.op.rows()
    }

    fn changed(&self) -> usize {
        self.op.changed()
    }

    fn track(&mut self) {
        self.op.track();
    }

    fn save<'a>(&'a self, into: &mut SavedStateRef<'a>) {
        into.windows.insert(self.name(), self.op.save_ref());
    }

    fn delta<'a>(&'a self, into: &mut StateDeltaRef<'a>) {
        into.windows.insert(self.name(), self.op.delta());
    }

    /// Windows not in `saved` start empty.
    fn restore(&mut self, saved: &mut SavedState) {
        let groups = saved.windows.remove(self.name()).unwrap_or_default();
        self.op.restore(groups);
    }

    fn apply(&mut self, delta: &mut StateDelta, watermark: Option<Micros>) {
        let changes = delta.windows.remove(self.name()).unwrap_or_default();
        self.op.apply(changes, watermark);
    }

    fn clone_box(&self) -> Box<dyn Operator> {
        Box::new(self.clone())
    }
}
