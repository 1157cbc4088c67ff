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
//! A join's right topic is partitioned as the source topic (the same count, keyed by the
//! join's key, which holds the source's): its partition `p` belongs to the task of the
//! source's partition `p`, whose join state it feeds, and the group gives both to one
//! member (see [`crate::pipeline::config::PipelineConfig::source_client`]).
//!
//! [`partition_plan_path`]: super::state::files::partition_plan_path

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use super::apply::{Applied, Timed};
use super::state::files::{partition_plan_path, write_pointer};
use super::state::saved::{BuiltOn, PlanFile, read};
use super::state::shares::Shares;
use super::state::{Plan, SavedState, StateError, StateStore};
use super::{EventTime, EventTimeOutcome, StateSize};

mod flush;
use crate::encode::SchemaError;
use crate::record::{Offsets, Record, TopicPartition};
use crate::units::{Micros, Millis};
pub use flush::Flush;

/// The saves this process made. Each save's files carry its number: the batch id and the
/// run alone do not tell them apart, since a member replaying another's batch saves under
/// that batch's id, which may be one it used for a batch of its own, committed, whose
/// files a later commit's chain still names (found by the tansu test of the analytics
/// example: a delta written over, its chain then out of order).
static SAVES: AtomicU64 = AtomicU64::new(0);

/// The tasks of the partitions this process owns.
#[derive(Debug, Clone)]
pub struct Tasks {
    /// Empty operators, the pattern of a new partition's task.
    template: EventTime,
    /// The source topic: tasks are named after its partitions.
    home: String,
    /// The joins' right topics, whose partition `p` is read by the task of `p`.
    right: Vec<String>,
    /// `topic/partition` of the source topic → its task.
    tasks: BTreeMap<String, EventTime>,
    /// The claim the table recorded for each task's partition when this process took it
    /// (see [`Tasks::claims`]).
    claims: BTreeMap<String, Option<String>>,
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
    /// No tasks yet for the partitions of `home`, the source topic; new ones are made like
    /// `template` (whose state is not used).
    pub fn new(template: &EventTime, home: &str) -> Self {
        Tasks {
            template: template.emptied(),
            home: home.to_string(),
            right: template
                .joins()
                .map(|j| j.config().right_topic.clone())
                .collect(),
            tasks: BTreeMap::new(),
            claims: BTreeMap::new(),
        }
    }

    /// Notes the claims of the table's last commit (`sluice.claims`, by partition) for
    /// the tasks' partitions.
    pub fn note_claims(&mut self, recorded: &BTreeMap<String, String>) {
        self.claims = self
            .tasks
            .keys()
            .map(|p| (p.clone(), recorded.get(p).cloned()))
            .collect();
    }

    /// Notes this process's own claim (`token`) of `partitions`.
    pub fn note_claim(&mut self, partitions: &BTreeSet<String>, token: &str) {
        for partition in partitions {
            self.claims
                .insert(partition.clone(), Some(token.to_string()));
        }
    }

    /// The claim the table recorded for each task's partition when this process took it:
    /// a batch of it commits only if the table still records those (no other member
    /// claimed one since).
    pub fn claims(&self) -> BTreeMap<String, Option<String>> {
        self.claims.clone()
    }

    /// The task that reads `tp`: that of the source topic's partition of its number.
    pub fn task_of(&self, tp: &TopicPartition) -> String {
        format!("{}/{}", self.home, tp.partition)
    }

    /// The partitions a task reads: its source partition and the joins' right ones of the
    /// same number.
    fn read_by(&self, task: &str) -> Vec<TopicPartition> {
        let Some(home) = topic_partition(task) else {
            return Vec::new();
        };
        let right = self.right.iter().map(|topic| TopicPartition {
            topic: topic.as_str().into(),
            partition: home.partition,
        });
        let mut all = vec![home.clone()];
        all.extend(right);
        all
    }

    /// The task of `partition`, made empty if new.
    fn task(&mut self, partition: &str) -> &mut EventTime {
        let template = &self.template;
        self.tasks
            .entry(partition.to_string())
            .or_insert_with(|| template.emptied())
    }

    /// Runs each task over its partition's records of `slices` (and of `right`, the joins'
    /// right records), the tasks of `assigned` (task names, [`Tasks::task_of`]) without
    /// records too (time moves on for them), and puts together what they leave: the
    /// table's rows in partition order, the windows' and joins' rows, late events.
    pub fn apply(
        &mut self,
        slices: Vec<Timed>,
        right: Vec<Record>,
        assigned: &BTreeSet<String>,
        now: Millis,
        flush: &Flush,
    ) -> Result<Applied, SchemaError> {
        type Inputs = (Vec<Timed>, Vec<Record>);
        let mut by_task: BTreeMap<String, Inputs> = assigned
            .iter()
            .map(|p| (p.clone(), Inputs::default()))
            .collect();
        for slice in slices {
            for (partition, part) in split_by_partition(slice) {
                by_task.entry(partition).or_default().0.push(part);
            }
        }
        for record in right {
            let task = format!("{}/{}", self.home, record.partition);
            by_task.entry(task).or_default().1.push(record);
        }
        let mut all: Option<Applied> = None;
        for (task, (timed, right)) in by_task {
            let read = self.read_by(&task);
            let applied =
                self.task(&task)
                    .apply(timed, right, read.iter(), now, flush.of(&task))?;
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
            kept: Vec::new(),
        }))
    }

    /// Whether a batch without events at `now` would emit anything in some task.
    pub fn due(&self, now: Millis, flush: &Flush) -> bool {
        (self.tasks.iter()).any(|(task, t)| t.due(now, flush.of(task)))
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

    /// The state file each task's state holds (`None`: a new task's, none yet), which the
    /// table's last commit records if no other member took its partition since.
    pub fn states(&self) -> BTreeMap<String, Option<String>> {
        let tip = |task: &EventTime| task.chain().map(|c| c.tip().to_string());
        self.tasks
            .iter()
            .map(|(p, t)| (p.clone(), tip(t)))
            .collect()
    }

    /// Lists the events on time of each batch, in every task (see
    /// [`EventTime::keep_on_time`]).
    pub fn keep_on_time(&mut self) {
        self.template.keep_on_time();
        for task in self.tasks.values_mut() {
            task.keep_on_time();
        }
    }

    /// Makes every task stage two of a repartition topic (see
    /// [`EventTime::read_origins`]).
    pub fn read_origins(&mut self, topic: &str, count: i32) {
        self.template.read_origins(topic, count);
        for task in self.tasks.values_mut() {
            task.read_origins(topic, count);
        }
    }

    /// A marker that reached `partition` (of the repartition topic; its task, made empty
    /// if new, takes it): see [`EventTime::observe_marker`].
    pub fn observe_marker(
        &mut self,
        partition: &TopicPartition,
        origin: &str,
        time: Option<Micros>,
        now: Millis,
    ) {
        let task = self.task_of(partition);
        self.task(&task).observe_marker(origin, time, now);
    }

    /// The newest event time read from each partition, over the tasks.
    pub fn newest_event_times(&self) -> BTreeMap<String, Option<Micros>> {
        let each = self.tasks.values().flat_map(|t| t.newest_event_times());
        each.collect()
    }

    /// What the markers of the repartition topics this process feeds say of each of its
    /// partitions at `now`: the newest event time read from it; with
    /// [`Tasks::read_origins`], its task's [`EventTime::followed_time`].
    pub fn marker_times(&self, now: Millis) -> BTreeMap<String, Option<Micros>> {
        if !self.template.reads_origins() {
            return self.newest_event_times();
        }
        let each = self.tasks.iter();
        each.map(|(p, task)| (p.clone(), task.followed_time(now)))
            .collect()
    }

    /// The partitions with a task.
    pub fn partitions(&self) -> impl Iterator<Item = &str> {
        self.tasks.keys().map(String::as_str)
    }

    /// Saves every task's state after a batch (each in files of its own, named after
    /// `run`, the save's number in this process and its partition) and, for each
    /// partition the batch read, a pointer to the batch's plan. Returns which file holds
    /// each task's state, the bytes written, and the files nothing needs once the batch
    /// is committed: the chains that a task's new snapshot replaces, and the pointers to
    /// this batch's plan on partitions it moved.
    ///
    /// A replay on some partitions (`replayed`) ran their tasks alone: the others' state,
    /// files and pointers (pending plans among them, to be replayed next) stay as they
    /// are, and their shares as the table records them.
    pub fn save(
        &mut self,
        store: &dyn StateStore,
        location: &str,
        pipeline: &str,
        run: &str,
        plan: &Plan,
        replayed: Option<&BTreeSet<String>>,
    ) -> Result<Saved, StateError> {
        let mut saved = Saved::default();
        let save = SAVES.fetch_add(1, Ordering::Relaxed);
        let ran = |p: &String| replayed.is_none_or(|r| r.contains(p));
        let mut built_on = BTreeMap::new();
        for (partition, task) in self.tasks.iter_mut().filter(|(p, _)| ran(p)) {
            let before = task.chain().map(|c| c.paths.clone());
            let tip = task.chain().map(|c| c.tip().to_string());
            built_on.insert(partition.clone(), BuiltOn { state_file: tip });
            let run = format!("{run}-{save}.{}", partition.replace('/', "@"));
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
        // A pointer per task, at its source partition's start: a batch that moved only a
        // right partition of it overwrites the pointer of the committed batch there, with
        // its own state file (uncommitted, it is told apart by the file).
        for (tp, &from) in start.0.iter().filter(|(tp, _)| *tp.topic == *self.home) {
            let partition = tp.to_string();
            if !ran(&partition) {
                continue;
            }
            let at = partition_plan_path(location, pipeline, &partition, from);
            let file = saved.shares.get(&partition).cloned();
            write_pointer(store, &at, plan, file, built_on.remove(&partition))?;
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
        let home = positions.0.iter().filter(|(tp, _)| *tp.topic == *self.home);
        for (tp, start) in home {
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
            if !pointer.replays_from(shares.get(&partition)) {
                continue; // another batch planned from this offset committed first
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

/// Where a batch that started its partitions at `starts` (`topic/partition` → offset;
/// `same` tells a plan of it, as planned or replayed on some partitions) may still be
/// committed, of its partitions of the home topic: those that the main table's last
/// commit (`positions`, by partition, and `shares`) records where the batch started,
/// whose pointer there still names the batch, uncommitted. Their next owner replays it
/// from there; elsewhere the partition moved on without it, or another batch planned
/// from the same offset (its pointer replaced) and committed first.
pub fn may_be_replayed(
    store: &dyn StateStore,
    (location, pipeline, home): (&str, &str, &str),
    starts: &BTreeMap<String, i64>,
    same: impl Fn(&Plan) -> bool,
    (positions, shares): (&BTreeMap<String, i64>, &Shares),
) -> Result<Pending, StateError> {
    let homes = starts
        .iter()
        .filter(|(p, _)| topic_partition(p).is_some_and(|tp| *tp.topic == *home));
    let mut pending = Pending::default();
    for (partition, &from) in homes {
        pending.of += 1;
        if positions.get(partition) != Some(&from) {
            continue;
        }
        let at = partition_plan_path(location, pipeline, partition, from);
        let Some(pointer) = read::<PlanFile>(store, &at)? else {
            continue;
        };
        let committed =
            pointer.state_file.is_some() && pointer.state_file.as_ref() == shares.get(partition);
        if !committed && pointer.replays_from(shares.get(partition)) && same(&pointer.plan) {
            pending.on.insert(partition.clone());
        }
    }
    Ok(pending)
}

/// Where a batch may still be committed ([`may_be_replayed`]).
#[derive(Debug, Default)]
pub struct Pending {
    /// The partitions where it may: their owner replays it there.
    pub on: BTreeSet<String>,
    /// Of how many partitions of the home topic it read.
    pub of: usize,
}

impl Pending {
    /// Whether it may be committed somewhere.
    pub fn anywhere(&self) -> bool {
        !self.on.is_empty()
    }

    /// Whether it may be committed on every partition it read: only then can its window
    /// rows all count, a replay on some partitions taking the rows as its own.
    pub fn everywhere(&self) -> bool {
        self.anywhere() && self.on.len() == self.of
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
    all.kept.extend(more.kept);
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
    for (rows, more) in a.joined.iter_mut().zip(b.joined) {
        rows.extend(more);
    }
    for (verdicts, more) in a.right_verdicts.iter_mut().zip(b.right_verdicts) {
        verdicts.extend(more);
    }
    let right = a.right_watermarks_before.iter_mut();
    for (before, more) in right.zip(b.right_watermarks_before) {
        *before = lower(*before, more);
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
    fn nothing(windows: usize, joins: usize) -> Self {
        EventTimeOutcome {
            verdicts: Vec::new(),
            watermark_before: None,
            watermark: None,
            emitted: vec![Vec::new(); windows],
            late: 0,
            duplicates: 0,
            future: 0,
            joined: vec![Vec::new(); joins],
            right_verdicts: vec![Vec::new(); joins],
            right_watermarks_before: vec![None; joins],
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
        EventTimeOutcome::nothing(self.inputs.0, self.inputs.1)
    }
}
