//! Running one batch through the operators: verdicts that depend on event time alone
//! (late, too far in the future), deduplication, windows (each shard on a thread of its
//! own), the watermark's advance, and the joins.

use super::join::{JoinInput, RightFields};
use super::shard;
use super::window::{self, Shape, Slots, WindowOperator, WindowRow, WindowShard};
use super::{Arrival, EventTime, EventTimeOutcome, Fields};
use crate::units::{Micros, Millis};

/// Per shard, that shard of every window operator.
fn window_shards(
    windows: &mut [(Slots, WindowOperator)],
    shards: usize,
) -> Vec<Vec<(&Shape, &mut WindowShard)>> {
    let mut parts: Vec<Vec<_>> = (0..shards).map(|_| Vec::new()).collect();
    for (_, op) in windows {
        let (shape, shards) = op.shards_mut();
        for (part, shard) in parts.iter_mut().zip(shards) {
            part.push((shape, shard));
        }
    }
    parts
}

/// The events of a batch, with the verdicts that depend on event time alone.
struct Judged<'a> {
    fields: Vec<&'a Fields>,
    verdicts: Vec<Arrival>,
    late: u64,
    future: u64,
}

impl EventTime {
    /// Runs one batch: `events` are `(partition, fields)` in `(topic, partition, offset)`
    /// order. With `flush`, every open window is closed at the end.
    pub fn process<'a>(
        &mut self,
        events: impl IntoIterator<Item = (&'a str, &'a Fields)>,
        now: Millis,
        flush: bool,
    ) -> EventTimeOutcome {
        self.process_joined(events, &[], now, flush)
    }

    /// Runs one batch with the records of the joins' right sides: `right` holds, per join
    /// (missing ones: none), its records as `(partition, fields)` in batch order.
    pub fn process_joined<'a>(
        &mut self,
        events: impl IntoIterator<Item = (&'a str, &'a Fields)>,
        right: &[Vec<(&str, &RightFields)>],
        now: Millis,
        flush: bool,
    ) -> EventTimeOutcome {
        let before = self.watermark_at(now);
        let judged = self.judge_times(events, now, before);
        let Judged {
            fields,
            mut verdicts,
            late,
            future,
        } = judged;
        let parallel = self.shards > 1 && fields.len() >= self.parallel_from;
        let duplicates = self.deduplicate(&fields, &mut verdicts, parallel);
        self.add_to_windows(&fields, &verdicts, before, parallel);
        let to = if flush {
            let ends = self.windows.iter().filter_map(|(_, op)| op.last_end());
            ends.max()
        } else {
            None
        };
        let watermark = self.watermark.advance(now, self.clock, to);
        let emitted = self.finish_batch(watermark, parallel);
        let mut outcome = EventTimeOutcome {
            verdicts,
            watermark_before: before,
            watermark,
            emitted,
            late,
            duplicates,
            future,
            joined: Vec::new(),
            right_verdicts: Vec::new(),
            right_watermarks_before: Vec::new(),
        };
        self.run_joins(&fields, right, now, flush, &mut outcome);
        outcome
    }

    /// Runs every join over the batch's on-time events and its right records.
    fn run_joins(
        &mut self,
        fields: &[&Fields],
        right: &[Vec<(&str, &RightFields)>],
        now: Millis,
        flush: bool,
        outcome: &mut EventTimeOutcome,
    ) {
        for (j, (_, op)) in self.joins.iter_mut().enumerate() {
            let records = right.get(j).map_or(&[][..], Vec::as_slice);
            let (verdicts, right_before) = op.judge(records, now, outcome.watermark_before);
            let left: Vec<(&JoinInput, Micros)> = fields
                .iter()
                .zip(&outcome.verdicts)
                .filter(|(_, v)| **v == Arrival::OnTime)
                .map(|(f, _)| (&f.joins[j], f.time))
                .collect();
            let on_time: Vec<&RightFields> = records
                .iter()
                .zip(&verdicts)
                .filter(|(_, v)| **v == Arrival::OnTime)
                .map(|((_, r), _)| *r)
                .collect();
            let mut rows = op.join(&left, &on_time);
            rows.extend(op.finish(outcome.watermark, now, flush));
            outcome.late += verdicts.iter().filter(|v| **v == Arrival::Late).count() as u64;
            outcome.future += verdicts.iter().filter(|v| **v == Arrival::Future).count() as u64;
            outcome.joined.push(rows);
            outcome.right_verdicts.push(verdicts);
            outcome.right_watermarks_before.push(right_before);
        }
    }

    /// The verdicts that depend on event time alone (too far in the future, late), and
    /// the watermark's partitions observed: one pass, on this thread.
    fn judge_times<'a>(
        &mut self,
        events: impl IntoIterator<Item = (&'a str, &'a Fields)>,
        now: Millis,
        before: Option<Micros>,
    ) -> Judged<'a> {
        let events = events.into_iter();
        let mut judged = Judged {
            fields: Vec::with_capacity(events.size_hint().0),
            verdicts: Vec::with_capacity(events.size_hint().0),
            late: 0,
            future: 0,
        };
        let horizon = now.as_micros().saturating_add(self.clock.max_future);
        // Events come in runs of one partition: its clock is updated once per run.
        let mut run: Option<(&str, Micros)> = None;
        for (partition, fields) in events {
            judged.fields.push(fields);
            let verdict = if fields.time > horizon {
                judged.future += 1;
                Arrival::Future
            } else {
                match &mut run {
                    Some((p, max)) if *p == partition => *max = (*max).max(fields.time),
                    _ => {
                        if let Some((p, max)) = run.replace((partition, fields.time)) {
                            self.watermark.observe(p, max, now);
                        }
                    }
                }
                if before.is_some_and(|w| fields.time < w) {
                    judged.late += 1;
                    Arrival::Late
                } else {
                    Arrival::OnTime
                }
            };
            judged.verdicts.push(verdict);
        }
        if let Some((p, max)) = run {
            self.watermark.observe(p, max, now);
        }
        judged
    }

    /// Marks the repeats among the events still on time; returns how many. Each shard
    /// looks at its own keys.
    fn deduplicate(&mut self, fields: &[&Fields], verdicts: &mut [Arrival], parallel: bool) -> u64 {
        if self.dedup_slots.is_none() {
            return 0;
        }
        let n = self.shards;
        let on_time: &[Arrival] = verdicts;
        let repeats = shard::each(
            self.dedup.shards_mut().iter_mut().collect(),
            parallel,
            |i, shard| {
                let mut repeats = Vec::new();
                for (at, f) in fields.iter().enumerate() {
                    if on_time[at] == Arrival::OnTime
                        && let Some(key) = &f.dedup_key
                        && shard::shard_of(f.dedup_hash, n) == i
                        && shard.is_repeat(key, f.dedup_hash, f.time)
                    {
                        repeats.push(at);
                    }
                }
                repeats
            },
        );
        let mut count = 0;
        for at in repeats.into_iter().flatten() {
            verdicts[at] = Arrival::Duplicate;
            count += 1;
        }
        count
    }

    /// Adds the events on time to their windows. Each shard takes its own keys, of every
    /// window.
    fn add_to_windows(
        &mut self,
        fields: &[&Fields],
        verdicts: &[Arrival],
        before: Option<Micros>,
        parallel: bool,
    ) {
        if self.windows.is_empty() {
            return;
        }
        let n = self.shards;
        shard::each(
            window_shards(&mut self.windows, n),
            parallel,
            |i, mut ops| {
                for (f, _) in fields
                    .iter()
                    .zip(verdicts)
                    .filter(|(_, v)| **v == Arrival::OnTime)
                {
                    for ((shape, shard), input) in ops.iter_mut().zip(&f.windows) {
                        if shard::shard_of(input.hash, n) == i {
                            shard.add(shape, f.time, input, before);
                        }
                    }
                }
            },
        );
    }

    /// Forgets dedup keys behind the watermark and ends the batch of every window: each
    /// shard on its own. Returns the rows emitted, per window.
    fn finish_batch(&mut self, watermark: Option<Micros>, parallel: bool) -> Vec<Vec<WindowRow>> {
        let windows = self.windows.len();
        let dedup = self.dedup.shards_mut().iter_mut();
        let parts: Vec<_> = dedup
            .zip(window_shards(&mut self.windows, self.shards))
            .collect();
        let per_shard = shard::each(parts, parallel, |_, (dedup, ops)| {
            if let Some(w) = watermark {
                dedup.forget_behind(w);
            }
            let rows = ops
                .into_iter()
                .map(|(shape, shard)| shard.finish_batch(shape, watermark));
            rows.collect::<Vec<_>>()
        });
        let mut by_window: Vec<Vec<Vec<WindowRow>>> = (0..windows).map(|_| Vec::new()).collect();
        for rows in per_shard {
            for (window, rows) in by_window.iter_mut().zip(rows) {
                window.push(rows);
            }
        }
        by_window.into_iter().map(window::merge_rows).collect()
    }
}
