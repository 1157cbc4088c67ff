//! The pipeline's side of event time by partition (`scale-out = "partitions"`, see
//! [`crate::event_time::tasks`]): every member of the group runs the pipeline on the
//! partitions it is given, each partition's task restored from the file the table's last
//! commit names for it; a batch another process planned and did not commit is replayed
//! on the partitions of it this process owns now, with its plan's processing time; window
//! tables take each batch once, by its plan's key ([`Fence::Keyed`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hasher;

use super::read::Input;
use super::{Pipeline, PipelineError};
use crate::checkpoint::{
    BATCH_ID, CLAIMS, COMMIT_ID, CommitMark, DATA_LOSS, DEAD_LETTERED, OFFSETS, PIPELINE,
    PLANNED_BATCH, RECORDS_LOST, RUN, STATE_SHARES,
};
use crate::event_time::state::shares::{Shares, shares_from_json};
use crate::event_time::state::{Plan, TriggerPlan};
use crate::event_time::tasks::{Tasks, Unfinished, may_be_replayed};
use crate::iceberg::Fence;
use crate::iceberg::compact::KeyedCommit;
use crate::record::{Offsets, TopicPartition};

/// A replay of a batch planned by this or another process, on some of its partitions.
#[derive(Debug, Clone)]
pub(super) struct Replaying {
    /// The key of the batch as planned ([`plan_key`]).
    key: String,
    /// The partitions replayed: those of the plan this process owns.
    partitions: BTreeSet<String>,
}

impl Pipeline {
    /// After a restart or a rebalance: each owned partition's task from the table's last
    /// commit; returns the first batch to replay, if any (the others wait their turn,
    /// [`Pipeline::next_replay`]).
    pub(super) fn recover_tasks(&mut self) -> Result<Option<Plan>, PipelineError> {
        self.replaying = None;
        let Some(et) = &self.event_time else {
            return Ok(None);
        };
        let name = &self.config.pipeline.name;
        let table = self.outputs.table().table();
        let last = table.last_mark_properties(name)?.unwrap_or_default();
        let shares: Shares = last
            .get(STATE_SHARES)
            .and_then(|s| shares_from_json(s))
            .unwrap_or_default();
        let claims: BTreeMap<String, String> = last
            .get(CLAIMS)
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or_default();
        let home = self.config.source.topics.first().map_or("", String::as_str);
        let mut tasks = Tasks::new(et, home);
        let location = table.location().to_string();
        let store = self.state.as_ref();
        let mut unfinished = tasks.recover(store, &location, name, &shares, &self.positions)?;
        tasks.note_claims(&claims);
        unfinished.sort_by_key(|u| u.plan.batch_id);
        unfinished.reverse();
        self.unfinished = unfinished;
        self.tasks = Some(tasks);
        self.check_co_partitioned(Some(&self.positions))?;
        self.load_seen()?;
        Ok(self.next_replay())
    }

    /// The next batch to replay, on the owned partitions it read (the others stay where
    /// they are), if any.
    pub(super) fn next_replay(&mut self) -> Option<Plan> {
        let Unfinished { plan, partitions } = self.unfinished.pop()?;
        let tasks = self.tasks.as_ref()?;
        let owned = |tp: &TopicPartition| partitions.contains(&tasks.task_of(tp));
        let restricted = restrict(&plan, owned, &self.positions)?;
        tracing::warn!(batch_id = plan.batch_id, partitions = ?partitions, "a batch was planned on partitions owned here but not committed: replaying it on them");
        self.replaying = Some(Replaying {
            key: plan_key(&plan),
            partitions,
        });
        Some(restricted)
    }

    /// The tasks that run in a batch: those of a replay, or those of every partition read.
    pub(super) fn task_partitions(&self, input: &Input) -> BTreeSet<String> {
        match (&self.replaying, &self.tasks) {
            (Some(replaying), _) => replaying.partitions.clone(),
            (None, Some(tasks)) => input.start.0.keys().map(|tp| tasks.task_of(tp)).collect(),
            (None, None) => BTreeSet::new(),
        }
    }

    /// What the derived tables (windows) must not hold yet for a batch to land there: its
    /// key for its partitions, with state by partition; else the main table's fence.
    pub(super) fn outputs_fence(&self, plan: &Plan, main: &Fence) -> Fence {
        let Some(tasks) = &self.tasks else {
            return main.clone();
        };
        let start = Offsets::from_json(&plan.start).unwrap_or_default();
        let end = Offsets::from_json(&plan.end).unwrap_or_default();
        let (key, replayed) = match &self.replaying {
            Some(r) => (r.key.clone(), Some(&r.partitions)),
            None => (plan_key(plan), None),
        };
        let partitions = start
            .0
            .iter()
            .filter(|(tp, _)| replayed.is_none_or(|r| r.contains(&tasks.task_of(tp))))
            .map(|(tp, &from)| (tp.to_string(), (from, end.get(tp).unwrap_or(from))))
            .collect();
        Fence::Keyed { key, partitions }
    }
}

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
        if self.main_recorded(&key, plan.now_ms.0)? {
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
        if self.main_recorded(&commit.key, commit.timestamp_ms)? {
            return Ok(Verdict::MayCount);
        }
        let starts = commit
            .range
            .iter()
            .map(|(p, &(s, _))| (p.clone(), s))
            .collect();
        // Without the plan recorded (an older commit), any plan of the same batch id.
        let same = |other: &Plan| match &commit.plan {
            Some(plan) => plan_identity(other) == *plan,
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

    /// Whether the main table, reloaded, recorded the batch `key` since `since_ms` (less
    /// the members' clocks' skew), or cannot tell.
    fn main_recorded(&mut self, key: &str, since_ms: i64) -> Result<bool, PipelineError> {
        self.outputs.table_mut().refresh()?;
        let table = self.outputs.table().table();
        let name = &self.config.pipeline.name;
        Ok(table.recorded_key_since(name, key, since_ms - CLOCK_SKEW_MS) != Some(false))
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
pub(super) fn plan_identity(plan: &Plan) -> String {
    format!(
        "{}/{}/{}",
        plan.batch_id, plan.now_ms.0, plan.session_start_ms.0
    )
}

/// A batch's key: a hash of its plan (id, offsets, processing times, flush), the same
/// when it is replayed by any process.
pub(super) fn plan_key(plan: &Plan) -> String {
    let mut hash = twox_hash::XxHash64::with_seed(0);
    hash.write_u64(plan.batch_id);
    hash.write(plan.start.as_bytes());
    hash.write(plan.end.as_bytes());
    hash.write_i64(plan.now_ms.0);
    hash.write_i64(plan.session_start_ms.0);
    hash.write_u8(u8::from(plan.flush));
    for trigger in &plan.held {
        hash.write(trigger.end.as_bytes());
        hash.write_i64(trigger.now_ms.0);
    }
    format!("{:016x}", hash.finish())
}

/// `plan` on the partitions `owned` says yes to alone: the other partitions of `positions`
/// start and end where they are (nothing of them is read). `None` if its offsets cannot
/// be read.
fn restrict(
    plan: &Plan,
    owned: impl Fn(&TopicPartition) -> bool,
    positions: &Offsets,
) -> Option<Plan> {
    let on = |json: &str| -> Option<String> {
        let planned = Offsets::from_json(json).ok()?;
        let mut offsets = positions.clone();
        for (tp, next) in planned.0 {
            if owned(&tp) {
                offsets.set(tp, next);
            }
        }
        Some(offsets.to_json())
    };
    let held = plan
        .held
        .iter()
        .map(|t| {
            Some(TriggerPlan {
                end: on(&t.end)?,
                ..t.clone()
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Plan {
        start: on(&plan.start)?,
        end: on(&plan.end)?,
        held,
        ..plan.clone()
    })
}
