//! The commit phase: a batch's side effects, in the one order that keeps every output
//! exactly once (or at least once with stable keys), with a crash point after each step.
//! [`SEQUENCE`] is that order; [`crate::sink`] explains it.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use super::cpu;
use super::crash::CrashPoint;
use super::route::Prepared;
use super::{Pipeline, PipelineError};
use crate::checkpoint::lookups::LOOKUPS;
use crate::checkpoint::{
    BATCH_KEYS, BATCH_PLAN, CommitMark, DATA_LOSS, DEAD_LETTERED, LAST_RECORDS, RECORDS_LOST, RUN,
    STATE, STATE_SHARES, WATERMARK,
};
use crate::event_time::delta::Chain;
use crate::event_time::extract::format_micros;
use crate::event_time::state;
use crate::event_time::state::PlanFile;
use crate::event_time::state::shares::shares_to_json;
use crate::event_time::tasks;
use crate::iceberg::maintain::cutoff_ms;
use crate::sink::{Commit, Delivered, Expired};

/// What saving the state wrote: one file (and its size), or with state by partition a
/// file per partition.
enum Written {
    File(Option<(String, u64)>),
    Shares(tasks::Saved),
}

/// One step of a batch's commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStep {
    /// The state file (with the batch's plan) beside the outputs' invisible writes (the
    /// table's data files); without event time, the plan alone when the batch saw lookup
    /// tables. From here on a crash replays exactly this batch.
    Stage,
    /// At-least-once deliveries, acknowledged: dead letters, late topic, window topics.
    /// After the state file, so that a replay sends the very same records.
    Send,
    /// Exactly-once outputs other than the table (window tables), each skipping a batch it
    /// already holds. Before the table, so that a replay finds them done.
    CommitOutputs,
    /// The table: data, offsets and the state's name in one snapshot, the checkpoint.
    Checkpoint,
    /// Housekeeping: the group offsets (monitoring), the outputs' after-commit hooks, old
    /// state files, and snapshot expiry when due (`[sink.expire-snapshots]`).
    AfterCommit,
}

/// The order of a batch's side effects, and the crash points each step ends at.
pub const SEQUENCE: [(CommitStep, &[CrashPoint]); 5] = [
    (
        CommitStep::Stage,
        &[CrashPoint::AfterState, CrashPoint::AfterWrite],
    ),
    (CommitStep::Send, &[CrashPoint::AfterDeadLetter]),
    (CommitStep::CommitOutputs, &[CrashPoint::AfterWindowCommit]),
    (CommitStep::Checkpoint, &[CrashPoint::AfterCommit]),
    (CommitStep::AfterCommit, &[]),
];

/// What the commit phase did.
#[derive(Debug, Default)]
pub(super) struct Committed {
    /// What the table staged: rows, files, bytes.
    pub(super) table: Delivered,
    /// The state file's path and size, with event time.
    pub(super) state_file: Option<(String, u64)>,
    /// With state by partition: the file that holds each partition's state, the bytes
    /// written, and the files to delete once committed.
    pub(super) shares: Option<tasks::Saved>,
    /// Whether the batch's plan was written (with event time or lookup tables): from then
    /// on a crash replays it exactly.
    pub(super) planned: bool,
    /// Time writing the data files and the state file (side by side).
    pub(super) write: Duration,
    /// Time writing the state file.
    pub(super) state: Duration,
    /// Time sending to topics, until acknowledged.
    pub(super) send: Duration,
    /// Time committing the tables.
    pub(super) commit: Duration,
    /// The process's CPU time writing (data and state files), sending, and committing.
    pub(super) write_cpu: Duration,
    pub(super) send_cpu: Duration,
    pub(super) commit_cpu: Duration,
    /// Table commits retried after a conflict with another commit.
    pub(super) retries: u64,
    /// The mark committed (in a consumer group, built at commit time).
    pub(super) mark: CommitMark,
    /// Snapshot expiry after the commit, when it was due.
    pub(super) expired: Expired,
}

impl Pipeline {
    /// Runs [`SEQUENCE`] for a prepared batch.
    pub(super) fn commit(&mut self, prepared: &Prepared) -> Result<Committed, PipelineError> {
        let mut committed = Committed::default();
        if self.tasks.is_some() {
            let batch_id = prepared.mark.batch_id;
            self.crash_if_at(CrashPoint::BeforeState, &committed, batch_id)?;
        }
        for (step, points) in SEQUENCE {
            let t = Instant::now();
            let (done, cpu) = cpu::in_process(|| self.commit_step(step, prepared, &mut committed));
            if let Err(error) = done {
                self.undo_if_fenced(step, &error, prepared)?;
                return Err(error);
            }
            let spent = t.elapsed();
            match step {
                CommitStep::Stage => (committed.write, committed.write_cpu) = (spent, cpu),
                CommitStep::Send => (committed.send, committed.send_cpu) = (spent, cpu),
                CommitStep::CommitOutputs | CommitStep::Checkpoint => {
                    committed.commit += spent;
                    committed.commit_cpu += cpu;
                }
                CommitStep::AfterCommit => committed.commit_cpu += cpu,
            }
            for &point in points {
                self.crash_if_at(point, &committed, prepared.mark.batch_id)?;
            }
        }
        Ok(committed)
    }

    /// A group member's batch fenced off a window table or the main table after some of
    /// its window commits landed will never count, unless another member replayed it or
    /// will (see [`Pipeline::batch_may_count`]): they are taken back (see
    /// [`crate::iceberg::IcebergTable::undo_keyed`]).
    fn undo_if_fenced(
        &mut self,
        step: CommitStep,
        error: &PipelineError,
        prepared: &Prepared,
    ) -> Result<(), PipelineError> {
        let late = matches!(step, CommitStep::CommitOutputs | CommitStep::Checkpoint);
        if !late || self.tasks.is_none() || !error.is_fenced_off() {
            return Ok(());
        }
        match self.batch_may_count(&prepared.plan) {
            Ok(false) => {
                let batch_id = prepared.mark.batch_id;
                self.crash
                    .at(CrashPoint::BeforeUndo, batch_id)
                    .map_err(|point| PipelineError::Crashed { point, batch_id })?;
                let key = self
                    .outputs_fence(&prepared.plan, &prepared.fence)
                    .batch_key();
                self.outputs.undo_others(key.as_deref().unwrap_or_default());
            }
            Ok(true) => {
                tracing::info!(
                    batch_id = prepared.plan.batch_id,
                    "the fenced batch was or will be replayed by its partitions' owner: its window rows stay"
                );
            }
            Err(error) => {
                tracing::warn!(%error, batch_id = prepared.plan.batch_id, "cannot tell whether the fenced batch will be replayed: its window rows stay");
            }
        }
        Ok(())
    }

    /// Crashes (or holds) the batch at `point` if the test asked for it and the batch
    /// passes there.
    fn crash_if_at(
        &self,
        point: CrashPoint,
        committed: &Committed,
        batch_id: u64,
    ) -> Result<(), PipelineError> {
        if !self.passes(point, committed) {
            return Ok(());
        }
        self.crash
            .at(point, batch_id)
            .map_err(|point| PipelineError::Crashed { point, batch_id })
    }

    /// Whether a batch passes `point`: the state point only with a plan (and a state file
    /// with event time), the window point only with windows or joins.
    fn passes(&self, point: CrashPoint, committed: &Committed) -> bool {
        match point {
            CrashPoint::AfterState => committed.planned,
            CrashPoint::AfterWindowCommit | CrashPoint::AfterFenceCheck => {
                !self.config.windows.is_empty() || !self.config.joins.is_empty()
            }
            _ => true,
        }
    }

    fn commit_step(
        &mut self,
        step: CommitStep,
        prepared: &Prepared,
        committed: &mut Committed,
    ) -> Result<(), PipelineError> {
        let results = &prepared.results;
        match step {
            CommitStep::Stage => self.stage(prepared, committed)?,
            CommitStep::Send => self.outputs.send(results)?,
            CommitStep::CommitOutputs => {
                let mut plan = HashMap::new();
                if self.tasks.is_some() {
                    let json = PlanFile::json_of(&prepared.plan);
                    plan.insert(BATCH_PLAN.to_string(), json);
                }
                if self.tasks.is_some() {
                    let table = self.outputs.table_mut();
                    table.check_fence(&prepared.mark, &prepared.fence)?;
                    let batch_id = prepared.mark.batch_id;
                    self.crash_if_at(CrashPoint::AfterFenceCheck, committed, batch_id)?;
                }
                let fence = self.outputs_fence(&prepared.plan, &prepared.fence);
                let commit = Commit {
                    mark: &prepared.mark,
                    fence: &fence,
                    properties: &plan,
                };
                self.commit_others(results, commit)?;
            }
            CommitStep::Checkpoint => {
                let properties = self.summary_properties(prepared, committed);
                let fence = self.with_own_claims(&prepared.fence);
                let commit = Commit {
                    mark: &prepared.mark,
                    fence: &fence,
                    properties: &properties,
                };
                committed.retries = self.outputs.checkpoint(results, commit)?.retries;
                let landed = self.outputs.table().landed();
                committed.mark = landed.cloned().unwrap_or_else(|| prepared.mark.clone());
            }
            CommitStep::AfterCommit => {
                self.source.acknowledge(&prepared.mark.offsets);
                self.outputs.after_commit(&prepared.mark);
                if let Some(saved) = &committed.shares {
                    self.forget(&saved.obsolete);
                }
                if committed.planned && self.tasks.is_none() {
                    let location = self.outputs.table().table().location();
                    let name = &prepared.mark.pipeline;
                    let chain_start = match &self.event_time {
                        Some(et) => et.chain().map_or(0, Chain::first_batch),
                        None => u64::MAX, // plans alone: no state chain to keep
                    };
                    let batch_id = prepared.mark.batch_id;
                    state::forget_old(self.state.as_ref(), location, name, batch_id, chain_start);
                }
                committed.expired = self.expire_if_due();
            }
        }
        Ok(())
    }

    /// Step 3, the window tables' commits; with state by partition, a batch fenced off by
    /// the window commit of a batch that will never count (its member stopped before
    /// taking it back) takes that commit back and tries again, once per window table.
    fn commit_others(
        &mut self,
        results: &crate::sink::Results,
        commit: Commit<'_>,
    ) -> Result<(), PipelineError> {
        let mut tries = self.config.windows.len() + self.config.joins.len();
        let mut claimed = std::collections::BTreeSet::new();
        loop {
            let error = match self.outputs.commit_others(results, commit) {
                Ok(()) => return Ok(()),
                Err(error) => PipelineError::from(error),
            };
            let retry = tries > 0 && self.tasks.is_some() && error.is_fenced_off();
            if !retry || !self.take_back_left_commits(commit.fence, &mut claimed) {
                return Err(error);
            }
            tries -= 1;
        }
    }

    /// With state by partition, after a commit: deletes the files it made obsolete (a
    /// failure is logged: `sluice maintain` deletes what is left).
    fn forget(&self, files: &[String]) {
        for file in files {
            if let Err(error) = self.state.delete(file) {
                tracing::debug!(%error, file, "cannot delete an old state file");
            }
        }
    }

    /// Expires old snapshots of the tables every `every-commits` commits, with
    /// `[sink.expire-snapshots]`. The expiry keeps the snapshot carrying each pipeline's
    /// latest mark and leaves the main branch where it is, so the next commit's fence
    /// holds; a failure is logged and counted, and tried again at the next commit.
    fn expire_if_due(&mut self) -> Expired {
        let Some(policy) = self.config.sink.expire_snapshots else {
            return Expired::default();
        };
        self.commits_since_expiry += 1;
        if self.commits_since_expiry < policy.every_commits {
            return Expired::default();
        }
        self.commits_since_expiry = 0;
        let cutoff = cutoff_ms(SystemTime::now(), policy.older_than);
        let expired = self.outputs.expire_snapshots(cutoff, policy.retain_last);
        tracing::debug!(
            snapshots = expired.snapshots,
            failures = expired.failures,
            "expired snapshots"
        );
        expired
    }

    /// Writes the state file beside the outputs' staged files.
    fn stage(
        &mut self,
        prepared: &Prepared,
        committed: &mut Committed,
    ) -> Result<(), PipelineError> {
        let location = self.outputs.table().table().location().to_string();
        if self.event_time.is_none() && !self.lookups.is_empty() {
            let name = &prepared.mark.pipeline;
            let t = Instant::now();
            state::write_plan(self.state.as_ref(), &location, name, &prepared.plan, None)?;
            committed.state = t.elapsed();
            committed.planned = true;
        }
        let (store, event_time, run) = (self.state.as_ref(), self.event_time.as_mut(), &self.run);
        let tasks = self.tasks.as_mut();
        let replayed = self.replaying.as_ref().map(|r| &r.partitions);
        let outputs = &mut self.outputs;
        let (saved, staged) = std::thread::scope(|scope| {
            let saving = scope.spawn(|| {
                let t = Instant::now();
                let name = &prepared.mark.pipeline;
                if let Some(tasks) = tasks {
                    let shares = tasks.save(store, &location, name, run, &prepared.plan, replayed);
                    return shares.map(|s| (Written::Shares(s), t.elapsed()));
                }
                let saved = event_time
                    .map(|et| et.save(store, &location, name, run, &prepared.plan))
                    .transpose();
                saved.map(|file| (Written::File(file), t.elapsed()))
            });
            let staged = outputs.stage(&prepared.results);
            let saved = saving
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (saved, staged)
        });
        let (saved, state_time) = saved?;
        committed.table = staged?;
        match saved {
            Written::File(file) => {
                committed.planned |= file.is_some();
                committed.state_file = file;
            }
            Written::Shares(shares) => {
                committed.planned = true;
                committed.shares = Some(shares);
            }
        }
        committed.state += state_time;
        Ok(())
    }

    /// The summary properties of the table's snapshot beside the commit mark: the dead
    /// letters, the stages' versions, the state file and the watermark.
    fn summary_properties(
        &self,
        prepared: &Prepared,
        committed: &Committed,
    ) -> HashMap<String, String> {
        let mut properties = HashMap::from([
            (
                DEAD_LETTERED.to_string(),
                prepared.results.dead.len().to_string(),
            ),
            (RUN.to_string(), self.run.clone()),
        ]);
        properties.extend(self.stages.summary_properties());
        if let Some((path, _)) = &committed.state_file {
            properties.insert(STATE.to_string(), path.clone());
        }
        if let Some(saved) = &committed.shares {
            properties.insert(STATE_SHARES.to_string(), shares_to_json(&saved.shares));
            // The batch's key by partition: a member fenced off after its window commits
            // finds there whether another replayed the batch (see `batch_may_count`).
            let keyed = self.outputs_fence(&prepared.plan, &prepared.fence);
            properties.extend(keyed.batch_keys().map(|k| (BATCH_KEYS.to_string(), k)));
        }
        properties.extend(self.seen_property());
        if !prepared.plan.lookups.is_empty()
            && let Ok(versions) = serde_json::to_string(&prepared.plan.lookups)
        {
            properties.insert(LOOKUPS.to_string(), versions);
        }
        if let Some(w) = prepared.event_time.and_then(|e| e.watermark) {
            properties.insert(WATERMARK.to_string(), format_micros(w));
        }
        if !self.batch_records.0.is_empty() {
            properties.insert(LAST_RECORDS.to_string(), self.batch_records.to_json());
        }
        if !self.losses.is_empty() {
            let notes: Vec<String> = self.losses.iter().map(ToString::to_string).collect();
            let lost: i64 = self.losses.iter().filter_map(|l| l.records).sum();
            properties.insert(DATA_LOSS.to_string(), notes.join("; "));
            properties.insert(RECORDS_LOST.to_string(), lost.to_string());
        }
        properties
    }
}
