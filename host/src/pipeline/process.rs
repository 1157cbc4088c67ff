//! The process phase: the plugin stages and the encoder over a batch, in contiguous
//! slices on all cores (see [`super::step`]). New plugin versions start here, at a batch
//! boundary; a version on probation that breaks its bounds is rolled back and the same
//! records are processed again on the previous one, before anything of the batch leaves.

use std::collections::BTreeMap;
use std::time::Duration;

use super::config::OnInvalid;
use super::stages::StageCounts;
use super::step::{Slice, Step, add_counts, shadow_reports, total_counts, total_verdicts};
use super::{Pipeline, PipelineError};
use crate::encode::Wanted;
use crate::event_time::apply::Timed;
use crate::format::Known;
use crate::plugin::shadow::ShadowReport;
use crate::progress::RepartitionProgress;
use crate::record::{Reason, Record};
use crate::units::Millis;

/// Records refused, with their reasons.
pub(super) type Dead = Vec<(Record, Reason)>;

/// What the process phase made of a batch.
pub(super) struct Processed {
    /// The table rows of each slice, with the records of those rows (and their event-time
    /// fields, with event time).
    pub(super) slices: Vec<Timed>,
    /// Records refused by a stage, the encoder or the event-time fields, in offset order
    /// within each slice.
    pub(super) dead: Vec<(Record, Reason)>,
    /// What the stages did, for the report.
    pub(super) stats: ProcessStats,
    /// Pieces set aside until the schema changes: the index of each one's placeholder in
    /// `slices`, and its records (see [`super::evolve`]).
    pub(super) pending: Vec<(usize, Vec<super::step::Kept>)>,
    /// What they need of the schema.
    pub(super) wanted: Wanted,
}

/// What the stages did with a batch.
pub(super) struct ProcessStats {
    /// What each stage did.
    pub(super) stage_counts: Vec<StageCounts>,
    /// Per stage, rejections by code and failures by kind.
    pub(super) stage_verdicts: Vec<BTreeMap<String, u64>>,
    /// Per stage, how its shadow compared.
    pub(super) shadows: Vec<Option<ShadowReport>>,
    /// Fields of the rows dropped for want of a column, by name (all names: the report
    /// bounds them).
    pub(super) dropped_fields: BTreeMap<String, u64>,
    /// The slowest thread's time in plugins.
    pub(super) plugins: Duration,
    /// The slowest thread's time encoding.
    pub(super) encode: Duration,
    /// CPU time in the stages, all threads together.
    pub(super) plugins_cpu: Duration,
    /// CPU time judging and encoding, all threads together.
    pub(super) encode_cpu: Duration,
    /// As stage two of a repartition topic: what it read of the topic.
    pub(super) repartition: RepartitionProgress,
}

impl ProcessStats {
    /// Nothing done: no stage ran (stage two of a repartition topic).
    pub(super) fn none(stages: usize) -> Self {
        ProcessStats {
            stage_counts: vec![StageCounts::default(); stages],
            stage_verdicts: vec![BTreeMap::new(); stages],
            shadows: vec![None; stages],
            dropped_fields: BTreeMap::new(),
            plugins: Duration::ZERO,
            encode: Duration::ZERO,
            plugins_cpu: Duration::ZERO,
            encode_cpu: Duration::ZERO,
            repartition: RepartitionProgress::default(),
        }
    }

    /// Adds a later batch's figures (held triggers committed together: see
    /// [`super::cadence`]).
    pub(super) fn absorb(&mut self, later: ProcessStats) {
        for (t, c) in self.stage_counts.iter_mut().zip(&later.stage_counts) {
            t.add(c);
        }
        for (t, v) in self.stage_verdicts.iter_mut().zip(later.stage_verdicts) {
            for (code, n) in v {
                *t.entry(code).or_default() += n;
            }
        }
        for (t, r) in self.shadows.iter_mut().zip(later.shadows) {
            if let Some(r) = r {
                t.get_or_insert_with(Default::default).merge(r);
            }
        }
        add_counts(&mut self.dropped_fields, later.dropped_fields);
        self.plugins += later.plugins;
        self.encode += later.encode;
        self.plugins_cpu += later.plugins_cpu;
        self.encode_cpu += later.encode_cpu;
        self.repartition.add(&later.repartition);
    }
}

impl Pipeline {
    /// Runs the stages and the encoder over `records`, processed at `now`.
    pub(super) fn process(
        &mut self,
        records: Vec<Record>,
        now: Millis,
    ) -> Result<Processed, PipelineError> {
        let ingestion = now.as_micros().0;
        self.follow_schema()?;
        self.stages.activate_new_versions();
        if let Some(decoder) = &self.decoder {
            let values = records.iter().map(|r| r.value.as_deref());
            self.known = Some(decoder.prepare(values)?);
        }
        let backup = self.stages.on_probation().then(|| records.clone());
        let mut slices = self.run_slices(records, ingestion)?;
        if let Some(records) = backup
            && self
                .stages
                .judge(&total_counts(&slices, self.stages.active().len()))
        {
            slices = self.run_slices(records, ingestion)?;
        }
        let mut processed = merge(slices, self.stages.active().len());
        if !processed.wanted.is_empty() {
            self.evolve(&mut processed, ingestion)?;
        }
        if let Some((record, reason)) = processed.dead.first()
            && self.config.pipeline.on_invalid == OnInvalid::Fail
        {
            return Err(PipelineError::invalid(record, reason));
        }
        Ok(processed)
    }

    /// Cuts `records` into contiguous slices, one per thread but none smaller than a
    /// plugin chunk, and runs a [`Step`] over each. `ingestion` (microseconds since 1970)
    /// fills the ingestion-time column.
    fn run_slices(
        &self,
        records: Vec<Record>,
        ingestion: i64,
    ) -> Result<Vec<Slice>, PipelineError> {
        let chunk_size = self.config.runtime.chunk_size;
        let per_thread = records
            .len()
            .div_ceil(self.config.threads())
            .max(chunk_size)
            .max(1);
        let parts = cut(records, per_thread);
        let step = Step {
            stages: self.stages.active(),
            shadows: self.stages.shadows(),
            encoder: &self.encoder,
            event_time: self.event_time.as_ref(),
            chunk_size,
            to_json: self.known.as_ref().filter(|_| self.needs_json()),
            avro: self.avro(),
        };
        std::thread::scope(|scope| {
            let handles: Vec<_> = parts
                .into_iter()
                .map(|part| scope.spawn(move || step.run(part, ingestion)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        })
    }
}

impl Pipeline {
    /// Whether the records of an Avro or Protobuf source are read as JSON before the stages: a
    /// plugin stage or event time reads them so.
    fn needs_json(&self) -> bool {
        !self.stages.active().is_empty() || self.event_time.is_some()
    }

    /// The records of the joins' right topics as JSON (they share the source's format
    /// and registry), and those that cannot be read, with their reasons.
    pub(super) fn right_as_json(
        &self,
        right: Vec<Record>,
    ) -> Result<(Vec<Record>, Dead), PipelineError> {
        let Some(decoder) = self.decoder.as_ref().filter(|_| !right.is_empty()) else {
            return Ok((right, Vec::new()));
        };
        let known = decoder.prepare(right.iter().map(|r| r.value.as_deref()))?;
        let mut dead = Vec::new();
        let kept = super::step::as_json(right, &known, &mut dead);
        Ok((kept, dead))
    }

    /// The schemas to read Avro or Protobuf records with straight into the table's columns, when
    /// nothing needs them as JSON first.
    pub(super) fn avro(&self) -> Option<&Known> {
        self.known.as_ref().filter(|_| !self.needs_json())
    }
}

/// `records` cut into parts of `n` records (the last one shorter), in order. The parts are
/// split off the end, so the batch's records are not held twice while its parts are
/// processed.
fn cut(mut records: Vec<Record>, n: usize) -> Vec<Vec<Record>> {
    let mut parts = Vec::new();
    if records.is_empty() {
        return parts;
    }
    while records.len() > n {
        let at = (records.len() - 1) / n * n;
        parts.push(records.split_off(at));
    }
    records.shrink_to_fit();
    parts.push(records);
    parts.reverse();
    parts
}

/// The slices of a batch, merged in order.
fn merge(slices: Vec<Slice>, stages: usize) -> Processed {
    let stats = ProcessStats {
        stage_counts: total_counts(&slices, stages),
        stage_verdicts: total_verdicts(&slices),
        shadows: shadow_reports(&slices),
        dropped_fields: BTreeMap::new(),
        plugins: slices.iter().map(|s| s.plugins).max().unwrap_or_default(),
        encode: slices.iter().map(|s| s.encode).max().unwrap_or_default(),
        plugins_cpu: slices.iter().map(|s| s.plugins_cpu).sum(),
        encode_cpu: slices.iter().map(|s| s.encode_cpu).sum(),
        repartition: RepartitionProgress::default(),
    };
    let mut processed = Processed {
        slices: Vec::with_capacity(slices.len()),
        dead: Vec::new(),
        stats,
        pending: Vec::new(),
        wanted: Wanted::default(),
    };
    for slice in slices {
        let offset = processed.slices.len();
        let pending = slice.pending.into_iter().map(|(i, r)| (offset + i, r));
        processed.pending.extend(pending);
        processed.wanted.merge(slice.wanted);
        add_counts(&mut processed.stats.dropped_fields, slice.dropped_fields);
        processed.dead.extend(slice.dead);
        processed.slices.extend(slice.rows);
    }
    processed
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn cut_keeps_every_record_in_order() {
        let topic: Arc<str> = "t".into();
        for (len, n) in [(0, 3), (1, 3), (3, 3), (7, 3), (9, 3), (10, 1)] {
            let records: Vec<Record> = (0..len)
                .map(|i| Record::with_value(topic.clone(), i, "{}"))
                .collect();
            let parts = cut(records, n);
            assert!(parts.iter().all(|p| !p.is_empty() && p.len() <= n));
            assert_eq!(parts.len(), (len as usize).div_ceil(n));
            let offsets: Vec<i64> = parts.concat().iter().map(|r| r.offset).collect();
            assert_eq!(offsets, (0..len).collect::<Vec<_>>());
        }
    }
}
