//! The main job, `sluice run`. Each batch goes through five phases, one module each:
//!
//! ```text
//! read ──▶ process ──▶ route ──▶ commit ──▶ report
//! source    stages      event      outputs,    progress,
//!           encoder     time       in order    metrics
//! ```
//!
//! - [`read`](self::read): records from the source up to the target and the caps (or a
//!   planned batch, replayed exactly after a crash);
//! - [`process`](self::process): the plugin stages and the encoder, on every core;
//!   probation and rollback of new plugin versions;
//! - [`route`](self::route): event time (late data, dedup, windows) and every record to
//!   its output;
//! - [`commit`](self::commit): the side effects in [`commit::SEQUENCE`] order, a crash
//!   point after each step ([`crash`]);
//! - [`report`](self::report): the progress line, the admin API, the run's summary.
//!
//! Exactly once: every batch ends in one Iceberg commit whose snapshot summary holds the
//! next offset of every partition (see [`crate::checkpoint`]). On start the pipeline reads the
//! latest such mark and seeks there, so a crash before the commit re-reads the batch and a
//! crash after it does not. The pipeline is built from injected parts ([`Parts`]): Kafka
//! and the table's storage in production, in-memory twins in tests. [`crate::batch::trigger`]
//! decides when batches run.

mod cadence;
pub mod clients;
pub mod commit;
mod compactor;
pub mod config;
mod cpu;
pub mod crash;
#[cfg(test)]
mod deploy_tests;
pub mod env;
mod error;
mod evolve;
pub mod faults;
mod health;
mod inlet;
mod keyed;
mod left;
pub mod open;
mod partitioned;
mod process;

mod read;
pub mod repartition;
mod report;
mod route;
pub mod stages;
mod standby;
mod step;
mod topology;

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use self::cadence::When;
use self::config::PipelineConfig;
use self::crash::Crash;
pub use self::error::PipelineError;
use self::faults::Faults;
pub use self::open::Parts;
use self::read::Input;
pub use self::report::RunSummary;
use self::route::Prepared;
use self::stages::Stages;
use crate::admin::Admin;
use crate::admin::health::Readiness;
use crate::batch::trigger::{self, Batches};
use crate::election::Election;
use crate::encode::{DroppedFields, Encoder};
use crate::event_time::EventTime;
use crate::event_time::config::AtEnd;
use crate::event_time::state::{Plan, StateStore};
use crate::event_time::tasks::{Tasks, Unfinished};
use crate::format::{Decoder, Known};
use crate::lookup::Current;
use crate::lookup::refresh::LookupTables;
use crate::progress::Role;
use crate::record::Record;
use crate::sink::Outputs;
use crate::source::identity::Fingerprints;
use crate::source::kafka::SourceMode;
use crate::source::{Loss, Offsets, Source, SourceError};
use crate::units::Millis;

/// A running pipeline.
pub struct Pipeline {
    config: PipelineConfig,
    stages: Stages,
    encoder: Encoder,
    source: Box<dyn Source>,
    outputs: Outputs,
    state: Box<dyn StateStore>,
    event_time: Option<EventTime>,
    /// Where the next batch starts.
    positions: Offsets,
    /// The last batch committed.
    last_batch: u64,
    /// When the last batch ended.
    last_end: Instant,
    crash: Crash,
    /// Tells this process's state files from another's.
    run: String,
    /// A batch planned but not committed before a crash: it runs first, exactly.
    replay: Option<Plan>,
    admin: Option<Admin>,
    /// Where the loop reports its liveness and readiness: the admin API's, or the one
    /// stage one's admin API watches for this later stage.
    health: Option<std::sync::Arc<crate::admin::health::Health>>,
    summary: RunSummary,
    /// Who runs an event-time pipeline shared by processes (`None`: this one does).
    election: Option<Box<dyn Election>>,
    /// What this process is to the pipeline now.
    role: Role,
    /// The election's changes when this process last became active.
    election_changes: u64,
    /// The last record read of each partition, as the last commit records it.
    last_records: Fingerprints,
    /// The same after the batch being committed.
    batch_records: Fingerprints,
    /// Data loss accepted and not yet recorded by a commit.
    losses: Vec<Loss>,
    /// The last batch committed when the last fault was met.
    faults_seen_at: u64,
    /// When an idle pipeline last looked at its catalog, for readiness ([`health`]).
    catalog_looked: Instant,
    /// The offsets the table's last commit of the pipeline records.
    committed: Offsets,
    /// Triggers processed but not committed yet (`[sink] commit-interval`).
    held: Option<cadence::Held>,
    /// Table commits of this process since its last snapshot expiry
    /// (`[sink.expire-snapshots]`).
    commits_since_expiry: u64,
    /// The names of the fields dropped for want of a column that this process has seen
    /// (bounded labels of the progress line's `dropped_fields`; each logged once).
    dropped_fields: DroppedFields,
    /// The schema change the batch being processed (or held) commits with, if it needs
    /// one (`[sink] unknown-fields = "add"`, see [`evolve`]).
    planned: Option<crate::iceberg::Evolution>,
    /// The lookup tables (`[[lookups]]`), refreshed between batches.
    lookups: LookupTables,
    /// The writer schemas of an Avro source; `None` for JSON.
    decoder: Option<Decoder>,
    /// The writer schemas the current batch's records name, fetched before it.
    known: Option<Known>,
    /// Where plugin calls read the lookup tables from (the runtime's).
    current: Current,
    /// The compaction thread (`[sink.compact]`).
    compactor: Option<compactor::Compactor>,
    /// What the records say of the source's declared key (`[source] keyed-by`).
    key_checks: keyed::KeyChecks,
    /// With state by partition (`scale-out = "partitions"`): each owned partition's
    /// event-time task ([`partitioned`]).
    tasks: Option<Tasks>,
    /// Batches planned but not committed that read owned partitions, to replay after the
    /// current one, last first.
    unfinished: Vec<Unfinished>,
    /// The replay under way, with state by partition.
    replaying: Option<partitioned::Replaying>,
    /// Batches fenced off in a row, and whether a wait is owed before the next try.
    fence_streak: left::FenceStreak,
    /// With state by partition: the key of the batch fenced off last, replayed after the
    /// others found with it (another of them may be what fenced it off).
    fenced_key: Option<String>,
    /// Repartition topics this process feeds (stage one).
    outlets: repartition::Outlets,
    /// The repartition topic this pipeline reads, as stage two.
    inlet: inlet::Inlet,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("name", &self.config.pipeline.name)
            .field("positions", &self.positions)
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// The positions the next batch starts from.
    pub fn positions(&self) -> &Offsets {
        &self.positions
    }

    /// The plugin stages: their active versions, and where new versions are sent.
    pub fn stages(&self) -> &Stages {
        &self.stages
    }

    /// The admin API, when configured.
    pub fn admin(&self) -> Option<&Admin> {
        self.admin.as_ref()
    }

    /// Reports liveness and readiness to `health` (a later stage, without an admin API of
    /// its own: stage one's answers for it, see [`Admin::watch_stage`]).
    pub fn report_health(&mut self, health: std::sync::Arc<crate::admin::health::Health>) {
        self.health = Some(health);
    }

    /// Runs until the trigger says to stop (`available-now`) or `stop` is raised; with an
    /// election, only while this process is the active one ([`standby`]).
    pub fn run(&mut self, stop: &AtomicBool) -> Result<RunSummary, PipelineError> {
        self.summary = RunSummary::default();
        let mut faults = Faults::new(self.config.pipeline.fault_budget);
        let mut brokers = faults::Brokers::new(&self.config.source.bootstrap_servers);
        let mut resume = false;
        loop {
            let ran = self.attempt(resume, stop);
            let error = match ran {
                Ok(stopped) => {
                    self.summary.stopped = stopped;
                    if let Some(compactor) = &self.compactor {
                        self.summary.compaction.add(&compactor.take());
                    }
                    return Ok(self.summary.clone());
                }
                Err(error) => error,
            };
            if self.last_batch > self.faults_seen_at {
                faults.progressed();
            }
            self.faults_seen_at = self.last_batch;
            let reason = format!("retrying after a fault: {error}");
            let wait = faults.after(error)?;
            self.set_readiness(Readiness::Waiting(reason));
            self.summary.faults_retried += 1;
            self.outputs.abandon();
            let health = self.health.clone();
            let beat = || health.iter().for_each(|h| h.beat());
            if !faults::pause(wait, stop, &mut brokers, &beat) {
                self.summary.stopped = true;
                return Ok(self.summary.clone());
            }
            resume = true;
        }
    }

    /// One attempt at the run; after a fault (`resume`), positions and state are read
    /// again from the table first (an elected process does so when it is active again).
    fn attempt(&mut self, resume: bool, stop: &AtomicBool) -> Result<bool, PipelineError> {
        match self.election.take() {
            None => {
                if resume {
                    self.resume()?;
                }
                self.run_active(stop)
            }
            Some(mut election) => {
                let ran = self.run_elected(election.as_mut(), stop);
                self.election = Some(election);
                ran
            }
        }
    }

    /// Replays a planned batch if there is one, then runs batches as the trigger says.
    /// Returns whether a stop ended the run.
    fn run_active(&mut self, stop: &AtomicBool) -> Result<bool, PipelineError> {
        if !self.replay_planned(stop)? {
            return Ok(true);
        }
        let flush = self
            .event_time
            .as_ref()
            .is_some_and(|et| et.config().at_end == AtEnd::Flush);
        let trigger = self.config.trigger.clone();
        trigger::drive(&trigger, flush, self, stop)
    }

    /// Replays the batches planned and not committed that a restart (or a resume after a
    /// fenced batch or a rebalance) found, before any other batch. Returns `false` when
    /// stopped.
    fn replay_planned(&mut self, stop: &AtomicBool) -> Result<bool, PipelineError> {
        while let Some(plan) = self.replay.take() {
            if !self.wait_after_fences(stop) {
                self.replay = Some(plan);
                return Ok(false);
            }
            let replayed = self.replay(&plan, stop);
            if !replayed? {
                self.replaying = None;
                return Ok(false);
            }
            // A replay fenced off read its positions again, which found the next replay
            // (and set what it replays): that one comes next, not one after it.
            if self.replay.is_none() {
                self.replaying = None;
                self.replay = self.next_replay();
            }
        }
        Ok(true)
    }

    /// Replays a batch that was planned before a crash: the same records, the same processing
    /// time, the same session start; trigger by trigger if it held several (commit
    /// cadence), committed together after the last. Returns `false` when stopped.
    fn replay(&mut self, plan: &Plan, stop: &AtomicBool) -> Result<bool, PipelineError> {
        tracing::warn!(batch_id = plan.batch_id, start = %plan.start, end = %plan.end, triggers = plan.held.len() + 1, "a batch was planned but not committed: replaying it exactly");
        let session = self.event_time.as_mut().map(|et| {
            let this_run = et.session_start();
            et.set_session_start(plan.session_start_ms);
            this_run
        });
        if let Some(tasks) = &mut self.tasks {
            tasks.set_session_start(plan.session_start_ms);
        }
        self.lookups_at(plan)?;
        let triggers = plan.triggers();
        let last = triggers.len() - 1;
        let mut replayed = true;
        for (i, trigger) in triggers.iter().enumerate() {
            let Some(input) = self.read_plan(plan.batch_id, trigger, stop)? else {
                self.held = None; // stopped: the batch is abandoned whole
                replayed = false;
                break;
            };
            let when = if i == last { When::Now } else { When::Hold };
            self.run_batch(input, when)?;
        }
        if let (Some(et), Some(this_run)) = (self.event_time.as_mut(), session) {
            et.set_session_start(this_run);
            if let Some(tasks) = &mut self.tasks {
                tasks.set_session_start(this_run);
            }
        }
        Ok(replayed)
    }

    /// A batch fenced off the table: it is abandoned (its files stay unreferenced, to be
    /// cleaned up by maintenance), and the positions and state are read again from the
    /// table, as a restart would.
    fn fenced(&mut self, prepared: &Prepared, error: &PipelineError) -> Result<(), PipelineError> {
        if error.is_schema_moved() {
            tracing::info!(
                batch_id = prepared.mark.batch_id,
                %error,
                "the table's schema changed while the batch was processed: the batch is abandoned and read again against the new schema"
            );
            self.summary.schema_retries += 1;
            return self.resume();
        }
        tracing::warn!(
            pipeline = %prepared.mark.pipeline,
            batch_id = prepared.mark.batch_id,
            %error,
            "batch fenced: another commit took its partitions first; the batch is abandoned and positions are read again from the table"
        );
        self.summary.batches_fenced += 1;
        self.fence_streak.fenced(self.last_batch);
        self.fenced_key = self
            .tasks
            .is_some()
            .then(|| partitioned::plan_key(&prepared.plan));
        if let Some(admin) = &self.admin {
            admin.fenced();
        }
        self.set_readiness(Readiness::Waiting(format!(
            "batch {} was fenced: reloading positions from the table",
            prepared.mark.batch_id
        )));
        self.resume()
    }

    /// The consumer group moved partitions while a batch was read: the batch is abandoned
    /// (nothing of it left), and the partitions owned now are positioned where the table
    /// says.
    fn rebalanced(&mut self) -> Result<(), PipelineError> {
        tracing::info!(
            "the consumer group moved partitions: the batch being read is abandoned; positions are read again from the table"
        );
        self.resume()
    }

    /// One batch (a trigger), through its phases; it commits when `when` says.
    fn run_batch(&mut self, mut input: Input, when: When) -> Result<(), PipelineError> {
        if when == When::Cadence && self.held.is_none() {
            self.refresh_lookups()?;
        }
        let records = std::mem::take(&mut input.records);
        // Held triggers (commit cadence) already moved the last records read.
        let before = match self.held {
            Some(_) => &self.batch_records,
            None => &self.last_records,
        };
        self.batch_records = before.updated(&records);
        self.losses.extend(self.source.take_losses());
        let (records, right) = self.split_right(records);
        let (right, mut unreadable) = self.right_as_json(right)?;
        let (slices, mut dead, stats) = if self.is_stage_two() {
            self.take_in(records, input.now)?
        } else {
            let processed = self.process(records, input.now)?;
            (processed.slices, processed.dead, processed.stats)
        };
        dead.append(&mut unreadable);
        let prepared = self.route(&input, slices, dead, right)?;
        match self.hold(input, stats, prepared, when) {
            Some((input, stats, prepared)) => self.commit_batch(input, stats, prepared),
            None => Ok(()),
        }
    }

    /// Splits off the records of the joins' right topics: they go to the joins alone, not
    /// through the stages nor into the table.
    fn split_right(&self, records: Vec<Record>) -> (Vec<Record>, Vec<Record>) {
        if self.config.joins.is_empty() {
            return (records, Vec::new());
        }
        let right: Vec<&str> = self.config.right_topics().collect();
        records
            .into_iter()
            .partition(|r| !right.contains(&&*r.topic))
    }

    /// Commits a batch (one trigger, or held triggers together) and reports it.
    fn commit_batch(
        &mut self,
        input: Input,
        stats: process::ProcessStats,
        prepared: Prepared,
    ) -> Result<(), PipelineError> {
        let committed = match self.commit(&prepared) {
            Err(error) if error.is_fenced() => return self.fenced(&prepared, &error),
            committed => committed?,
        };
        self.positions = input.next.clone();
        if let Some(evolution) = &prepared.results.evolution {
            self.summary.columns_added += evolution.added.len() as u64;
            tracing::info!(
                batch_id = committed.mark.batch_id,
                added = ?evolution.added,
                widened = ?evolution.promoted,
                "the table's schema changed with the batch"
            );
        }
        self.planned = None; // committed: the table's schema now
        self.seen_committed();
        self.last_batch = committed.mark.batch_id;
        self.last_records = std::mem::take(&mut self.batch_records);
        self.committed = committed.mark.offsets.clone();
        self.losses.clear();
        self.stages.committed(&stats.stage_counts);
        self.report(&input, stats, &prepared, &committed);
        Ok(())
    }
}

impl Pipeline {
    /// At a batch boundary (never during a batch, nor between the triggers a commit
    /// cadence holds): brings the lookup tables to their newest versions, for the stages.
    fn refresh_lookups(&mut self) -> Result<(), PipelineError> {
        if self.lookups.is_empty() {
            return Ok(());
        }
        let refreshed = self.lookups.refresh();
        let refreshed = refreshed.inspect_err(|_| self.summary.lookup_refresh_failures += 1)?;
        self.current.set(refreshed);
        Ok(())
    }

    /// Before a replay: the lookup tables at exactly the versions the plan recorded.
    fn lookups_at(&mut self, plan: &Plan) -> Result<(), PipelineError> {
        if self.lookups.is_empty() {
            return Ok(());
        }
        let rebuilt = self.lookups.at(&plan.lookups);
        let rebuilt = rebuilt.inspect_err(|_| self.summary.lookup_refresh_failures += 1)?;
        self.current.set(rebuilt);
        Ok(())
    }
}

impl Batches for Pipeline {
    type Error = PipelineError;

    /// The brokers' end offsets; the brokers answering makes the pipeline ready.
    fn end_offsets(&mut self) -> Result<Offsets, PipelineError> {
        loop {
            match self.source.end_offsets() {
                Err(SourceError::Rebalanced) => self.rebalanced()?,
                ends => {
                    let ends = ends?;
                    self.brokers_answered();
                    return Ok(ends);
                }
            }
        }
    }

    /// Whether every partition's position reached `ends`. In a consumer group, only the
    /// partitions this process owns count: the others are other members' work.
    fn reached(&self, ends: &Offsets) -> bool {
        let grouped = self.config.source.mode == SourceMode::Group;
        ends.0
            .iter()
            .filter(|(tp, _)| !grouped || self.positions.get(tp).is_some())
            .all(|(tp, &end)| self.positions.get(tp).is_some_and(|p| p >= end))
    }

    fn batch(&mut self, ends: &Offsets, stop: &AtomicBool) -> Result<bool, PipelineError> {
        self.beat();
        if !self.wait_after_fences(stop) || !self.replay_planned(stop)? {
            return Ok(false);
        }
        let input = match self.read(ends, stop) {
            Err(PipelineError::Source(SourceError::Rebalanced)) => {
                self.rebalanced()?;
                return Ok(true);
            }
            input => input?,
        };
        let Some(input) = input else {
            tracing::info!("stopped while reading: the batch is abandoned; nothing was committed");
            return Ok(false);
        };
        if input.records.is_empty() {
            self.positions = input.next;
            return Ok(true);
        }
        self.run_batch(input, When::Cadence)?;
        Ok(true)
    }

    fn idle(&mut self) {
        self.beat();
        self.source.idle();
        self.look_at_catalog();
    }

    fn tick(&mut self, flush: bool) -> Result<(), PipelineError> {
        self.beat();
        if !self.replay_planned(&AtomicBool::new(false))? {
            return Ok(());
        }
        let now = Millis::now();
        let flushing = self.flushing(flush);
        let flush_all = self.flushing_all(&flushing);
        let due = match &self.tasks {
            Some(tasks) => tasks.due(now, &flushing),
            None => self
                .event_time
                .as_ref()
                .is_some_and(|et| et.due(now, flush_all)),
        };
        // Stage one tells the later stages where the run ended.
        let due = due || (flush && flush_all && self.outlets.feeds());
        if due {
            let mut input = self.no_records(now, flush);
            if flush && self.outlets.feeds() {
                input.read_to_end = self.read_to_end()?;
            }
            self.run_batch(input, When::Cadence)?;
        }
        self.commit_held(false)
    }

    fn settle(&mut self) -> Result<(), PipelineError> {
        self.commit_held(true)
    }
}
