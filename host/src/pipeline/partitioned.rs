//! The pipeline's side of event time by partition (`scale-out = "partitions"`, see
//! [`crate::event_time::tasks`]): every member of the group runs the pipeline on the
//! partitions it is given, each partition's task restored from the file the table's last
//! commit names for it; a batch another process planned and did not commit is replayed
//! on the partitions of it this process owns now, with its plan's processing time; window
//! tables take each batch once, by its plan's key ([`Fence::Keyed`]). What a batch fenced
//! off between its window commits and its table commit leaves behind: [`super::left`].

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

use super::read::Input;
use super::{Pipeline, PipelineError};
use crate::checkpoint::{CLAIMS, STATE_SHARES};
use crate::event_time::delta::batch_of;
use crate::event_time::state::shares::{Shares, shares_from_json};
use crate::event_time::state::{Plan, TriggerPlan};
use crate::event_time::tasks::{Tasks, Unfinished};
use crate::iceberg::Fence;
use crate::record::{Offsets, TopicPartition};

/// A replay of a batch planned by this or another process, on some of its partitions.
#[derive(Debug, Clone)]
pub(super) struct Replaying {
    /// The key of the batch as planned ([`plan_key`]).
    pub(super) key: String,
    /// The partitions replayed: those of the plan this process owns.
    pub(super) partitions: BTreeSet<String>,
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
        // The batch just fenced off goes last: one found with it may be what fenced it
        // off (a batch from the same state, left behind by a member that stopped, whose
        // replay elsewhere decides whether it counts).
        let fenced = self.fenced_key.take();
        if let Some(at) = unfinished
            .iter()
            .position(|u| Some(plan_key(&u.plan)) == fenced)
        {
            let last = unfinished.remove(at);
            unfinished.insert(0, last);
        }
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
        let partitions: BTreeMap<String, (i64, i64)> = start
            .0
            .iter()
            .filter(|(tp, _)| replayed.is_none_or(|r| r.contains(&tasks.task_of(tp))))
            .map(|(tp, &from)| (tp.to_string(), (from, end.get(tp).unwrap_or(from))))
            .collect();
        let bases = match main {
            Fence::Owns {
                states: Some(states),
                ..
            } => bases(states, start.0.keys().map(|tp| (tp, tasks.task_of(tp)))),
            _ => BTreeMap::new(),
        };
        let bases = (bases.into_iter())
            .filter(|(p, _)| partitions.contains_key(p))
            .collect();
        Fence::Keyed {
            key,
            partitions,
            bases,
        }
    }
}

/// A batch's key: a hash of its plan (id, offsets, processing times, flush), the same
/// when it is replayed by any process.
pub(super) fn plan_key(plan: &Plan) -> String {
    if let Some(key) = &plan.key {
        return key.clone(); // a replay of that batch
    }
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

/// For each partition read (`topic/partition` with its task's), the generation of the
/// state its task builds on (`states`, the batch's [`Fence::Owns`]): the batch its state
/// file was saved by, 0 for a task with none yet; left out where a file's name does not
/// say (the window tables then fence that partition by offsets alone).
fn bases<'a>(
    states: &BTreeMap<String, Option<String>>,
    read: impl Iterator<Item = (&'a TopicPartition, String)>,
) -> BTreeMap<String, u64> {
    let base = |file: &Option<String>| match file {
        Some(file) => batch_of(file),
        None => Some(0),
    };
    read.filter_map(|(tp, task)| Some((tp.to_string(), base(states.get(&task)?)?)))
        .collect()
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
