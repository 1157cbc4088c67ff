//! Fenced commits: a batch commits only if the table still says what the batch was read
//! against, checked by the catalog itself, never by rebasing onto a newer snapshot.
//!
//! iceberg-rust's `Transaction::commit` reloads the table and re-applies an append on top
//! of whatever is current, so two writers of the same batch would both succeed. Here the
//! transaction runs through a [`PinnedCatalog`]: its reload returns the very table the
//! fence was checked against, so the append's requirement names that snapshot (the catalog
//! refuses the commit if the main branch moved since), and a refusal comes back at once
//! instead of being retried on a newer base. The caller then reloads, checks the fence
//! again, and retries or gives up (see [`super::IcebergTable::commit`]).

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, Namespace, NamespaceIdent, TableCommit, TableCreation, TableIdent,
};

use crate::checkpoint::CommitMark;
use crate::record::Offsets;

/// What the table must show for a commit to go ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fence {
    /// The pipeline's last commit is the batch before the mark's, and records these
    /// offsets (where the batch started) for every partition the batch read: nobody
    /// committed those partitions since the batch was read.
    Follows(Offsets),
    /// For the partitions this process owns in a consumer group: the pipeline's last commit
    /// records these offsets (where the batch started) for them, whatever other members
    /// committed for theirs. The mark is then built at commit time: the last commit's
    /// offsets with this batch's on top, and the next batch id (see [`Fence::mark`]).
    Owns {
        /// Where the batch started on each partition.
        start: Offsets,
        /// With state by partition: the state file the last commit records for each
        /// partition whose task this process runs (`None`: none), the one its state builds
        /// on (`sluice.state-shares`). Another member that committed one of them since, even
        /// without reading further (a batch of no records), recorded another: a member
        /// frozen meanwhile is fenced off (see [`Fence::check_states`]).
        states: Option<BTreeMap<String, Option<String>>>,
        /// With state by partition: the claim the last commit recorded for each of them
        /// when this process took them (`sluice.claims`; `None`: none). Another member
        /// that claimed one since fences this process's batches off (see
        /// [`Fence::check_states`]).
        claims: Option<BTreeMap<String, Option<String>>>,
    },
    /// The table does not hold the mark's batch yet: each batch's results land once (window
    /// tables).
    NotHeld,
    /// For a derived table (windows) written by the members of a group, each of its own
    /// partitions: the table's last commit of the pipeline does not record `key` (the
    /// batch's plan) for these partitions (`sluice.batch-keys`, merged by partition): a
    /// batch replayed after a crash lands once, whoever replays it. The mark is built at
    /// commit time, as for [`Fence::Owns`].
    Keyed {
        /// The batch's key: its plan's, the same when it is replayed.
        key: String,
        /// The partitions (`topic/partition`) whose rows the batch holds, with the
        /// offsets the batch read each from and to. A partition the table records a later
        /// batch of (one that read past this one's start) moved on to another member.
        partitions: BTreeMap<String, (i64, i64)>,
        /// With state by partition: for each of the partitions, the generation of the
        /// state the batch builds on (the batch its task's state file was saved by, see
        /// [`crate::event_time::delta::batch_of`]; 0 for a task with none yet). Another
        /// batch's entry that built on a state no older fences this batch off, though
        /// neither read past the other: two batches of no records from one state (a
        /// member frozen while another took the partition) never both land.
        bases: BTreeMap<String, u64>,
    },
}

/// Why a fence does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fenced {
    /// Another commit of the pipeline came in between.
    Moved {
        /// The batch the table's last commit of the pipeline is.
        found_batch: Option<u64>,
        /// A partition whose recorded offset is not where the batch started, if one is.
        partition: Option<String>,
        /// Where the batch started on it.
        expected: Option<i64>,
        /// What the table records for it.
        found: Option<i64>,
    },
    /// The table holds the batch already.
    Held,
    /// Another batch's window commit built on the state this one builds on for a
    /// partition, reading no further ([`Fence::Keyed`]'s `bases`): it took that step first.
    SameState {
        /// The partition.
        partition: String,
        /// Where both batches started on it.
        offset: i64,
    },
    /// Another member claimed a partition ([`Fence::Owns`]'s `claims`).
    Claimed {
        /// The partition.
        partition: String,
    },
    /// Another commit recorded another state file for a partition ([`Fence::Owns`]'s
    /// `states`).
    StateMoved {
        /// The partition.
        partition: String,
        /// The state file this batch's state builds on.
        expected: Option<String>,
        /// The one the table records.
        found: Option<String>,
    },
}

impl Fence {
    /// Checks the fence for `mark` against `last`, the table's last commit of the pipeline.
    pub fn check(&self, mark: &CommitMark, last: Option<&CommitMark>) -> Result<(), Fenced> {
        let found_batch = last.map(|m| m.batch_id);
        match self {
            Fence::NotHeld if found_batch.is_some_and(|b| b >= mark.batch_id) => Err(Fenced::Held),
            Fence::NotHeld | Fence::Keyed { .. } => Ok(()),
            Fence::Owns { start, .. } => match moved_partition(start, last) {
                Some((partition, expected, found)) => Err(Fenced::Moved {
                    found_batch,
                    partition: Some(partition),
                    expected: Some(expected),
                    found,
                }),
                None => Ok(()),
            },
            Fence::Follows(start) => {
                if let Some((partition, expected, found)) = moved_partition(start, last) {
                    return Err(Fenced::Moved {
                        found_batch,
                        partition: Some(partition),
                        expected: Some(expected),
                        found,
                    });
                }
                if found_batch.unwrap_or(0) + 1 != mark.batch_id {
                    return Err(Fenced::Moved {
                        found_batch,
                        partition: None,
                        expected: None,
                        found: None,
                    });
                }
                Ok(())
            }
        }
    }
}

impl Fence {
    /// The mark to commit for `planned` after `last`: `planned` itself, except for
    /// [`Fence::Owns`], where it is the next batch after `last` with `last`'s offsets and
    /// `planned`'s on top (so each commit records the whole pipeline's offsets); the same
    /// for [`Fence::Keyed`].
    pub fn mark(&self, planned: &CommitMark, last: Option<&CommitMark>) -> CommitMark {
        match self {
            Fence::Owns { .. } | Fence::Keyed { .. } => {
                let mut offsets = last.map(|m| m.offsets.clone()).unwrap_or_default();
                for (tp, &next) in &planned.offsets.0 {
                    offsets.set(tp.clone(), next);
                }
                CommitMark {
                    pipeline: planned.pipeline.clone(),
                    batch_id: last.map_or(0, |m| m.batch_id) + 1,
                    offsets,
                }
            }
            Fence::Follows(_) | Fence::NotHeld => planned.clone(),
        }
    }
}

impl Fence {
    /// For [`Fence::Keyed`]: the batch's key, where it ended on each of its partitions and
    /// the generation of the state it built on there, as the commit records them
    /// (`sluice.batch-keys`: `topic/partition` → `key@end@base`, see [`BatchEntry`]).
    pub fn batch_keys(&self) -> Option<String> {
        let Fence::Keyed {
            key,
            partitions,
            bases,
        } = self
        else {
            return None;
        };
        let entry = |p: &String, end: i64| BatchEntry {
            key: key.clone(),
            end,
            base: bases.get(p).copied(),
        };
        let keys: BTreeMap<&str, String> = partitions
            .iter()
            .map(|(p, &(_, end))| (p.as_str(), entry(p, end).to_string()))
            .collect();
        serde_json::to_string(&keys).ok()
    }

    /// For [`Fence::Keyed`], against the batch keys the table's last commit records
    /// (`recorded`, see [`Fence::batch_keys`]): `Ok(true)` if it records this batch for one
    /// of its partitions (it landed), `Ok(false)` if it records none past where the batch
    /// started on each (nor built on a state as new, see [`BatchEntry::fences`]), else
    /// the first partition that moved on. Other fences: `Ok(false)`.
    pub fn keyed(&self, recorded: Option<&str>) -> Result<bool, Fenced> {
        let Fence::Keyed {
            key, partitions, ..
        } = self
        else {
            return Ok(false);
        };
        let recorded = recorded_keys(recorded);
        if partitions
            .keys()
            .any(|p| recorded.get(p).is_some_and(|(e, _)| e.key == *key))
        {
            return Ok(true);
        }
        let Some((p, entry, _)) = self.fenced_by_entry(&recorded) else {
            return Ok(false);
        };
        let start = partitions.get(&p).map_or(entry.end, |&(start, _)| start);
        Err(if entry.end > start {
            Fenced::Moved {
                found_batch: None,
                partition: Some(p),
                expected: Some(start),
                found: Some(entry.end),
            }
        } else {
            Fenced::SameState {
                partition: p,
                offset: start,
            }
        })
    }

    /// For [`Fence::Owns`] with `states`, against the state files the table's last commit
    /// of the pipeline records (its `sluice.state-shares` property, `shares`) and its
    /// claims (`sluice.claims`, `claims`): the first partition whose file is not the one
    /// expected, or that another member claimed since. Other fences: `Ok(())`.
    pub fn check_states(&self, shares: Option<&str>, claims: Option<&str>) -> Result<(), Fenced> {
        let Fence::Owns {
            states: Some(states),
            claims: ours,
            ..
        } = self
        else {
            return Ok(());
        };
        if let Some((partition, expected, found)) = first_other(states, shares) {
            return Err(Fenced::StateMoved {
                partition,
                expected,
                found,
            });
        }
        match ours.as_ref().and_then(|ours| first_other(ours, claims)) {
            Some((partition, _, _)) => Err(Fenced::Claimed { partition }),
            None => Ok(()),
        }
    }

    /// For [`Fence::Keyed`]: the batch's key.
    pub fn batch_key(&self) -> Option<String> {
        match self {
            Fence::Keyed { key, .. } => Some(key.clone()),
            _ => None,
        }
    }

    /// For [`Fence::Keyed`]: where the batch read each of its partitions from and to, as
    /// the commit records it (`sluice.batch-range`).
    pub fn batch_range(&self) -> Option<String> {
        let Fence::Keyed { partitions, .. } = self else {
            return None;
        };
        serde_json::to_string(partitions).ok()
    }

    /// For [`Fence::Keyed`], against the batch keys the table's last commit records: the
    /// first of the batch's partitions whose entry names another batch that read past
    /// where this one starts or built on a state as new (see [`BatchEntry::fences`]), as
    /// (partition, that batch's key, its entry).
    pub fn fenced_by(&self, recorded: Option<&str>) -> Option<(String, String, String)> {
        let recorded = recorded_keys(recorded);
        let (p, entry, text) = self.fenced_by_entry(&recorded)?;
        Some((p, entry.key.clone(), text.to_string()))
    }

    /// [`Fence::fenced_by`] over entries read back: the partition, the entry and its text.
    fn fenced_by_entry<'a>(
        &self,
        recorded: &'a BTreeMap<String, (BatchEntry, String)>,
    ) -> Option<(String, &'a BatchEntry, &'a str)> {
        let Fence::Keyed {
            key,
            partitions,
            bases,
        } = self
        else {
            return None;
        };
        partitions.iter().find_map(|(p, &(start, _))| {
            let (entry, text) = recorded.get(p)?;
            (entry.fences(key, start, bases.get(p).copied()))
                .then(|| (p.clone(), entry, text.as_str()))
        })
    }

    /// For [`Fence::Keyed`]: whether `recorded` holds this batch on all its partitions.
    pub fn keyed_landed(&self, recorded: Option<&str>) -> bool {
        let Fence::Keyed {
            key, partitions, ..
        } = self
        else {
            return false;
        };
        let recorded = recorded_keys(recorded);
        partitions
            .keys()
            .all(|p| recorded.get(p).is_some_and(|(e, _)| e.key == *key))
    }
}

/// The first partition of `expected` whose value in `recorded` (a JSON object by
/// partition) is another, with both.
fn first_other(
    expected: &BTreeMap<String, Option<String>>,
    recorded: Option<&str>,
) -> Option<(String, Option<String>, Option<String>)> {
    let recorded: BTreeMap<String, String> = recorded
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
    expected.iter().find_map(|(partition, expected)| {
        let found = recorded.get(partition);
        (found != expected.as_ref()).then(|| (partition.clone(), expected.clone(), found.cloned()))
    })
}

/// One partition's entry of `sluice.batch-keys`: `key@end`, and `@base` after it where
/// the batch recorded the generation of the state it built on (see [`Fence::Keyed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchEntry {
    /// The batch's key (a plan's hash: it holds no `@`).
    pub key: String,
    /// Where the batch ended on the partition.
    pub end: i64,
    /// The generation of the state it built on there; `None` in entries of older
    /// versions of sluice.
    pub base: Option<u64>,
}

impl BatchEntry {
    /// The entry's text read back; `None` if it is not one.
    pub fn parse(text: &str) -> Option<BatchEntry> {
        let (key, rest) = text.split_once('@')?;
        let (end, base) = match rest.split_once('@') {
            Some((end, base)) => (end, Some(base.parse().ok()?)),
            None => (rest, None),
        };
        Some(BatchEntry {
            key: key.to_string(),
            end: end.parse().ok()?,
            base,
        })
    }

    /// Whether this entry fences off another batch, keyed `key`, that starts on the
    /// partition at `start` from a state of generation `base`: it is another batch's that
    /// read past `start`, or that built on a state no older (it took the step from that
    /// state first; the batch's own predecessor built on an older one).
    pub fn fences(&self, key: &str, start: i64, base: Option<u64>) -> bool {
        let as_new = matches!((self.base, base), (Some(theirs), Some(ours)) if theirs >= ours);
        self.key != key && (self.end > start || as_new)
    }
}

impl std::fmt::Display for BatchEntry {
    /// The entry's text, as [`BatchEntry::parse`] reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.key, self.end)?;
        match self.base {
            Some(base) => write!(f, "@{base}"),
            None => Ok(()),
        }
    }
}

/// `sluice.batch-keys` read back: partition → (entry, its text); unreadable entries are
/// left out.
fn recorded_keys(recorded: Option<&str>) -> BTreeMap<String, (BatchEntry, String)> {
    let map: BTreeMap<String, String> = recorded
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
    map.into_iter()
        .filter_map(|(p, text)| Some((p, (BatchEntry::parse(&text)?, text))))
        .collect()
}

/// The first partition of `start` whose offset in `last` is another one.
fn moved_partition(
    start: &Offsets,
    last: Option<&CommitMark>,
) -> Option<(String, i64, Option<i64>)> {
    start.0.iter().find_map(|(tp, &expected)| {
        let found = last.and_then(|m| m.offsets.get(tp));
        found
            .is_some_and(|f| f != expected)
            .then(|| (tp.to_string(), expected, found))
    })
}

impl std::fmt::Display for Fenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fenced::Held => write!(f, "the table holds this batch already"),
            Fenced::Moved {
                found_batch,
                partition: Some(p),
                expected,
                found,
            } => write!(
                f,
                "another commit (batch {}) recorded offset {} for {p}, but this batch started at {}",
                found_batch.map_or("-".into(), |b| b.to_string()),
                found.map_or("-".into(), |o| o.to_string()),
                expected.map_or("-".into(), |o| o.to_string()),
            ),
            Fenced::SameState { partition, offset } => write!(
                f,
                "another batch of {partition} from offset {offset} built on the state this batch builds on, and landed its window rows first"
            ),
            Fenced::Claimed { partition } => write!(
                f,
                "{partition} was claimed (by another member, or by this process for a later batch) since this batch was planned"
            ),
            Fenced::StateMoved {
                partition,
                expected,
                found,
            } => write!(
                f,
                "another commit recorded the state of {partition} in {}, but this batch's state builds on {}",
                found.as_deref().unwrap_or("no file"),
                expected.as_deref().unwrap_or("no file"),
            ),
            Fenced::Moved { found_batch, .. } => write!(
                f,
                "the table's last commit of the pipeline is batch {}, not the one before this batch",
                found_batch.map_or("none".into(), |b| b.to_string())
            ),
        }
    }
}

/// A catalog whose reload of one table returns that table as it was checked, and whose
/// commit conflicts are not retryable: a transaction through it commits against the
/// checked snapshot or not at all.
#[derive(Debug)]
pub(super) struct PinnedCatalog<'a> {
    /// The real catalog.
    pub(super) inner: &'a dyn Catalog,
    /// The table as the fence was checked against.
    pub(super) table: &'a Table,
}

#[async_trait]
impl Catalog for PinnedCatalog<'_> {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> iceberg::Result<Vec<NamespaceIdent>> {
        self.inner.list_namespaces(parent).await
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> iceberg::Result<Namespace> {
        self.inner.create_namespace(namespace, properties).await
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> iceberg::Result<Namespace> {
        self.inner.get_namespace(namespace).await
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> iceberg::Result<bool> {
        self.inner.namespace_exists(namespace).await
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> iceberg::Result<()> {
        self.inner.update_namespace(namespace, properties).await
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> iceberg::Result<()> {
        self.inner.drop_namespace(namespace).await
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> iceberg::Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> iceberg::Result<Table> {
        self.inner.create_table(namespace, creation).await
    }

    async fn load_table(&self, table: &TableIdent) -> iceberg::Result<Table> {
        if table == self.table.identifier() {
            return Ok(self.table.clone());
        }
        self.inner.load_table(table).await
    }

    async fn drop_table(&self, table: &TableIdent) -> iceberg::Result<()> {
        self.inner.drop_table(table).await
    }

    async fn purge_table(&self, table: &TableIdent) -> iceberg::Result<()> {
        self.inner.purge_table(table).await
    }

    async fn table_exists(&self, table: &TableIdent) -> iceberg::Result<bool> {
        self.inner.table_exists(table).await
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> iceberg::Result<()> {
        self.inner.rename_table(src, dest).await
    }

    async fn register_table(
        &self,
        table: &TableIdent,
        metadata_location: String,
    ) -> iceberg::Result<Table> {
        self.inner.register_table(table, metadata_location).await
    }

    async fn update_table(&self, commit: TableCommit) -> iceberg::Result<Table> {
        self.inner.update_table(commit).await.map_err(|error| {
            if error.kind() == ErrorKind::CatalogCommitConflicts {
                Error::new(
                    ErrorKind::CatalogCommitConflicts,
                    error.message().to_string(),
                )
                .with_retryable(false)
                .with_source(error)
            } else {
                error
            }
        })
    }
}

#[cfg(test)]
#[path = "fence_tests.rs"]
mod tests;
