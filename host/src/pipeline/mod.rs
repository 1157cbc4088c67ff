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

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow_array::RecordBatch;

use self::config::{OnInvalid, PipelineConfig};
use self::progress::{Durations, Progress};
use crate::batch::TriggerMode;
use crate::commit::{CommitMark, DEAD_LETTERED};
use crate::encode::{Encoder, SchemaError};
use crate::record::Record;
use crate::sink::deadletter::{DeadLetterError, DeadLetterSink, Reason};
use crate::sink::iceberg::{IcebergSink, SinkError};
use crate::source::kafka::KafkaSource;
use crate::source::{Offsets, Source, SourceError};
use crate::udf::chain::{self, Fate};
use crate::udf::{Plugin, Runtime, UdfError};

/// The pipeline failed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A plugin could not be loaded.
    #[error("stage: {0}")]
    Udf(#[from] UdfError),
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
    /// Whether a stop signal ended the run.
    pub stopped: bool,
}

/// A running pipeline.
pub struct Pipeline {
    config: PipelineConfig,
    stages: Vec<Plugin>,
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
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("name", &self.config.pipeline.name)
            .field("positions", &self.positions)
            .finish_non_exhaustive()
    }
}

/// What became of the records of one slice of a batch.
struct Slice {
    batch: Option<RecordBatch>,
    dead: Vec<(Record, Reason)>,
    plugins: Duration,
    encode: Duration,
}

/// Fault injection for crash tests: `SLUICE_CRASH_AT=<point>:<batch id>` aborts the
/// process at `point` of that batch, as a power cut would. Points: `after-dead-letter`
/// (dead letters acknowledged, nothing written), `after-write` (data files written, not
/// committed) and `after-commit` (committed, group offsets not yet).
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

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

impl Pipeline {
    /// Loads the plugins, opens the table (creating it if absent), connects to Kafka and
    /// positions the source where the table's last commit says. `base` is the folder
    /// relative paths are resolved against.
    pub fn open(config: PipelineConfig, base: &Path) -> Result<Self, PipelineError> {
        let runtime = Runtime::new(config.runtime.clone())?;
        let stages = config
            .stages
            .iter()
            .map(|s| runtime.load_stage(s))
            .collect::<Result<Vec<_>, _>>()?;
        for plugin in &stages {
            let (declared, version) = plugin.declared();
            tracing::info!(stage = plugin.name(), plugin = %declared, %version, digest = plugin.digest(), "loaded stage");
        }
        let sink = IcebergSink::open(config.sink.clone(), base)?;
        let generated: Vec<String> = sink
            .ingestion_time_column()
            .map(String::from)
            .into_iter()
            .collect();
        let encoder = Encoder::new(sink.schema(), &generated)?;
        let dead_letter = match (&config.dead_letter, config.pipeline.on_invalid) {
            (Some(dl), OnInvalid::DeadLetter) => {
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
        Ok(Pipeline {
            chunk_size: config.runtime.chunk_size,
            threads: config.threads(),
            last_batch: mark.map_or(0, |m| m.batch_id),
            config,
            stages,
            source,
            sink,
            dead_letter,
            encoder,
            positions,
            last_end: Instant::now(),
            crash_at: CrashAt::from_env(),
        })
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
                }
                summary.stopped = true;
            }
        }
        Ok(summary)
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
        let start_offsets = self.positions.clone();
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
        let input_rows = records.len() as u64;
        let batch_id = self.last_batch + 1;

        let ingestion = now_micros();
        let slices = self.process(records, ingestion)?;
        let plugins = slices.iter().map(|s| s.plugins).max().unwrap_or_default();
        let encode = slices.iter().map(|s| s.encode).max().unwrap_or_default();
        let mut batches = Vec::new();
        let mut dead = Vec::new();
        for slice in slices {
            batches.extend(slice.batch);
            dead.extend(slice.dead);
        }
        let mut by_code: BTreeMap<String, u64> = BTreeMap::new();
        for (_, reason) in &dead {
            *by_code.entry(reason.code.clone()).or_default() += 1;
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

        let t = Instant::now();
        let dead_lettered = match &self.dead_letter {
            Some(sink) => sink.send_all(
                dead.iter().map(|(r, why)| (r, why)),
                &self.config.pipeline.name,
                batch_id,
            )?,
            None => 0,
        };
        let dead_letter_time = t.elapsed();
        self.crash_at.point("after-dead-letter", batch_id);

        let t = Instant::now();
        let written = self.sink.write(batches, batch_id)?;
        let write = t.elapsed();
        self.crash_at.point("after-write", batch_id);

        let t = Instant::now();
        let mark = CommitMark {
            pipeline: self.config.pipeline.name.clone(),
            batch_id,
            offsets: next.clone(),
        };
        let mut extra = std::collections::HashMap::from([(
            DEAD_LETTERED.to_string(),
            dead_lettered.to_string(),
        )]);
        for plugin in &self.stages {
            extra.insert(
                format!("sluice.stage.{}.digest", plugin.name()),
                plugin.digest().to_string(),
            );
        }
        let files = written.files.len();
        self.sink.commit(written.files, &mark, extra)?;
        let commit = t.elapsed();
        self.crash_at.point("after-commit", batch_id);
        self.positions = next;
        self.last_batch = batch_id;
        self.source.acknowledge(&self.positions);

        let total = started.elapsed();
        let since_last = self.last_end.elapsed();
        self.last_end = Instant::now();
        summary.batches += 1;
        summary.input_rows += input_rows;
        summary.rows_written += written.rows;
        summary.rows_dead_lettered += dead_lettered;
        let progress = Progress {
            pipeline: self.config.pipeline.name.clone(),
            batch_id,
            commit_id: mark.commit_id(),
            table: self.sink.name(),
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
                commit: commit.as_millis() as u64,
                total: total.as_millis() as u64,
            },
            start_offsets: start_offsets.to_json(),
            end_offsets: self.positions.to_json(),
            lag: self.positions.distance_to(ends),
        };
        progress.log();
        Ok(true)
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
                    let (stages, encoder, chunk) = (&self.stages, &self.encoder, self.chunk_size);
                    scope.spawn(move || process_slice(stages, encoder, chunk, part, ingestion))
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

/// Runs the stages and the encoder over one slice of a batch.
fn process_slice(
    stages: &[Plugin],
    encoder: &Encoder,
    chunk_size: usize,
    records: Vec<Record>,
    ingestion: i64,
) -> Result<Slice, PipelineError> {
    let t = Instant::now();
    let outcomes = chain::run(stages, records, chunk_size);
    let plugins = t.elapsed();
    let t = Instant::now();
    let mut kept = Vec::with_capacity(outcomes.len());
    let mut dead = Vec::new();
    for outcome in outcomes {
        match outcome.fate {
            Fate::Kept | Fate::Rewritten => kept.push(outcome.record),
            Fate::Rejected { stage, rejection } => {
                let plugin = &stages[stage];
                dead.push((
                    outcome.record,
                    Reason {
                        stage: plugin.name().to_string(),
                        digest: Some(plugin.digest().to_string()),
                        code: rejection.code,
                        message: rejection.message,
                        field: rejection.field,
                    },
                ));
            }
            Fate::Failed { stage, error } => {
                let plugin = &stages[stage];
                let code = error.failure().map_or("plugin_error", |f| f.code());
                dead.push((
                    outcome.record,
                    Reason {
                        stage: plugin.name().to_string(),
                        digest: Some(plugin.digest().to_string()),
                        code: code.to_string(),
                        message: error.to_string(),
                        field: None,
                    },
                ));
            }
        }
    }
    let encoded = encoder.encode(kept.iter().map(|r| r.value.as_deref()), ingestion)?;
    if !encoded.errors.is_empty() {
        let mut failed = encoded.errors.into_iter().peekable();
        for (index, record) in kept.into_iter().enumerate() {
            if failed.peek().is_some_and(|(i, _)| *i == index) {
                let (_, error) = failed.next().expect("peeked");
                dead.push((
                    record,
                    Reason {
                        stage: "encode".into(),
                        digest: None,
                        code: error.code.into(),
                        message: error.message,
                        field: error.field,
                    },
                ));
            }
        }
    }
    // Dead letters in offset order, whichever step refused them.
    dead.sort_by(|a, b| {
        (&a.0.topic, a.0.partition, a.0.offset).cmp(&(&b.0.topic, b.0.partition, b.0.offset))
    });
    Ok(Slice {
        batch: (encoded.batch.num_rows() > 0).then_some(encoded.batch),
        dead,
        plugins,
        encode: t.elapsed(),
    })
}
