//! Per-batch progress, like Spark's `StreamingQueryProgress`: logged as one JSON line under
//! the `sluice::progress` target after every committed batch. A floor of its own: the
//! pipeline fills it in, the admin API serves it (status and metrics), and neither needs
//! the other to read it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};

use crate::event_time::StateSize;
use crate::event_time::extract::format_micros;
use crate::plugin::shadow::ShadowReport;
use crate::units::Micros;

/// Milliseconds spent in each phase of a batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Durations {
    /// Reading records from the source.
    pub poll: u64,
    /// Running the plugin stages (the slowest thread).
    pub plugins: u64,
    /// Encoding to Arrow (the slowest thread).
    pub encode: u64,
    /// Sending to the output topics (dead letters, late data, window results) and waiting
    /// for their acknowledgement.
    pub dead_letter: u64,
    /// Writing Parquet files (and, beside them, the event-time state file).
    pub write: u64,
    /// Writing the event-time state file (in parallel with the Parquet files).
    pub state: u64,
    /// The table commit, with its check.
    pub commit: u64,
    /// The whole batch.
    pub total: u64,
}

impl Durations {
    /// The phases' names, as in the JSON (not `total`).
    pub const PHASES: [&'static str; 7] = [
        "poll",
        "plugins",
        "encode",
        "dead_letter",
        "write",
        "state",
        "commit",
    ];

    /// Each phase's name and milliseconds (not `total`).
    pub fn phases(&self) -> impl Iterator<Item = (&'static str, u64)> {
        let ms = [
            self.poll,
            self.plugins,
            self.encode,
            self.dead_letter,
            self.write,
            self.state,
            self.commit,
        ];
        Self::PHASES.into_iter().zip(ms)
    }
}

/// CPU microseconds of the process per phase of a batch (the kernel's CPU clocks, so
/// time waiting costs nothing). `plugins` and `encode` are summed over the threads that ran
/// them; `route`, `send`, `write` and `commit` are the whole process's CPU while they ran;
/// `read` is the rest of `total`: reading, and librdkafka's threads fetching in the
/// background, whenever they ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuTimes {
    /// Reading records, and what the other phases do not count.
    pub read: u64,
    /// The reading thread's own CPU while it read the batch: the part of `read` that is
    /// sluice's read loop (polling, building records); the rest of `read` is librdkafka's
    /// threads and other background work.
    pub reader: u64,
    /// The plugin stages.
    pub plugins: u64,
    /// Judging the verdicts and encoding to Arrow.
    pub encode: u64,
    /// Event time (watermark, dedup, windows) and routing.
    pub route: u64,
    /// Sending to the output topics, until acknowledged.
    pub send: u64,
    /// Writing the Parquet files and the state file.
    pub write: u64,
    /// The table commits, with their checks.
    pub commit: u64,
    /// The process's CPU from the batch's start to its report.
    pub total: u64,
}

/// How a process runs its pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// It reads every partition (`[source] mode = "assign"`).
    Single,
    /// It reads the partitions the consumer group gives it (`mode = "group"`).
    Member,
    /// It runs an event-time pipeline that other processes stand by for (`mode = "group"`
    /// with `[event-time]`): it reads every partition.
    Active,
    /// It stands by for an event-time pipeline another process runs, ready to take over.
    Standby,
}

/// What one batch did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// The pipeline.
    pub pipeline: String,
    /// The batch id.
    pub batch_id: u64,
    /// The commit id in the table's snapshot summary.
    pub commit_id: String,
    /// The table.
    pub table: String,
    /// How this process runs the pipeline: alone, or as a member of a consumer group.
    pub role: Role,
    /// The partitions the batch read (in a consumer group, those this process owns).
    pub partitions: Vec<String>,
    /// Consumer-group rebalances this process saw since it started.
    pub rebalances: u64,
    /// Wall-clock time of the table commit; serialised as RFC 3339 in UTC.
    #[serde(serialize_with = "rfc3339")]
    pub committed_at: DateTime<Utc>,
    /// Records read.
    pub input_rows: u64,
    /// Rows appended to the table.
    pub rows_written: u64,
    /// Records sent to the dead-letter topic.
    pub rows_dead_lettered: u64,
    /// Dead letters by code.
    pub dead_lettered_by_code: BTreeMap<String, u64>,
    /// The same by what refused them (a plugin stage's name, `encode` or `event-time`),
    /// then by code: `{"rules": {"missing_field": 3}, "encode": {"malformed_json": 1}}`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub dead_lettered_by_stage: BTreeMap<String, BTreeMap<String, u64>>,
    /// Fields dropped from the rows because the table has no column for them
    /// (`[sink] unknown-fields = "drop"`), counted per row and by field name: the first
    /// 100 names the process saw, later ones together under `_other`.
    pub dropped_fields: BTreeMap<String, u64>,
    /// Records read per second since the previous batch ended.
    pub input_rows_per_second: f64,
    /// Records processed per second of this batch's duration.
    pub processed_rows_per_second: f64,
    /// Data files added.
    pub files_written: u64,
    /// Bytes of data files added.
    pub bytes_written: u64,
    /// Table commits retried after a conflict with a commit that left the fence standing
    /// (another pipeline on the table, maintenance).
    pub commit_retries: u64,
    /// Snapshots expired from the tables after this batch's commit
    /// (`[sink.expire-snapshots]`).
    pub snapshots_expired: u64,
    /// Tables whose snapshot expiry failed after this batch's commit (logged).
    pub snapshot_expiry_failures: u64,
    /// What the pipeline's compaction did since the previous batch (`[sink.compact]`).
    pub compaction: crate::iceberg::compact::Compaction,
    /// The lookup tables the batch saw, by name (`[[lookups]]`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub lookups: BTreeMap<String, LookupProgress>,
    /// Lookup-table refreshes that failed since the process started (each a transient
    /// fault, retried).
    pub lookup_refresh_failures: u64,
    /// Time per phase.
    pub durations_ms: Durations,
    /// CPU time per phase.
    pub cpu_us: CpuTimes,
    /// Offsets the batch started from (JSON).
    pub start_offsets: String,
    /// Offsets after the batch, as committed (JSON).
    pub end_offsets: String,
    /// Records known to remain behind the batch's target end offsets.
    pub lag: i64,
    /// The partitions among [`Progress::partitions`] with records left behind the batch's
    /// target end offsets, and how many (`"topic/3": 120`); a partition caught up is left out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lag_by_partition: BTreeMap<String, i64>,
    /// Per plugin stage: the version that judged the batch and what it did.
    pub stages: BTreeMap<String, StageProgress>,
    /// Event-time operators, when configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_time: Option<EventTimeProgress>,
    /// With repartition topics (a stage of a pipeline whose operators cross them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repartition: Option<RepartitionProgress>,
}

/// What one batch did across repartition topics: as stage two, what it read of its topic;
/// as a stage feeding others, what it sent on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RepartitionProgress {
    /// Events taken in (first read).
    pub taken: u64,
    /// Events dropped as sent again by the stage before (a batch of it replayed, or a
    /// member of it frozen meanwhile): each was taken before.
    pub again: u64,
    /// Markers read: how far the stage before read each of its partitions.
    pub markers: u64,
    /// Events sent on to the topics this stage feeds.
    pub sent: u64,
    /// Markers sent on.
    pub markers_sent: u64,
}

impl RepartitionProgress {
    /// Adds a later batch's counts (held triggers committed together).
    pub fn add(&mut self, later: &RepartitionProgress) {
        self.taken += later.taken;
        self.again += later.again;
        self.markers += later.markers;
        self.sent += later.sent;
        self.markers_sent += later.markers_sent;
    }
}

/// One lookup table a batch saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LookupProgress {
    /// Its keys.
    pub keys: u64,
    /// Bytes of its keys and values.
    pub bytes: u64,
    /// Records skipped since the process started: without a key, or with a value that is
    /// not a JSON object (its key deleted).
    pub skipped: u64,
    /// The version the batch read (as its commit records it): a topic's offsets, a
    /// table's snapshot, a file's digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<crate::checkpoint::lookups::Version>,
}

/// What the event-time operators did in one batch (Spark's `eventTime` and
/// `stateOperators`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventTimeProgress {
    /// The watermark after the batch; serialised as RFC 3339.
    #[serde(serialize_with = "rfc3339_micros")]
    pub watermark: Option<Micros>,
    /// Events behind the watermark (Spark's `numRowsDroppedByWatermark`), wherever
    /// `event-time.late` sent them.
    pub rows_late: u64,
    /// Duplicates dropped.
    pub rows_deduplicated: u64,
    /// Window results emitted, by window.
    pub windows_emitted: BTreeMap<String, u64>,
    /// State after the batch, by operator (`dedup`, `window:<name>`).
    pub state: BTreeMap<String, StateSize>,
    /// Size of the saved state file.
    pub state_file_bytes: u64,
    /// Rows each join's `max-rows` evicted since the start, by join: (left, right).
    pub join_rows_evicted: BTreeMap<String, (u64, u64)>,
    /// Each partition's own watermark (its newest event time less the maximum delay), RFC
    /// 3339, for the partitions heard from; the watermark above is their minimum but for
    /// idle ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub partition_watermarks: BTreeMap<String, String>,
}

fn rfc3339<S: Serializer>(time: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format_micros(Micros(time.timestamp_micros())))
}

fn rfc3339_micros<S: Serializer>(time: &Option<Micros>, serializer: S) -> Result<S::Ok, S::Error> {
    match time {
        Some(t) => serializer.serialize_some(&format_micros(*t)),
        None => serializer.serialize_none(),
    }
}

impl Progress {
    /// Logs the progress line.
    pub fn log(&self) {
        match serde_json::to_string(self) {
            Ok(json) => tracing::info!(target: "sluice::progress", "{json}"),
            Err(error) => tracing::warn!(%error, "cannot serialise progress"),
        }
    }
}

/// What one stage did with the events that reached it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StageCounts {
    /// Events that reached the stage.
    pub events: u64,
    /// Events it kept (or rewrote).
    pub kept: u64,
    /// Events it rejected.
    pub rejected: u64,
    /// Events it failed on (trap, limit, broken answer).
    pub failed: u64,
    /// Events whose value it rewrote (counted in `kept` too).
    pub rewritten: u64,
    /// Plugin calls made.
    pub calls: u64,
    /// Time spent in its calls, microseconds (the slowest thread's share).
    pub micros: u64,
}

impl StageCounts {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &StageCounts) {
        self.events += other.events;
        self.kept += other.kept;
        self.rejected += other.rejected;
        self.failed += other.failed;
        self.rewritten += other.rewritten;
        self.calls += other.calls;
        self.micros += other.micros;
    }

    /// `part` as a share of `events` (0 when there were none).
    pub fn share(part: u64, events: u64) -> f64 {
        if events == 0 {
            0.0
        } else {
            part as f64 / events as f64
        }
    }
}

/// A stage in one batch's progress.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageProgress {
    /// sha256 of the module that judged this batch.
    pub digest: String,
    /// Name the plugin declares.
    pub plugin: String,
    /// Version the plugin declares.
    pub version: String,
    /// What it did in this batch.
    #[serde(flatten)]
    pub counts: StageCounts,
    /// Rejections by code (`rejected:<code>`) and failures by kind (`failed:<code>`, e.g.
    /// `failed:plugin_trapped`, `failed:deadline_exceeded`) in this batch.
    pub verdicts: BTreeMap<String, u64>,
    /// Microseconds per event in this batch.
    pub micros_per_event: f64,
    /// Whether this batch is the first on a version swapped in.
    pub swapped_in: bool,
    /// Milliseconds from seeing the file change to activating the version, when swapped in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_ms: Option<u64>,
    /// How a shadow version's verdicts compared, when one runs beside the stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowReport>,
    /// Why a version was rolled back in this batch (the batch then ran on the previous one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<String>,
    /// Versions swapped in, rolled back and refused since the start.
    pub swaps: u64,
    /// See `swaps`.
    pub rollbacks: u64,
    /// See `swaps`.
    pub refused: u64,
}
