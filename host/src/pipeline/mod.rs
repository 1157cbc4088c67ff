//! The main job, `sluice run`: source → batch → stages (Wasm) → encode (Arrow) → sinks →
//! commit, once per trigger.
//!
//! Exactly once: every batch ends in one Iceberg commit whose snapshot summary holds the
//! next offset of every partition (see [`crate::commit`]). On start the pipeline reads the
//! latest such mark and seeks there, so a crash before the commit re-reads the batch and a
//! crash after it does not. Dead-letter records are acknowledged before the commit (at
//! least once). Consumer-group offsets are committed after it, for monitoring only.

pub mod config;
pub mod env;
pub mod progress;
pub mod stages;
mod step;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow_array::RecordBatch;

use self::config::{OnInvalid, PipelineConfig};
use self::progress::{Durations, EventTimeProgress, Progress};
use self::stages::{StageError, Stages};
use self::step::{Slice, Step, keep_rows, shadow_reports, total_counts, total_verdicts};
use crate::admin::{Admin, AdminError};
use crate::batch::{Caps, TriggerMode};
use crate::commit::{CommitMark, DEAD_LETTERED};
use crate::encode::{Encoder, SchemaError};
use crate::record::Record;
use crate::sink::deadletter::{DeadLetterConfig, DeadLetterError, DeadLetterSink, Reason};
use crate::sink::iceberg::{IcebergSink, SinkError};
use crate::sink::window::{WindowSink, WindowSinkError};
use crate::source::kafka::KafkaSource;
use crate::source::{Offsets, Source, SourceError};
use crate::udf::{Runtime, UdfError};
use crate::event_time::config::{AtEnd, LateData};
use crate::event_time::extract::format_micros;
use crate::event_time::state::{self, Plan, StateFile, StateFileRef};

use crate::event_time::{EventTime, Fields, Outcome, Verdict};

/// The pipeline failed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A plugin could not be loaded.
    #[error("stage: {0}")]
    Udf(#[from] UdfError),
    /// A stage's plugin failed a check at start.
    #[error("{0}")]
    Stage(#[from] StageError),
    /// The admin API could not start.
    #[error("{0}")]
    Admin(#[from] AdminError),
    /// The source failed.
    #[error("source: {0}")]
    Source(#[from] SourceError),
    /// The table failed.
    #[error("sink: {0}")]
    Sink(#[from] SinkError),
    /// The dead-letter topic failed.
    #[error("dead-letter: {0}")]
    DeadLetter(#[from] DeadLetterError),
    /// The table's schema cannot be encoded.
    #[error("table schema: {0}")]
    Schema(#[from] SchemaError),
    /// A window output failed.
    #[error("{0}")]
    Window(#[from] WindowSinkError),
    /// The saved event-time state cannot be used.
    #[error("event-time state: {0}")]
    State(String),
    /// An event was refused and `on-invalid = "fail"`.
    #[error(
        "event {position} refused by {stage} ({code}): {message}; nothing of this batch was committed (on-invalid = \"fail\")"
    )]
    Invalid {
        /// `topic/partition@offset`.
        position: String,
        /// The stage, or `encode`.
        stage: String,
        /// The code.
        code: String,
        /// The reason.
        message: String,
    },
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Batches committed.
    pub batches: u64,
    /// Records read and committed (as rows or dead letters).
    pub input_rows: u64,
    /// Rows appended to the table.
    pub rows_written: u64,
    /// Records sent to the dead-letter topic.
    pub rows_dead_lettered: u64,
    /// Events behind the watermark (wherever `event-time.late` sent them).
    pub rows_late: u64,
    /// Duplicates dropped.
    pub rows_deduplicated: u64,
    /// Window results emitted.
    pub window_rows: u64,
    /// Whether a stop signal ended the run.
    pub stopped: bool,
}

/// A running pipeline.
pub struct Pipeline {
    config: PipelineConfig,
    stages: Stages,
    chunk_size: usize,
    threads: usize,
    source: Box<dyn Source>,
    sink: IcebergSink,
    dead_letter: Option<DeadLetterSink>,
    encoder: Encoder,
    positions: Offsets,
    last_batch: u64,
    last_end: Instant,
    crash_at: CrashAt,
    event_time: Option<EventTime>,
    late_sink: Option<DeadLetterSink>,
    windows: Vec<WindowSink>,
    replay: Option<Plan>,
    admin: Option<Admin>,
}

/// A slice's table batch and, with event time, the records of its rows and their fields.
type SlicePart = (Option<RecordBatch>, Vec<(Record, Fields)>);

/// What the event-time operators leave of a batch: the table's batches, the late events
/// with their reason, and what the operators did (`None` without event time).
type AfterEventTime = (
    Vec<RecordBatch>,
    Vec<(Record, Reason)>,
    Option<(LateData, Outcome)>,
);

/// The records of one batch and how it runs.
struct Input {
    records: Vec<Record>,
    /// Offsets after the batch.
    next: Offsets,
    /// The end offsets the batch was reading towards (for lag).
    ends: Offsets,
    /// Processing time, milliseconds since 1970.
    now_ms: i64,
    /// Close every open window at the end (`at-end = "flush"`).
    flush: bool,
    started: Instant,
    poll: Duration,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("name", &self.config.pipeline.name)
            .field("positions", &self.positions)
            .finish_non_exhaustive()
    }
}

/// Fault injection for crash tests: `SLUICE_CRASH_AT=<point>:<batch id>` aborts the
/// process at `point` of that batch, as a power cut would. Points, in order: with event
/// time `after-state` (state file and data files written, nothing sent); `after-write`
/// (data files written, not committed, nothing sent); `after-dead-letter` (dead letters
/// acknowledged); with windows `after-window-commit` (window tables committed, the main
/// table not); `after-commit` (committed, group offsets not yet).
/// The variable is read once, when the pipeline opens.
#[derive(Debug, Default)]
struct CrashAt(Option<String>);

impl CrashAt {
    fn from_env() -> Self {
        CrashAt(std::env::var("SLUICE_CRASH_AT").ok())
    }

    fn point(&self, point: &str, batch_id: u64) {
        if self
            .0
            .as_ref()
            .is_some_and(|v| *v == format!("{point}:{batch_id}"))
        {
            eprintln!("SLUICE_CRASH_AT: aborting at {point} of batch {batch_id}");
            std::process::abort();
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// How many state files are kept behind the current one.
const KEEP_STATE_FILES: u64 = 10;

impl Pipeline {
    /// Loads the plugins, opens the table (creating it if absent), connects to Kafka and
    /// positions the source where the table's last commit says. `base` is the folder
    /// relative paths are resolved against.
    pub fn open(config: PipelineConfig, base: &Path) -> Result<Self, PipelineError> {
        let runtime = Runtime::new(config.runtime.clone())?;
        let stages = Stages::load(&runtime, &config.stages)?;
        let admin = match &config.admin {
            Some(a) => Some(Admin::start(
                a,
                &config.pipeline.name,
                runtime.clone(),
                stages.checks(),
                stages.sender(),
            )?),
            None => None,
        };
        let sink = IcebergSink::open(config.sink.clone(), base)?;
        let generated: Vec<String> = sink
            .ingestion_time_column()
            .map(String::from)
            .into_iter()
            .collect();
        let encoder = Encoder::new(sink.schema(), &generated)?;
        let late_to_dead_letter = config
            .event_time
            .as_ref()
            .is_some_and(|et| et.late == LateData::DeadLetter);
        let dead_letter = match &config.dead_letter {
            Some(dl)
                if config.pipeline.on_invalid == OnInvalid::DeadLetter || late_to_dead_letter =>
            {
                Some(DeadLetterSink::new(dl, &config.source.bootstrap_servers)?)
            }
            _ => None,
        };
        let name = config.pipeline.name.clone();
        let mut source: Box<dyn Source> = Box::new(KafkaSource::new(
            config.source.clone(),
            &format!("sluice-{name}"),
        )?);
        let mark = sink.last_mark(&name)?;
        let positions = source.start(mark.as_ref().map(|m| &m.offsets))?;
        match &mark {
            Some(m) => {
                tracing::info!(pipeline = %name, table = %sink.name(), batch_id = m.batch_id, offsets = %positions, "resuming from the table's last commit")
            }
            None => {
                tracing::info!(pipeline = %name, table = %sink.name(), offsets = %positions, "new pipeline: starting at {:?} offsets", config.source.starting_offsets)
            }
        }
        let last_batch = mark.as_ref().map_or(0, |m| m.batch_id);
        let windows = config
            .windows
            .iter()
            .map(|w| WindowSink::open(w, &config.sink, &config.source.bootstrap_servers, base))
            .collect::<Result<Vec<_>, _>>()?;
        let late_sink = match &config.event_time {
            Some(et) if et.late == LateData::Topic => {
                let topic = et.late_topic.clone().unwrap_or_default();
                let late = DeadLetterConfig {
                    topic,
                    bootstrap_servers: None,
                    ack_timeout: Duration::from_secs(60),
                    properties: BTreeMap::new(),
                };
                Some(DeadLetterSink::new(
                    &late,
                    &config.source.bootstrap_servers,
                )?)
            }
            _ => None,
        };
        let mut pipeline = Pipeline {
            chunk_size: config.runtime.chunk_size,
            threads: config.threads(),
            last_batch,
            event_time: config
                .event_time
                .as_ref()
                .map(|et| EventTime::new(et, config.dedup.as_ref(), &config.windows)),
            config,
            stages,
            source,
            sink,
            dead_letter,
            encoder,
            positions,
            last_end: Instant::now(),
            crash_at: CrashAt::from_env(),
            late_sink,
            windows,
            replay: None,
            admin,
        };
        pipeline.recover_state(mark.is_some())?;
        Ok(pipeline)
    }

    /// Loads the event-time state named by the table's last commit, and finds a batch
    /// that was planned (its state file written) but not committed: it is replayed first.
    fn recover_state(&mut self, resumed: bool) -> Result<(), PipelineError> {
        let Some(et) = &mut self.event_time else {
            return Ok(());
        };
        et.set_session_start(now_ms());
        let name = self.config.pipeline.name.clone();
        let saved = self
            .sink
            .last_mark_properties(&name)
            .and_then(|p| p.get(state::STATE))
            .cloned();
        match saved {
            Some(path) => {
                let file = read_state(&self.sink, &path)?.ok_or_else(|| {
                    PipelineError::State(format!(
                        "the state file {path} named by the table's last commit is missing"
                    ))
                })?;
                et.restore(file.state);
                tracing::info!(state = %path, watermark = ?et.watermark_at(now_ms()).map(format_micros), "restored event-time state");
            }
            None if resumed => {
                tracing::warn!(
                    "the table's last commit names no event-time state: starting with none"
                );
            }
            None => {}
        }
        let next = self.last_batch + 1;
        let pending = state::path(self.sink.location(), &name, next);
        let plan = match read_state(&self.sink, &pending) {
            Ok(Some(file)) if file.plan.start == self.positions.to_json() => Some(file.plan),
            Ok(Some(_)) => {
                tracing::warn!(state = %pending, "ignoring a state file planned from other offsets");
                None
            }
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(state = %pending, %error, "ignoring an unreadable state file");
                None
            }
        };
        for window in &self.windows {
            if let Some(held) = window.table_batch(&name)?
                && held > self.last_batch
                && plan.as_ref().is_none_or(|p| p.batch_id != held)
            {
                return Err(PipelineError::State(format!(
                    "window `{}`'s table holds batch {held} but the main table is at batch {} and there is no plan to replay it",
                    window.name(),
                    self.last_batch
                )));
            }
        }
        self.replay = plan;
        Ok(())
    }

    /// The positions the next batch starts from.
    pub fn positions(&self) -> &Offsets {
        &self.positions
    }

    fn reached(&self, ends: &Offsets) -> bool {
        ends.0
            .iter()
            .all(|(tp, &end)| self.positions.get(tp).is_some_and(|p| p >= end))
    }

    /// Runs until the trigger says to stop (`available-now`) or `stop` is raised.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<RunSummary, PipelineError> {
        let mut summary = RunSummary::default();
        if let Some(plan) = self.replay.take()
            && !self.replay(plan, stop, &mut summary)?
        {
            return Ok(summary);
        }
        let trigger = self.config.trigger.clone();
        match trigger.mode {
            TriggerMode::AvailableNow => {
                let ends = self.source.end_offsets()?;
                tracing::info!(ends = %ends, records = self.positions.distance_to(&ends), "available-now: reading up to these end offsets");
                while !self.reached(&ends) {
                    if stop.load(Ordering::Relaxed) {
                        summary.stopped = true;
                        break;
                    }
                    if !self.batch(&ends, stop, &mut summary)? {
                        break;
                    }
                }
                let flush = self
                    .event_time
                    .as_ref()
                    .is_some_and(|et| et.config().at_end == AtEnd::Flush);
                if flush && !summary.stopped {
                    self.tick(true, &mut summary)?;
                }
            }
            TriggerMode::Interval => {
                let mut next_tick = Instant::now();
                'ticks: loop {
                    while let Some(wait) = next_tick.checked_duration_since(Instant::now()) {
                        if stop.load(Ordering::Relaxed) {
                            break 'ticks;
                        }
                        std::thread::sleep(wait.min(Duration::from_millis(100)));
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    next_tick = (next_tick + trigger.interval).max(Instant::now());
                    let ends = self.source.end_offsets()?;
                    // A capped batch is followed at once by the next, until caught up.
                    while !self.reached(&ends) {
                        if !self.batch(&ends, stop, &mut summary)? || stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    if !stop.load(Ordering::Relaxed) {
                        self.tick(false, &mut summary)?;
                    }
                }
                summary.stopped = true;
            }
        }
        Ok(summary)
    }

    /// Replays a batch that was planned before a crash: the same records, the same
    /// processing time. Returns `false` when stopped.
    fn replay(
        &mut self,
        plan: Plan,
        stop: &AtomicBool,
        summary: &mut RunSummary,
    ) -> Result<bool, PipelineError> {
        let ends = Offsets::from_json(&plan.end).map_err(PipelineError::State)?;
        tracing::warn!(batch_id = plan.batch_id, start = %plan.start, end = %plan.end, "a batch was planned but not committed: replaying it exactly");
        let started = Instant::now();
        let unlimited = Caps {
            records: usize::MAX,
            bytes: u64::MAX,
        };
        let (records, next) = match self.source.read(&ends, unlimited, stop) {
            Ok(read) => read,
            Err(SourceError::Stopped) => {
                summary.stopped = true;
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        if next != ends {
            return Err(PipelineError::State(format!(
                "replaying batch {}: read up to {next}, but it was planned up to {ends}",
                plan.batch_id
            )));
        }
        let poll = started.elapsed();
        let session = self.event_time.as_mut().map(|et| {
            let this_run = et.session_start();
            et.set_session_start(plan.session_start_ms);
            this_run
        });
        self.commit_batch(
            Input {
                records,
                next,
                ends,
                now_ms: plan.now_ms,
                flush: plan.flush,
                started,
                poll,
            },
            summary,
        )?;
        if let (Some(et), Some(this_run)) = (self.event_time.as_mut(), session) {
            et.set_session_start(this_run);
        }
        Ok(true)
    }

    /// Runs a batch without records when the watermark, moving on while input is idle,
    /// closes a window; or, with `flush`, when any window is open.
    fn tick(&mut self, flush: bool, summary: &mut RunSummary) -> Result<(), PipelineError> {
        let now = now_ms();
        if !self
            .event_time
            .as_ref()
            .is_some_and(|et| et.due(now, flush))
        {
            return Ok(());
        }
        self.commit_batch(
            Input {
                records: Vec::new(),
                next: self.positions.clone(),
                ends: self.positions.clone(),
                now_ms: now,
                flush,
                started: Instant::now(),
                poll: Duration::ZERO,
            },
            summary,
        )
    }

    /// Runs one batch up to `ends`. Returns `false` when stopped mid-batch (the batch is
    /// abandoned whole).
    fn batch(
        &mut self,
        ends: &Offsets,
        stop: &AtomicBool,
        summary: &mut RunSummary,
    ) -> Result<bool, PipelineError> {
        let started = Instant::now();
        let (records, next) = match self.source.read(ends, self.config.trigger.caps(), stop) {
            Ok(read) => read,
            Err(SourceError::Stopped) => {
                tracing::info!(
                    "stopped while reading: the batch is abandoned; nothing was committed"
                );
                summary.stopped = true;
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        let poll = started.elapsed();
        if records.is_empty() {
            self.positions = next;
            return Ok(true);
        }
        self.commit_batch(
            Input {
                records,
                next,
                ends: ends.clone(),
                now_ms: now_ms(),
                flush: false,
                started,
                poll,
            },
            summary,
        )?;
        Ok(true)
    }

    /// Processes the records of a batch and commits the results to every output.
    fn commit_batch(
        &mut self,
        input: Input,
        summary: &mut RunSummary,
    ) -> Result<(), PipelineError> {
        let Input {
            mut records,
            next,
            ends,
            now_ms,
            flush,
            started,
            poll,
        } = input;
        let start_offsets = self.positions.clone();
        let input_rows = records.len() as u64;
        let batch_id = self.last_batch + 1;
        let name = self.config.pipeline.name.clone();
        if self.event_time.is_some() {
            // Event-time state depends on order: make a replay see the same one.
            records.sort_unstable_by(|a, b| {
                (&a.topic, a.partition, a.offset).cmp(&(&b.topic, b.partition, b.offset))
            });
        }

        // New plugin versions start at a batch boundary; a batch on a version still on
        // probation keeps its records, to process them again if it is rolled back.
        self.stages.activate_new_versions();
        let backup = self.stages.on_probation().then(|| records.clone());
        let mut slices = self.process(records, now_ms * 1000)?;
        let mut stage_counts = total_counts(&slices, self.stages.active().len());
        let mut stage_verdicts = total_verdicts(&slices);
        let mut shadows = shadow_reports(&slices);
        if let Some(records) = backup
            && self.stages.judge(&stage_counts)
        {
            slices = self.process(records, now_ms * 1000)?;
            stage_counts = total_counts(&slices, self.stages.active().len());
            stage_verdicts = total_verdicts(&slices);
            shadows = shadow_reports(&slices);
        }
        let plugins = slices.iter().map(|s| s.plugins).max().unwrap_or_default();
        let encode = slices.iter().map(|s| s.encode).max().unwrap_or_default();
        let mut dead = Vec::new();
        let mut parts = Vec::with_capacity(slices.len());
        for slice in slices {
            dead.extend(slice.dead);
            parts.push((slice.batch, slice.timed));
        }
        if let Some((record, reason)) = dead.first()
            && self.config.pipeline.on_invalid == OnInvalid::Fail
        {
            return Err(PipelineError::Invalid {
                position: record.position(),
                stage: reason.stage.clone(),
                code: reason.code.clone(),
                message: reason.message.clone(),
            });
        }

        // Event time: late events leave, duplicates are dropped, windows are updated.
        let (batches, mut late, event) =
            self.apply_event_time(parts, &start_offsets, now_ms, flush)?;
        let rows_late = late.len() as u64;
        let mut late_to_topic = Vec::new();
        match event.as_ref().map(|(late, _)| *late) {
            Some(LateData::DeadLetter) => dead.append(&mut late),
            Some(LateData::Topic) => late_to_topic = late,
            Some(LateData::Drop) if rows_late > 0 => {
                tracing::info!(
                    batch_id,
                    rows_late,
                    "dropped events behind the watermark (event-time.late = \"drop\")"
                );
            }
            _ => {}
        }
        let mut by_code: BTreeMap<String, u64> = BTreeMap::new();
        for (_, reason) in &dead {
            *by_code.entry(reason.code.clone()).or_default() += 1;
        }

        // The state and the plan, before anything leaves: a crash from here on replays
        // exactly this batch.
        let plan = Plan {
            batch_id,
            start: start_offsets.to_json(),
            end: next.to_json(),
            now_ms,
            session_start_ms: self.event_time.as_ref().map_or(0, EventTime::session_start),
            flush,
        };
        // Data files are written meanwhile: they stay invisible until the commit.
        let t = Instant::now();
        let (sink, event_time) = (&self.sink, self.event_time.as_ref());
        let (saved, written) = std::thread::scope(|scope| {
            let saving = scope.spawn(|| {
                let t = Instant::now();
                save_state(sink, event_time, &name, &plan).map(|file| (file, t.elapsed()))
            });
            let written = sink.write(batches, batch_id);
            let saved = saving
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (saved, written)
        });
        let (state_file, state_time) = saved?;
        let written = written?;
        let write = t.elapsed();
        if state_file.is_some() {
            self.crash_at.point("after-state", batch_id);
        }
        self.crash_at.point("after-write", batch_id);

        let t = Instant::now();
        let dead_lettered = match &self.dead_letter {
            Some(sink) => sink.send_all(dead.iter().map(|(r, why)| (r, why)), &name, batch_id)?,
            None => 0,
        };
        if let Some(sink) = &self.late_sink {
            sink.send_all(
                late_to_topic.iter().map(|(r, why)| (r, why)),
                &name,
                batch_id,
            )?;
        }
        let dead_letter_time = t.elapsed();
        self.crash_at.point("after-dead-letter", batch_id);

        let emitted = event
            .as_ref()
            .map(|(_, outcome)| outcome.emitted.clone())
            .unwrap_or_default();
        for (window, rows) in self.windows.iter().zip(&emitted) {
            window.send(rows, &name, batch_id)?;
        }

        let t = Instant::now();
        let mark = CommitMark {
            pipeline: name.clone(),
            batch_id,
            offsets: next.clone(),
        };
        for (window, rows) in self.windows.iter_mut().zip(&emitted) {
            window.commit(rows, &mark)?;
        }
        if !self.windows.is_empty() {
            self.crash_at.point("after-window-commit", batch_id);
        }
        let mut extra = std::collections::HashMap::from([(
            DEAD_LETTERED.to_string(),
            dead_lettered.to_string(),
        )]);
        extra.extend(self.stages.summary_properties());
        if let Some((path, _)) = &state_file {
            extra.insert(state::STATE.to_string(), path.clone());
        }
        if let Some(w) = event.as_ref().and_then(|(_, o)| o.watermark) {
            extra.insert(state::WATERMARK.to_string(), format_micros(w));
        }
        let files = written.files.len();
        self.sink.commit(written.files, &mark, extra)?;
        let commit = t.elapsed();
        self.crash_at.point("after-commit", batch_id);
        self.positions = next;
        self.last_batch = batch_id;
        self.source.acknowledge(&self.positions);
        self.stages.committed(&stage_counts);
        if state_file.is_some() && batch_id > KEEP_STATE_FILES {
            let old = state::path(self.sink.location(), &name, batch_id - KEEP_STATE_FILES);
            if let Err(error) = self.sink.delete_file(&old) {
                tracing::debug!(%error, "cannot delete an old state file");
            }
        }

        let total = started.elapsed();
        let since_last = self.last_end.elapsed();
        self.last_end = Instant::now();
        let event_progress = event.map(|(_, outcome)| {
            let et = self.event_time.as_ref().expect("event time is configured");
            EventTimeProgress {
                watermark: outcome.watermark.map(format_micros),
                rows_late,
                rows_deduplicated: outcome.duplicates,
                windows_emitted: self
                    .windows
                    .iter()
                    .zip(&outcome.emitted)
                    .map(|(w, rows)| (w.name().to_string(), rows.len() as u64))
                    .collect(),
                state: et.state_sizes(),
                state_file_bytes: state_file.as_ref().map_or(0, |(_, size)| *size),
            }
        });
        summary.batches += 1;
        summary.input_rows += input_rows;
        summary.rows_written += written.rows;
        summary.rows_dead_lettered += dead_lettered;
        if let Some(e) = &event_progress {
            summary.rows_late += e.rows_late;
            summary.rows_deduplicated += e.rows_deduplicated;
            summary.window_rows += e.windows_emitted.values().sum::<u64>();
        }
        let progress = Progress {
            pipeline: name,
            batch_id,
            commit_id: mark.commit_id(),
            table: self.sink.name(),
            committed_at: chrono::Utc::now(),
            input_rows,
            rows_written: written.rows,
            rows_dead_lettered: dead_lettered,
            dead_lettered_by_code: by_code,
            input_rows_per_second: input_rows as f64 / since_last.as_secs_f64().max(1e-9),
            processed_rows_per_second: input_rows as f64 / total.as_secs_f64().max(1e-9),
            files_written: files as u64,
            bytes_written: written.bytes,
            durations_ms: Durations {
                poll: poll.as_millis() as u64,
                plugins: plugins.as_millis() as u64,
                encode: encode.as_millis() as u64,
                dead_letter: dead_letter_time.as_millis() as u64,
                write: write.as_millis() as u64,
                state: state_time.as_millis() as u64,
                commit: commit.as_millis() as u64,
                total: total.as_millis() as u64,
            },
            start_offsets: start_offsets.to_json(),
            end_offsets: self.positions.to_json(),
            lag: self.positions.distance_to(&ends),
            stages: self.stages.progress(&stage_counts, stage_verdicts, shadows),
            event_time: event_progress,
        };
        progress.log();
        if let Some(admin) = &self.admin {
            admin.record(&progress);
        }
        Ok(())
    }

    /// Runs the event-time operators over the slices' records, in order: returns the
    /// table's batches without late events and duplicates, the late events with their
    /// reason, and what the operators did (`None` without event time).
    fn apply_event_time(
        &mut self,
        parts: Vec<SlicePart>,
        start_offsets: &Offsets,
        now_ms: i64,
        flush: bool,
    ) -> Result<AfterEventTime, PipelineError> {
        let Some(et) = &mut self.event_time else {
            let batches = parts.into_iter().filter_map(|(batch, _)| batch).collect();
            return Ok((batches, Vec::new(), None));
        };
        let assigned: Vec<String> = start_offsets
            .0
            .keys()
            .map(|tp| format!("{}/{}", tp.topic, tp.partition))
            .collect();
        et.register(assigned.iter().map(String::as_str), now_ms);
        // Records come sorted by partition: one key per run of a partition, not per record.
        let mut names: Vec<String> = Vec::new();
        let mut which = Vec::new();
        let mut last: Option<(&str, i32)> = None;
        for (record, _) in parts.iter().flat_map(|(_, timed)| timed.iter()) {
            let here = (&*record.topic, record.partition);
            if last != Some(here) {
                names.push(format!("{}/{}", here.0, here.1));
                last = Some(here);
            }
            which.push(names.len() - 1);
        }
        let fields = parts
            .iter()
            .flat_map(|(_, timed)| timed.iter().map(|(_, f)| f));
        let keys = which.iter().map(|&i| names[i].as_str());
        let outcome = et.process(keys.zip(fields), now_ms, flush);
        let mut verdicts = outcome.verdicts.iter();
        let field = &et.config().field;
        let (mut batches, mut late) = (Vec::new(), Vec::new());
        for (batch, timed) in parts {
            let mut on_time = Vec::with_capacity(timed.len());
            for (record, fields) in timed {
                let verdict = *verdicts.next().expect("one verdict per event");
                on_time.push(verdict == Verdict::OnTime);
                if verdict == Verdict::Late {
                    let reason = late_reason(field, fields.time, outcome.watermark_before);
                    late.push((record, reason));
                }
            }
            if let Some(batch) = batch
                && let Some(kept) = keep_rows(batch, on_time)?
            {
                batches.push(kept);
            }
        }
        let late_data = et.config().late;
        Ok((batches, late, Some((late_data, outcome))))
    }

    /// Runs the stages and the encoder over `records`, in contiguous slices on the
    /// pipeline's threads.
    fn process(&self, records: Vec<Record>, ingestion: i64) -> Result<Vec<Slice>, PipelineError> {
        // No slice smaller than a plugin chunk, unless the batch is.
        let per_thread = records
            .len()
            .div_ceil(self.threads)
            .max(self.chunk_size)
            .max(1);
        let mut parts: Vec<Vec<Record>> = Vec::new();
        let mut records = records.into_iter().peekable();
        while records.peek().is_some() {
            parts.push(records.by_ref().take(per_thread).collect());
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = parts
                .into_iter()
                .map(|part| {
                    let step = Step {
                        stages: self.stages.active(),
                        shadows: self.stages.shadows(),
                        encoder: &self.encoder,
                        event_time: self.event_time.as_ref(),
                        chunk_size: self.chunk_size,
                    };
                    scope.spawn(move || step.run(part, ingestion))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        })
    }
}

/// Writes the event-time state after a batch, with the batch's plan, to the table's
/// storage: returns its path and size (`None` without event time).
fn save_state(
    sink: &IcebergSink,
    event_time: Option<&EventTime>,
    name: &str,
    plan: &Plan,
) -> Result<Option<(String, u64)>, PipelineError> {
    let Some(et) = event_time else {
        return Ok(None);
    };
    let file = StateFileRef {
        version: 1,
        pipeline: name,
        plan,
        state: et.save_ref(),
    };
    let bytes = serde_json::to_vec(&file)
        .map_err(|e| PipelineError::State(format!("cannot serialise the state: {e}")))?;
    let path = state::path(sink.location(), name, plan.batch_id);
    let size = bytes.len() as u64;
    sink.put_file(&path, bytes)?;
    Ok(Some((path, size)))
}

/// Why a late event left the stream.
fn late_reason(field: &str, time: i64, watermark: Option<i64>) -> Reason {
    Reason {
        stage: "event-time".into(),
        digest: None,
        code: "late_event".into(),
        message: format!(
            "event time {} is behind the watermark {}",
            format_micros(time),
            watermark.map_or_else(|| "(none)".into(), format_micros)
        ),
        field: Some(field.to_string()),
    }
}

fn read_state(sink: &IcebergSink, path: &str) -> Result<Option<StateFile>, PipelineError> {
    let Some(bytes) = sink.get_file(path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| PipelineError::State(format!("cannot read {path}: {e}")))
}
