//! One slice of a batch, on one thread: the plugin stages (and their shadows), the
//! encoder, and the reading of event-time fields. The pipeline cuts a batch into
//! contiguous slices, runs a [`Step`] over each on its own thread, and merges the
//! [`Slice`]s back in order.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arrow_array::{BooleanArray, RecordBatch};

use super::PipelineError;
use super::stages::StageCounts;
use crate::encode::{Encoder, SchemaError};
use crate::record::Record;
use crate::sink::deadletter::Reason;
use crate::udf::Plugin;
use crate::udf::chain::{self, Fate};
use crate::udf::shadow::{self, ShadowReport};
use crate::event_time::{EventTime, Fields};

/// What became of the records of one slice of a batch.
pub(super) struct Slice {
    pub(super) batch: Option<RecordBatch>,
    pub(super) dead: Vec<(Record, Reason)>,
    /// With event time: the records of `batch`'s rows, in order, with their fields.
    pub(super) timed: Vec<(Record, Fields)>,
    /// What each stage did with the slice's records.
    pub(super) stage_counts: Vec<StageCounts>,
    /// Per stage, rejections by code and failures by kind.
    pub(super) stage_verdicts: Vec<BTreeMap<String, u64>>,
    /// Per stage, how its shadow version compared, if it has one.
    pub(super) shadows: Vec<Option<ShadowReport>>,
    pub(super) plugins: Duration,
    pub(super) encode: Duration,
}

/// What each thread runs over its slice of a batch: the stages, the encoder and, with
/// event time, the reading of event-time fields.
#[derive(Clone, Copy)]
pub(super) struct Step<'a> {
    pub(super) stages: &'a [Plugin],
    pub(super) shadows: &'a [Option<Plugin>],
    pub(super) encoder: &'a Encoder,
    pub(super) event_time: Option<&'a EventTime>,
    pub(super) chunk_size: usize,
}

impl Step<'_> {
    /// Runs the step over `records`; `ingestion` fills the ingestion-time column.
    pub(super) fn run(self, records: Vec<Record>, ingestion: i64) -> Result<Slice, PipelineError> {
        let stages = self.stages;
        let t = Instant::now();
        let originals = self
            .shadows
            .iter()
            .any(Option::is_some)
            .then(|| records.clone());
        let (outcomes, runs) = chain::run_counted(stages, records, self.chunk_size);
        let shadows: Vec<Option<ShadowReport>> = self
            .shadows
            .iter()
            .enumerate()
            .map(|(s, shadow)| {
                let (shadow, originals) = (shadow.as_ref()?, originals.as_ref()?);
                Some(shadow::compare(
                    stages,
                    s,
                    shadow,
                    originals,
                    &outcomes,
                    self.chunk_size,
                ))
            })
            .collect();
        let plugins = t.elapsed();
        let t = Instant::now();
        let mut kept = Vec::with_capacity(outcomes.len());
        let mut dead = Vec::new();
        let mut stage_counts: Vec<StageCounts> = runs
            .iter()
            .map(|r| StageCounts {
                rewritten: r.rewritten,
                calls: r.calls,
                micros: r.micros,
                ..StageCounts::default()
            })
            .collect();
        let mut stage_verdicts = vec![BTreeMap::<String, u64>::new(); stages.len()];
        for outcome in outcomes {
            // Every stage before the one that stopped the record kept it.
            let (stage, rejected, code, message, field) = match outcome.fate {
                Fate::Kept | Fate::Rewritten => {
                    for c in &mut stage_counts {
                        c.events += 1;
                        c.kept += 1;
                    }
                    kept.push(outcome.record);
                    continue;
                }
                Fate::Rejected { stage, rejection } => (
                    stage,
                    true,
                    rejection.code,
                    rejection.message,
                    rejection.field,
                ),
                Fate::Failed { stage, error } => {
                    let code = error.failure().map_or("plugin_error", |f| f.code());
                    (stage, false, code.to_string(), error.to_string(), None)
                }
            };
            for c in &mut stage_counts[..stage] {
                c.events += 1;
                c.kept += 1;
            }
            let c = &mut stage_counts[stage];
            c.events += 1;
            let verdict = if rejected {
                c.rejected += 1;
                format!("rejected:{code}")
            } else {
                c.failed += 1;
                format!("failed:{code}")
            };
            *stage_verdicts[stage].entry(verdict).or_default() += 1;
            let plugin = &stages[stage];
            dead.push((
                outcome.record,
                Reason {
                    stage: plugin.name().to_string(),
                    digest: Some(plugin.digest().to_string()),
                    code,
                    message,
                    field,
                },
            ));
        }
        let encoded = self
            .encoder
            .encode(kept.iter().map(|r| r.value.as_deref()), ingestion)?;
        let mut failed = encoded.errors.into_iter().peekable();
        let mut timed = Vec::new();
        let mut on_time = Vec::new();
        for (index, record) in kept.into_iter().enumerate() {
            if failed.peek().is_some_and(|(i, _)| *i == index) {
                let (_, error) = failed.next().expect("peeked");
                dead.push((
                    record,
                    Reason {
                        stage: "encode".into(),
                        digest: None,
                        code: error.code.into(),
                        message: error.message,
                        field: error.field,
                    },
                ));
                continue;
            }
            let Some(et) = self.event_time else {
                continue;
            };
            match et.fields(record.value.as_deref()) {
                Ok(fields) => {
                    on_time.push(true);
                    timed.push((record, fields));
                }
                Err(error) => {
                    on_time.push(false);
                    dead.push((
                        record,
                        Reason {
                            stage: "event-time".into(),
                            digest: None,
                            code: error.code.into(),
                            message: error.message,
                            field: error.field,
                        },
                    ));
                }
            }
        }
        let batch = if self.event_time.is_some() {
            keep_rows(encoded.batch, on_time)?
        } else {
            (encoded.batch.num_rows() > 0).then_some(encoded.batch)
        };
        // Dead letters in offset order, whichever step refused them.
        dead.sort_by(|a, b| {
            (&a.0.topic, a.0.partition, a.0.offset).cmp(&(&b.0.topic, b.0.partition, b.0.offset))
        });
        Ok(Slice {
            batch,
            dead,
            timed,
            stage_counts,
            stage_verdicts,
            shadows,
            plugins,
            encode: t.elapsed(),
        })
    }
}
/// What each stage did over all slices of a batch.
pub(super) fn total_counts(slices: &[Slice], stages: usize) -> Vec<StageCounts> {
    let mut total = vec![StageCounts::default(); stages];
    for slice in slices {
        for (t, c) in total.iter_mut().zip(&slice.stage_counts) {
            let micros = t.micros.max(c.micros); // threads run side by side
            t.add(c);
            t.micros = micros;
        }
    }
    total
}

/// Rejections by code and failures by kind, per stage, over all slices of a batch.
pub(super) fn total_verdicts(slices: &[Slice]) -> Vec<BTreeMap<String, u64>> {
    let mut total: Vec<BTreeMap<String, u64>> = Vec::new();
    for slice in slices {
        total.resize(slice.stage_verdicts.len().max(total.len()), BTreeMap::new());
        for (t, v) in total.iter_mut().zip(&slice.stage_verdicts) {
            for (code, n) in v {
                *t.entry(code.clone()).or_default() += n;
            }
        }
    }
    total
}

/// The shadow reports of all slices of a batch, merged per stage.
pub(super) fn shadow_reports(slices: &[Slice]) -> Vec<Option<ShadowReport>> {
    let mut merged: Vec<Option<ShadowReport>> = Vec::new();
    for slice in slices {
        merged.resize(slice.shadows.len().max(merged.len()), None);
        for (m, r) in merged.iter_mut().zip(&slice.shadows) {
            if let Some(r) = r {
                m.get_or_insert_with(ShadowReport::default).merge(r.clone());
            }
        }
    }
    merged
}

/// The rows of `batch` where `keep` is true; `None` if there are none.
pub(super) fn keep_rows(
    batch: RecordBatch,
    keep: Vec<bool>,
) -> Result<Option<RecordBatch>, PipelineError> {
    if keep.iter().all(|k| *k) {
        return Ok((batch.num_rows() > 0).then_some(batch));
    }
    let filtered = arrow_select::filter::filter_record_batch(&batch, &BooleanArray::from(keep))
        .map_err(|e| PipelineError::Schema(SchemaError::from(e)))?;
    Ok((filtered.num_rows() > 0).then_some(filtered))
}
