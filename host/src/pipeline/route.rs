//! The route phase: event time applied to the processed batch, and every record sent to
//! its output: the table, the dead letters, the late topic, a counted drop, the windows.
//! Nothing leaves yet; the result is a [`Prepared`] batch for the commit phase.

use std::time::Duration;

use super::read::Input;
use super::{Pipeline, PipelineError, cpu};
use crate::checkpoint::CommitMark;
use crate::event_time::EventTime;
use crate::event_time::apply::Timed;
use crate::event_time::config::LateData;
use crate::event_time::state::Plan;
use crate::event_time::tasks::Tasks;
use crate::iceberg::Fence;
use crate::pipeline::config::OnInvalid;
use crate::record::Offsets;
use crate::record::{Reason, Record};
use crate::sink::Results;
use crate::source::kafka::SourceMode;
use crate::units::{Micros, Millis};

/// A batch ready to commit.
#[derive(Debug)]
pub(super) struct Prepared {
    /// What its outputs receive.
    pub(super) results: Results,
    /// Its commit mark: the pipeline, the batch id, the offsets after it.
    pub(super) mark: CommitMark,
    /// What the table must still record for it to commit: where it started.
    pub(super) fence: Fence,
    /// What it read and when it ran, saved with the state to replay it exactly.
    pub(super) plan: Plan,
    /// With event time: the watermark after it, late events and duplicates.
    pub(super) event_time: Option<EventTimeCounts>,
    /// The process's CPU time routing it (event time included).
    pub(super) cpu: Duration,
}

/// What event time did to a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EventTimeCounts {
    /// The watermark after the batch.
    pub(super) watermark: Option<Micros>,
    /// Events behind the watermark, wherever they went.
    pub(super) late: u64,
    /// Duplicates dropped.
    pub(super) duplicates: u64,
}

impl EventTimeCounts {
    /// Adds a later batch's counts (held triggers committed together: see
    /// [`super::cadence`]): the watermark is the later one's.
    pub(super) fn then(self, later: EventTimeCounts) -> EventTimeCounts {
        EventTimeCounts {
            watermark: later.watermark,
            late: self.late + later.late,
            duplicates: self.duplicates + later.duplicates,
        }
    }
}

impl Pipeline {
    /// Applies event time to `processed` and routes its records.
    pub(super) fn route(
        &mut self,
        input: &Input,
        slices: Vec<Timed>,
        dead: Vec<(Record, Reason)>,
        right: Vec<Record>,
    ) -> Result<Prepared, PipelineError> {
        let cpu_start = cpu::process();
        let name = self.config.pipeline.name.clone();
        let mut results = Results {
            pipeline: name.clone(),
            batch_id: input.batch_id,
            dead,
            evolution: self.planned.clone(),
            ..Results::default()
        };
        let mut counts = None;
        self.check_keys(&slices, &right)?;
        let assigned = match self.tasks {
            Some(_) => self.task_partitions(input),
            None => Default::default(),
        };
        let mut kept = Vec::new();
        let flush = self.flushing(input.flush);
        let flush_all = self.flushing_all(&flush);
        match &mut self.event_time {
            None => {
                results.rows = slices.into_iter().filter_map(|s| s.batch).collect();
            }
            Some(et) => {
                let applied = match &mut self.tasks {
                    Some(tasks) => tasks.apply(slices, right, &assigned, input.now, &flush)?,
                    None => et.apply(slices, right, input.start.0.keys(), input.now, flush_all)?,
                };
                kept = applied.kept;
                results.rows = applied.batches;
                results.windows = applied.outcome.emitted;
                results.joins = applied.outcome.joined;
                counts = Some(EventTimeCounts {
                    watermark: applied.outcome.watermark,
                    late: applied.late.len() as u64,
                    duplicates: applied.outcome.duplicates,
                });
                route_late(et, applied.late, &mut results, input.batch_id);
                let refused = applied.future.iter().chain(&applied.unreadable);
                if let Some((record, reason)) = refused.min_by_key(|(r, _)| r.position())
                    && self.config.pipeline.on_invalid == OnInvalid::Fail
                {
                    return Err(PipelineError::invalid(record, reason));
                }
                results.dead.extend(applied.future);
                results.dead.extend(applied.unreadable);
            }
        }
        self.observe_markers(input.now);
        let ended = (input.flush && flush_all).then_some(&input.read_to_end);
        results.repartition = self.repartitioned(&kept, input, ended);
        if self.outlets.rows_elsewhere {
            results.rows.clear(); // a later stage writes them
        }
        Ok(Prepared {
            plan: Plan {
                batch_id: input.batch_id,
                start: input.start.to_json(),
                end: input.next.to_json(),
                now_ms: input.now,
                session_start_ms: self
                    .event_time
                    .as_ref()
                    .map_or(Millis(0), EventTime::session_start),
                flush: input.flush,
                held: Vec::new(),
                lookups: self.lookups.lookups().versions(),
                key: self.replaying.as_ref().map(|r| r.key.clone()),
            },
            fence: match self.config.source.mode {
                SourceMode::Assign => Fence::Follows(self.fence_start(&input.start)),
                SourceMode::Group => Fence::Owns {
                    start: self.fence_start(&input.start),
                    states: self.tasks.as_ref().map(Tasks::states),
                    claims: self.tasks.as_ref().map(Tasks::claims),
                },
            },
            mark: CommitMark {
                pipeline: name,
                batch_id: input.batch_id,
                offsets: input.next.clone(),
            },
            results,
            event_time: counts,
            cpu: cpu::process().saturating_sub(cpu_start),
        })
    }
}

/// Late events go where `event-time.late` says: the dead letters, the late topic, or a
/// counted drop.
fn route_late(
    et: &EventTime,
    mut late: Vec<(Record, Reason)>,
    results: &mut Results,
    batch_id: u64,
) {
    match et.config().late {
        LateData::DeadLetter => results.dead.append(&mut late),
        LateData::Topic => results.late = late,
        LateData::Drop if !late.is_empty() => {
            tracing::info!(
                batch_id,
                rows_late = late.len(),
                "dropped events behind the watermark (event-time.late = \"drop\")"
            );
        }
        LateData::Drop => {}
    }
}

impl Pipeline {
    /// What the table must record for a batch read from `start` to commit: the offsets of
    /// the last commit for the partitions it has, which are `start` unless the source
    /// skipped records since (data loss accepted with `on-data-loss = "continue"`).
    fn fence_start(&self, start: &Offsets) -> Offsets {
        let mut fence = start.clone();
        for (tp, next) in &mut fence.0 {
            if let Some(committed) = self.committed.get(tp) {
                *next = committed;
            }
        }
        fence
    }
}
