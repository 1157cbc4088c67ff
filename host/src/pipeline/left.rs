//! What a group member's batch leaves behind when it is fenced off after some of its
//! window commits landed, and what the partitions' next owner does about a window commit
//! another member left behind (scale-out by partition, see [`super::partitioned`]).
//!
//! A batch counts once the main table records it. A member fenced off between its window
//! commits and its table commit takes its window rows back, unless its batch counts after
//! all ([`Pipeline::batch_may_count`]: replayed by another member, or to be). Killed before
//! that, it leaves them, and their entries fence the partitions' later batches off the
//! window tables: the next owner decides ([`Pipeline::take_back_left_commits`]) whether
//! that batch never counts (it takes the rows back), counts unless claimed (it claims the
//! partitions, [`crate::checkpoint::CLAIMS`], then takes them back), or counts (it replays
//! the batch where its plan's pointers were replaced).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::partitioned::plan_key;
use super::{Pipeline, PipelineError};
use crate::checkpoint::{
    BATCH_ID, CLAIMS, COMMIT_ID, CommitMark, DATA_LOSS, DEAD_LETTERED, OFFSETS, PIPELINE,
    PLANNED_BATCH, RECORDS_LOST, RUN, STATE_SHARES,
};
use crate::event_time::state::files::{partition_plan_path, write_plan_at};
use crate::event_time::state::shares::shares_from_json;
use crate::event_time::state::{Plan, PlanFile};
use crate::event_time::tasks::{Tasks, may_be_replayed};
use crate::iceberg::Fence;
use crate::iceberg::compact::KeyedCommit;
use crate::record::Offsets;

impl Pipeline {
    /// For a batch fenced off after some of its window commits landed: whether it may
    /// count still, so that its window rows must stay. It does if the main table recorded
    /// its key since it was planned (another member replayed it: the window tables held
    /// its rows already), or if a partition of it stands where it started with its plan's
    /// pointer there (its owner replays it next); and, unable to tell (the main table's
    /// history cut since), it is taken to.
    pub(super) fn batch_may_count(&mut self, plan: &Plan) -> Result<bool, PipelineError> {
        let key = match &self.replaying {
            Some(r) => r.key.clone(),
            None => plan_key(plan),
        };
        if self.main_records(&key, plan.now_ms.0)? != Some(false) {
            return Ok(true);
        }
        let start = Offsets::from_json(&plan.start).unwrap_or_default();
        let starts = by_partition(&start);
        let ours = plan_identity(plan);
        self.may_be_replayed(&starts, |other| plan_identity(other) == ours)
    }

    /// After a window table fenced this batch off (`fence`): takes back the window commits
    /// whose entries did it if their batches can never count (their member stopped
    /// between such a commit and taking it back, see [`Pipeline::commit_may_count`]).
    /// Returns whether it took one back (the batch's window commits are then tried again);
    /// `claimed` gathers the partitions it claimed over the batch's tries.
    pub(super) fn take_back_left_commits(
        &mut self,
        fence: &Fence,
        claimed: &mut BTreeSet<String>,
    ) -> bool {
        let name = self.config.pipeline.name.clone();
        let mut taken = false;
        for (index, commit) in self.outputs.fencing_commits(&name, fence) {
            match self.commit_may_count(&commit) {
                Ok(Verdict::Never) => {}
                Ok(Verdict::UnlessClaimed(partitions)) if partitions.is_subset(claimed) => {}
                Ok(Verdict::UnlessClaimed(partitions)) => {
                    // Its member alone can commit it: claimed, those partitions fence it off.
                    if let Err(error) = self.claim(&partitions) {
                        tracing::warn!(commit_id = %commit.commit_id, %error, "cannot claim the partitions of a batch left behind");
                        continue;
                    }
                    tracing::warn!(commit_id = %commit.commit_id, partitions = ?partitions, "claimed the partitions of a batch whose member left its window commit behind");
                    claimed.extend(partitions);
                }
                Ok(Verdict::ReplayOn(plan, partitions)) => {
                    // Replayed once this batch, fenced off, reads its positions again.
                    match self.point_to(&plan, &partitions) {
                        Ok(()) => {
                            tracing::warn!(commit_id = %commit.commit_id, partitions = ?partitions, "a batch another member replayed in part fences this batch off: replaying it on these partitions too")
                        }
                        Err(error) => {
                            tracing::warn!(commit_id = %commit.commit_id, %error, "cannot point to a batch to replay")
                        }
                    }
                    continue;
                }
                Ok(Verdict::MayCount) => {
                    tracing::info!(commit_id = %commit.commit_id, key = %commit.key, "a window commit of a batch that may still count fences this batch off");
                    continue;
                }
                Err(error) => {
                    tracing::warn!(commit_id = %commit.commit_id, %error, "cannot tell whether the batch of a window commit that fences this batch off may count");
                    continue;
                }
            }
            match self.outputs.take_back(index, &name, &commit) {
                Ok(done) => taken |= done,
                Err(error) => {
                    tracing::warn!(commit_id = %commit.commit_id, %error, "cannot take back a window commit of a batch that never counted");
                }
            }
        }
        taken
    }

    /// Whether the batch of a window commit found in a table may still count: the main
    /// table recorded its key since (or cannot tell), or a partition's pointer still
    /// names it (see [`Pipeline::batch_may_count`]); or it records every partition of the
    /// batch where the batch started, so that its member may still commit it, unless this
    /// process claims the partitions of it that it owns.
    fn commit_may_count(&mut self, commit: &KeyedCommit) -> Result<Verdict, PipelineError> {
        let plan = commit.plan.as_deref().and_then(PlanFile::plan_of);
        match self.main_records(&commit.key, commit.timestamp_ms)? {
            Some(true) => return self.replay_where_left(commit, plan),
            None => return Ok(Verdict::MayCount),
            Some(false) => {}
        }
        let starts = commit
            .range
            .iter()
            .map(|(p, &(s, _))| (p.clone(), s))
            .collect();
        // Without the plan recorded (an older commit), any plan of the same batch id.
        let identity = plan.as_ref().map(plan_identity);
        let same = |other: &Plan| match &identity {
            Some(identity) => plan_identity(other) == *identity,
            None => Some(other.batch_id) == commit.planned_batch,
        };
        if self.may_be_replayed(&starts, same)? {
            return Ok(Verdict::MayCount);
        }
        let name = &self.config.pipeline.name;
        let table = self.outputs.table().table();
        let positions = table
            .last_mark(name)?
            .map(|m| m.offsets)
            .unwrap_or_default();
        let positions = by_partition(&positions);
        let unmoved = (commit.range.iter())
            .all(|(p, &(start, _))| positions.get(p).is_none_or(|&m| m == start));
        if !unmoved {
            return Ok(Verdict::Never);
        }
        let owned = self.tasks.as_ref().map(Tasks::claims).unwrap_or_default();
        let ours: BTreeSet<String> = (commit.range.keys())
            .filter(|p| owned.contains_key(*p))
            .cloned()
            .collect();
        Ok(match ours.is_empty() {
            true => Verdict::MayCount,
            false => Verdict::UnlessClaimed(ours),
        })
    }

    /// Claims `partitions` (owned by this process) in the main table: a snapshot without
    /// data that records this process's claim of them (`sluice.claims`), behind their
    /// offsets, state files and claims as the table records them, carrying the rest of the
    /// last commit's properties. A batch planned before, by any member, no longer commits.
    fn claim(&mut self, partitions: &BTreeSet<String>) -> Result<(), PipelineError> {
        let name = self.config.pipeline.name.clone();
        self.outputs.table_mut().refresh()?;
        let table = self.outputs.table().table();
        let last = table.last_mark_properties(&name)?.unwrap_or_default();
        let positions = table
            .last_mark(&name)?
            .map(|m| m.offsets)
            .unwrap_or_default();
        let field = |key: &str| -> BTreeMap<String, String> {
            (last.get(key).and_then(|v| serde_json::from_str(v).ok())).unwrap_or_default()
        };
        let pick = |recorded: BTreeMap<String, String>| {
            let of = |p: &String| (p.clone(), recorded.get(p).cloned());
            Some(partitions.iter().map(of).collect())
        };
        let mut start = Offsets::default();
        for (tp, &offset) in positions.0.iter() {
            if partitions.contains(&tp.to_string()) {
                start.set(tp.clone(), offset);
            }
        }
        let fence = Fence::Owns {
            start: start.clone(),
            states: pick(field(STATE_SHARES)),
            claims: pick(field(CLAIMS)),
        };
        let token = format!("{}@{}", self.run, crate::units::Millis::now().0);
        let ours: BTreeMap<&String, &str> =
            partitions.iter().map(|p| (p, token.as_str())).collect();
        let mut extra: HashMap<String, String> = last
            .into_iter()
            .filter(|(key, _)| !NOT_CARRIED.contains(&key.as_str()))
            .collect();
        extra.insert(
            CLAIMS.to_string(),
            serde_json::to_string(&ours).unwrap_or_default(),
        );
        extra.insert(RUN.to_string(), token.clone());
        let planned = CommitMark {
            pipeline: name,
            batch_id: 0,
            offsets: start,
        };
        self.outputs
            .table_mut()
            .commit_empty(&planned, &fence, extra)?;
        if let Some(tasks) = &mut self.tasks {
            tasks.note_claim(partitions, &token);
        }
        Ok(())
    }

    /// `fence` with the claims this process holds now: those of its own claims made since
    /// the batch was planned, whose table commit they do not fence off.
    pub(super) fn with_own_claims(&self, fence: &Fence) -> Fence {
        match (fence, &self.tasks) {
            (Fence::Owns { start, states, .. }, Some(tasks)) => Fence::Owns {
                start: start.clone(),
                states: states.clone(),
                claims: Some(tasks.claims()),
            },
            _ => fence.clone(),
        }
    }

    /// A batch of a window commit that counts (the main table recorded it, replayed by
    /// another member on some of its partitions) and fences this batch off: on the
    /// partitions of it this process owns that the table records where it started, having
    /// read records there, and where no pointer names it any more (another batch planned
    /// from the same offsets replaced it), it is replayed too: its pointers are put back
    /// from its commit's plan. Elsewhere it may count as it is.
    fn replay_where_left(
        &mut self,
        commit: &KeyedCommit,
        plan: Option<Plan>,
    ) -> Result<Verdict, PipelineError> {
        let Some(plan) = plan else {
            return Ok(Verdict::MayCount);
        };
        let name = &self.config.pipeline.name;
        let positions = self.outputs.table().table().last_mark(name)?;
        let positions = by_partition(&positions.map(|m| m.offsets).unwrap_or_default());
        let owned = self.tasks.as_ref().map(Tasks::claims).unwrap_or_default();
        let identity = plan_identity(&plan);
        let mut left = BTreeMap::new();
        for (p, &(start, end)) in &commit.range {
            if start >= end || !owned.contains_key(p) || positions.get(p) != Some(&start) {
                continue;
            }
            let one = BTreeMap::from([(p.clone(), start)]);
            if !self.may_be_replayed(&one, |other| plan_identity(other) == identity)? {
                left.insert(p.clone(), start);
            }
        }
        Ok(match left.is_empty() {
            true => Verdict::MayCount,
            false => Verdict::ReplayOn(Box::new(plan), left),
        })
    }

    /// Puts back the pointers of `plan` on `partitions` (at their starts): this process
    /// replays it there once it reads its positions again.
    fn point_to(
        &self,
        plan: &Plan,
        partitions: &BTreeMap<String, i64>,
    ) -> Result<(), PipelineError> {
        let location = self.outputs.table().table().location();
        let name = &self.config.pipeline.name;
        for (partition, &start) in partitions {
            let at = partition_plan_path(location, name, partition, start);
            write_plan_at(self.state.as_ref(), &at, plan, None)?;
        }
        Ok(())
    }

    /// Whether the main table, reloaded, recorded the batch `key` since `since_ms` (less
    /// the members' clocks' skew); `None`: it cannot tell.
    fn main_records(&mut self, key: &str, since_ms: i64) -> Result<Option<bool>, PipelineError> {
        self.outputs.table_mut().refresh()?;
        let table = self.outputs.table().table();
        let name = &self.config.pipeline.name;
        Ok(table.recorded_key_since(name, key, since_ms - CLOCK_SKEW_MS))
    }

    /// [`may_be_replayed`] against the main table's last commit.
    fn may_be_replayed(
        &self,
        starts: &BTreeMap<String, i64>,
        same: impl Fn(&Plan) -> bool,
    ) -> Result<bool, PipelineError> {
        let name = self.config.pipeline.name.as_str();
        let table = self.outputs.table().table();
        let last = table.last_mark_properties(name)?.unwrap_or_default();
        let positions = table
            .last_mark(name)?
            .map(|m| m.offsets)
            .unwrap_or_default();
        let shares = last
            .get(STATE_SHARES)
            .and_then(|s| shares_from_json(s))
            .unwrap_or_default();
        let home = self.config.source.topics.first().map_or("", String::as_str);
        let at = (table.location(), name, home);
        let positions = (&by_partition(&positions), &shares);
        Ok(may_be_replayed(
            self.state.as_ref(),
            at,
            starts,
            same,
            positions,
        )?)
    }
}

/// What [`Pipeline::commit_may_count`] found.
enum Verdict {
    /// The batch may count: its rows stay.
    MayCount,
    /// It never will: its rows are taken back.
    Never,
    /// Its member may still commit it unless this process claims these partitions of it.
    UnlessClaimed(BTreeSet<String>),
    /// It counts, replayed elsewhere; this process replays it on these partitions (where
    /// each starts) too.
    ReplayOn(Box<Plan>, BTreeMap<String, i64>),
}

/// The last commit's summary properties a claim does not carry: its mark's own, and what
/// only says what a batch did.
const NOT_CARRIED: &[&str] = &[
    PIPELINE,
    BATCH_ID,
    COMMIT_ID,
    OFFSETS,
    PLANNED_BATCH,
    RUN,
    DEAD_LETTERED,
    DATA_LOSS,
    RECORDS_LOST,
];

/// Offsets by `topic/partition`.
fn by_partition(offsets: &Offsets) -> BTreeMap<String, i64> {
    offsets
        .0
        .iter()
        .map(|(tp, &o)| (tp.to_string(), o))
        .collect()
}

/// How far apart the members' clocks may be: the main table's history is searched for a
/// batch's key back to this long before the batch was planned.
const CLOCK_SKEW_MS: i64 = 10 * 60 * 1000;

/// Which plan a batch is, the same in a replay of it on some of its partitions (whose
/// offsets are others): its id, processing time and session start.
fn plan_identity(plan: &Plan) -> String {
    format!(
        "{}/{}/{}",
        plan.batch_id, plan.now_ms.0, plan.session_start_ms.0
    )
}
