//! The saved forms of the operators' state: the whole state (owned, and borrowed for
//! writing), state files and the pointer to a batch's plan, and reading them back from a
//! store (binary snapshots, and the JSON files of older versions).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::store::{StateError, StateStore};
use crate::checkpoint::lookups::Version;
use crate::event_time::delta::SNAPSHOT_SUFFIX;
use crate::event_time::join::{SavedJoin, SavedJoinRef};
use crate::event_time::plan::{Plan, TriggerPlan};
use crate::event_time::watermark::Watermark;
use crate::event_time::window::{SavedGroup, SavedGroupRef};
use crate::units::Micros;

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

/// Reads a JSON file; `None` if it does not exist.
pub(crate) fn read<T: serde::de::DeserializeOwned>(
    store: &dyn StateStore,
    path: &str,
) -> Result<Option<T>, StateError> {
    Ok(read_sized(store, path)?.map(|(file, _)| file))
}

/// How a binary snapshot starts (then the [`StateFile`] in postcard).
pub(super) const SNAPSHOT_MAGIC: &[u8] = b"sluice-state-snapshot\n";

/// Reads a snapshot and its size: binary if its name ends in [`SNAPSHOT_SUFFIX`], else a
/// whole-state JSON file (of an older version); `None` if it does not exist.
pub(super) fn read_snapshot(
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
pub(super) fn read_sized<T: serde::de::DeserializeOwned>(
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

/// The pointer to a batch's plan and state file, at [`super::path`]. (A whole [`StateFile`] of
/// an older version reads as one with no `state_file`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanFile {
    /// The batch's plan (without its held triggers and lookups: see [`PlanFile::into_plan`]).
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
    /// The key of the batch a replay replays (see [`Plan::key`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// With state by partition: the state the batch built on there (absent in pointers
    /// of older versions, and in those put back for a replay): the batch can be replayed
    /// only from that state, while the table records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_on: Option<BuiltOn>,
}

/// The state a batch built on, in its pointer ([`PlanFile::built_on`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuiltOn {
    /// Its state file; `None`: a new task's, with none yet.
    pub state_file: Option<String>,
}

impl PlanFile {
    /// Whether the batch may be replayed from `recorded`, the state file the table records
    /// for the partition: it built on it (or its pointer does not say).
    pub fn replays_from(&self, recorded: Option<&String>) -> bool {
        self.built_on
            .as_ref()
            .is_none_or(|b| b.state_file.as_ref() == recorded)
    }
}

impl PlanFile {
    /// `plan` as its pointer holds it, as JSON (a window commit records it, see
    /// `checkpoint::BATCH_PLAN`).
    pub fn json_of(plan: &Plan) -> String {
        let file = PlanFile {
            plan: plan.clone(),
            state_file: None,
            held: plan.held.clone(),
            lookups: plan.lookups.clone(),
            key: plan.key.clone(),
            built_on: None,
        };
        serde_json::to_string(&file).unwrap_or_default()
    }

    /// A plan read back from [`PlanFile::json_of`].
    pub fn plan_of(json: &str) -> Option<Plan> {
        serde_json::from_str::<PlanFile>(json)
            .ok()
            .map(PlanFile::into_plan)
    }

    /// The whole plan: its held triggers and lookup versions put back.
    pub fn into_plan(self) -> Plan {
        Plan {
            held: self.held,
            lookups: self.lookups,
            key: self.key,
            ..self.plan
        }
    }
}
