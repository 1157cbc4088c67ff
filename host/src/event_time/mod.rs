//! Event time: the watermark, deduplication and windowed aggregates, run on every batch
//! after the plugin stages, so rules and enrichment apply to all outputs.
//!
//! Per batch, in `(topic, partition, offset)` order:
//!
//! 1. the watermark at the batch's processing time is taken (see [`watermark`]);
//! 2. an event whose event time is behind it is *late*: it leaves the stream for the
//!    late-data output (dead-letter topic, a late topic, or a counted drop);
//! 3. an event whose dedup key was seen, and whose first copy is not behind the
//!    watermark, is a *duplicate*: it is dropped and counted;
//! 4. the rest go to the table and into every window that holds them and is still open;
//! 5. the watermark advances; windows it closed are emitted (`on-window-close`) or the
//!    windows that changed are (`update`); dedup keys behind it are forgotten.
//!
//! The operators' state is a pure function of the batches and their processing times, so
//! a batch replayed after a crash (same records, same recorded time) gives the same
//! results. The pipeline saves it with every commit (see [`state`]; with a commit cadence,
//! once for the triggers held into one commit), and [`apply`] runs the operators over a
//! processed batch.
//!
//! Import cycle: delta, join, session, shard, state, window: the operators save themselves
//! through `state` and `delta`, which name the operators' saved forms (to be broken up by
//! the operator trait of issue 29).

pub mod apply;
pub mod config;
pub mod dedup;
pub mod delta;
pub mod extract;
pub mod files;
pub mod join;
pub mod session;
pub mod shard;
pub mod state;
pub mod watermark;
pub mod window;

use std::collections::BTreeMap;

use serde::Serialize;

use self::config::{DedupConfig, EmitMode, EventTimeConfig, WindowConfig};
use self::dedup::Dedup;
use self::extract::{ExtractError, Extractor, event_time};
use self::join::config::JoinConfig;
use self::join::{JoinInput, JoinOperator, JoinRow, LeftSlots, RightFields};
use self::state::{SavedState, SavedStateRef};
use self::watermark::{Clock, Watermark};
use self::window::{Shape, Slots, WindowInput, WindowOperator, WindowRow, WindowShard};
use crate::units::{Micros, Millis};

/// What the operators read from one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Fields {
    /// Event time.
    pub time: Micros,
    /// The dedup key, when deduplicating.
    pub dedup_key: Option<Box<str>>,
    /// Its hash (see [`shard`]); 0 without a key.
    pub dedup_hash: u64,
    /// One input per window.
    pub windows: Vec<WindowInput>,
    /// One input per join.
    pub joins: Vec<JoinInput>,
}

/// What became of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// On time and new: it goes on.
    OnTime,
    /// Behind the watermark.
    Late,
    /// A repeat of an event seen within the watermark.
    Duplicate,
    /// Further past processing time than `max-future`: it does not touch the watermark.
    Future,
}

/// What a batch did to the operators.
#[derive(Debug, Clone, PartialEq)]
pub struct EventTimeOutcome {
    /// One verdict per event, in input order.
    pub verdicts: Vec<Arrival>,
    /// The watermark events were judged against.
    pub watermark_before: Option<Micros>,
    /// The watermark after the batch.
    pub watermark: Option<Micros>,
    /// Rows emitted, per window (in configured order).
    pub emitted: Vec<Vec<WindowRow>>,
    /// Late events.
    pub late: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Events too far in the future.
    pub future: u64,
    /// Rows joined, per join (in configured order).
    pub joined: Vec<Vec<JoinRow>>,
    /// Per join, one verdict per right record, in input order.
    pub right_verdicts: Vec<Vec<Arrival>>,
    /// Per join, the right watermark its records were judged against.
    pub right_watermarks_before: Vec<Option<Micros>>,
}

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

/// Size of one operator's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StateSize {
    /// Keys (dedup) or open (window, group) pairs.
    pub rows: u64,
    /// Estimated bytes in memory.
    pub bytes: u64,
}

/// The event-time operators of a pipeline and their state.
#[derive(Debug, Clone)]
pub struct EventTime {
    config: EventTimeConfig,
    clock: Clock,
    extractor: Extractor,
    time_slot: usize,
    dedup_slots: Option<Vec<usize>>,
    windows: Vec<(Slots, WindowOperator)>,
    joins: Vec<(LeftSlots, JoinOperator)>,
    watermark: Watermark,
    dedup: Dedup,
    /// Shards of the keyed state, each run on a thread of its own (see [`shard`]).
    shards: usize,
    /// Batches of at least this many events run their shards on threads of their own.
    parallel_from: usize,
    /// The saved files the next delta extends (see [`delta`]); `None`: the next save is a
    /// snapshot.
    chain: Option<delta::Chain>,
}

impl EventTime {
    /// Operators with empty state.
    pub fn new(
        config: &EventTimeConfig,
        dedup: Option<&DedupConfig>,
        windows: &[WindowConfig],
    ) -> Self {
        let mut extractor = Extractor::new([config.field.as_str()]);
        let time_slot = extractor.position(&config.field);
        let dedup_slots = dedup.map(|d| d.keys.iter().map(|k| extractor.position(k)).collect());
        let windows = windows
            .iter()
            .map(|w| {
                (
                    Slots::new(w, |f| extractor.position(f)),
                    WindowOperator::new(w.clone()),
                )
            })
            .collect();
        EventTime {
            config: config.clone(),
            clock: Clock {
                delay: Micros::from_duration(config.max_delay),
                idle: Millis::from_duration(config.idle_timeout),
                max_future: Micros::from_duration(config.max_future),
                session_start: Millis(0),
            },
            extractor,
            time_slot,
            dedup_slots,
            windows,
            joins: Vec::new(),
            watermark: Watermark::default(),
            dedup: Dedup::default(),
            shards: 1,
            parallel_from: shard::PARALLEL_MIN_EVENTS,
            chain: None,
        }
    }

    /// The same operators, empty, with their keyed state in a shard per thread of
    /// `threads` (results do not depend on it; see [`shard`]).
    pub fn with_threads(mut self, threads: usize) -> Self {
        let shards = shard::shards_for(threads);
        self.shards = shards;
        self.dedup = Dedup::new(shards);
        for (_, op) in &mut self.windows {
            *op = WindowOperator::with_shards(op.config().clone(), shards);
        }
        self
    }

    /// The same operators with stream-stream joins of the events (see [`join`]), empty.
    pub fn with_joins(mut self, joins: &[JoinConfig]) -> Self {
        let extractor = &mut self.extractor;
        self.joins = joins
            .iter()
            .map(|j| {
                (
                    LeftSlots::new(j, |f| extractor.position(f)),
                    JoinOperator::new(j, &self.config),
                )
            })
            .collect();
        self
    }

    /// The joins.
    pub fn joins(&self) -> impl Iterator<Item = &JoinOperator> {
        self.joins.iter().map(|(_, op)| op)
    }

    /// The join reading `topic` as its right side, by index.
    pub fn join_of_topic(&self, topic: &str) -> Option<usize> {
        self.joins
            .iter()
            .position(|(_, op)| op.config().right_topic == topic)
    }

    /// Reads what join `join` needs from a right record. Safe to call from many threads.
    pub fn right_fields(
        &self,
        join: usize,
        value: Option<&[u8]>,
    ) -> Result<RightFields, ExtractError> {
        self.joins[join].1.right_fields(value)
    }

    /// Runs shards on threads of their own for every batch, however small (for tests).
    #[cfg(test)]
    pub(crate) fn always_parallel(mut self) -> Self {
        self.parallel_from = 0;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &EventTimeConfig {
        &self.config
    }

    /// Reads what the operators need from an event. Safe to call from many threads.
    pub fn fields(&self, value: Option<&[u8]>) -> Result<Fields, ExtractError> {
        let values = self.extractor.read(value)?;
        let time = event_time(&self.config.field, values[self.time_slot].as_ref())?;
        // An event without one of the key fields is not deduplicated.
        let dedup_key = self.dedup_slots.as_ref().and_then(|slots| {
            let mut key = String::new();
            for (i, &slot) in slots.iter().enumerate() {
                if i > 0 {
                    key.push('\u{1f}');
                }
                key.push_str(values[slot].as_ref()?.text());
            }
            Some(key.into_boxed_str())
        });
        Ok(Fields {
            time,
            dedup_hash: dedup_key.as_deref().map_or(0, shard::hash_str),
            dedup_key,
            windows: self.windows.iter().map(|(s, _)| s.input(&values)).collect(),
            joins: self.joins.iter().map(|(s, _)| s.input(&values)).collect(),
        })
    }

    /// The watermark at processing time `now`.
    pub fn watermark_at(&self, now: Millis) -> Option<Micros> {
        self.watermark.at(now, self.clock)
    }

    /// When this run started: time before it does not make a partition idle.
    pub fn session_start(&self) -> Millis {
        self.clock.session_start
    }

    /// Sets when this run started (or, to replay a batch, when its run started).
    pub fn set_session_start(&mut self, start: Millis) {
        self.clock.session_start = start;
        for (_, op) in &mut self.joins {
            op.set_session_start(start);
        }
    }

    /// Adds the assigned partitions (`topic/partition`) not known yet: each holds the
    /// watermark back until it sends an event or is idle.
    pub fn register<'a>(&mut self, partitions: impl IntoIterator<Item = &'a str>, now: Millis) {
        for partition in partitions {
            self.watermark.register(partition, now);
        }
    }

    /// Whether a batch without events at `now` would emit a window (the watermark moved on
    /// while input was idle), or, with `flush`, whether any window is open.
    pub fn due(&self, now: Millis, flush: bool) -> bool {
        let on_close = |op: &&WindowOperator| op.config().emit == EmitMode::OnWindowClose;
        let left = self.watermark_at(now);
        if self.joins.iter().any(|(_, op)| op.due(now, flush, left)) {
            return true;
        }
        if flush {
            return self.windows.iter().any(|(_, op)| op.rows() > 0);
        }
        let Some(w) = left else {
            return false;
        };
        self.windows
            .iter()
            .map(|(_, op)| op)
            .filter(on_close)
            .any(|op| op.closes_any(w))
    }

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

    /// State size per operator: `dedup` and `window:<name>`.
    pub fn state_sizes(&self) -> BTreeMap<String, StateSize> {
        let mut sizes = BTreeMap::new();
        if self.dedup_slots.is_some() {
            sizes.insert("dedup".to_string(), self.dedup.size());
        }
        for (_, op) in &self.joins {
            sizes.insert(format!("join:{}", op.config().name), op.size());
        }
        for (_, op) in &self.windows {
            sizes.insert(
                format!("window:{}", op.config().name),
                StateSize {
                    rows: op.rows() as u64,
                    bytes: op.bytes() as u64,
                },
            );
        }
        sizes
    }

    /// Rows each join evicted by its `max-rows` since the start: (left, right), by join.
    pub fn join_rows_evicted(&self) -> BTreeMap<String, (u64, u64)> {
        let joins = self.joins.iter().map(|(_, op)| op);
        joins
            .map(|op| (op.config().name.clone(), op.evicted()))
            .collect()
    }

    /// The state, borrowed for saving (it is read back as a [`SavedState`]).
    pub fn save_ref(&self) -> SavedStateRef<'_> {
        SavedStateRef {
            watermark: &self.watermark,
            dedup: self.dedup.save_ref(),
            windows: self
                .windows
                .iter()
                .map(|(_, op)| (op.config().name.as_str(), op.save_ref()))
                .collect(),
            joins: self
                .joins
                .iter()
                .map(|(_, op)| (op.config().name.as_str(), op.save_ref()))
                .collect(),
        }
    }

    /// Restores saved state. Windows not in `saved` start empty; saved windows that are
    /// no longer configured are dropped with a warning. The next save is a snapshot.
    pub fn restore(&mut self, saved: SavedState) {
        self.chain = None;
        self.watermark = saved.watermark;
        self.dedup.restore(saved.dedup);
        let mut windows = saved.windows;
        for (_, op) in &mut self.windows {
            op.restore(windows.remove(&op.config().name).unwrap_or_default());
        }
        for name in windows.keys() {
            tracing::warn!(window = %name, "saved state of a window that is no longer configured is dropped");
        }
        let mut joins = saved.joins;
        for (_, op) in &mut self.joins {
            op.restore(joins.remove(&op.config().name).unwrap_or_default());
        }
        for name in joins.keys() {
            tracing::warn!(join = %name, "saved state of a join that is no longer configured is dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::config::{AggregateConfig, AtEnd, Function, LateData};
    use super::*;

    const S: i64 = 1_000_000;

    /// Event time in the field `ts`, 10 s of delay, 5 s of idleness, late events dropped.
    pub(super) fn config() -> EventTimeConfig {
        EventTimeConfig {
            field: "ts".into(),
            max_delay: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
            max_future: Duration::from_secs(3600),
            late: LateData::Drop,
            late_topic: None,
            late_topic_properties: Default::default(),
            at_end: AtEnd::Keep,
        }
    }

    pub(super) fn operators(emit: EmitMode) -> EventTime {
        let config = config();
        let window = WindowConfig {
            name: "counts".into(),
            size: Some(Duration::from_secs(60)),
            gap: None,
            slide: None,
            group_by: vec!["type".into()],
            aggregates: vec![AggregateConfig {
                name: "count".into(),
                function: Function::Count,
                field: None,
            }],
            emit,
            kafka: None,
            iceberg: None,
        };
        EventTime::new(
            &config,
            Some(&DedupConfig {
                keys: vec!["id".into()],
            }),
            &[window],
        )
    }

    pub(super) fn event(op: &EventTime, id: &str, secs: i64, ty: &str) -> Fields {
        op.fields(Some(
            format!(r#"{{"id":"{id}","ts":{},"type":"{ty}"}}"#, secs * 1000).as_bytes(),
        ))
        .unwrap()
    }

    fn counts(outcome: &EventTimeOutcome) -> Vec<(i64, String, i64)> {
        let mut rows = outcome.emitted[0].clone();
        window::sort_rows(&mut rows);
        rows.iter()
            .map(|r| {
                (
                    r.start.0 / S,
                    r.key[0].clone().unwrap(),
                    r.values[0].as_i64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn late_duplicates_and_closing() {
        let mut op = operators(EmitMode::OnWindowClose);
        let batch = [
            event(&op, "a", 10, "view"),
            event(&op, "b", 50, "view"),
            event(&op, "a", 10, "view"), // duplicate in the same batch
            event(&op, "c", 65, "buy"),
        ];
        let out = op.process(batch.iter().map(|f| ("t/0", f)), Millis(0), false);
        assert_eq!(
            out.verdicts,
            [
                Arrival::OnTime,
                Arrival::OnTime,
                Arrival::Duplicate,
                Arrival::OnTime
            ]
        );
        assert_eq!(out.watermark, Some(Micros(55 * S)));
        assert!(out.emitted[0].is_empty());
        // 40 s is late (behind 55 s); 58 s is on time; "c" again is a duplicate.
        let batch = [
            event(&op, "d", 40, "view"),
            event(&op, "e", 58, "view"),
            event(&op, "c", 65, "buy"),
            event(&op, "f", 75, "view"),
        ];
        let out = op.process(batch.iter().map(|f| ("t/0", f)), Millis(1_000), false);
        assert_eq!(
            out.verdicts,
            [
                Arrival::Late,
                Arrival::OnTime,
                Arrival::Duplicate,
                Arrival::OnTime
            ]
        );
        assert_eq!((out.late, out.duplicates), (1, 1));
        assert_eq!(out.watermark, Some(Micros(65 * S)));
        assert_eq!(counts(&out), vec![(0, "view".into(), 3)]);
        // Dedup keys behind the watermark (65 s) are forgotten: a, b, e.
        assert_eq!(op.state_sizes()["dedup"].rows, 2);
        assert!(!op.due(Millis(1_000), false));
        // Input stops: after the idle timeout the watermark moves with processing time.
        assert!(!op.due(Millis(6_000), false));
        assert!(op.due(Millis(6_000 + 55_000), false)); // 75 - 10 + 55 = 120: closes [60, 120)
        let out = op.process([], Millis(6_000 + 55_000), false);
        assert_eq!(
            counts(&out),
            vec![(60, "buy".into(), 1), (60, "view".into(), 1)]
        );
    }

    #[test]
    fn events_too_far_in_the_future_never_move_the_watermark() {
        let mut op = operators(EmitMode::OnWindowClose);
        // Processing time 100 s, max-future 1 h: the horizon is 3 700 s.
        let now = Millis(100_000);
        let batch = [
            event(&op, "a", 50, "view"),
            event(&op, "x", 3_701, "view"),
            event(&op, "y", 3_700, "view"),
        ];
        let out = op.process(batch.iter().map(|f| ("t/0", f)), now, false);
        assert_eq!(
            out.verdicts,
            [Arrival::OnTime, Arrival::Future, Arrival::OnTime]
        );
        assert_eq!(out.future, 1);
        assert_eq!(out.watermark, Some(Micros(3_690 * S)));
        let mut op = operators(EmitMode::OnWindowClose);
        let batch = [
            event(&op, "x", 9_999_999, "view"),
            event(&op, "a", 50, "view"),
        ];
        let out = op.process(batch.iter().map(|f| ("t/0", f)), now, false);
        assert_eq!(out.verdicts, [Arrival::Future, Arrival::OnTime]);
        assert_eq!(out.watermark, Some(Micros(40 * S)));
        // Later events are judged against the real watermark, not the future one.
        let batch = [event(&op, "b", 45, "view")];
        let out = op.process(batch.iter().map(|f| ("t/0", f)), now, false);
        assert_eq!(out.verdicts, [Arrival::OnTime]);
    }

    #[test]
    fn state_round_trips_and_flush_closes_everything() {
        let mut op = operators(EmitMode::OnWindowClose);
        let batch = [event(&op, "a", 10, "view"), event(&op, "b", 30, "view")];
        op.process(batch.iter().map(|f| ("t/0", f)), Millis(0), false);
        let json = serde_json::to_string(&op.save_ref()).unwrap();
        let mut again = operators(EmitMode::OnWindowClose);
        again.restore(serde_json::from_str(&json).unwrap());
        let saved = |et: &EventTime| {
            let json = serde_json::to_string(&et.save_ref()).unwrap();
            serde_json::from_str::<SavedState>(&json).unwrap().sorted()
        };
        assert_eq!(saved(&again), saved(&op));
        assert!(again.due(Millis(0), true));
        let out = again.process([], Millis(0), true);
        assert_eq!(counts(&out), vec![(0, "view".into(), 2)]);
        assert_eq!(out.watermark, Some(Micros(60 * S)));
        assert!(!again.due(Millis(0), true));
    }

    #[test]
    fn events_without_a_dedup_key_are_not_deduplicated() {
        let mut op = operators(EmitMode::OnWindowClose);
        let anonymous = op.fields(Some(br#"{"ts":1000,"type":"view"}"#)).unwrap();
        assert_eq!(anonymous.dedup_key, None);
        let out = op.process([("t/0", &anonymous), ("t/0", &anonymous)], Millis(0), false);
        assert_eq!(out.verdicts, [Arrival::OnTime, Arrival::OnTime]);
        assert_eq!(out.duplicates, 0);
    }

    #[test]
    fn bad_event_times_are_reported() {
        let op = operators(EmitMode::Update);
        let e = op.fields(Some(br#"{"id":"x"}"#)).unwrap_err();
        assert_eq!(e.code, "missing_event_time");
        let e = op.fields(Some(br#"{"ts":"soon"}"#)).unwrap_err();
        assert_eq!(e.code, "invalid_event_time");
        let e = op.fields(Some(b"nope")).unwrap_err();
        assert_eq!(e.code, "malformed_json");
    }
}
