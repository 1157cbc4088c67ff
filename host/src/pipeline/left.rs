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
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::partitioned::plan_key;
use super::{Pipeline, PipelineError};
use crate::checkpoint::{
    BATCH_ID, CLAIMS, COMMIT_ID, CommitMark, DATA_LOSS, DEAD_LETTERED, OFFSETS, PIPELINE,
    PLANNED_BATCH, RECORDS_LOST, RUN, STATE_SHARES,
};
use crate::event_time::delta::batch_of;
use crate::event_time::state::files::{partition_plan_path, write_plan_at};
use crate::event_time::state::shares::{Shares, shares_from_json};
use crate::event_time::state::{Plan, PlanFile};
use crate::event_time::tasks::{Pending, Tasks, may_be_replayed};
use crate::iceberg::Fence;
use crate::iceberg::compact::KeyedCommit;
use crate::record::Offsets;
use crate::retry::Backoff;

impl Pipeline {
    /// For a batch fenced off after some of its window commits landed: whether it may
    /// count still, so that its window rows must stay. It does if the main table recorded
    /// its key since it was planned (another member replayed it: the window tables held
    /// its rows already), or if every partition of it (of those it replays, for a replay)
    /// stands where it started with its plan's pointer there (their owners replay it next);
    /// and, unable to tell (the main table's history cut since), it is taken to. Where one
    /// moved on without it, or its pointer names another batch now (a batch left in part
    /// that this one's fence had replayed there), it can never count there, and a replay
    /// elsewhere would take its rows of that partition as its own: they go.
    pub(super) fn batch_may_count(&mut self, plan: &Plan) -> Result<bool, PipelineError> {
        let key = match &self.replaying {
            Some(r) => r.key.clone(),
            None => plan_key(plan),
        };
        let last = self.last_commit()?;
        if self.main_records(&key, plan.now_ms.0) != Some(false) {
            return Ok(true);
        }
        let start = Offsets::from_json(&plan.start).unwrap_or_default();
        let mut starts = by_partition(&start);
        if let Some(replaying) = &self.replaying {
            starts.retain(|p, _| replaying.partitions.contains(p));
        }
        let ours = plan_identity(plan);
        let pending = self.may_be_replayed(&last, &starts, |o| plan_identity(o) == ours)?;
        Ok(pending.everywhere())
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
            let verdict = self
                .last_commit()
                .and_then(|last| Ok((self.commit_may_count(&commit, &last)?, last)));
            match verdict {
                Ok((Verdict::Never, _)) => {}
                Ok((Verdict::UnlessClaimed(partitions), _)) if partitions.is_subset(claimed) => {}
                Ok((Verdict::UnlessClaimed(partitions), last)) => {
                    // Its member alone can commit it: claimed, those partitions fence it off.
                    if let Err(error) = self.claim(&partitions, &last) {
                        tracing::warn!(commit_id = %commit.commit_id, %error, "cannot claim the partitions of a batch left behind");
                        continue;
                    }
                    tracing::warn!(commit_id = %commit.commit_id, partitions = ?partitions, "claimed the partitions of a batch whose member left its window commit behind");
                    claimed.extend(partitions);
                }
                Ok((Verdict::ReplayOn(plan, partitions), _)) => {
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
                Ok((Verdict::MayCount, _)) => {
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
    /// names it (see [`Pipeline::batch_may_count`]; in either case, replayed here too on
    /// partitions of it this process owns where it was left); or it records every partition of the
    /// batch where the batch started, so that its member may still commit it, unless this
    /// process claims the partitions of it that it owns.
    fn commit_may_count(
        &self,
        commit: &KeyedCommit,
        last: &LastCommit,
    ) -> Result<Verdict, PipelineError> {
        let plan = commit.plan.as_deref().and_then(PlanFile::plan_of);
        match self.main_records(&commit.key, commit.timestamp_ms) {
            Some(true) => return self.replay_where_left(commit, plan, last),
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
        if self.may_be_replayed(last, &starts, same)?.anywhere() {
            // It may count: where another batch replaced its pointer on partitions of it
            // this process owns (a member frozen before saving), it is replayed here too.
            return self.replay_where_left(commit, plan, last);
        }
        let positions = by_partition(&last.offsets);
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
    fn claim(
        &mut self,
        partitions: &BTreeSet<String>,
        last: &LastCommit,
    ) -> Result<(), PipelineError> {
        let name = self.config.pipeline.name.clone();
        let field = |key: &str| -> BTreeMap<String, String> {
            let value = last.properties.get(key);
            (value.and_then(|v| serde_json::from_str(v).ok())).unwrap_or_default()
        };
        let pick = |recorded: BTreeMap<String, String>| {
            let of = |p: &String| (p.clone(), recorded.get(p).cloned());
            Some(partitions.iter().map(of).collect())
        };
        let mut start = Offsets::default();
        for (tp, &offset) in last.offsets.0.iter() {
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
        let mut extra: HashMap<String, String> = (last.properties.iter())
            .filter(|(key, _)| !NOT_CARRIED.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
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

    /// A batch of a window commit that counts or may (the main table recorded it, replayed
    /// by another member on some of its partitions, or pointers elsewhere name it) and
    /// fences this batch off: on the
    /// partitions of it this process owns that the table records where it started, having
    /// read records there or built on the state the table records there (not committed
    /// there, then), and where no pointer names it any more (another batch planned
    /// from the same offsets replaced it), it is replayed too: its pointers are put back
    /// from its commit's plan. Elsewhere it may count as it is.
    fn replay_where_left(
        &self,
        commit: &KeyedCommit,
        plan: Option<Plan>,
        last: &LastCommit,
    ) -> Result<Verdict, PipelineError> {
        let Some(plan) = plan else {
            return Ok(Verdict::MayCount);
        };
        let positions = by_partition(&last.offsets);
        let owned = self.tasks.as_ref().map(Tasks::claims).unwrap_or_default();
        let identity = plan_identity(&plan);
        let shares = last.shares();
        let recorded = |p: &String| shares.get(p).map_or(Some(0), |f| batch_of(f));
        let uncommitted = |p: &String| {
            let base = commit.bases.get(p);
            base.is_some_and(|&base| recorded(p).is_some_and(|r| r <= base))
        };
        let mut left = BTreeMap::new();
        for (p, &(start, end)) in &commit.range {
            let read = start < end || uncommitted(p);
            if !read || !owned.contains_key(p) || positions.get(p) != Some(&start) {
                continue;
            }
            let one = BTreeMap::from([(p.clone(), start)]);
            let same = |other: &Plan| plan_identity(other) == identity;
            if !self.may_be_replayed(last, &one, same)?.anywhere() {
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

    /// The main table's last commit of the pipeline, reloaded: what a verdict reads.
    fn last_commit(&mut self) -> Result<LastCommit, PipelineError> {
        self.outputs.table_mut().refresh()?;
        let table = self.outputs.table().table();
        let name = &self.config.pipeline.name;
        Ok(LastCommit {
            properties: table.last_mark_properties(name)?.unwrap_or_default(),
            offsets: (table.last_mark(name)?.map(|m| m.offsets)).unwrap_or_default(),
        })
    }

    /// Whether the main table (as last reloaded) recorded the batch `key` since `since_ms`
    /// (less the members' clocks' skew); `None`: it cannot tell.
    fn main_records(&self, key: &str, since_ms: i64) -> Option<bool> {
        let table = self.outputs.table().table();
        let name = &self.config.pipeline.name;
        table.recorded_key_since(name, key, since_ms - CLOCK_SKEW_MS)
    }

    /// [`may_be_replayed`] against the main table's `last` commit.
    fn may_be_replayed(
        &self,
        last: &LastCommit,
        starts: &BTreeMap<String, i64>,
        same: impl Fn(&Plan) -> bool,
    ) -> Result<Pending, PipelineError> {
        let name = self.config.pipeline.name.as_str();
        let shares = last.shares();
        let home = self.config.source.topics.first().map_or("", String::as_str);
        let at = (self.outputs.table().table().location(), name, home);
        let positions = (&by_partition(&last.offsets), &shares);
        Ok(may_be_replayed(
            self.state.as_ref(),
            at,
            starts,
            same,
            positions,
        )?)
    }
}

/// The main table's last commit of the pipeline, read once for a verdict.
struct LastCommit {
    /// Its summary properties.
    properties: HashMap<String, String>,
    /// The offsets it records.
    offsets: Offsets,
}

impl LastCommit {
    /// The state file it records for each partition (`sluice.state-shares`).
    fn shares(&self) -> Shares {
        (self.properties.get(STATE_SHARES))
            .and_then(|s| shares_from_json(s))
            .unwrap_or_default()
    }
}

/// A member fenced off over and over (a batch left by another member that may still count
/// fences its batches off until the partitions' owner acts on it): it waits before each
/// new try, twice as long each time up to [`FENCED_BACKOFF`]'s cap, instead of reading the
/// tables again at once. A commit ends the streak.
#[derive(Debug, Default)]
pub(super) struct FenceStreak {
    /// The last batch committed when the streak began.
    since_batch: u64,
    /// Batches fenced off since.
    fences: u32,
    /// Whether the next try waits first.
    owed: bool,
}

/// The waits between tries of a member fenced off over and over (with jitter: members
/// fencing each other off do not try again together).
const FENCED_BACKOFF: Backoff =
    Backoff::doubling(Duration::from_millis(20), Duration::from_secs(2)).with_jitter();

impl FenceStreak {
    /// A batch was fenced off, `last_batch` being the last committed: the first of a
    /// streak tries again at once, the others after a wait.
    pub(super) fn fenced(&mut self, last_batch: u64) {
        if last_batch != self.since_batch {
            *self = FenceStreak {
                since_batch: last_batch,
                ..FenceStreak::default()
            };
        }
        self.fences += 1;
        self.owed = self.fences > 1;
    }

    /// The wait owed before the next try, once.
    fn take_wait(&mut self) -> Option<Duration> {
        std::mem::take(&mut self.owed).then(|| FENCED_BACKOFF.wait(self.fences - 1))
    }
}

impl Pipeline {
    /// Waits out what a streak of fenced batches owes before the next try ([`FenceStreak`]);
    /// returns `false` if stopped meanwhile.
    pub(super) fn wait_after_fences(&mut self, stop: &AtomicBool) -> bool {
        let Some(wait) = self.fence_streak.take_wait() else {
            return true;
        };
        tracing::info!(
            fenced = self.fence_streak.fences,
            ?wait,
            "fenced off again: waiting before the next try"
        );
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            self.beat();
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
        true
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_of_fences_waits_longer_each_time_and_a_commit_ends_it() {
        let mut streak = FenceStreak::default();
        streak.fenced(4);
        assert_eq!(
            streak.take_wait(),
            None,
            "the first fence tries again at once"
        );
        let mut waits = Vec::new();
        for _ in 0..9 {
            streak.fenced(4);
            waits.push(streak.take_wait().unwrap());
            assert_eq!(streak.take_wait(), None, "owed once");
        }
        let ms = |d: &Duration| d.as_millis();
        assert!((20..=40).contains(&ms(&waits[0])), "{waits:?}");
        assert!((40..=80).contains(&ms(&waits[1])), "{waits:?}");
        assert!((2000..=4000).contains(&ms(&waits[8])), "{waits:?}");
        streak.fenced(5); // a batch committed since
        assert_eq!(streak.take_wait(), None);
    }
}
