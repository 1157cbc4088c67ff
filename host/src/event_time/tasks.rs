//! Event time by partition (`scale-out = "partitions"`, issue 35): every source partition
//! has operators and state of its own, a *task* (Kafka Streams' word): its own watermark,
//! dedup keys and windows. A source keyed by the field every keyed operator's key holds
//! (checked, see [`super::keyed`]) puts all of a key's events in one partition, so no key's
//! state is split; and what a partition's task emits depends on that partition's records
//! and the batches' processing times alone, never on which process of a group runs it, or
//! next to which other partitions.
//!
//! Each task saves its state in files of its own (a snapshot, then deltas, as one
//! process's state is saved), and a commit records which file holds each partition's state
//! ([`Shares`], merged over the group's members at commit time): a process given a
//! partition restores its task from that file. Each batch's plan has a pointer per
//! partition ([`partition_plan_path`]), so that whichever process owns a partition after a
//! crash finds the batch that read it and was not committed.
//!
//! [`partition_plan_path`]: super::state::files::partition_plan_path

use std::collections::{BTreeMap, BTreeSet};

use super::apply::{Applied, Timed};
use super::state::files::{partition_plan_path, write_plan_at};
use super::state::saved::{PlanFile, read};
use super::state::shares::Shares;
use super::state::{Plan, SavedState, StateError, StateStore};
use super::{EventTime, EventTimeOutcome, StateSize};
use crate::encode::SchemaError;
use crate::record::{Offsets, TopicPartition};
use crate::units::{Micros, Millis};

/// The tasks of the partitions this process owns.
#[derive(Debug, Clone)]
pub struct Tasks {
    /// Empty operators, the pattern of a new partition's task.
    template: EventTime,
    /// `topic/partition` → its task.
    tasks: BTreeMap<String, EventTime>,
}

/// What [`Tasks::save`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Saved {
    /// The file that holds each partition's state.
    pub shares: Shares,
    /// Bytes written.
    pub bytes: u64,
    /// Files to delete once the batch is committed.
    pub obsolete: Vec<String>,
}

/// A batch planned but not committed that read partitions this process owns now: it is
/// replayed, on those partitions alone. (A pointer at a partition's committed offset is
/// that of a batch that committed without moving it, when it names the state file the
/// commit records for the partition.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// Its plan.
    pub plan: Plan,
    /// The partitions of it that this process owns.
    pub partitions: BTreeSet<String>,
}

impl Tasks {
    /// No tasks yet; new ones are made like `template` (whose state is not used).
    pub fn new(template: &EventTime) -> Self {
        Tasks {
            template: template.emptied(),
            tasks: BTreeMap::new(),
        }
    }

    /// The task of `partition`, made empty if new.
    fn task(&mut self, partition: &str) -> &mut EventTime {
        let template = &self.template;
        self.tasks
            .entry(partition.to_string())
            .or_insert_with(|| template.emptied())
    }

    /// Runs each task over its partition's records of `slices`, the tasks of `assigned`
    /// partitions without records too (time moves on for them), and puts together what
    /// they leave: the table's rows in partition order, the windows' rows, late events.
    pub fn apply(
        &mut self,
        slices: Vec<Timed>,
        assigned: &BTreeSet<String>,
        now: Millis,
        flush: bool,
    ) -> Result<Applied, SchemaError> {
        let mut by_partition: BTreeMap<String, Vec<Timed>> =
            assigned.iter().map(|p| (p.clone(), Vec::new())).collect();
        for slice in slices {
            for (partition, part) in split_by_partition(slice) {
                by_partition.entry(partition).or_default().push(part);
            }
        }
        let mut all: Option<Applied> = None;
        for (partition, timed) in by_partition {
            let tp = topic_partition(&partition);
            let applied = self
                .task(&partition)
                .apply(timed, Vec::new(), tp.iter(), now, flush)?;
            all = Some(match all {
                None => applied,
                Some(mut all) => {
                    merge(&mut all, applied);
                    all
                }
            });
        }
        Ok(all.unwrap_or_else(|| Applied {
            batches: Vec::new(),
            late: Vec::new(),
            future: Vec::new(),
            unreadable: Vec::new(),
            outcome: self.template.empty_outcome(),
        }))
    }

    /// Whether a batch without events at `now` would emit anything in some task.
    pub fn due(&self, now: Millis, flush: bool) -> bool {
        self.tasks.values().any(|t| t.due(now, flush))
    }

    /// The lowest of the tasks' watermarks at `now`, for reports.
    pub fn watermark_at(&self, now: Millis) -> Option<Micros> {
        self.tasks
            .values()
            .filter_map(|t| t.watermark_at(now))
            .min()
    }

    /// Each partition's watermark.
    pub fn partition_watermarks(&self) -> BTreeMap<String, Micros> {
        let each = self.tasks.values().flat_map(|t| t.partition_watermarks());
        each.collect()
    }

    /// State size per operator, over the tasks.
    pub fn state_sizes(&self) -> BTreeMap<String, StateSize> {
        let mut sizes: BTreeMap<String, StateSize> = BTreeMap::new();
        for (name, size) in self.tasks.values().flat_map(|t| t.state_sizes()) {
            let total = sizes.entry(name).or_default();
            total.rows += size.rows;
            total.bytes += size.bytes;
        }
        sizes
    }

    /// When this run started (see [`EventTime::session_start`]).
    pub fn session_start(&self) -> Millis {
        self.template.session_start()
    }

    /// Sets when this run started, for every task.
    pub fn set_session_start(&mut self, start: Millis) {
        self.template.set_session_start(start);
        for task in self.tasks.values_mut() {
            task.set_session_start(start);
        }
    }

    /// The partitions with a task.
    pub fn partitions(&self) -> impl Iterator<Item = &str> {
        self.tasks.keys().map(String::as_str)
    }

    /// Saves every task's state after a batch (each in files of its own, named after
    /// `run` and its partition) and, for each partition the batch read, a pointer to the
    /// batch's plan. Returns which file holds each task's state, the bytes written, and
    /// the files nothing needs once the batch is committed: the chains that a task's new
    /// snapshot replaces, and the pointers to this batch's plan on partitions it moved.
    pub fn save(
        &mut self,
        store: &dyn StateStore,
        location: &str,
        pipeline: &str,
        run: &str,
        plan: &Plan,
    ) -> Result<Saved, StateError> {
        let mut saved = Saved::default();
        for (partition, task) in &mut self.tasks {
            let before = task.chain().map(|c| c.paths.clone());
            let run = format!("{run}.{}", partition.replace('/', "@"));
            let (file, size) = task.save_file(store, location, pipeline, &run, plan)?;
            let after = task.chain().map(|c| &c.paths.base);
            if let Some(old) = before.filter(|old| Some(&old.base) != after) {
                saved.obsolete.push(old.base);
                saved.obsolete.extend(old.deltas);
            }
            saved.shares.insert(partition.clone(), file);
            saved.bytes += size;
        }
        let start = Offsets::from_json(&plan.start).map_err(StateError::Plan)?;
        let end = Offsets::from_json(&plan.end).map_err(StateError::Plan)?;
        for (tp, &from) in &start.0 {
            let partition = tp.to_string();
            let at = partition_plan_path(location, pipeline, &partition, from);
            write_plan_at(store, &at, plan, saved.shares.get(&partition).cloned())?;
            if end.get(tp).is_some_and(|to| to > from) {
                saved.obsolete.push(at);
            }
        }
        Ok(saved)
    }

    /// After a restart or a rebalance: the tasks of the partitions of `positions` (this
    /// process's, where each starts), each restored from the file `shares` names for it
    /// (a new partition starts empty); and the batches planned but not committed that
    /// read any of them from there, to be replayed first.
    pub fn recover(
        &mut self,
        store: &dyn StateStore,
        location: &str,
        pipeline: &str,
        shares: &Shares,
        positions: &Offsets,
    ) -> Result<Vec<Unfinished>, StateError> {
        self.tasks.clear();
        let mut unfinished: Vec<Unfinished> = Vec::new();
        for (tp, start) in &positions.0 {
            let partition = tp.to_string();
            let mut task = self.template.emptied();
            if let Some(file) = shares.get(&partition) {
                let chain = task.load(store, file)?;
                task.track(chain);
            }
            self.tasks.insert(partition.clone(), task);
            let at = partition_plan_path(location, pipeline, &partition, *start);
            let Some(pointer) = read::<PlanFile>(store, &at)? else {
                continue;
            };
            if pointer.state_file.is_some() && pointer.state_file.as_ref() == shares.get(&partition)
            {
                continue; // the batch committed (it read nothing of this partition)
            }
            let plan = pointer.into_plan();
            match unfinished.iter_mut().find(|u| u.plan == plan) {
                Some(u) => {
                    u.partitions.insert(partition);
                }
                None => unfinished.push(Unfinished {
                    plan,
                    partitions: BTreeSet::from([partition]),
                }),
            }
        }
        tracing::info!(
            partitions = self.tasks.len(),
            restored = positions
                .0
                .keys()
                .filter(|tp| shares.contains_key(&tp.to_string()))
                .count(),
            unfinished = unfinished.len(),
            "restored the event-time state of each partition assigned"
        );
        Ok(unfinished)
    }
}

/// `topic/partition` read back (a topic never holds `/`).
fn topic_partition(partition: &str) -> Option<TopicPartition> {
    let (topic, number) = partition.rsplit_once('/')?;
    Some(TopicPartition {
        topic: topic.into(),
        partition: number.parse().ok()?,
    })
}

/// A slice cut into runs of one partition each (rows and records alike).
fn split_by_partition(slice: Timed) -> Vec<(String, Timed)> {
    let mut parts: Vec<(String, Timed)> = Vec::new();
    let mut at = 0;
    let mut records = slice.records.into_iter().peekable();
    while let Some(first) = records.next() {
        let here = (first.0.topic.clone(), first.0.partition);
        let mut run = vec![first];
        while let Some(next) =
            records.next_if(|(r, _)| (&r.topic, r.partition) == (&here.0, here.1))
        {
            run.push(next);
        }
        let batch = slice.batch.as_ref().map(|b| b.slice(at, run.len()));
        at += run.len();
        parts.push((
            format!("{}/{}", here.0, here.1),
            Timed {
                batch,
                records: run,
            },
        ));
    }
    parts
}

/// `more` added to `all`: rows, records that left, and the outcome (the lower
/// watermarks).
fn merge(all: &mut Applied, more: Applied) {
    all.batches.extend(more.batches);
    all.late.extend(more.late);
    all.future.extend(more.future);
    all.unreadable.extend(more.unreadable);
    let (a, b) = (&mut all.outcome, more.outcome);
    a.verdicts.extend(b.verdicts);
    a.watermark_before = lower(a.watermark_before, b.watermark_before);
    a.watermark = lower(a.watermark, b.watermark);
    for (rows, more) in a.emitted.iter_mut().zip(b.emitted) {
        rows.extend(more);
    }
    a.late += b.late;
    a.duplicates += b.duplicates;
    a.future += b.future;
}

/// The lower of two watermarks; one that is not set yet does not count.
fn lower(a: Option<Micros>, b: Option<Micros>) -> Option<Micros> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl EventTimeOutcome {
    /// Nothing happened (no task ran).
    fn nothing(windows: usize) -> Self {
        EventTimeOutcome {
            verdicts: Vec::new(),
            watermark_before: None,
            watermark: None,
            emitted: vec![Vec::new(); windows],
            late: 0,
            duplicates: 0,
            future: 0,
            joined: Vec::new(),
            right_verdicts: Vec::new(),
            right_watermarks_before: Vec::new(),
        }
    }
}

impl EventTime {
    /// The same operators, empty.
    fn emptied(&self) -> EventTime {
        let mut empty = self.clone();
        empty.restore(SavedState::default());
        empty
    }

    /// What a batch without tasks did: nothing.
    fn empty_outcome(&self) -> EventTimeOutcome {
        EventTimeOutcome::nothing(self.inputs.0)
    }
}
