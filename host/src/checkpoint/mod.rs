//! Commit marks: what each table commit records about the pipeline, and how a restarted
//! pipeline finds where it stopped.
//!
//! Each batch is committed to the table in one snapshot whose summary carries the
//! pipeline's name, the batch id, the next Kafka offset of every partition the pipeline
//! owns, and a deterministic commit id. The table is the only checkpoint: data and offsets
//! change in the same atomic commit, so they cannot drift apart. [`lookups`]: the version of
//! each lookup table a batch saw, recorded in its plan and its commit.

pub mod lookups;

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::record::Offsets;

/// Snapshot summary key: the pipeline's name.
pub const PIPELINE: &str = "sluice.pipeline";
/// Snapshot summary key: the batch id (1, 2, ...; counted per pipeline).
pub const BATCH_ID: &str = "sluice.batch-id";
/// Snapshot summary key of a group member's commit, whose batch id is given at commit time
/// (the next after the table's last): the batch id it planned (its last commit's plus
/// one), which tells its commits apart when one moved no offset (a batch of no records
/// that closed windows) and found the same offsets as the one before.
pub const PLANNED_BATCH: &str = "sluice.planned-batch";
/// Snapshot summary key: the deterministic commit id.
pub const COMMIT_ID: &str = "sluice.commit-id";
/// Snapshot summary key: the next offset of every owned partition, as JSON.
pub const OFFSETS: &str = "sluice.offsets";
/// Snapshot summary key: the process that committed (its run id), which tells a commit of
/// this process from the same batch committed by another.
pub const RUN: &str = "sluice.run";
/// Snapshot summary key: the path of the state file after this commit.
pub const STATE: &str = "sluice.state";
/// Snapshot summary key: in a group whose members own the event-time state of their
/// partitions, the state file that holds each partition's share, as a JSON object
/// (`topic/partition` → path), merged at commit time ([`MERGED_BY_PARTITION`]).
pub const STATE_SHARES: &str = "sluice.state-shares";
/// Snapshot summary keys whose JSON object, keyed by partition, a member's commit puts on
/// top of the last commit's (as its offsets are, see `iceberg::fence`): each member says
/// only what it knows of its own partitions.
/// A commit without one of them leaves the last commit's as it is.
pub const MERGED_BY_PARTITION: &[&str] = &[STATE_SHARES, BATCH_KEYS, REPARTITION_SEEN, CLAIMS];
/// Snapshot summary key: in a group whose members own the event-time state of their
/// partitions, the partitions a member claimed (`topic/partition` → a token of its own),
/// merged by partition. A member whose batch was planned before a claim of one of its
/// partitions is fenced off the table: a member claims partitions to make sure that the
/// batch of a window commit left behind can never count (see `iceberg::compact::orphan`).
pub const CLAIMS: &str = "sluice.claims";
/// Snapshot summary key of stage two of a repartition topic: per partition of the topic
/// (`topic/partition`), the last offset it took from each source partition, as JSON (see
/// `event_time::repartition::Seen`), merged by partition.
pub const REPARTITION_SEEN: &str = "sluice.repartition-seen";
/// Snapshot summary key of a derived table (windows) written by the members of a group:
/// the key of the last batch whose rows it holds for each partition, as a JSON object
/// (`topic/partition` → `key@end`), merged at commit time: a batch replayed after a crash
/// finds its key there and lands once (see `iceberg::fence`). The main table's commits by
/// partition record their batch's key the same way: whether a batch was replayed by
/// another member shows in the main table's history.
pub const BATCH_KEYS: &str = "sluice.batch-keys";
/// Snapshot summary key of a window commit of a group member: what [`BATCH_KEYS`] recorded
/// for the batch's partitions before it (`topic/partition` → entry, or `null`), so that the
/// commit can be taken back if its batch never reaches the main table.
pub const BATCH_KEYS_BEFORE: &str = "sluice.batch-keys-before";
/// Snapshot summary key of a window commit of a group member: the offsets its batch read
/// each of its partitions from and to (`topic/partition` → `[start, end]`), so that a
/// later member can tell whether that batch can still count.
pub const BATCH_RANGE: &str = "sluice.batch-range";
/// Snapshot summary key of a window commit of a group member: its batch's plan (as its
/// pointers hold it, JSON), to find those pointers by, or to replay it where none is left.
pub const BATCH_PLAN: &str = "sluice.batch-plan";
/// Snapshot summary key of a snapshot that took back a window commit: its commit id.
pub const UNDONE: &str = "sluice.undone";

/// `ours` (a JSON object of texts, keyed by partition) on top of `last` (the same, from the
/// last commit); an unreadable `last` counts as empty, an unreadable `ours` is kept as is.
pub fn merged_by_partition(last: Option<&str>, ours: &str) -> String {
    type Map = std::collections::BTreeMap<String, String>;
    let Ok(ours_map) = serde_json::from_str::<Map>(ours) else {
        return ours.to_string();
    };
    let mut merged: Map = last
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    merged.extend(ours_map);
    serde_json::to_string(&merged).unwrap_or_else(|_| ours.to_string())
}

/// Whether `recorded` (a JSON object of texts, keyed by partition, as a commit records
/// it) holds every entry of `ours` (the same); unreadable texts hold only themselves.
pub fn holds_by_partition(recorded: Option<&str>, ours: &str) -> bool {
    type Map = std::collections::BTreeMap<String, String>;
    let parse = |text: &str| serde_json::from_str::<Map>(text).ok();
    match (recorded.and_then(parse), parse(ours)) {
        (Some(recorded), Some(ours)) => ours.iter().all(|(k, v)| recorded.get(k) == Some(v)),
        _ => recorded == Some(ours),
    }
}

/// Snapshot summary key: the watermark after this commit, RFC 3339.
pub const WATERMARK: &str = "sluice.watermark";
/// Snapshot summary key: the last record read of every partition, as JSON (see
/// `source::identity`).
pub const LAST_RECORDS: &str = "sluice.last-records";
/// Snapshot summary key: rows of the batch sent to the dead-letter topic.
pub const DEAD_LETTERED: &str = "sluice.dead-lettered";
/// Snapshot summary key: data loss accepted since the last commit (`on-data-loss =
/// "continue"`), one note per partition.
pub const DATA_LOSS: &str = "sluice.data-loss";
/// Snapshot summary key: records known lost since the last commit (see [`DATA_LOSS`]).
pub const RECORDS_LOST: &str = "sluice.records-lost";

/// A new run id: this process among others (its id and when the id was made), as [`RUN`]
/// records it and as data and state file names carry it.
pub fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}-{nanos:x}", std::process::id())
}

/// What one commit records about the pipeline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitMark {
    /// The pipeline's name.
    pub pipeline: String,
    /// The batch id.
    pub batch_id: u64,
    /// The next offset to read of every owned partition after this batch.
    pub offsets: Offsets,
}

/// A snapshot summary that names a pipeline but cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("snapshot {snapshot} of pipeline `{pipeline}` has an unreadable commit mark: {reason}")]
pub struct MarkError {
    /// The pipeline.
    pub pipeline: String,
    /// The snapshot id.
    pub snapshot: i64,
    /// What is wrong.
    pub reason: String,
}

impl CommitMark {
    /// The commit id: the same for every attempt at the same batch, so a commit that may
    /// or may not have landed can be recognised.
    pub fn commit_id(&self) -> String {
        let digest = Sha256::digest(self.offsets.to_json().as_bytes());
        let short = hex::encode(&digest[..8]);
        format!("{}-{:010}-{short}", self.pipeline, self.batch_id)
    }

    /// The snapshot summary properties of this mark.
    pub fn to_properties(&self) -> HashMap<String, String> {
        HashMap::from([
            (PIPELINE.to_string(), self.pipeline.clone()),
            (BATCH_ID.to_string(), self.batch_id.to_string()),
            (COMMIT_ID.to_string(), self.commit_id()),
            (OFFSETS.to_string(), self.offsets.to_json()),
        ])
    }

    /// Reads the mark of `pipeline` from a snapshot summary: `None` when the snapshot was
    /// written by someone else.
    pub fn from_properties(
        pipeline: &str,
        snapshot: i64,
        properties: &HashMap<String, String>,
    ) -> Option<Result<CommitMark, MarkError>> {
        if properties.get(PIPELINE).map(String::as_str) != Some(pipeline) {
            return None;
        }
        let error = |reason: String| MarkError {
            pipeline: pipeline.to_string(),
            snapshot,
            reason,
        };
        let read = || -> Result<CommitMark, MarkError> {
            let batch_id = properties
                .get(BATCH_ID)
                .ok_or_else(|| error(format!("no `{BATCH_ID}`")))?
                .parse()
                .map_err(|e| error(format!("`{BATCH_ID}`: {e}")))?;
            let offsets = properties
                .get(OFFSETS)
                .ok_or_else(|| error(format!("no `{OFFSETS}`")))?;
            let offsets = Offsets::from_json(offsets).map_err(error)?;
            Ok(CommitMark {
                pipeline: pipeline.to_string(),
                batch_id,
                offsets,
            })
        };
        Some(read())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TopicPartition;

    #[test]
    fn round_trip_and_stable_id() {
        let mut offsets = Offsets::default();
        offsets.set(
            TopicPartition {
                topic: "clicks".into(),
                partition: 2,
            },
            17,
        );
        let mark = CommitMark {
            pipeline: "p".into(),
            batch_id: 3,
            offsets,
        };
        let props = mark.to_properties();
        assert_eq!(
            CommitMark::from_properties("p", 1, &props),
            Some(Ok(mark.clone()))
        );
        assert_eq!(CommitMark::from_properties("other", 1, &props), None);
        assert_eq!(mark.commit_id(), mark.clone().commit_id());
        assert!(
            mark.commit_id().starts_with("p-0000000003-"),
            "{}",
            mark.commit_id()
        );
        let mut broken = props.clone();
        broken.insert(OFFSETS.into(), "{".into());
        assert!(matches!(
            CommitMark::from_properties("p", 9, &broken),
            Some(Err(_))
        ));
    }

    #[test]
    fn a_commit_holds_a_batchs_entries_by_partition_when_each_is_the_same() {
        let recorded = Some(r#"{"t/0":"a","t/1":"b"}"#);
        assert!(holds_by_partition(recorded, r#"{"t/1":"b"}"#));
        assert!(!holds_by_partition(recorded, r#"{"t/1":"c"}"#));
        assert!(!holds_by_partition(recorded, r#"{"t/1":"b","t/2":"c"}"#));
        assert!(!holds_by_partition(None, r#"{"t/1":"b"}"#));
        assert!(holds_by_partition(Some("?"), "?"));
    }
}
