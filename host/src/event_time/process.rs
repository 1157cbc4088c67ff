//! Running one batch through the operators: the verdicts that depend on event time alone
//! (late, too far in the future), then every operator's [`process`] hook, the watermark's
//! advance, and every operator's [`advance`] hook (see [`super::operator`]).
//!
//! [`process`]: super::operator::Operator::process
//! [`advance`]: super::operator::Operator::advance

use super::join::RightFields;
use super::operator::Batch;
use super::{Arrival, EventTime, EventTimeOutcome, Fields};
use crate::units::{Micros, Millis};

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
            verdicts,
            late,
            future,
        } = judged;
        let batch = Batch {
            fields: &fields,
            right,
            now,
            flush,
            parallel: self.shards > 1 && fields.len() >= self.parallel_from,
        };
        let mut outcome = EventTimeOutcome {
            verdicts,
            watermark_before: before,
            watermark: None,
            emitted: Vec::new(),
            late,
            duplicates: 0,
            future,
            joined: Vec::new(),
            right_verdicts: Vec::new(),
            right_watermarks_before: Vec::new(),
        };
        for op in &mut self.operators {
            op.process(&batch, &mut outcome);
        }
        let to = if flush {
            self.operators.iter().filter_map(|op| op.flush_to()).max()
        } else {
            None
        };
        outcome.watermark = self.watermark.advance(now, self.clock, to);
        for op in &mut self.operators {
            op.advance(&batch, &mut outcome);
        }
        outcome
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
        // Events come in runs of one partition: its clock is updated once per run. Stage
        // two's clocks follow its origins' markers alone: an event from a stage two before
        // (stages composed) can be newer than what that stage's watermark vouches for.
        let follows_markers = self.origins.is_some();
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
                        if let Some((p, max)) = run.replace((partition, fields.time))
                            && !follows_markers
                        {
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
        if let Some((p, max)) = run
            && !follows_markers
        {
            self.watermark.observe(p, max, now);
        }
        judged
    }
}
