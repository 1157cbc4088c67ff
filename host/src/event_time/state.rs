//! Saved operator state: one file per batch, written to the table's location before any
//! commit of the batch and named in the table's snapshot summary (`sluice.state`): a
//! snapshot of the whole state, or a delta of what the batch changed that names the
//! snapshot and deltas it builds on (see [`super::delta`]).
//!
//! The file also holds the batch's *plan*: the offsets it read and the processing time
//! it ran at. After a crash between the state file and the table commit, the restarted
//! pipeline finds the plan of the next batch and replays exactly that plan, so its
//! results are the same as they would have been without the crash: a window that an
//! output already holds is not emitted with different contents, and none is missed.
//! With a commit cadence a batch is several triggers held into one commit, saved once:
//! its plan lists each of them ([`Plan::held`]), and the replay runs them one by one.
//!
//! Each process names its state files with its own run id (`<batch>-<run>.json`), so a
//! process fenced off the table (see [`crate::iceberg::fence`]) can never overwrite
//! the state another process committed for the same batch. The plan is found through a
//! small pointer at a name that does not depend on the run (`<batch>.json`), which a
//! restart can compute; state files of older versions of sluice were written at that name
//! whole, and read the same way.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::EventTime;
use super::delta::{
    Chain, ChainPaths, DELTA_SUFFIX, DELTA_VERSION, DeltaFile, DeltaFileRef, SNAPSHOT_SUFFIX,
};
use super::join::{SavedJoin, SavedJoinRef};
use super::watermark::Watermark;
use super::window::{Accumulator, PackedKey, SavedGroup};
use crate::checkpoint::lookups::Version;
use crate::units::{Micros, Millis};

pub use crate::checkpoint::STATE;
/// Snapshot summary key: the watermark after this commit, RFC 3339.
pub const WATERMARK: &str = "sluice.watermark";

/// The operators' state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedState {
    /// The watermark and its partitions.
    pub watermark: Watermark,
    /// Dedup keys and the event time of their first copy, in no order.
    pub dedup: Vec<(String, Micros)>,
    /// Open window groups, by window name, in no order.
    pub windows: BTreeMap<String, Vec<SavedGroup>>,
    /// The state of each join, by join name. Absent from the files of older versions, and
    /// of pipelines without joins (a binary snapshot carries it after the rest: see
    /// [`read_snapshot`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub joins: BTreeMap<String, SavedJoin>,
}

impl SavedState {
    /// The same state in one order (dedup keys, then groups by window start and key, join
    /// rows by id), to compare states.
    pub fn sorted(mut self) -> Self {
        self.dedup.sort_unstable();
        for groups in self.windows.values_mut() {
            groups.sort_unstable_by(|a, b| (a.start, &a.key).cmp(&(b.start, &b.key)));
        }
        self.joins = std::mem::take(&mut self.joins)
            .into_iter()
            .map(|(name, join)| (name, join.sorted()))
            .collect();
        self
    }
}

/// The operators' state, borrowed: serialised exactly like [`SavedState`], without copying
/// the state first.
#[derive(Debug, Serialize)]
pub struct SavedStateRef<'a> {
    /// The watermark and its partitions.
    pub watermark: &'a Watermark,
    /// Dedup keys and the event time of their first copy, in no order.
    pub dedup: Vec<(&'a str, Micros)>,
    /// Open window groups, by window name.
    pub windows: BTreeMap<&'a str, Vec<SavedGroupRef<'a>>>,
    /// The state of each join, by join name; not written when there is none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub joins: BTreeMap<&'a str, SavedJoinRef<'a>>,
}

/// A window group, borrowed (see [`SavedGroup`]).
#[derive(Debug, Serialize)]
pub struct SavedGroupRef<'a> {
    /// Window start.
    pub start: Micros,
    /// Group-by values.
    pub key: &'a PackedKey,
    /// Accumulators.
    pub acc: &'a [Accumulator],
}

/// A state file being written (see [`StateFile`]).
#[derive(Debug, Serialize)]
pub struct StateFileRef<'a> {
    /// Format version, 1.
    pub version: u32,
    /// The pipeline.
    pub pipeline: &'a str,
    /// The batch this state follows.
    pub plan: &'a Plan,
    /// The state after the batch.
    pub state: SavedStateRef<'a>,
}

/// What a batch read and when it ran: enough to replay it exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The batch id.
    pub batch_id: u64,
    /// Offsets the batch starts from, as JSON (see [`crate::record::Offsets::to_json`]).
    pub start: String,
    /// Offsets the batch ends at.
    pub end: String,
    /// Processing time of the batch.
    pub now_ms: Millis,
    /// When the run that planned the batch started (see
    /// [`super::watermark::Clock::session_start`]).
    pub session_start_ms: Millis,
    /// Whether the batch closed every open window (`at-end = "flush"`).
    pub flush: bool,
    /// With a commit cadence, the triggers held before the last one, in order (`end`,
    /// `now_ms` and `flush` are the last one's): a replay runs each as it ran. Kept in the
    /// plan's pointer ([`PlanFile`]) alone, so that the state files' layout (a snapshot's
    /// is binary) does not change.
    #[serde(skip)]
    pub held: Vec<TriggerPlan>,
    /// The version of every lookup table the batch saw (see [`crate::lookup`]): a replay
    /// rebuilds them there. Kept in the plan's pointer alone, as [`Plan::held`] is.
    #[serde(skip)]
    pub lookups: BTreeMap<String, Version>,
}

/// One trigger of a batch that held several (see [`Plan::held`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerPlan {
    /// Offsets the trigger ended at.
    pub end: String,
    /// Its processing time.
    pub now_ms: Millis,
    /// Whether it closed every open window.
    pub flush: bool,
}

impl Plan {
    /// Every trigger of the batch, in order: the held ones, then the last.
    pub fn triggers(&self) -> Vec<TriggerPlan> {
        let mut all = self.held.clone();
        all.push(TriggerPlan {
            end: self.end.clone(),
            now_ms: self.now_ms,
            flush: self.flush,
        });
        all
    }

    /// Adds a later trigger to a batch held for the commit cadence: this one's last
    /// trigger joins the held ones.
    pub fn then(&mut self, later: &Plan) {
        self.held.push(TriggerPlan {
            end: std::mem::replace(&mut self.end, later.end.clone()),
            now_ms: self.now_ms,
            flush: self.flush,
        });
        (self.now_ms, self.flush) = (later.now_ms, later.flush);
        self.held.extend(later.held.iter().cloned());
    }
}

/// A state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateFile {
    /// Format version, 1.
    pub version: u32,
    /// The pipeline.
    pub pipeline: String,
    /// The batch this state follows.
    pub plan: Plan,
    /// The state after the batch.
    pub state: SavedState,
}

/// How many batches' state files are kept behind the current one (and, further back, the
/// files of the chain the current one builds on: see [`forget_old`]).
pub const KEEP_STATE_FILES: u64 = 10;

/// Saving or loading the state failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The store failed.
    #[error("{0}")]
    Store(Box<dyn std::error::Error + Send + Sync>),
    /// The state cannot be serialised.
    #[error("cannot serialise the state: {0}")]
    Serialise(serde_json::Error),
    /// A snapshot cannot be encoded.
    #[error("cannot encode the state: {0}")]
    Encode(postcard::Error),
    /// A binary snapshot cannot be read.
    #[error("cannot decode {path}: {error}")]
    Undecodable {
        /// The file.
        path: String,
        /// Why.
        error: postcard::Error,
    },
    /// A state file cannot be read.
    #[error("cannot read {path}: {error}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        error: serde_json::Error,
    },
    /// The state file named by the table's last commit is missing.
    #[error("the state file {0} named by the table's last commit is missing")]
    Missing(String),
    /// A file of the chain of a delta is missing or does not follow the files before it.
    #[error("the state file {file}, in the chain of {named_by}, is missing or out of order")]
    Chain {
        /// The file of the chain.
        file: String,
        /// The delta that names it.
        named_by: String,
    },
}

impl StateError {
    /// A failure of the store.
    pub fn store(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        StateError::Store(Box::new(error))
    }
}

/// Where state files are kept: the table's storage in production
/// ([`crate::iceberg::TableFiles`]), [`MemoryStore`] in tests. Paths are full paths
/// below the table's location (see [`path`]).
pub trait StateStore: Send + Sync {
    /// Writes a whole file.
    fn put(&self, path: &str, bytes: Vec<u8>) -> Result<(), StateError>;
    /// Reads a whole file; `None` if it does not exist.
    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, StateError>;
    /// Deletes a file.
    fn delete(&self, path: &str) -> Result<(), StateError>;
}

/// A state store in memory; clones share the files.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore(Arc<Mutex<BTreeMap<String, Vec<u8>>>>);

impl MemoryStore {
    /// The paths held, in order.
    pub fn paths(&self) -> Vec<String> {
        self.files().keys().cloned().collect()
    }

    fn files(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl StateStore for MemoryStore {
    fn put(&self, path: &str, bytes: Vec<u8>) -> Result<(), StateError> {
        self.files().insert(path.to_string(), bytes);
        Ok(())
    }

    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.files().get(path).cloned())
    }

    fn delete(&self, path: &str) -> Result<(), StateError> {
        self.files().remove(path);
        Ok(())
    }
}

/// Reads a JSON file; `None` if it does not exist.
fn read<T: serde::de::DeserializeOwned>(
    store: &dyn StateStore,
    path: &str,
) -> Result<Option<T>, StateError> {
    Ok(read_sized(store, path)?.map(|(file, _)| file))
}

/// How a binary snapshot starts (then the [`StateFile`] in postcard).
const SNAPSHOT_MAGIC: &[u8] = b"sluice-state-snapshot\n";

/// Reads a snapshot and its size: binary if its name ends in [`SNAPSHOT_SUFFIX`], else a
/// whole-state JSON file (of an older version); `None` if it does not exist.
fn read_snapshot(
    store: &dyn StateStore,
    path: &str,
) -> Result<Option<(StateFile, u64)>, StateError> {
    if !path.ends_with(SNAPSHOT_SUFFIX) {
        return read_sized(store, path);
    }
    let Some(bytes) = store.get(path)? else {
        return Ok(None);
    };
    let undecodable = |error| StateError::Undecodable {
        path: path.to_string(),
        error,
    };
    let body = bytes
        .strip_prefix(SNAPSHOT_MAGIC)
        .ok_or(undecodable(postcard::Error::DeserializeBadEncoding))?;
    let (core, rest) = postcard::take_from_bytes::<CoreFile>(body).map_err(undecodable)?;
    let joins = if rest.is_empty() {
        BTreeMap::new()
    } else {
        postcard::from_bytes(rest).map_err(undecodable)?
    };
    let file = StateFile {
        version: core.version,
        pipeline: core.pipeline,
        plan: core.plan,
        state: SavedState {
            watermark: core.state.watermark,
            dedup: core.state.dedup,
            windows: core.state.windows,
            joins,
        },
    };
    Ok(Some((file, bytes.len() as u64)))
}

/// A binary snapshot as older versions wrote it whole, and as it starts now: the joins'
/// state, when there is any, follows it (postcard has no optional trailing fields).
#[derive(Deserialize)]
struct CoreFile {
    version: u32,
    pipeline: String,
    plan: Plan,
    state: CoreState,
}

/// See [`CoreFile`].
#[derive(Deserialize)]
struct CoreState {
    watermark: Watermark,
    dedup: Vec<(String, Micros)>,
    windows: BTreeMap<String, Vec<SavedGroup>>,
}

/// Reads a JSON file and its size; `None` if it does not exist.
fn read_sized<T: serde::de::DeserializeOwned>(
    store: &dyn StateStore,
    path: &str,
) -> Result<Option<(T, u64)>, StateError> {
    let Some(bytes) = store.get(path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(|file| Some((file, bytes.len() as u64)))
        .map_err(|error| StateError::Unreadable {
            path: path.to_string(),
            error,
        })
}

/// The pointer to a batch's plan and state file, at [`path`]. (A whole [`StateFile`] of
/// an older version reads as one with no `state_file`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanFile {
    /// The batch's plan.
    pub plan: Plan,
    /// The state file written with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_file: Option<String>,
    /// The triggers held before the plan's last (see [`Plan::held`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<TriggerPlan>,
    /// The lookup tables' versions (see [`Plan::lookups`]); absent in files of older
    /// versions and of batches without lookups.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lookups: BTreeMap<String, Version>,
}

/// Writes the pointer to a batch's plan (and its state file, if any) at [`path`]: a
/// restart finds the plan there ([`planned`]). Without event time, a pipeline with lookup
/// tables writes one with no state file, so that a crash replays the batch with the same
/// reference data.
pub fn write_plan(
    store: &dyn StateStore,
    location: &str,
    pipeline: &str,
    plan: &Plan,
    state_file: Option<String>,
) -> Result<(), StateError> {
    let pointer = PlanFile {
        plan: plan.clone(),
        state_file,
        held: plan.held.clone(),
        lookups: plan.lookups.clone(),
    };
    let pointer = serde_json::to_vec(&pointer).map_err(StateError::Serialise)?;
    store.put(&path(location, pipeline, plan.batch_id), pointer)
}

/// The plan of the next batch (its pointer at `next`) if it was planned from `positions`
/// but not committed: that batch is to be replayed first, exactly.
pub fn planned(store: &dyn StateStore, next: &str, positions: &str) -> Option<Plan> {
    match read::<PlanFile>(store, next) {
        Ok(Some(file)) if file.plan.start == positions => Some(Plan {
            held: file.held,
            lookups: file.lookups,
            ..file.plan
        }),
        Ok(Some(_)) => {
            tracing::warn!(state = %next, "ignoring a state file planned from other offsets");
            None
        }
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(state = %next, %error, "ignoring an unreadable state file");
            None
        }
    }
}

impl EventTime {
    /// Writes the state after a batch, with the batch's plan: a delta of what changed since
    /// the last save when the chain takes it, else a snapshot of the whole state (see
    /// [`super::delta`]). Returns the file's path and size. `run` tells this process's
    /// files from another's.
    pub fn save(
        &mut self,
        store: &dyn StateStore,
        location: &str,
        pipeline: &str,
        run: &str,
        plan: &Plan,
    ) -> Result<(String, u64), StateError> {
        let delta_file = delta_path(location, pipeline, plan.batch_id, run);
        let (state_file, bytes, chain) = match self.encode_delta(pipeline, plan, &delta_file)? {
            Some((bytes, chain)) => (delta_file, bytes, chain),
            None => {
                let path = run_path(location, pipeline, plan.batch_id, run);
                let (bytes, chain) = self.encode_snapshot(pipeline, plan, &path)?;
                (path, bytes, chain)
            }
        };
        let size = bytes.len() as u64;
        store.put(&state_file, bytes)?;
        write_plan(store, location, pipeline, plan, Some(state_file.clone()))?;
        self.track(chain);
        Ok((state_file, size))
    }

    /// The bytes of a delta file at `path` and the chain after it, if the current chain
    /// takes it.
    fn encode_delta(
        &self,
        pipeline: &str,
        plan: &Plan,
        path: &str,
    ) -> Result<Option<(Vec<u8>, Chain)>, StateError> {
        let Some(chain) = self.chain() else {
            return Ok(None);
        };
        if !chain.takes(self.changed_rows()) {
            return Ok(None);
        }
        let file = DeltaFileRef {
            version: DELTA_VERSION,
            pipeline,
            plan,
            chain: &chain.paths,
            delta: self.delta_ref(),
        };
        let bytes = serde_json::to_vec(&file).map_err(StateError::Serialise)?;
        if !chain.takes_bytes(bytes.len() as u64) {
            return Ok(None);
        }
        let mut next = chain.clone();
        next.paths.deltas.push(path.to_string());
        next.delta_bytes += bytes.len() as u64;
        Ok(Some((bytes, next)))
    }

    /// The bytes of a snapshot file at `path` and the chain that starts at it.
    fn encode_snapshot(
        &self,
        pipeline: &str,
        plan: &Plan,
        path: &str,
    ) -> Result<(Vec<u8>, Chain), StateError> {
        let file = StateFileRef {
            version: 1,
            pipeline,
            plan,
            state: self.save_ref(),
        };
        // `to_allocvec` appends with `extend_from_slice` (`to_extend` goes through `Extend`).
        let body = postcard::to_allocvec(&file).map_err(StateError::Encode)?;
        let mut bytes = Vec::with_capacity(SNAPSHOT_MAGIC.len() + body.len());
        bytes.extend_from_slice(SNAPSHOT_MAGIC);
        bytes.extend_from_slice(&body);
        let chain = Chain::new(path.to_string(), bytes.len() as u64, self.state_rows());
        Ok((bytes, chain))
    }

    /// After a restart: restores the state named by the table's last commit (`saved`, the
    /// `sluice.state` of its summary), and returns the plan of the next batch if it was
    /// planned from `positions` (its state file written) but not committed: that batch is
    /// to be replayed first. `resumed` says whether the table holds a commit of the
    /// pipeline at all.
    pub fn recover(
        &mut self,
        store: &dyn StateStore,
        saved: Option<&str>,
        resumed: bool,
        next: &str,
        positions: &str,
    ) -> Result<Option<Plan>, StateError> {
        match saved {
            Some(path) => {
                let chain = self.load(store, path)?;
                let files = chain.paths.deltas.len() + 1;
                self.track(chain);
                tracing::info!(state = %path, files, "restored event-time state");
            }
            None if resumed => tracing::warn!(
                "the table's last commit names no event-time state: starting with none"
            ),
            None => {}
        }
        Ok(planned(store, next, positions))
    }

    /// Restores the state saved at `path` (a snapshot, or a delta and its chain); returns
    /// the chain that ends there.
    fn load(&mut self, store: &dyn StateStore, path: &str) -> Result<Chain, StateError> {
        let missing = || StateError::Missing(path.into());
        if !path.ends_with(DELTA_SUFFIX) {
            let (file, bytes) = read_snapshot(store, path)?.ok_or_else(missing)?;
            self.restore(file.state);
            return Ok(Chain::new(path.into(), bytes, self.state_rows()));
        }
        let (last, last_bytes) = read_sized::<DeltaFile>(store, path)?.ok_or_else(missing)?;
        let broken = |file: &str| StateError::Chain {
            file: file.into(),
            named_by: path.into(),
        };
        let base = &last.chain.base;
        let (file, base_bytes) = read_snapshot(store, base)?.ok_or_else(|| broken(base))?;
        self.restore(file.state);
        let mut chain = Chain::new(base.clone(), base_bytes, self.state_rows());
        for delta in &last.chain.deltas {
            let (file, bytes) =
                read_sized::<DeltaFile>(store, delta)?.ok_or_else(|| broken(delta))?;
            if file.chain != chain.paths {
                return Err(broken(delta));
            }
            self.apply_delta(file.delta);
            chain.paths.deltas.push(delta.clone());
            chain.delta_bytes += bytes;
        }
        self.apply_delta(last.delta);
        chain.paths.deltas.push(path.into());
        chain.delta_bytes += last_bytes;
        Ok(chain)
    }
}

/// The state files that recovering from `path` reads: the file itself and, for a delta,
/// its chain. Cleanup must keep them all.
pub fn chain_files(store: &dyn StateStore, path: &str) -> Result<Vec<String>, StateError> {
    if !path.ends_with(DELTA_SUFFIX) {
        return Ok(vec![path.to_string()]);
    }
    #[derive(Deserialize)]
    struct ChainOnly {
        chain: ChainPaths,
    }
    let file: ChainOnly =
        read(store, path)?.ok_or_else(|| StateError::Missing(path.to_string()))?;
    let mut files = vec![file.chain.base];
    files.extend(file.chain.deltas);
    files.push(path.to_string());
    Ok(files)
}

/// Deletes, once `batch_id` is committed, the files of the batches that fall out of the
/// kept ones: those more than [`KEEP_STATE_FILES`] behind it and before `chain_start`,
/// the batch of the snapshot that the committed state builds on (see
/// [`super::delta::Chain::first_batch`]; 0 keeps everything). Each batch's pointer and the
/// state file it names go, newest first, down to a batch already forgotten.
pub fn forget_old(
    store: &dyn StateStore,
    location: &str,
    pipeline: &str,
    batch_id: u64,
    chain_start: u64,
) {
    let keep_from = (batch_id + 1)
        .saturating_sub(KEEP_STATE_FILES)
        .min(chain_start);
    for batch in (0..keep_from).rev() {
        let old = path(location, pipeline, batch);
        let named = match store.get(&old) {
            Ok(None) => break,
            Ok(Some(bytes)) => serde_json::from_slice::<PlanFile>(&bytes).ok(),
            Err(error) => {
                tracing::debug!(%error, "cannot read an old state file");
                break;
            }
        };
        for file in named.and_then(|p| p.state_file).iter().chain([&old]) {
            if let Err(error) = store.delete(file) {
                tracing::debug!(%error, "cannot delete an old state file");
            }
        }
    }
}

/// Where a table's state files go: beside the table, not in it, at
/// `<parent of the table's location>/_sluice-state/<table folder>`. Orphan-file cleanup
/// (Spark's `remove_orphan_files`, sluice's own) deletes every file below a table's location
/// that its metadata does not name, which state files never are; and an object-store
/// listing of the table's location as a prefix must not reach them either, hence not a
/// sibling named after the table. State files of older versions below the table's location
/// are still read (a commit names its state file by its whole path).
pub fn state_root(table_location: &str) -> String {
    let location = table_location.trim_end_matches('/');
    match location.rsplit_once('/') {
        Some((parent, table)) if !parent.ends_with('/') && !parent.is_empty() => {
            format!("{parent}/_sluice-state/{table}")
        }
        _ => format!("{location}/_sluice-state"),
    }
}

/// The path of the snapshot (a binary whole-state file) that the process `run` writes for
/// `batch_id`. (Older versions wrote whole-state JSON at `<batch>-<run>.json`.)
pub fn run_path(table_location: &str, pipeline: &str, batch_id: u64, run: &str) -> String {
    format!(
        "{}/{pipeline}/{batch_id:020}-{run}{SNAPSHOT_SUFFIX}",
        state_root(table_location)
    )
}

/// The path of the delta file that the process `run` writes for `batch_id` (see
/// [`super::delta`]).
pub fn delta_path(table_location: &str, pipeline: &str, batch_id: u64, run: &str) -> String {
    format!(
        "{}/{pipeline}/{batch_id:020}-{run}{DELTA_SUFFIX}",
        state_root(table_location)
    )
}

/// The path of the pointer to `batch_id`'s plan and state file (see [`state_root`]).
pub fn path(table_location: &str, pipeline: &str, batch_id: u64) -> String {
    format!(
        "{}/{pipeline}/{batch_id:020}.json",
        state_root(table_location)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operators() -> EventTime {
        EventTime::new(&super::super::tests::config(), None, &[])
    }

    fn plan(batch_id: u64, start: &str) -> Plan {
        Plan {
            batch_id,
            start: start.into(),
            end: "{}".into(),
            now_ms: Millis(7),
            session_start_ms: Millis(1),
            flush: false,
            held: Vec::new(),
            lookups: BTreeMap::new(),
        }
    }

    #[test]
    fn saved_state_is_recovered_with_the_plan_of_an_uncommitted_batch() {
        let store = MemoryStore::default();
        let mut et = operators();
        let fields = et.fields(Some(br#"{"ts":60000}"#)).unwrap();
        et.process([("t/0", &fields)], Millis(0), false);
        let (saved, size) = et
            .save(&store, "mem://t", "p", "run1", &plan(1, "a"))
            .unwrap();
        assert_eq!(saved, run_path("mem://t", "p", 1, "run1"));
        assert!(size > 0);
        // Batch 2 was planned from offsets "b" but not committed, then planned by another
        // process too: its state file does not replace the first one's.
        let next = path("mem://t", "p", 2);
        operators()
            .save(&store, "mem://t", "p", "run1", &plan(2, "b"))
            .unwrap();
        let (other_file, _) = operators()
            .save(&store, "mem://t", "p", "run2", &plan(2, "b"))
            .unwrap();
        assert_ne!(other_file, run_path("mem://t", "p", 2, "run1"));
        assert!(
            store
                .get(&run_path("mem://t", "p", 2, "run1"))
                .unwrap()
                .is_some()
        );
        let mut again = operators();
        let replay = again
            .recover(&store, Some(&saved), true, &next, "b")
            .unwrap();
        assert_eq!(replay, Some(plan(2, "b")));
        assert_eq!(again.watermark_at(Millis(0)), et.watermark_at(Millis(0)));
        // A plan from other offsets is not replayed; a missing named state is an error.
        let mut other = operators();
        assert_eq!(
            other
                .recover(&store, Some(&saved), true, &next, "c")
                .unwrap(),
            None
        );
        let missing = path("mem://t", "p", 9);
        assert!(matches!(
            other.recover(&store, Some(&missing), true, &next, "b"),
            Err(StateError::Missing(_))
        ));
    }

    /// A batch of held triggers (commit cadence) lists each in its plan's pointer, in
    /// order, and a restart gets them all back to replay; the state files do not carry
    /// them (a snapshot's binary layout is that of a plan of one trigger).
    #[test]
    fn the_plan_of_held_triggers_lists_each_and_is_recovered_whole() {
        let trigger = |end: &str, now: i64, flush: bool| TriggerPlan {
            end: end.into(),
            now_ms: Millis(now),
            flush,
        };
        let mut held = plan(2, "a");
        let later = |end: &str, now: i64, flush: bool| Plan {
            end: end.into(),
            now_ms: Millis(now),
            flush,
            ..plan(2, "x")
        };
        held.then(&later("b", 8, false));
        held.then(&later("c", 9, true));
        assert_eq!((held.start.as_str(), held.batch_id), ("a", 2));
        let all = [trigger("{}", 7, false), trigger("b", 8, false)];
        assert_eq!(held.held, all);
        assert_eq!(
            held.triggers(),
            [&all[..], &[trigger("c", 9, true)]].concat()
        );
        let store = MemoryStore::default();
        let mut et = operators();
        let (saved, _) = et.save(&store, "mem://t", "p", "r", &held).unwrap();
        let pointer = store.get(&path("mem://t", "p", 2)).unwrap().unwrap();
        let pointer: PlanFile = serde_json::from_slice(&pointer).unwrap();
        assert_eq!(pointer.held, all);
        let alone = Plan {
            held: Vec::new(),
            ..held.clone()
        };
        let file = read_snapshot(&store, &saved).unwrap().unwrap().0;
        assert_eq!(file.plan, alone);
        let encoded = |plan: &Plan| {
            let file = StateFileRef {
                version: 1,
                pipeline: "p",
                plan,
                state: et.save_ref(),
            };
            postcard::to_allocvec(&file).unwrap()
        };
        assert_eq!(encoded(&held), encoded(&alone));
        let next = path("mem://t", "p", 2);
        let replay = operators()
            .recover(&store, None, false, &next, "a")
            .unwrap();
        assert_eq!(replay, Some(held));
    }

    /// Without event time, a batch that saw lookup tables writes its plan alone, with the
    /// tables' versions; a restart gets them back. A pointer of an older version (no
    /// lookups) still reads.
    #[test]
    fn a_plan_alone_keeps_the_lookup_versions_and_old_pointers_still_read() {
        let store = MemoryStore::default();
        let mut planned_batch = plan(4, "a");
        let version = Version::Topic {
            offsets: BTreeMap::from([(0, 7), (1, 3)]),
        };
        planned_batch.lookups = BTreeMap::from([("profiles".into(), version)]);
        write_plan(&store, "mem://t", "p", &planned_batch, None).unwrap();
        let next = path("mem://t", "p", 4);
        let pointer = String::from_utf8(store.get(&next).unwrap().unwrap()).unwrap();
        assert!(
            pointer.contains(r#""lookups":{"profiles":{"kind":"topic""#),
            "{pointer}"
        );
        assert!(!pointer.contains("state_file"), "{pointer}");
        assert_eq!(planned(&store, &next, "a"), Some(planned_batch));
        assert_eq!(planned(&store, &next, "b"), None);
        let old = r#"{"plan":{"batch_id":5,"start":"a","end":"{}","now_ms":7,"session_start_ms":1,"flush":false},"state_file":"s"}"#;
        store.put(&path("mem://t", "p", 5), old.into()).unwrap();
        assert_eq!(
            planned(&store, &path("mem://t", "p", 5), "a"),
            Some(plan(5, "a"))
        );
    }

    /// A binary snapshot written from the borrowed state reads back as the owned one, with
    /// every kind of accumulator, partition clock and key.
    #[test]
    fn binary_snapshots_read_back_what_was_written() {
        use super::super::watermark::PartitionClock;
        let clock = |max_event| PartitionClock {
            max_event,
            last_seen: Millis(-3),
        };
        let acc = vec![
            Accumulator::Count(3),
            Accumulator::Sum(1.5, 2),
            Accumulator::Min(None),
            Accumulator::Max(Some(-2.25)),
            Accumulator::Avg(3.0, 2),
            Accumulator::Distinct([1, u64::MAX].into_iter().collect()),
        ];
        let group = SavedGroup {
            start: Micros(-60),
            key: vec![Some("Zoë".into()), None],
            acc,
        };
        let state = SavedState {
            watermark: Watermark {
                partitions: BTreeMap::from([
                    ("t/0".into(), clock(None)),
                    ("t/1".into(), clock(Some(Micros(i64::MIN)))),
                ]),
                current: Some(Micros(42)),
            },
            dedup: vec![("k\u{1f}1".into(), Micros(-5))],
            windows: BTreeMap::from([("w".into(), vec![group.clone()])]),
            joins: BTreeMap::new(),
        };
        let key = PackedKey::of(&group.key);
        let written = StateFileRef {
            version: 1,
            pipeline: "p",
            plan: &plan(3, "a"),
            state: SavedStateRef {
                watermark: &state.watermark,
                dedup: vec![(state.dedup[0].0.as_str(), state.dedup[0].1)],
                windows: BTreeMap::from([(
                    "w",
                    vec![SavedGroupRef {
                        start: group.start,
                        key: &key,
                        acc: &group.acc,
                    }],
                )]),
                joins: BTreeMap::new(),
            },
        };
        let store = MemoryStore::default();
        let bytes = postcard::to_extend(&written, SNAPSHOT_MAGIC.to_vec()).unwrap();
        store.put("x/1-r.snapshot.bin", bytes.clone()).unwrap();
        let (read, size) = read_snapshot(&store, "x/1-r.snapshot.bin")
            .unwrap()
            .unwrap();
        assert_eq!(read.state, state);
        assert_eq!(read.plan, plan(3, "a"));
        assert_eq!(size, bytes.len() as u64);
        store
            .put("x/2-r.snapshot.bin", bytes[1..].to_vec())
            .unwrap();
        assert!(matches!(
            read_snapshot(&store, "x/2-r.snapshot.bin"),
            Err(StateError::Undecodable { .. })
        ));
    }

    #[test]
    fn paths_sort_by_batch() {
        let a = path("file:///w/ns/t/", "p", 9);
        let b = path("file:///w/ns/t", "p", 10);
        assert_eq!(
            a,
            "file:///w/ns/_sluice-state/t/p/00000000000000000009.json"
        );
        assert!(a < b);
        let s3 = path("s3://bucket/wh/ns/t", "p", 1);
        assert_eq!(
            s3,
            "s3://bucket/wh/ns/_sluice-state/t/p/00000000000000000001.json"
        );
        assert!(
            !s3.starts_with("s3://bucket/wh/ns/t"),
            "outside the table's prefix"
        );
        assert_eq!(state_root("mem://t"), "mem://t/_sluice-state");
    }
}
