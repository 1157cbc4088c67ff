//! A stream-stream join (`[[joins]]`) as an [`Operator`]: its right records are judged
//! against the right watermark, the on-time ones of both sides joined; once the left
//! watermark moved, the rows the watermarks passed leave (left-outer rows emitted).

use super::{Batch, Operator};
use super::{EventTimeOutcome, Fields};
use crate::event_time::config::EventTimeConfig;
use crate::event_time::delta::{StateDelta, StateDeltaRef};
use crate::event_time::extract::Scalar;
use crate::event_time::join::config::JoinConfig;
use crate::event_time::join::{JoinInput, JoinOperator, LeftSlots, RightFields};
use crate::event_time::outcome::{Arrival, StateSize};
use crate::event_time::state::{SavedState, SavedStateRef};
use crate::units::{Micros, Millis};

/// One join of a pipeline: its operator, the slots of the left fields it reads, and
/// where its input sits in an event's [`Fields::joins`] (and its right records in a
/// batch's [`Batch::right`]).
#[derive(Debug, Clone)]
pub struct JoinStage {
    slots: LeftSlots,
    /// Its position among the joins.
    index: usize,
    op: JoinOperator,
}

impl JoinStage {
    /// The join `index` (in configured order), reading left fields at the slots `slot`
    /// gives.
    pub fn new(
        config: &JoinConfig,
        event_time: &EventTimeConfig,
        index: usize,
        slot: impl FnMut(&str) -> usize,
    ) -> Self {
        JoinStage {
            slots: LeftSlots::new(config, slot),
            index,
            op: JoinOperator::new(config, event_time),
        }
    }

    fn name(&self) -> &str {
        &self.op.config().name
    }
}

impl Operator for JoinStage {
    fn read(&self, values: &[Option<Scalar>], fields: &mut Fields) {
        fields.joins.push(self.slots.input(values));
    }

    /// Judges the right records, and joins the on-time events of both sides.
    fn process(&mut self, batch: &Batch<'_>, outcome: &mut EventTimeOutcome) {
        let index = self.index;
        let records = batch.right.get(index).map_or(&[][..], Vec::as_slice);
        let (verdicts, right_before) = self.op.judge(records, batch.now, outcome.watermark_before);
        let left: Vec<(&JoinInput, Micros, u64)> = batch
            .fields
            .iter()
            .zip(&outcome.verdicts)
            .filter(|(_, v)| **v == Arrival::OnTime)
            .map(|(f, _)| (&f.joins[index], f.time, f.id))
            .collect();
        let on_time: Vec<&RightFields> = records
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| **v == Arrival::OnTime)
            .map(|((_, r), _)| *r)
            .collect();
        let rows = self.op.join(&left, &on_time);
        outcome.late += verdicts.iter().filter(|v| **v == Arrival::Late).count() as u64;
        outcome.future += verdicts.iter().filter(|v| **v == Arrival::Future).count() as u64;
        outcome.joined.push(rows);
        outcome.right_verdicts.push(verdicts);
        outcome.right_watermarks_before.push(right_before);
    }

    /// Removes the rows the watermarks passed; adds the left-outer rows they emit.
    fn advance(&mut self, batch: &Batch<'_>, outcome: &mut EventTimeOutcome) {
        let rows = self.op.finish(outcome.watermark, batch.now, batch.flush);
        if let Some(joined) = outcome.joined.get_mut(self.index) {
            joined.extend(rows);
        }
    }

    fn due(&self, now: Millis, flush: bool, left: Option<Micros>) -> bool {
        self.op.due(now, flush, left)
    }

    fn set_session_start(&mut self, start: Millis) {
        self.op.set_session_start(start);
    }

    fn size(&self) -> Option<(String, StateSize)> {
        Some((format!("join:{}", self.name()), self.op.size()))
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
        into.joins.insert(self.name(), self.op.save_ref());
    }

    fn delta<'a>(&'a self, into: &mut StateDeltaRef<'a>) {
        into.joins.insert(self.name(), self.op.delta_ref());
    }

    /// A join not in `saved` starts empty.
    fn restore(&mut self, saved: &mut SavedState) {
        let state = saved.joins.remove(self.name()).unwrap_or_default();
        self.op.restore(state);
    }

    /// A join not in the delta did not change.
    fn apply(&mut self, delta: &mut StateDelta, watermark: Option<Micros>) {
        if let Some(changes) = delta.joins.remove(self.name()) {
            self.op.apply(changes, watermark);
        }
    }

    fn as_join(&self) -> Option<&JoinOperator> {
        Some(&self.op)
    }

    fn as_join_mut(&mut self) -> Option<&mut JoinOperator> {
        Some(&mut self.op)
    }

    fn clone_box(&self) -> Box<dyn Operator> {
        Box::new(self.clone())
    }
}
