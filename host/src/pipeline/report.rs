//! The report phase: one batch's [`Progress`], logged, kept by the admin API, and added
//! to the run's summary.

use std::collections::BTreeMap;
use std::time::Instant;

use super::Pipeline;
use super::commit::Committed;
use super::cpu;
use super::process::ProcessStats;
use super::read::Input;
use super::route::Prepared;
use crate::admin::health::Readiness;
use crate::progress::{
    CpuTimes, Durations, EventTimeProgress, LookupProgress, Progress, RepartitionProgress,
};

impl Pipeline {
    /// Reports a committed batch.
    pub(super) fn report(
        &mut self,
        input: &Input,
        stats: ProcessStats,
        prepared: &Prepared,
        committed: &Committed,
    ) {
        let progress = self.progress(input, stats, prepared, committed);
        self.summary.add(&progress);
        progress.log();
        // Committed: the brokers and the catalog answered.
        self.set_readiness(Readiness::Running);
        if let Some(admin) = &self.admin {
            admin.record(&progress);
            admin.record_dead_letters(progress.batch_id, &prepared.results.dead);
        }
    }

    fn progress(
        &mut self,
        input: &Input,
        mut stats: ProcessStats,
        prepared: &Prepared,
        committed: &Committed,
    ) -> Progress {
        let dropped_fields = std::mem::take(&mut stats.dropped_fields);
        let total = input.started.elapsed();
        let since_last = self.last_end.elapsed();
        self.last_end = Instant::now();
        let input_rows = input.rows;
        let mut by_code: BTreeMap<String, u64> = BTreeMap::new();
        let mut by_stage: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for (_, reason) in &prepared.results.dead {
            *by_code.entry(reason.code.clone()).or_default() += 1;
            let stage = by_stage.entry(reason.stage.clone()).or_default();
            *stage.entry(reason.code.clone()).or_default() += 1;
        }
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        Progress {
            pipeline: committed.mark.pipeline.clone(),
            batch_id: committed.mark.batch_id,
            commit_id: committed.mark.commit_id(),
            role: self.role,
            partitions: input.start.0.keys().map(ToString::to_string).collect(),
            rebalances: self.source.rebalances().unwrap_or(self.election_changes),
            table: self.outputs.table().table().name(),
            committed_at: chrono::Utc::now(),
            input_rows,
            rows_written: committed.table.records,
            rows_dead_lettered: prepared.results.dead.len() as u64,
            dead_lettered_by_code: by_code,
            dead_lettered_by_stage: by_stage,
            dropped_fields: self.dropped_fields.label(dropped_fields),
            input_rows_per_second: input_rows as f64 / since_last.as_secs_f64().max(1e-9),
            processed_rows_per_second: input_rows as f64 / total.as_secs_f64().max(1e-9),
            files_written: committed.table.files,
            bytes_written: committed.table.bytes,
            commit_retries: committed.retries,
            snapshots_expired: committed.expired.snapshots,
            snapshot_expiry_failures: committed.expired.failures,
            compaction: self.compaction_since(input),
            lookups: self.lookup_progress(prepared),
            lookup_refresh_failures: self.lookups.failures(),
            durations_ms: Durations {
                poll: ms(input.poll),
                plugins: ms(stats.plugins),
                encode: ms(stats.encode),
                dead_letter: ms(committed.send),
                write: ms(committed.write),
                state: ms(committed.state),
                commit: ms(committed.commit),
                total: ms(total),
            },
            cpu_us: cpu_times(input, &stats, prepared, committed),
            start_offsets: input.start.to_json(),
            end_offsets: input.next.to_json(),
            lag: input.next.distance_to(&input.ends),
            lag_by_partition: input.next.behind(&input.ends),
            stages: self
                .stages
                .progress(&stats.stage_counts, stats.stage_verdicts, stats.shadows),
            event_time: self.event_time_progress(prepared, committed),
            repartition: self.repartition_progress(stats.repartition, prepared),
        }
    }

    /// What the batch read of a repartition topic (`read`, as stage two) and sent on to
    /// the topics this stage feeds; `None` for a pipeline that does neither.
    fn repartition_progress(
        &self,
        mut read: RepartitionProgress,
        prepared: &Prepared,
    ) -> Option<RepartitionProgress> {
        if !self.is_stage_two() && prepared.results.repartition.is_empty() {
            return None;
        }
        let sent = prepared.results.repartition.iter().flatten();
        read.sent = sent.clone().filter(|r| r.value.is_some()).count() as u64;
        read.markers_sent = sent.count() as u64 - read.sent;
        Some(read)
    }

    /// What the compaction thread did since the last batch; and whether this process
    /// compacts from now on ([`super::compactor::compacts`]).
    fn compaction_since(&self, input: &Input) -> crate::iceberg::compact::Compaction {
        let Some(compactor) = &self.compactor else {
            return Default::default();
        };
        let first = self.config.source.topics.first().map_or("", String::as_str);
        let read: Vec<_> = input.start.0.keys().cloned().collect();
        compactor.set_active(super::compactor::compacts(self.role, &read, first));
        compactor.take()
    }

    /// Each lookup table's size and what was skipped, and the version `prepared` read.
    fn lookup_progress(&self, prepared: &Prepared) -> BTreeMap<String, LookupProgress> {
        let sizes = self.lookups.sizes().into_iter();
        let skipped = self.lookups.skipped();
        sizes
            .map(|(name, (keys, bytes))| {
                let (keys, bytes) = (keys as u64, bytes as u64);
                let skipped = skipped.get(&name).copied().unwrap_or(0);
                let version = prepared.plan.lookups.get(&name).cloned();
                let progress = LookupProgress {
                    keys,
                    bytes,
                    skipped,
                    version,
                };
                (name, progress)
            })
            .collect()
    }

    fn event_time_progress(
        &self,
        prepared: &Prepared,
        committed: &Committed,
    ) -> Option<EventTimeProgress> {
        let (et, counts) = (self.event_time.as_ref()?, prepared.event_time?);
        let (state, partition_watermarks) = match &self.tasks {
            Some(tasks) => (tasks.state_sizes(), tasks.partition_watermarks()),
            None => (et.state_sizes(), et.partition_watermarks()),
        };
        let state_file_bytes = match (&committed.state_file, &committed.shares) {
            (Some((_, size)), _) => *size,
            (None, Some(saved)) => saved.bytes,
            (None, None) => 0,
        };
        let windows = self.config.windows.iter().zip(&prepared.results.windows);
        Some(EventTimeProgress {
            watermark: counts.watermark,
            rows_late: counts.late,
            rows_deduplicated: counts.duplicates,
            windows_emitted: windows
                .map(|(w, rows)| (w.name.clone(), rows.len() as u64))
                .collect(),
            state,
            join_rows_evicted: et.join_rows_evicted(),
            state_file_bytes,
            partition_watermarks: partition_watermarks
                .into_iter()
                .map(|(p, w)| (p, crate::event_time::extract::format_micros(w)))
                .collect(),
        })
    }
}

/// The batch's CPU per phase; what no phase counted is `read`'s.
fn cpu_times(
    input: &Input,
    stats: &ProcessStats,
    prepared: &Prepared,
    committed: &Committed,
) -> CpuTimes {
    let us = |d: std::time::Duration| d.as_micros() as u64;
    let total = us(cpu::process().saturating_sub(input.cpu_started));
    let mut times = CpuTimes {
        plugins: us(stats.plugins_cpu),
        encode: us(stats.encode_cpu),
        route: us(prepared.cpu),
        send: us(committed.send_cpu),
        write: us(committed.write_cpu),
        commit: us(committed.commit_cpu),
        total,
        read: 0,
        reader: us(input.reader_cpu),
    };
    let counted =
        times.plugins + times.encode + times.route + times.send + times.write + times.commit;
    times.read = total.saturating_sub(counted);
    times
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Batches committed.
    pub batches: u64,
    /// Records read and committed (as rows or dead letters).
    pub input_rows: u64,
    /// Rows appended to the table.
    pub rows_written: u64,
    /// Records sent to the dead-letter topic.
    pub rows_dead_lettered: u64,
    /// Events behind the watermark (wherever `event-time.late` sent them).
    pub rows_late: u64,
    /// Duplicates dropped.
    pub rows_deduplicated: u64,
    /// Window results emitted.
    pub window_rows: u64,
    /// What it read of a repartition topic (as stage two) and sent on to others.
    pub repartition: RepartitionProgress,
    /// Batches abandoned because another commit took their partitions first.
    pub batches_fenced: u64,
    /// Table commits retried after a conflict with a commit that left the fence standing.
    pub commit_retries: u64,
    /// Transient faults retried (see [`faults`]).
    pub faults_retried: u64,
    /// Snapshots expired from the tables between commits (`[sink.expire-snapshots]`).
    pub snapshots_expired: u64,
    /// Snapshot expiries that failed (logged; the pipeline went on).
    pub snapshot_expiry_failures: u64,
    /// What the pipeline's compaction did (`[sink.compact]`).
    pub compaction: crate::iceberg::compact::Compaction,
    /// Lookup-table refreshes that failed (each a transient fault, retried).
    pub lookup_refresh_failures: u64,
    /// Fields of written rows dropped because the table has no column for them
    /// (`[sink] unknown-fields = "drop"`), all names together.
    pub fields_dropped: u64,
    /// Columns added to the table (`[sink] unknown-fields = "add"`).
    pub columns_added: u64,
    /// Batches read again because the table's schema changed while their own schema
    /// change was being committed.
    pub schema_retries: u64,
    /// Whether a stop signal ended the run.
    pub stopped: bool,
}

impl RunSummary {
    /// Adds a committed batch.
    fn add(&mut self, p: &Progress) {
        self.batches += 1;
        self.input_rows += p.input_rows;
        self.rows_written += p.rows_written;
        self.rows_dead_lettered += p.rows_dead_lettered;
        self.fields_dropped += p.dropped_fields.values().sum::<u64>();
        self.commit_retries += p.commit_retries;
        self.snapshots_expired += p.snapshots_expired;
        self.snapshot_expiry_failures += p.snapshot_expiry_failures;
        self.compaction.add(&p.compaction);
        if let Some(r) = &p.repartition {
            self.repartition.add(r);
        }
        if let Some(e) = &p.event_time {
            self.rows_late += e.rows_late;
            self.rows_deduplicated += e.rows_deduplicated;
            self.window_rows += e.windows_emitted.values().sum::<u64>();
        }
    }
}
