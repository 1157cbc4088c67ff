//! Committing a batch's files with the pipeline's commit mark, behind a [`Fence`], and
//! finding the last mark.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use iceberg::ErrorKind;
use iceberg::spec::DataFile;
use iceberg::transaction::{ApplyTransactionAction, Transaction};

use super::evolve::{self, Evolution};
use super::fence::{Fence, Fenced, PinnedCatalog};
use super::marks::{mark_property, mark_property_value};
use super::{IcebergError, IcebergTable};
use crate::checkpoint::{
    BATCH_KEYS, BATCH_KEYS_BEFORE, BATCH_RANGE, CLAIMS, CommitMark, MERGED_BY_PARTITION, PIPELINE,
    PLANNED_BATCH, RUN, STATE_SHARES, holds_by_partition, merged_by_partition,
};
use crate::retry::Backoff;

/// Conflicts with commits that leave the fence standing (another pipeline, maintenance)
/// are retried this many times.
const MAX_RETRIES: u32 = 10;

/// How far back a process looks for its own commit (other processes may have committed
/// since).
const OWN_COMMIT_DEPTH: usize = 1000;

/// How a commit went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landed {
    /// Committed, after this many conflicts with other commits.
    Committed {
        /// Commits retried after a conflict.
        retries: u32,
        /// The mark committed: the one given, or for [`Fence::Owns`] the one built at
        /// commit time.
        mark: CommitMark,
    },
    /// The table holds the batch already (a window table after a replay).
    AlreadyHeld,
}

impl IcebergTable {
    /// Appends `files` in one snapshot carrying `planned` (or the mark `fence` builds from
    /// it, see [`Fence::mark`]) and `extra` summary properties, if `fence` holds. The catalog
    /// checks that the table did not move between the fence's check and the commit (see
    /// [`super::fence`]). A conflict with a commit that leaves the fence standing is retried
    /// with backoff; a fence that no longer holds is [`IcebergError::Fenced`]. After the commit
    /// the table is reloaded and the mark checked: a commit that returned an error but
    /// landed is accepted, one that reported success but is not there is
    /// [`IcebergError::NotCommitted`].
    pub fn commit(
        &mut self,
        files: Vec<DataFile>,
        planned: &CommitMark,
        extra: HashMap<String, String>,
        fence: &Fence,
    ) -> Result<Landed, IcebergError> {
        self.commit_evolving(files, planned, extra, fence, None)
    }

    /// [`IcebergTable::commit`], changing the table's schema to `evolution`'s in the same
    /// snapshot (the files were written with it). If the table's current schema is no
    /// longer the one the change was planned against, nothing is committed:
    /// [`IcebergError::SchemaMoved`] (the batch is to be encoded again).
    ///
    /// A catalog that accepts the change but does not apply it (a REST server that keeps
    /// the schema id 0 iceberg-rust sends, as one built on pyiceberg does) would leave the
    /// new columns' values unreadable: that is [`IcebergError::SchemaNotApplied`], and the
    /// pipeline stops.
    pub fn commit_evolving(
        &mut self,
        files: Vec<DataFile>,
        planned: &CommitMark,
        extra: HashMap<String, String>,
        fence: &Fence,
        evolution: Option<&Evolution>,
    ) -> Result<Landed, IcebergError> {
        let landed = self.land(files, planned, extra, fence, evolution)?;
        if let (Some(evolution), Landed::Committed { .. }) = (evolution, &landed) {
            self.schema_applied(evolution, planned)?;
        }
        Ok(landed)
    }

    fn land(
        &mut self,
        files: Vec<DataFile>,
        planned: &CommitMark,
        extra: HashMap<String, String>,
        fence: &Fence,
        evolution: Option<&Evolution>,
    ) -> Result<Landed, IcebergError> {
        let mut retries = 0;
        loop {
            self.refresh()?;
            let last = self.last_mark(&planned.pipeline)?;
            if let Some(mark) = self.holds(planned, fence, &extra)? {
                return Ok(Landed::Committed { retries, mark });
            }
            if self.holds_key(planned, fence)? {
                return Ok(Landed::AlreadyHeld);
            }
            match fence.check(planned, last.as_ref()) {
                Ok(()) => {}
                Err(Fenced::Held) => return Ok(Landed::AlreadyHeld),
                Err(why) => {
                    return Err(IcebergError::Fenced {
                        table: self.name(),
                        commit_id: planned.commit_id(),
                        why: why.to_string(),
                    });
                }
            }
            self.states_still(planned, fence)?;
            if let Some(evolution) = evolution {
                self.schema_still(evolution, planned)?;
            }
            let mark = fence.mark(planned, last.as_ref());
            let mut properties = mark.to_properties();
            properties.extend(extra.clone());
            if let Some(keys) = fence.batch_keys() {
                properties.insert(BATCH_KEYS.to_string(), keys);
            }
            if let Some(range) = fence.batch_range() {
                properties.insert(BATCH_RANGE.to_string(), range);
            }
            if let Some(before) = self.keys_before_commit(&planned.pipeline, fence)? {
                properties.insert(BATCH_KEYS_BEFORE.to_string(), before);
            }
            if matches!(fence, Fence::Owns { .. } | Fence::Keyed { .. }) {
                self.merge_by_partition(&planned.pipeline, &mut properties)?;
                properties.insert(PLANNED_BATCH.to_string(), planned.batch_id.to_string());
            }
            match self.try_commit(files.clone(), properties, evolution) {
                Ok(()) => break,
                Err(error) if error.kind() == ErrorKind::CatalogCommitConflicts => {
                    retries += 1;
                    if retries > MAX_RETRIES {
                        return Err(self.not_committed(&mark, Some(error.to_string())));
                    }
                    tracing::info!(table = %self.name(), commit_id = %mark.commit_id(), retries, %error, "the table moved: checking the fence again");
                    std::thread::sleep(BACKOFF.wait(retries));
                }
                Err(error) => return self.landed_anyway(planned, fence, &extra, error),
            }
        }
        self.refresh()?;
        match self.holds(planned, fence, &extra)? {
            Some(mark) => Ok(Landed::Committed { retries, mark }),
            None => Err(self.not_committed(planned, None)),
        }
    }

    /// For [`Fence::Keyed`]: what the pipeline's last commit records for the batch's
    /// partitions (`sluice.batch-keys-before`, JSON), the base the commit lands on.
    fn keys_before_commit(
        &self,
        pipeline: &str,
        fence: &Fence,
    ) -> Result<Option<String>, IcebergError> {
        let Fence::Keyed { partitions, .. } = fence else {
            return Ok(None);
        };
        let last = self.last_mark_properties(pipeline)?.unwrap_or_default();
        let recorded: BTreeMap<String, String> = last
            .get(BATCH_KEYS)
            .and_then(|k| serde_json::from_str(k).ok())
            .unwrap_or_default();
        let before: BTreeMap<&String, Option<&String>> =
            partitions.keys().map(|p| (p, recorded.get(p))).collect();
        Ok(serde_json::to_string(&before).ok())
    }

    /// For [`Fence::Keyed`]: whether the pipeline's last commit records the batch's key
    /// for one of its partitions (the batch landed, committed by whoever ran it first); a
    /// partition it records a later batch of is [`IcebergError::Fenced`].
    fn holds_key(&self, planned: &CommitMark, fence: &Fence) -> Result<bool, IcebergError> {
        if !matches!(fence, Fence::Keyed { .. }) {
            return Ok(false);
        }
        let last = self.last_mark_properties(&planned.pipeline)?;
        let recorded = last.as_ref().and_then(|p| p.get(BATCH_KEYS));
        fence
            .keyed(recorded.map(String::as_str))
            .map_err(|why| IcebergError::Fenced {
                table: self.name(),
                commit_id: planned.commit_id(),
                why: why.to_string(),
            })
    }

    /// Whether `fence` holds for `planned` on the table as last refreshed, without
    /// committing: its offsets (a table that holds the batch passes) and state files.
    pub fn check_fence(&self, planned: &CommitMark, fence: &Fence) -> Result<(), IcebergError> {
        let last = self.last_mark(&planned.pipeline)?;
        match fence.check(planned, last.as_ref()) {
            Ok(()) | Err(Fenced::Held) => self.states_still(planned, fence),
            Err(why) => Err(self.fenced(planned, &why)),
        }
    }

    /// For [`Fence::Owns`] with state by partition: the table's last commit of the
    /// pipeline records the state files the batch's state builds on.
    fn states_still(&self, planned: &CommitMark, fence: &Fence) -> Result<(), IcebergError> {
        if !matches!(
            fence,
            Fence::Owns {
                states: Some(_),
                ..
            }
        ) {
            return Ok(());
        }
        let last = self.last_mark_properties(&planned.pipeline)?;
        let recorded = |key| last.as_ref().and_then(|p| p.get(key)).map(String::as_str);
        fence
            .check_states(recorded(STATE_SHARES), recorded(CLAIMS))
            .map_err(|why| self.fenced(planned, &why))
    }

    fn fenced(&self, planned: &CommitMark, why: &Fenced) -> IcebergError {
        IcebergError::Fenced {
            table: self.name(),
            commit_id: planned.commit_id(),
            why: why.to_string(),
        }
    }

    /// A group member's commit: its properties keyed by partition
    /// ([`MERGED_BY_PARTITION`]) put on top of the pipeline's last commit's.
    fn merge_by_partition(
        &self,
        pipeline: &str,
        properties: &mut HashMap<String, String>,
    ) -> Result<(), IcebergError> {
        if !MERGED_BY_PARTITION
            .iter()
            .any(|k| properties.contains_key(*k))
        {
            return Ok(());
        }
        let last = self.last_mark_properties(pipeline)?.unwrap_or_default();
        for key in MERGED_BY_PARTITION {
            match (properties.get_mut(*key), last.get(*key)) {
                (Some(ours), last) => *ours = merged_by_partition(last.map(String::as_str), ours),
                (None, Some(last)) => {
                    properties.insert(key.to_string(), last.clone());
                }
                (None, None) => {}
            }
        }
        Ok(())
    }

    /// The table's current schema is still the one `evolution` was planned against.
    fn schema_still(
        &self,
        evolution: &Evolution,
        planned: &CommitMark,
    ) -> Result<(), IcebergError> {
        let found = self.schema().schema_id();
        if found == evolution.base_schema_id {
            return Ok(());
        }
        Err(IcebergError::SchemaMoved {
            table: self.name(),
            commit_id: planned.commit_id(),
            expected: evolution.base_schema_id,
            found,
        })
    }

    /// The table's current schema is a new one (a catalog that kept the schema id the
    /// client sent would show the old id, and pyiceberg would read that id's first
    /// schema, the old one) with every field the committed `evolution` planned (a later
    /// change may have added more).
    fn schema_applied(
        &self,
        evolution: &Evolution,
        planned: &CommitMark,
    ) -> Result<(), IcebergError> {
        let current = self.schema();
        let mut missing: Vec<String> = if current.schema_id() == evolution.base_schema_id {
            evolution
                .added
                .iter()
                .chain(&evolution.promoted)
                .cloned()
                .collect()
        } else {
            evolution
                .schema
                .field_id_to_name_map()
                .iter()
                .filter(|(id, _)| current.field_by_id(**id).is_none())
                .map(|(_, name)| name.clone())
                .collect()
        };
        missing.sort();
        if missing.is_empty() {
            return Ok(());
        }
        Err(IcebergError::SchemaNotApplied {
            table: self.name(),
            commit_id: planned.commit_id(),
            schema_id: current.schema_id(),
            missing,
        })
    }

    /// One attempt, against the table as loaded (with the schema change's base, see
    /// [`evolve`], when the schema changes too).
    fn try_commit(
        &self,
        files: Vec<DataFile>,
        properties: HashMap<String, String>,
        evolution: Option<&Evolution>,
    ) -> iceberg::Result<()> {
        let pipeline = properties.get(PIPELINE).cloned().unwrap_or_default();
        self.catalog.block_on(async {
            let base = match evolution {
                Some(evolution) => evolve::base_for(&self.table, evolution)?,
                None => self.table.clone(),
            };
            let mut tx = Transaction::new(&base);
            if evolution.is_some() {
                let change = tx.update_schema().delete_column(evolve::PLACEHOLDER);
                tx = change.apply(tx)?;
            }
            let mark = tx
                .update_table_properties()
                .set(mark_property(&pipeline), mark_property_value(&properties));
            // No duplicate-file check: iceberg-rust's reads every manifest of the table at
            // each commit (the commit's CPU grew from 25 to 250 ms over 100 commits of 13
            // files). The files are new by construction: named by batch and by this
            // process's run, written for this commit only, and a retry first checks whether
            // the earlier attempt landed (`landed_anyway`).
            let append = tx
                .fast_append()
                .with_check_duplicate(false)
                .add_data_files(files)
                .set_snapshot_properties(properties);
            let pinned = PinnedCatalog {
                inner: self.catalog.catalog(),
                table: &base,
            };
            let tx = mark.apply(append.apply(tx)?)?;
            tx.commit(&pinned).await.map(|_| ())
        })
    }

    /// After a commit error that was not a conflict: it may have landed all the same.
    fn landed_anyway(
        &mut self,
        planned: &CommitMark,
        fence: &Fence,
        extra: &HashMap<String, String>,
        error: iceberg::Error,
    ) -> Result<Landed, IcebergError> {
        self.refresh()?;
        if let Some(mark) = self.holds(planned, fence, extra)? {
            tracing::warn!(cause = %error, commit_id = %mark.commit_id(), "the commit reported an error but landed");
            return Ok(Landed::Committed { retries: 0, mark });
        }
        Err(self.not_committed(planned, Some(error.to_string())))
    }

    fn not_committed(&self, mark: &CommitMark, cause: Option<String>) -> IcebergError {
        IcebergError::NotCommitted {
            table: self.name(),
            commit_id: mark.commit_id(),
            cause,
        }
    }

    /// This process's commit of `planned`, if the table holds it: a snapshot of the
    /// pipeline committed by `run` with `planned`'s commit id, or for [`Fence::Owns`] (whose
    /// mark is built at commit time) with `planned`'s offsets and the state files `extra`
    /// records (two replays of one plan that read nothing differ in those alone). Other members may have
    /// committed since, so the search walks back through the history, up to
    /// [`OWN_COMMIT_DEPTH`] snapshots. The same batch committed by another process is not
    /// this commit.
    fn holds(
        &self,
        planned: &CommitMark,
        fence: &Fence,
        extra: &HashMap<String, String>,
    ) -> Result<Option<CommitMark>, IcebergError> {
        let (run, shares) = (extra.get(RUN).map(String::as_str), extra.get(STATE_SHARES));
        let metadata = self.table.metadata();
        let mut next = metadata.current_snapshot();
        for _ in 0..OWN_COMMIT_DEPTH {
            let Some(snapshot) = next else { break };
            let props = &snapshot.summary().additional_properties;
            let by = props.get(RUN).map(String::as_str);
            if by == run
                && let Some(mark) =
                    CommitMark::from_properties(&planned.pipeline, snapshot.snapshot_id(), props)
            {
                let mark = mark?;
                let same = match fence {
                    Fence::Keyed { .. } => {
                        fence.keyed_landed(props.get(BATCH_KEYS).map(String::as_str))
                    }
                    Fence::Owns { .. } => {
                        let recorded = props.get(STATE_SHARES).map(String::as_str);
                        owns_landed(planned, &mark, props)
                            && shares.is_none_or(|s| holds_by_partition(recorded, s))
                    }
                    Fence::Follows(_) | Fence::NotHeld => mark.commit_id() == planned.commit_id(),
                };
                if same {
                    return Ok(Some(mark));
                }
            }
            next = snapshot
                .parent_snapshot_id()
                .and_then(|id| metadata.snapshot_by_id(id));
        }
        Ok(None)
    }
}

/// For [`Fence::Owns`]: whether `found`, a commit of this process, is that of `planned`:
/// the batch id it planned (when recorded, see [`PLANNED_BATCH`]) and the offsets of its
/// partitions are `planned`'s. (Offsets alone do not tell a batch that moved none, a
/// batch of no records, from the commit before it.)
fn owns_landed(planned: &CommitMark, found: &CommitMark, props: &HashMap<String, String>) -> bool {
    let batch = props.get(PLANNED_BATCH).map(String::as_str);
    let batch_id = planned.batch_id.to_string();
    batch.is_none_or(|b| b == batch_id)
        && planned
            .offsets
            .0
            .iter()
            .all(|(tp, &n)| found.offsets.get(tp) == Some(n))
}

/// The wait before retry `n` (from 1): 50 ms doubling to 1.6 s, plus jitter of up to as
/// much again, so that writers that collided do not collide again.
const BACKOFF: Backoff =
    Backoff::doubling(Duration::from_millis(50), Duration::from_millis(1600)).with_jitter();

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;
