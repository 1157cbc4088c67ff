//! Commit cadence (`[sink] commit-interval`, `min-commit-rows`): triggers processed but
//! held until enough has gathered for one commit.
//!
//! Nothing of a held trigger leaves the process: its rows stay in memory and its dead
//! letters, late events and window results unsent, and the offsets move only when the
//! held triggers commit together, as one batch (one snapshot, one set of data files). A
//! crash or a fault before that replays them all from the table's offsets, so exactly once
//! holds as with a commit per trigger.
//!
//! With event time, the operators run each held trigger as it comes (its watermark, late
//! events, duplicates and windows are those of a commit per trigger), and their state is
//! saved once, at the commit: one state file, whose delta holds what all the held triggers
//! changed (see [`crate::event_time::delta`]). The batch's plan lists every held trigger
//! ([`crate::event_time::state::Plan::held`]), so that a crash after the state file replays
//! them one by one, as they ran, and commits them together again. A crash or a fault before
//! the state file reads the state of the table's last commit again, as a restart does.

use std::time::{Duration, Instant};

use crate::sink::Results;

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
        absorb_results(&mut p.results, prepared.results);
        p.mark.offsets = prepared.mark.offsets;
        p.plan.then(&prepared.plan);
        p.event_time = match (p.event_time, prepared.event_time) {
            (Some(before), Some(later)) => Some(before.then(later)),
            (before, later) => later.or(before),
        };
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

/// Adds a later trigger's results to the held ones, in order (window results per window).
fn absorb_results(held: &mut Results, later: Results) {
    held.rows.extend(later.rows);
    if later.evolution.is_some() {
        // Planned on top of the held one's: it holds every change of the held triggers.
        held.evolution = later.evolution;
    }
    held.dead.extend(later.dead);
    held.late.extend(later.late);
    append_lists(&mut held.windows, later.windows);
    append_lists(&mut held.joins, later.joins);
    append_lists(&mut held.repartition, later.repartition);
}

/// Each of `later`'s lists after the held list of its place.
fn append_lists<T>(held: &mut Vec<Vec<T>>, later: Vec<Vec<T>>) {
    if held.len() < later.len() {
        held.resize_with(later.len(), Vec::new);
    }
    for (rows, more) in held.iter_mut().zip(later) {
        rows.extend(more);
    }
}

/// Whether a processed trigger commits now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum When {
    /// As the commit cadence says (every trigger commits without one).
    Cadence,
    /// Not yet: a replayed trigger that was held.
    Hold,
    /// Now, with the held ones: the last trigger of a replayed batch.
    Now,
}

impl Pipeline {
    /// Holds a processed trigger when `when` (or the commit cadence) says to; otherwise
    /// returns what commits now: this trigger, after the held ones.
    pub(super) fn hold(
        &mut self,
        input: Input,
        stats: ProcessStats,
        prepared: Prepared,
        when: When,
    ) -> Option<(Input, ProcessStats, Prepared)> {
        let cadence = self.config.sink.cadence();
        if when == When::Cadence && cadence.is_none() {
            return Some((input, stats, prepared));
        }
        let held = match self.held.take() {
            Some(mut held) => {
                held.absorb(input, stats, prepared);
                held
            }
            None => Held::new(input, stats, prepared),
        };
        let due = match when {
            When::Cadence => cadence.is_some_and(|(interval, rows)| held.due(interval, rows)),
            When::Hold => false,
            When::Now => true,
        };
        if due {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_time::window::WindowRow;
    use crate::pipeline::route::EventTimeCounts;
    use crate::units::Micros;

    fn row(start: i64, count: i64) -> WindowRow {
        WindowRow {
            start: Micros(start),
            end: Micros(start + 60),
            key: vec![Some("view".into())],
            values: vec![count.into()],
        }
    }

    /// Held triggers' window results go out together, each window's in trigger order (an
    /// update after the one it follows); the counts add up, the watermark is the last's.
    #[test]
    fn held_window_results_and_counts_follow_in_trigger_order() {
        let mut held = Results {
            windows: vec![vec![row(0, 1)], vec![]],
            ..Results::default()
        };
        let later = Results {
            windows: vec![vec![row(0, 2), row(60, 1)], vec![row(0, 5)]],
            ..Results::default()
        };
        absorb_results(&mut held, later);
        assert_eq!(held.windows[0], [row(0, 1), row(0, 2), row(60, 1)]);
        assert_eq!(held.windows[1], [row(0, 5)]);
        let mut none = Results::default();
        absorb_results(&mut none, held);
        assert_eq!(
            none.windows.len(),
            2,
            "held results without window lists take the later ones"
        );
        let counts = |watermark: Option<i64>, late, duplicates| EventTimeCounts {
            watermark: watermark.map(Micros),
            late,
            duplicates,
        };
        let merged = counts(Some(5), 1, 2).then(counts(Some(9), 3, 4));
        assert_eq!(merged, counts(Some(9), 4, 6));
    }
}
