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
//! The rooms, lowest first: [`config`], [`extract`], [`watermark`] and [`shard`]; the
//! operators [`window`] (with its sessions), [`dedup`] and [`join`]; [`outcome`] (what a
//! batch did, shared by all); [`plan`] (what a batch read); [`delta`] and [`state`] (the
//! saved state: deltas below the state files that chain them). Imports run that way only.
//! The one exception is `EventTime` itself: its `impl` is split over the files of its
//! seams ([`delta`], [`state`], the batch run, [`apply`]), each of which names it from
//! here, as a child names its parent.

pub mod apply;
pub mod config;
pub mod dedup;
pub mod delta;
pub mod extract;
pub mod join;
pub mod outcome;
pub mod plan;
mod process;
pub mod shard;
pub mod state;
pub mod watermark;
pub mod window;

use std::collections::BTreeMap;

use self::config::{DedupConfig, EmitMode, EventTimeConfig, WindowConfig};
use self::dedup::Dedup;
use self::extract::{ExtractError, Extractor, event_time};
use self::join::config::JoinConfig;
use self::join::{JoinOperator, LeftSlots, RightFields};
pub use self::outcome::{Arrival, EventTimeOutcome, Fields, StateSize};
use self::state::{SavedState, SavedStateRef};
use self::watermark::{Clock, Watermark};
use self::window::{Slots, WindowOperator};
use crate::units::{Micros, Millis};

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
mod tests;
