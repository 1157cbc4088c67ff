//! Runs plugins in order over records. A record rejected (or failed) by one stage is not
//! seen by the next; a rewritten record goes on with its new value. A patched record goes
//! on with its patch beside its value: the patch is applied to the value only when a later
//! stage is to see it (or by [`Judged::settle`]), so a last stage's patch reaches the
//! encoder unapplied.
//!
//! When a call fails in a way that may depend on its events (a trap, a memory or stack
//! limit), the chunk is split in halves and each half is tried again, so only the events
//! that really make the plugin fail are marked failed, and the rest are judged normally.
//! A deadline or a broken answer fails the whole chunk: retrying would cost too much or
//! would fail the same way.

use std::sync::Arc;

use super::{EventSpan, Failure, Plugin, PluginError, Rejection, Verdict};
use crate::record::{Patch, Record};

/// What became of one record after all stages.
#[derive(Debug, Clone)]
pub enum Fate {
    /// Every stage kept it unchanged.
    Kept,
    /// Every stage kept it, and at least one rewrote or patched its value.
    Rewritten,
    /// A stage rejected it.
    Rejected {
        /// Index of the stage that rejected it.
        stage: usize,
        /// The plugin's reason.
        rejection: Rejection,
    },
    /// A stage failed on it (trap, limit, broken answer).
    Failed {
        /// Index of the stage that failed.
        stage: usize,
        /// The failure, shared by the records of the failed call.
        error: Arc<PluginError>,
    },
}

/// A record with its fate. A rewritten record carries its final value; a patched one may
/// carry the last patch beside it.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The record, with the value given by the last rewrite (or applied patch).
    pub record: Record,
    /// What happened to it.
    pub fate: Fate,
    /// A patch not yet applied to `record`'s value, and the stage that gave it.
    pub patch: Option<(usize, Patch)>,
}

impl Judged {
    /// This outcome with its patch applied to its record's value (see [`Judged::settle_mut`]).
    pub fn settle(mut self, stages: &[Plugin]) -> Judged {
        self.settle_mut(stages);
        self
    }

    /// Applies the patch to the record's value; a value the patch cannot apply to (not a
    /// JSON object) fails the record at the stage that patched it.
    pub fn settle_mut(&mut self, stages: &[Plugin]) {
        let Some((stage, patch)) = self.patch.take() else {
            return;
        };
        match patch.apply(self.record.value.as_deref()) {
            Ok(value) => self.record.value = Some(value.into()),
            Err(e) => {
                let position = Some(self.record.position());
                self.fate = Fate::Failed {
                    stage,
                    error: Arc::new(PluginError::Call {
                        plugin: stages.get(stage).map_or("", |p| p.name()).to_string(),
                        failure: Failure::BadAnswer {
                            reason: format!("patched an event that cannot be patched: {e}"),
                        },
                        events: EventSpan {
                            count: 1,
                            first: position.clone(),
                            last: position,
                        },
                    }),
                };
            }
        }
    }
}

/// What running one stage over a batch cost and did, beyond each record's fate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageRun {
    /// Plugin calls made (one per chunk, more when a failing chunk is split).
    pub calls: u64,
    /// Records whose value the stage rewrote or patched.
    pub rewritten: u64,
    /// Time spent in the stage's calls, in microseconds.
    pub micros: u64,
}

/// Runs `stages` in order over `records`, calling each plugin with chunks of at most
/// `chunk_size` records. Returns one outcome per record, in input order, patches applied.
pub fn run(stages: &[Plugin], records: Vec<Record>, chunk_size: usize) -> Vec<Judged> {
    let (judged, _) = run_counted(stages, records, chunk_size);
    judged.into_iter().map(|j| j.settle(stages)).collect()
}

/// [`run`], also returning per stage the calls made, the records rewritten (or patched)
/// and the time; the last patch of a record is left unapplied, beside it.
pub fn run_counted(
    stages: &[Plugin],
    records: Vec<Record>,
    chunk_size: usize,
) -> (Vec<Judged>, Vec<StageRun>) {
    let mut runs = vec![StageRun::default(); stages.len()];
    let chunk_size = chunk_size.max(1);
    let mut outcomes: Vec<Judged> = records
        .into_iter()
        .map(|record| Judged {
            record,
            fate: Fate::Kept,
            patch: None,
        })
        .collect();
    let mut alive: Vec<usize> = (0..outcomes.len()).collect();
    for (stage, plugin) in stages.iter().enumerate() {
        settle(&mut outcomes, &mut alive, stages);
        let mut survivors = Vec::with_capacity(alive.len());
        let run = &mut runs[stage];
        let started = std::time::Instant::now();
        for chunk in alive.chunks(chunk_size) {
            let records: Vec<&Record> = chunk.iter().map(|&i| &outcomes[i].record).collect();
            let mut budget = ISOLATION_BUDGET;
            let verdicts = judge_within(plugin, &records, &mut budget, &mut run.calls);
            for (&i, verdict) in chunk.iter().zip(verdicts) {
                let outcome = &mut outcomes[i];
                match verdict {
                    Ok(Verdict::Keep) => survivors.push(i),
                    Ok(Verdict::Rewrite(value)) => {
                        run.rewritten += 1;
                        outcome.record.value = Some(value.into());
                        outcome.fate = Fate::Rewritten;
                        survivors.push(i);
                    }
                    Ok(Verdict::Patch(patch)) => {
                        run.rewritten += 1;
                        outcome.patch = Some((stage, patch));
                        outcome.fate = Fate::Rewritten;
                        survivors.push(i);
                    }
                    Ok(Verdict::Reject(rejection)) => {
                        outcome.fate = Fate::Rejected { stage, rejection }
                    }
                    Err(error) => outcome.fate = Fate::Failed { stage, error },
                }
            }
        }
        run.micros = started.elapsed().as_micros() as u64;
        alive = survivors;
    }
    (outcomes, runs)
}

/// Applies the pending patches of the records still `alive`, before a stage sees them;
/// those whose patch cannot apply fail, and leave `alive`.
fn settle(outcomes: &mut [Judged], alive: &mut Vec<usize>, stages: &[Plugin]) {
    alive.retain(|&i| {
        let outcome = &mut outcomes[i];
        outcome.settle_mut(stages);
        !matches!(outcome.fate, Fate::Failed { .. })
    });
}

/// Most extra calls spent isolating the failing events of one chunk. A plugin that fails on
/// every event would otherwise cost two calls per event.
const ISOLATION_BUDGET: usize = 64;

/// Judges `records`, narrowing event-dependent failures down to the records that cause
/// them; counts the calls made in `calls`.
fn judge_within(
    plugin: &Plugin,
    records: &[&Record],
    budget: &mut usize,
    calls: &mut u64,
) -> Vec<Result<Verdict, Arc<PluginError>>> {
    *calls += 1;
    match plugin.process_records(records) {
        Ok(verdicts) => verdicts.into_iter().map(Ok).collect(),
        Err(error) => {
            let isolate = records.len() > 1
                && *budget >= 2
                && error.failure().is_some_and(|f| f.depends_on_events());
            if isolate {
                *budget -= 2;
                let (left, right) = records.split_at(records.len() / 2);
                let mut verdicts = judge_within(plugin, left, budget, calls);
                verdicts.extend(judge_within(plugin, right, budget, calls));
                verdicts
            } else {
                tracing::warn!(%error, "Plugin failed; its events are marked failed.");
                let error = Arc::new(error);
                records.iter().map(|_| Err(error.clone())).collect()
            }
        }
    }
}
