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
//! The rooms, lowest first: [`config`], [`extract`], [`watermark`], [`shard`], [`keyed`]
//! (whether a source topic is keyed by a state key) and [`outcome`] (what became of an
//! event, the size of a state); the operators' state
//! machines [`window`] (with its sessions), [`dedup`] and [`join`]; [`plan`] (what a
//! batch read); [`delta`] and [`state`] (the saved state: deltas below the state files
//! that chain them); then [`operator`], the one trait every operator implements (one
//! file per kind in its folder), with what an operator reads and emits, and which
//! `EventTime` holds a list of; on top, [`tasks`]: an `EventTime` per source partition,
//! for state kept by partition over a group's members. Imports run that way only. The one exception is
//! `EventTime` itself: its `impl` is split over the files of its seams ([`delta`],
//! [`state`], the batch run, [`apply`]), each of which names it from here, as a child
//! names its parent.

pub mod apply;
pub mod config;
pub mod dedup;
pub mod delta;
pub mod extract;
pub mod join;
pub mod keyed;
pub mod operator;
pub mod outcome;
pub mod plan;
mod process;
pub mod repartition;
pub mod shard;
pub mod state;
pub mod tasks;
pub mod watermark;
pub mod window;

use std::collections::BTreeMap;

use self::config::{DedupConfig, EventTimeConfig, WindowConfig};
use self::extract::{ExtractError, Extractor, event_time};
use self::join::config::JoinConfig;
use self::join::{JoinOperator, RightFields};
use self::operator::Operator;
use self::operator::dedup::DedupStage;
use self::operator::join::JoinStage;
use self::operator::window::WindowStage;
pub use self::operator::{EventTimeOutcome, Fields};
pub use self::outcome::{Arrival, StateSize};
use self::state::{SavedState, SavedStateRef};
use self::watermark::{Clock, Watermark};
use crate::record::Record;
use crate::units::{Micros, Millis};

/// The event-time operators of a pipeline and their state.
#[derive(Debug, Clone)]
pub struct EventTime {
    config: EventTimeConfig,
    clock: Clock,
    extractor: Extractor,
    time_slot: usize,
    /// The operators, in the order they run: dedup, the windows, the joins (see
    /// [`operator`]).
    operators: Vec<Box<dyn Operator>>,
    /// How many window and join inputs an event's [`Fields`] hold, so that they are
    /// allocated once, at their size.
    inputs: (usize, usize),
    watermark: Watermark,
    /// Shards of the keyed state, each run on a thread of its own (see [`shard`]).
    shards: usize,
    /// Batches of at least this many events run their shards on threads of their own.
    parallel_from: usize,
    /// The saved files the next delta extends (see [`delta`]); `None`: the next save is a
    /// snapshot.
    chain: Option<delta::Chain>,
    /// The field the source is keyed by, when declared (see [`keyed`]).
    keyed: Option<keyed::KeyedBy>,
    /// Whether [`Applied::kept`] lists the events on time (stage one of a repartition
    /// topic, see [`repartition`]).
    keep_on_time: bool,
    /// Stage two of a repartition topic: the source topic stage one read and its
    /// partition count. The watermark is then kept per partition of that topic, each
    /// event's read from its origin, moved on by markers too.
    origins: Option<(String, i32)>,
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
        let mut operators: Vec<Box<dyn Operator>> = vec![Box::new(DedupStage::new(dedup_slots))];
        for (i, w) in windows.iter().enumerate() {
            let stage = WindowStage::new(w, i, |f| extractor.position(f));
            operators.push(Box::new(stage));
        }
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
            operators,
            inputs: (windows.len(), 0),
            watermark: Watermark::default(),
            shards: 1,
            parallel_from: shard::PARALLEL_MIN_EVENTS,
            chain: None,
            keyed: None,
            keep_on_time: false,
            origins: None,
        }
    }

    /// The same operators, reading also where each record's value of `field` (the field
    /// the source is keyed by) belongs ([`Fields::placed`]), once the topics' partition
    /// counts are set ([`EventTime::keyed_mut`]).
    pub fn with_keyed_by(mut self, field: &str) -> Self {
        let slot = self.extractor.position(field);
        self.keyed = Some(keyed::KeyedBy::new(field, slot));
        self
    }

    /// The source's declared key, if any.
    pub fn keyed(&self) -> Option<&keyed::KeyedBy> {
        self.keyed.as_ref()
    }

    /// The same, to set the topics' partition counts.
    pub fn keyed_mut(&mut self) -> Option<&mut keyed::KeyedBy> {
        self.keyed.as_mut()
    }

    /// `record`'s value of the source's key as text (for messages), if it has one.
    pub fn key_text(&self, record: &Record) -> Option<String> {
        let keyed = self.keyed.as_ref()?;
        let values = self.extractor.read(record.value.as_deref()).ok()?;
        Some(values.get(keyed.slot)?.as_ref()?.text().to_string())
    }

    /// A join's right record's value of the join key field that the source's key
    /// (`[source] keyed-by`) matches, as text; `None` without a declared key, a join
    /// reading the record's topic, or a value.
    pub fn right_key_text(&self, record: &Record) -> Option<String> {
        let keyed = self.keyed.as_ref()?;
        let join = self.joins().nth(self.join_of_topic(&record.topic)?)?;
        join.key_text(record.value.as_deref(), &keyed.field)
    }

    /// The same operators, empty, with their keyed state in a shard per thread of
    /// `threads` (results do not depend on it; see [`shard`]).
    pub fn with_threads(mut self, threads: usize) -> Self {
        let shards = shard::shards_for(threads);
        self.shards = shards;
        for op in &mut self.operators {
            op.set_shards(shards);
        }
        self
    }

    /// The same operators with stream-stream joins of the events (see [`join`]), empty.
    pub fn with_joins(mut self, joins: &[JoinConfig]) -> Self {
        self.operators.retain(|op| op.as_join().is_none());
        for (i, j) in joins.iter().enumerate() {
            let extractor = &mut self.extractor;
            let stage = JoinStage::new(j, &self.config, i, |f| extractor.position(f));
            self.operators.push(Box::new(stage));
        }
        self.inputs.1 = joins.len();
        self
    }

    /// The joins.
    pub fn joins(&self) -> impl Iterator<Item = &JoinOperator> {
        self.operators.iter().filter_map(|op| op.as_join())
    }

    /// The join `join` (by index among the joins).
    pub(crate) fn join_mut(&mut self, join: usize) -> Option<&mut JoinOperator> {
        let mut joins = self.operators.iter_mut().filter_map(|op| op.as_join_mut());
        joins.nth(join)
    }

    /// The join reading `topic` as its right side, by index.
    pub fn join_of_topic(&self, topic: &str) -> Option<usize> {
        self.joins().position(|op| op.config().right_topic == topic)
    }

    /// Reads what join `join` needs from a right record. Safe to call from many threads.
    ///
    /// # Panics
    ///
    /// If there is no join `join`.
    pub fn right_fields(
        &self,
        join: usize,
        value: Option<&[u8]>,
    ) -> Result<RightFields, ExtractError> {
        let op = self.joins().nth(join).expect("a configured join");
        op.right_fields(value)
    }

    /// Runs shards on threads of their own for every batch, however small (for tests).
    #[cfg(test)]
    pub(crate) fn always_parallel(mut self) -> Self {
        self.parallel_from = 0;
        self
    }

    /// Lists the events on time of each batch ([`Applied::kept`]): they go on to a
    /// repartition topic.
    pub fn keep_on_time(&mut self) {
        self.keep_on_time = true;
    }

    /// Makes this stage two of a repartition topic fed from the `count` partitions of
    /// `topic` (see [`EventTime::origins`]).
    pub fn read_origins(&mut self, topic: &str, count: i32) {
        self.origins = Some((topic.to_string(), count));
    }

    /// With [`EventTime::read_origins`]: the origin partitions (`topic/partition`), whose
    /// minimum the watermark follows.
    pub fn origins(&self) -> Vec<String> {
        let Some((topic, count)) = &self.origins else {
            return Vec::new();
        };
        (0..*count).map(|p| format!("{topic}/{p}")).collect()
    }

    /// A marker of a repartition topic: `origin` (`topic/partition`) was read by stage
    /// one up to event time `time` (`None`: nothing yet) at processing time `now`.
    pub fn observe_marker(&mut self, origin: &str, time: Option<Micros>, now: Millis) {
        match time {
            Some(time) => self.watermark.observe(origin, time, now),
            None => self.watermark.register(origin, now),
        }
    }

    /// Takes the roles `other` plays in a repartition (stage one's events on time, stage
    /// two's origins), as operators rebuilt from the configuration must.
    pub fn take_roles(&mut self, other: &EventTime) {
        self.keep_on_time = other.keep_on_time;
        self.origins.clone_from(&other.origins);
    }

    /// With [`EventTime::read_origins`] (stage two feeding a next stage): the newest event
    /// time its watermark at `now` stands for (the watermark plus the maximum delay), what
    /// its markers say, so that the next stage's watermark follows this one's.
    pub fn followed_time(&self, now: Millis) -> Option<Micros> {
        let watermark = self.watermark_at(now)?;
        Some(watermark.saturating_add(self.clock.delay))
    }

    /// Whether this is stage two of a repartition topic (see [`EventTime::read_origins`]).
    pub fn reads_origins(&self) -> bool {
        self.origins.is_some()
    }

    /// The newest event time read from each partition (`topic/partition`), `None` for one
    /// assigned but not heard from yet.
    pub fn newest_event_times(&self) -> BTreeMap<String, Option<Micros>> {
        let clocks = self.watermark.partitions.iter();
        clocks.map(|(p, c)| (p.clone(), c.max_event)).collect()
    }

    /// The configuration.
    pub fn config(&self) -> &EventTimeConfig {
        &self.config
    }

    /// Reads what the operators need from an event. Safe to call from many threads.
    pub fn fields(&self, value: Option<&[u8]>) -> Result<Fields, ExtractError> {
        self.fields_in(value, None)
    }

    /// [`EventTime::fields`], with where the value of the source's key belongs in
    /// `topic` when it is given.
    fn fields_in(&self, value: Option<&[u8]>, topic: Option<&str>) -> Result<Fields, ExtractError> {
        let values = self.extractor.read(value)?;
        let time = event_time(&self.config.field, values[self.time_slot].as_ref())?;
        let mut fields = Fields {
            time,
            id: 0,
            dedup_key: None,
            dedup_hash: 0,
            windows: Vec::with_capacity(self.inputs.0),
            joins: Vec::with_capacity(self.inputs.1),
            placed: None,
        };
        if let (Some(keyed), Some(topic)) = (&self.keyed, topic) {
            fields.placed = keyed.place(topic, values[keyed.slot].as_ref());
        }
        for op in &self.operators {
            op.read(&values, &mut fields);
        }
        Ok(fields)
    }

    /// Reads what the operators need from a record: [`EventTime::fields`] of its value,
    /// with the record's id from its position ([`join::row_id`]) when a join holds rows,
    /// and where its key belongs when the source is keyed ([`Fields::placed`]).
    pub fn record_fields(&self, record: &Record) -> Result<Fields, ExtractError> {
        let mut fields = self.fields_in(record.value.as_deref(), Some(&record.topic))?;
        if self.inputs.1 > 0 {
            fields.id = join::row_id(&record.topic, record.partition, record.offset);
        }
        Ok(fields)
    }

    /// The watermark at processing time `now`.
    pub fn watermark_at(&self, now: Millis) -> Option<Micros> {
        self.watermark.at(now, self.clock)
    }

    /// Each partition's own watermark: its newest event time less the maximum delay, for
    /// the partitions heard from (keyed `topic/partition`).
    pub fn partition_watermarks(&self) -> BTreeMap<String, Micros> {
        let delay = self.clock.delay;
        let clocks = self.watermark.partitions.iter();
        clocks
            .filter_map(|(p, c)| Some((p.clone(), c.max_event?.saturating_sub(delay))))
            .collect()
    }

    /// When this run started: time before it does not make a partition idle.
    pub fn session_start(&self) -> Millis {
        self.clock.session_start
    }

    /// Sets when this run started (or, to replay a batch, when its run started).
    pub fn set_session_start(&mut self, start: Millis) {
        self.clock.session_start = start;
        for op in &mut self.operators {
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
    /// while input was idle) or left-outer join rows, or, with `flush`, whether any window
    /// is open or any left-outer row waits.
    pub fn due(&self, now: Millis, flush: bool) -> bool {
        let left = self.watermark_at(now);
        self.operators.iter().any(|op| op.due(now, flush, left))
    }

    /// State size per operator: `dedup`, `window:<name>` and `join:<name>`.
    pub fn state_sizes(&self) -> BTreeMap<String, StateSize> {
        operator::sizes(&self.operators)
    }

    /// Rows each join evicted by its `max-rows` since the start: (left, right), by join.
    pub fn join_rows_evicted(&self) -> BTreeMap<String, (u64, u64)> {
        self.joins()
            .map(|op| (op.config().name.clone(), op.evicted()))
            .collect()
    }

    /// The state, borrowed for saving (it is read back as a [`SavedState`]).
    pub fn save_ref(&self) -> SavedStateRef<'_> {
        let mut saved = SavedStateRef {
            watermark: &self.watermark,
            dedup: Vec::new(),
            windows: BTreeMap::new(),
            joins: BTreeMap::new(),
        };
        for op in &self.operators {
            op.save(&mut saved);
        }
        saved
    }

    /// Restores saved state. Windows not in `saved` start empty; saved windows that are
    /// no longer configured are dropped with a warning. The next save is a snapshot.
    pub fn restore(&mut self, mut saved: SavedState) {
        self.chain = None;
        self.watermark = std::mem::take(&mut saved.watermark);
        for op in &mut self.operators {
            op.restore(&mut saved);
        }
        for name in saved.windows.keys() {
            tracing::warn!(window = %name, "saved state of a window that is no longer configured is dropped");
        }
        for name in saved.joins.keys() {
            tracing::warn!(join = %name, "saved state of a join that is no longer configured is dropped");
        }
    }
}

#[cfg(test)]
mod tests;
