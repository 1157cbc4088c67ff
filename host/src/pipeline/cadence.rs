//! Commit cadence (`[sink] commit-interval`, `min-commit-rows`): triggers processed but
//! held until enough has gathered for one commit.
//!
//! Nothing of a held trigger leaves the process: its rows stay in memory and its dead
//! letters unsent, and the offsets move only when the held triggers commit together, as one
//! batch (one snapshot, one set of data files). A crash or a fault before that replays them
//! all from the table's offsets, so exactly once holds as with a commit per trigger. Not
//! with event time, whose state is saved per trigger (the configuration refuses it).

use std::time::{Duration, Instant};

use super::process::ProcessStats;
use super::read::Input;
use super::route::Prepared;
use super::{Pipeline, PipelineError};

/// Triggers processed and not committed yet, merged into one batch.
pub(super) struct Held {
    input: Input,
    stats: ProcessStats,
    prepared: Prepared,
    /// When the first of them was held.
    since: Instant,
}

impl Held {
    fn new(input: Input, stats: ProcessStats, prepared: Prepared) -> Self {
        Held {
            input,
            stats,
            prepared,
            since: Instant::now(),
        }
    }

    /// Adds a later trigger: its records follow the held ones in every partition.
    fn absorb(&mut self, input: Input, stats: ProcessStats, prepared: Prepared) {
        let held = &mut self.input;
        held.rows += input.rows;
        held.poll += input.poll;
        (held.next, held.ends, held.now, held.flush) =
            (input.next, input.ends, input.now, input.flush);

        self.stats.absorb(stats);

        let p = &mut self.prepared;
        let results = prepared.results;
        p.results.rows.extend(results.rows);
        p.results.dead.extend(results.dead);
        p.results.late.extend(results.late);
        p.mark.offsets = prepared.mark.offsets;
        (p.plan.end, p.plan.now_ms) = (prepared.plan.end, prepared.plan.now_ms);
        p.cpu += prepared.cpu;
    }

    /// Whether the held triggers should commit now.
    fn due(&self, interval: Duration, min_rows: u64) -> bool {
        self.input.rows >= min_rows || self.since.elapsed() >= interval
    }

    fn into_parts(self) -> (Input, ProcessStats, Prepared) {
        (self.input, self.stats, self.prepared)
    }
}

impl Pipeline {
    /// Holds a processed trigger when the commit cadence says to; otherwise returns what
    /// commits now: this trigger, after the held ones.
    pub(super) fn hold(
        &mut self,
        input: Input,
        stats: ProcessStats,
        prepared: Prepared,
    ) -> Option<(Input, ProcessStats, Prepared)> {
        let Some((interval, min_rows)) = self.config.sink.cadence() else {
            return Some((input, stats, prepared));
        };
        let held = match self.held.take() {
            Some(mut held) => {
                held.absorb(input, stats, prepared);
                held
            }
            None => Held::new(input, stats, prepared),
        };
        if held.due(interval, min_rows) {
            return Some(held.into_parts());
        }
        self.positions = held.input.next.clone();
        self.held = Some(held);
        None
    }

    /// Commits the held triggers if the commit interval is up, or with `now`, if there
    /// are any.
    pub(super) fn commit_held(&mut self, now: bool) -> Result<(), PipelineError> {
        let Some((interval, min_rows)) = self.config.sink.cadence() else {
            return Ok(());
        };
        if !now
            && !self
                .held
                .as_ref()
                .is_some_and(|h| h.due(interval, min_rows))
        {
            return Ok(());
        }
        match self.held.take() {
            Some(held) => {
                let (input, stats, prepared) = held.into_parts();
                self.commit_batch(input, stats, prepared)
            }
            None => Ok(()),
        }
    }
}
