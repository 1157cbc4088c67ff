//! The files of a pipeline's state beside its table: where they go, the pointer to each
//! batch's plan, the chain a recovery reads, which files cleanup deletes, and which old
//! ones `sluice maintain` deletes ([`old_state_files`]).

use std::collections::HashSet;
use std::time::SystemTime;

use serde::Deserialize;

use super::saved::{BuiltOn, PlanFile, read};
use super::shares::shares_from_json;
use super::store::{StateError, StateStore};
use crate::checkpoint::{BATCH_ID, OFFSETS, STATE, STATE_SHARES};
use crate::event_time::delta::{ChainPaths, DELTA_SUFFIX, SNAPSHOT_SUFFIX};
use crate::event_time::plan::Plan;
use crate::iceberg::IcebergTable;
use crate::iceberg::listing::normalize;
use crate::record::{Offsets, TopicPartition};

/// How many batches' state files are kept behind the current one (and, further back, the
/// files of the chain the current one builds on: see [`forget_old`]).
pub const KEEP_STATE_FILES: u64 = 10;

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
    write_plan_at(
        store,
        &path(location, pipeline, plan.batch_id),
        plan,
        state_file,
    )
}

/// Writes the pointer to a batch's plan (and its state file, if any) at `at`.
pub fn write_plan_at(
    store: &dyn StateStore,
    at: &str,
    plan: &Plan,
    state_file: Option<String>,
) -> Result<(), StateError> {
    write_pointer(store, at, plan, state_file, None)
}

/// Writes the pointer to a batch's plan at `at`, with its state file and the state it
/// built on (see [`PlanFile::built_on`]).
pub fn write_pointer(
    store: &dyn StateStore,
    at: &str,
    plan: &Plan,
    state_file: Option<String>,
    built_on: Option<BuiltOn>,
) -> Result<(), StateError> {
    let pointer = PlanFile {
        plan: plan.clone(),
        state_file,
        held: plan.held.clone(),
        lookups: plan.lookups.clone(),
        key: plan.key.clone(),
        built_on,
    };
    let pointer = serde_json::to_vec(&pointer).map_err(StateError::Serialise)?;
    store.put(at, pointer)
}

/// The plan of the next batch (its pointer at `next`) if it was planned from `positions`
/// but not committed: that batch is to be replayed first, exactly.
pub fn planned(store: &dyn StateStore, next: &str, positions: &str) -> Option<Plan> {
    match read::<PlanFile>(store, next) {
        Ok(Some(file)) if file.plan.start == positions => Some(file.into_plan()),
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
/// [`crate::event_time::delta::Chain::first_batch`]; 0 keeps everything). Each batch's pointer and the
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
/// [`crate::event_time::delta`]).
pub fn delta_path(table_location: &str, pipeline: &str, batch_id: u64, run: &str) -> String {
    format!(
        "{}/{pipeline}/{batch_id:020}-{run}{DELTA_SUFFIX}",
        state_root(table_location)
    )
}

/// With state kept by partition: the path of the pointer to the plan of the batch that
/// read `partition` (`topic/partition`) from `start`, whatever process planned it.
pub fn partition_plan_path(
    table_location: &str,
    pipeline: &str,
    partition: &str,
    start: i64,
) -> String {
    let name: String = partition
        .chars()
        .map(|c| if c == '/' { '@' } else { c })
        .collect();
    format!(
        "{}/{pipeline}/plans/{name}-{start:020}.json",
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

/// With state by partition, whether the plan pointer at `location`
/// ([`partition_plan_path`]) is of a batch that started before the partition's committed
/// offset: nothing looks it up any more.
fn plan_passed(location: &str, committed: &Offsets) -> bool {
    let Some(name) = location
        .rsplit_once("/plans/")
        .and_then(|(_, n)| n.strip_suffix(".json"))
    else {
        return false;
    };
    let Some((partition, start)) = name.rsplit_once('-') else {
        return false;
    };
    let (Some((topic, number)), Ok(start)) = (partition.rsplit_once('@'), start.parse::<i64>())
    else {
        return false;
    };
    let tp = TopicPartition {
        topic: topic.into(),
        partition: number.parse().unwrap_or(-1),
    };
    committed.get(&tp).is_some_and(|next| start < next)
}

/// The state files of each pipeline that left a mark in `table`, below its latest mark's
/// batch by more than sluice keeps ([`KEEP_STATE_FILES`]), that the mark does not name,
/// that the state it names does not build on (the snapshot and deltas of its chain) and
/// that were last modified before `cutoff`; with state by partition, the same of every
/// partition's state, and the pointers to plans of batches that started before the
/// partition's committed offset; their locations.
pub fn old_state_files(
    table: &IcebergTable,
    cutoff: SystemTime,
) -> Result<Vec<String>, StateError> {
    let root = state_root(table.location());
    let mut old = Vec::new();
    for pipeline in table.mark_snapshots().map_err(StateError::store)?.keys() {
        let props = table
            .last_mark_properties(pipeline)
            .map_err(StateError::store)?
            .unwrap_or_default();
        // The named files (with state by partition, each partition's) and, for a delta,
        // the snapshot and deltas it builds on.
        let mut named: Vec<String> = props.get(STATE).cloned().into_iter().collect();
        let shares = props.get(STATE_SHARES).and_then(|s| shares_from_json(s));
        named.extend(shares.unwrap_or_default().into_values());
        let mut live = HashSet::new();
        for file in &named {
            live.extend(
                chain_files(&table.files(), file)?
                    .iter()
                    .map(|f| normalize(f)),
            );
        }
        let committed = props
            .get(OFFSETS)
            .and_then(|o| Offsets::from_json(o).ok())
            .unwrap_or_default();
        let batch = props
            .get(BATCH_ID)
            .and_then(|b| b.parse::<u64>().ok())
            .unwrap_or(0);
        let keep_from = batch.saturating_sub(KEEP_STATE_FILES);
        let listed = table
            .files_below(&format!("{root}/{pipeline}"))
            .map_err(StateError::store)?;
        for file in listed {
            let file_batch = file
                .location
                .rsplit('/')
                .next()
                .and_then(|n| n.get(..20))
                .and_then(|b| b.parse::<u64>().ok());
            let passed = file_batch.map_or_else(
                || plan_passed(&file.location, &committed),
                |b| b < keep_from,
            );
            if passed && !live.contains(&file.location) && file.older_than(cutoff) {
                old.push(file.location);
            }
        }
    }
    Ok(old)
}

#[cfg(test)]
mod plan_tests {
    use super::*;

    #[test]
    fn a_partitions_plan_pointer_is_passed_once_its_partition_committed_beyond_it() {
        let mut committed = Offsets::default();
        let tp = |topic: &str, partition| TopicPartition {
            topic: topic.into(),
            partition,
        };
        committed.set(tp("my-topic.v1", 2), 40);
        let at = |partition: &str, start| partition_plan_path("s3://b/wh/t", "p", partition, start);
        assert!(plan_passed(&at("my-topic.v1/2", 39), &committed));
        assert!(
            !plan_passed(&at("my-topic.v1/2", 40), &committed),
            "may be unfinished"
        );
        assert!(
            !plan_passed(&at("my-topic.v1/3", 1), &committed),
            "not committed yet"
        );
        assert!(!plan_passed(
            "s3://b/_sluice-state/t/p/00000000000000000001.json",
            &committed
        ));
    }
}
