//! The read phase: a batch's records from the source, up to the target end offsets and
//! the caps; or, after a crash, exactly the records of the batch that was planned; or no
//! records at all, when event time has windows to close.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::{Pipeline, PipelineError, cpu};
use crate::batch::Caps;
use crate::event_time::state::TriggerPlan;
use crate::record::Record;
use crate::source::{Offsets, SourceError};
use crate::units::Millis;

/// The records of one batch and how it runs.
#[derive(Debug)]
pub(super) struct Input {
    /// The batch id.
    pub(super) batch_id: u64,
    /// The records, in `(topic, partition, offset)` order with event time.
    pub(super) records: Vec<Record>,
    /// How many records the batch read.
    pub(super) rows: u64,
    /// Offsets the batch starts from.
    pub(super) start: Offsets,
    /// Offsets after the batch.
    pub(super) next: Offsets,
    /// The end offsets the batch was reading towards (for lag).
    pub(super) ends: Offsets,
    /// Processing time.
    pub(super) now: Millis,
    /// Close every open window at the end (`at-end = "flush"`).
    pub(super) flush: bool,
    /// With `flush`, feeding a repartition topic: the source partitions read to the end
    /// ([`Pipeline::read_to_end`]; never in a replay).
    pub(super) read_to_end: BTreeSet<String>,
    /// When the batch started.
    pub(super) started: Instant,
    /// The process's CPU time when the batch started.
    pub(super) cpu_started: Duration,
    /// The reading thread's CPU time while it read the batch.
    pub(super) reader_cpu: Duration,
    /// Time spent reading.
    pub(super) poll: Duration,
}

impl Pipeline {
    /// Reads the next batch towards `ends`, within the trigger's caps. `None` when stopped
    /// while reading: the batch is abandoned whole.
    pub(super) fn read(
        &mut self,
        ends: &Offsets,
        stop: &AtomicBool,
    ) -> Result<Option<Input>, PipelineError> {
        let caps = self.config.trigger.caps();
        self.read_up_to(ends, caps, stop, Millis::now(), false)
    }

    /// Reads a trigger of the batch `batch_id` planned before a crash again: the same
    /// records, the same processing time.
    pub(super) fn read_plan(
        &mut self,
        batch_id: u64,
        trigger: &TriggerPlan,
        stop: &AtomicBool,
    ) -> Result<Option<Input>, PipelineError> {
        let ends = Offsets::from_json(&trigger.end).map_err(PipelineError::State)?;
        let unlimited = Caps {
            records: usize::MAX,
            bytes: u64::MAX,
        };
        let mut input = self.read_up_to(&ends, unlimited, stop, trigger.now_ms, trigger.flush)?;
        if let Some(input) = &mut input {
            // As planned: a group's members number batches each their own way, and a
            // replay by another member sends what the planned batch would have.
            input.batch_id = batch_id;
        }
        if let Some(input) = &input
            && input.next != ends
        {
            return Err(PipelineError::State(format!(
                "replaying batch {batch_id}: read up to {}, but it was planned up to {ends}",
                input.next
            )));
        }
        Ok(input)
    }

    /// A batch without records, at processing time `now`.
    pub(super) fn no_records(&self, now: Millis, flush: bool) -> Input {
        Input {
            batch_id: self.last_batch + 1,
            records: Vec::new(),
            rows: 0,
            start: self.positions.clone(),
            next: self.positions.clone(),
            ends: self.positions.clone(),
            now,
            flush,
            read_to_end: BTreeSet::new(),
            started: Instant::now(),
            cpu_started: cpu::process(),
            reader_cpu: Duration::ZERO,
            poll: Duration::ZERO,
        }
    }

    fn read_up_to(
        &mut self,
        ends: &Offsets,
        caps: Caps,
        stop: &AtomicBool,
        now: Millis,
        flush: bool,
    ) -> Result<Option<Input>, PipelineError> {
        let started = Instant::now();
        let cpu_started = cpu::process();
        let (read, reader_cpu) = cpu::on_thread(|| self.source.read(ends, caps, stop));
        let (mut records, next) = match read {
            Ok(read) => read,
            Err(SourceError::Stopped) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if self.event_time.is_some() {
            // Event-time state depends on order: make a replay see the same one.
            records.sort_unstable_by(|a, b| {
                (&a.topic, a.partition, a.offset).cmp(&(&b.topic, b.partition, b.offset))
            });
        }
        Ok(Some(Input {
            batch_id: self.last_batch + 1,
            rows: records.len() as u64,
            records,
            start: self.positions.clone(),
            next,
            ends: ends.clone(),
            now,
            flush,
            read_to_end: BTreeSet::new(),
            started,
            cpu_started,
            reader_cpu,
            poll: started.elapsed(),
        }))
    }
}
