//! One slice of a batch, on one thread: the plugin stages (and their shadows), the
//! encoder, and the reading of event-time fields. The process phase cuts a batch into
//! contiguous slices, runs a [`Step`] over each on its own thread, and merges the
//! [`Slice`]s back in order. A step goes through its slice a piece at a time
//! ([`PIECE_RECORDS`]), so that each piece's records are freed as soon as they are
//! encoded: a batch's records and its Arrow rows are never held whole side by side.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::PipelineError;
use super::cpu;
use super::stages::StageCounts;
use crate::encode::{Encoder, Wanted, keep_rows};
use crate::event_time::EventTime;
use crate::event_time::apply::Timed;
use crate::format::Known;
use crate::plugin::chain::{self, Fate, Judged, StageRun};
use crate::plugin::shadow::{self, ShadowReport};
use crate::plugin::{Plugin, PluginError};
use crate::record::{Patch, Reason, Record, capped};

/// Records a step judges and encodes at a time (rounded up to whole plugin chunks).
const PIECE_RECORDS: usize = 8192;

/// What became of the records of one slice of a batch.
pub(super) struct Slice {
    /// The table rows of each piece and, with event time, the records of the rows with
    /// their fields.
    pub(super) rows: Vec<Timed>,
    pub(super) dead: Vec<(Record, Reason)>,
    /// What each stage did with the slice's records.
    pub(super) stage_counts: Vec<StageCounts>,
    /// Per stage, rejections by code and failures by kind.
    pub(super) stage_verdicts: Vec<BTreeMap<String, u64>>,
    /// Per stage, how its shadow version compared, if it has one.
    pub(super) shadows: Vec<Option<ShadowReport>>,
    /// Fields of the encoded rows that the table has no column for, dropped: how many
    /// times each, by name.
    pub(super) dropped_fields: BTreeMap<String, u64>,
    /// Pieces set aside until the table's schema changes (`unknown-fields = "add"`): the
    /// index of each one's placeholder in `rows`, and its kept records.
    pub(super) pending: Vec<(usize, Vec<Kept>)>,
    /// What the pieces set aside need of the schema.
    pub(super) wanted: Wanted,
    pub(super) plugins: Duration,
    pub(super) encode: Duration,
    /// CPU time of this thread in the stages.
    pub(super) plugins_cpu: Duration,
    /// CPU time of this thread judging and encoding.
    pub(super) encode_cpu: Duration,
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
    /// An Avro source whose records the stages or event time read: each record's value
    /// is read to JSON with these schemas first.
    pub(super) to_json: Option<&'a Known>,
    /// An Avro or Protobuf source read straight into the table's columns with these
    /// schemas.
    pub(super) avro: Option<&'a Known>,
}

/// A record the stages kept, with the last stage's patch if it was not applied yet.
pub(super) type Kept = (Record, Option<Patch>);

/// The stages' verdicts on a slice, sorted out.
struct Judgement {
    kept: Vec<Kept>,
    dead: Vec<(Record, Reason)>,
    stage_counts: Vec<StageCounts>,
    stage_verdicts: Vec<BTreeMap<String, u64>>,
}

impl Slice {
    pub(super) fn new(stages: usize, shadows: usize) -> Self {
        Slice {
            rows: Vec::new(),
            dead: Vec::new(),
            stage_counts: vec![StageCounts::default(); stages],
            stage_verdicts: vec![BTreeMap::new(); stages],
            shadows: vec![None; shadows],
            dropped_fields: BTreeMap::new(),
            pending: Vec::new(),
            wanted: Wanted::default(),
            plugins: Duration::ZERO,
            encode: Duration::ZERO,
            plugins_cpu: Duration::ZERO,
            encode_cpu: Duration::ZERO,
        }
    }

    /// Adds what the stages did with a piece.
    fn count(&mut self, judgement: &Judgement, shadows: Vec<Option<ShadowReport>>) {
        for (t, c) in self.stage_counts.iter_mut().zip(&judgement.stage_counts) {
            t.add(c);
        }
        for (t, v) in self
            .stage_verdicts
            .iter_mut()
            .zip(&judgement.stage_verdicts)
        {
            for (code, n) in v {
                *t.entry(code.clone()).or_default() += n;
            }
        }
        for (t, r) in self.shadows.iter_mut().zip(shadows) {
            if let Some(r) = r {
                t.get_or_insert_with(ShadowReport::default).merge(r);
            }
        }
    }
}

impl Step<'_> {
    /// Runs the step over `records`, a piece at a time; `ingestion` fills the
    /// ingestion-time column.
    pub(super) fn run(self, records: Vec<Record>, ingestion: i64) -> Result<Slice, PipelineError> {
        let mut slice = Slice::new(self.stages.len(), self.shadows.len());
        let chunk = self.chunk_size.max(1);
        let piece = PIECE_RECORDS.div_ceil(chunk) * chunk;
        let mut records = records.into_iter();
        loop {
            let part: Vec<Record> = records.by_ref().take(piece).collect();
            if part.is_empty() {
                break;
            }
            self.run_piece(part, ingestion, &mut slice)?;
        }
        // Dead letters in offset order, whichever step refused them.
        slice.dead.sort_by(|a, b| {
            (&a.0.topic, a.0.partition, a.0.offset).cmp(&(&b.0.topic, b.0.partition, b.0.offset))
        });
        Ok(slice)
    }

    /// Runs the step over one piece of the slice, adding what became of it to `slice`.
    /// The piece's records are gone when it returns, but for the dead letters and, with
    /// event time, the records of the rows.
    fn run_piece(
        self,
        records: Vec<Record>,
        ingestion: i64,
        slice: &mut Slice,
    ) -> Result<(), PipelineError> {
        let dead_before = slice.dead.len();
        let records = match self.to_json {
            Some(known) => as_json(records, known, &mut slice.dead),
            None => records,
        };
        let t = Instant::now();
        let ((judged, runs, shadows), plugins_cpu) = cpu::on_thread(|| {
            // The one reading of each JSON value's fields, for the stages and the encoder.
            let mut records = records;
            if self.avro.is_none() && self.stages.iter().any(Plugin::scans) {
                crate::encode::index_fields(&mut records);
            }
            self.run_stages(records)
        });
        slice.plugins += t.elapsed();
        slice.plugins_cpu += plugins_cpu;
        let t = Instant::now();
        let encode_start = cpu::thread();
        let mut judgement = self.judge(judged, &runs);
        slice.count(&judgement, shadows);
        slice.dead.append(&mut judgement.dead);
        let set_aside = slice.pending.len();
        let rows = self.encode(judgement.kept, ingestion, slice)?;
        if rows.batch.is_some() || !rows.records.is_empty() || slice.pending.len() > set_aside {
            slice.rows.push(rows);
        }
        own_bytes(&mut slice.dead[dead_before..]);
        slice.encode += t.elapsed();
        slice.encode_cpu += cpu::thread().saturating_sub(encode_start);
        Ok(())
    }

    /// The stages over `records`, and each shadow beside its stage.
    fn run_stages(
        self,
        records: Vec<Record>,
    ) -> (Vec<Judged>, Vec<StageRun>, Vec<Option<ShadowReport>>) {
        let originals = self
            .shadows
            .iter()
            .any(Option::is_some)
            .then(|| records.clone());
        let (judged, runs) = chain::run_counted(self.stages, records, self.chunk_size);
        let shadows = self
            .shadows
            .iter()
            .enumerate()
            .map(|(s, shadow)| {
                let (shadow, originals) = (shadow.as_ref()?, originals.as_ref()?);
                let size = self.chunk_size;
                Some(shadow::compare(
                    self.stages,
                    s,
                    shadow,
                    originals,
                    &judged,
                    size,
                ))
            })
            .collect();
        (judged, runs, shadows)
    }

    /// Sorts the records into kept and dead, and counts what each stage did.
    fn judge(self, judged: Vec<Judged>, runs: &[StageRun]) -> Judgement {
        let mut out = Judgement {
            kept: Vec::with_capacity(judged.len()),
            dead: Vec::new(),
            stage_counts: runs
                .iter()
                .map(|r| StageCounts {
                    rewritten: r.rewritten,
                    calls: r.calls,
                    micros: r.micros,
                    ..StageCounts::default()
                })
                .collect(),
            stage_verdicts: vec![BTreeMap::new(); self.stages.len()],
        };
        let mut last_failure = None;
        for Judged {
            record,
            fate,
            patch,
        } in judged
        {
            let (stage, rejected, reason) = match fate {
                Fate::Kept | Fate::Rewritten => {
                    count_kept(&mut out.stage_counts);
                    out.kept.push((record, patch.map(|(_, p)| p)));
                    continue;
                }
                Fate::Rejected { stage, rejection } => (
                    stage,
                    true,
                    (rejection.code, capped(&rejection.message), rejection.field),
                ),
                Fate::Failed { stage, error } => {
                    let code = error.failure().map_or("plugin_error", |f| f.code());
                    let message = failed_message(&mut last_failure, &error);
                    (stage, false, (code.to_string(), message, None))
                }
            };
            count_kept(&mut out.stage_counts[..stage]);
            let c = &mut out.stage_counts[stage];
            c.events += 1;
            let (code, message, field) = reason;
            let verdict = if rejected {
                c.rejected += 1;
                format!("rejected:{code}")
            } else {
                c.failed += 1;
                format!("failed:{code}")
            };
            *out.stage_verdicts[stage].entry(verdict).or_default() += 1;
            let plugin = &self.stages[stage];
            let reason = Reason {
                stage: plugin.name().to_string(),
                digest: Some(plugin.digest().to_string()),
                code,
                message,
                field,
            };
            out.dead.push((record, reason));
        }
        out
    }

    /// Encodes the kept records, and with event time reads their fields. Records that do
    /// not fit the table or have no readable event time join the slice's dead letters;
    /// the fields the encoder dropped are added to its counts. Records that need the
    /// table's schema to change first set the whole piece aside, in `slice.pending`
    /// (the rows returned are then an empty placeholder).
    pub(super) fn encode(
        self,
        kept: Vec<Kept>,
        ingestion: i64,
        slice: &mut Slice,
    ) -> Result<Timed, PipelineError> {
        let encoded = match self.avro {
            Some(known) => {
                // Patches come from stages, and stages read JSON: never with `avro`.
                debug_assert!(kept.iter().all(|(_, p)| p.is_none()));
                let values = kept.iter().map(|(r, _)| known.framed(r.value.as_deref()));
                self.encoder.encode_framed(values, ingestion)?
            }
            None => {
                let records = kept.iter().map(|(r, p)| (r, p.as_ref()));
                self.encoder.encode_records(records, ingestion)?
            }
        };
        if !encoded.wanted.is_empty() {
            slice.wanted.merge(encoded.wanted);
            slice.pending.push((slice.rows.len(), kept));
            return Ok(Timed {
                batch: None,
                records: Vec::new(),
            });
        }
        add_counts(&mut slice.dropped_fields, encoded.dropped);
        let dead = &mut slice.dead;
        let mut failed = encoded.errors.into_iter().peekable();
        let mut timed = Vec::new();
        let mut on_time = Vec::new();
        for (index, (record, patch)) in kept.into_iter().enumerate() {
            if failed.peek().is_none_or(|(i, _)| *i != index) && self.event_time.is_none() {
                continue;
            }
            // Past the encoder, the value is read as bytes: with the patch applied (a value
            // it cannot apply to failed the encoder too, and keeps its own bytes).
            let record = applied(record, patch);
            if let Some((_, error)) = failed.next_if(|(i, _)| *i == index) {
                dead.push((
                    record,
                    refusal("encode", error.code, error.message, error.field),
                ));
                continue;
            }
            let Some(et) = self.event_time else {
                continue;
            };
            match et.record_fields(&record) {
                Ok(fields) => timed.push((record, fields)),
                Err(e) => {
                    on_time.push(false);
                    dead.push((record, refusal("event-time", e.code, e.message, e.field)));
                    continue;
                }
            }
            on_time.push(true);
        }
        let batch = if self.event_time.is_some() {
            keep_rows(encoded.batch, on_time)?
        } else {
            (encoded.batch.num_rows() > 0).then_some(encoded.batch)
        };
        Ok(Timed {
            batch,
            records: timed,
        })
    }
}

/// The piece's dead letters, their bytes copied into memory of their own. A dead letter
/// outlives its piece (it leaves when the batch commits), and its bytes were read among
/// the bytes of the records around it: held, one record in twenty kept every memory page
/// of the batch's values from being freed until the commit (~30 MiB at 100 000 records per
/// batch in the ingest benchmark).
pub(super) fn own_bytes(dead: &mut [(Record, Reason)]) {
    for (record, _) in dead {
        record.own_bytes();
    }
}

/// `record` with `patch` applied to its value, when it applies.
/// The host's reading of its fields is dropped: past the encoder nothing needs it, and it
/// would keep its piece's buffer of spans.
fn applied(mut record: Record, patch: Option<Patch>) -> Record {
    record.spans = None;
    if let Some(Ok(value)) = patch.map(|p| p.apply(record.value.as_deref())) {
        record.value = Some(value.into());
    }
    record
}

/// `records` with their Avro or Protobuf values read to JSON; those that cannot be read join `dead`
/// with their original bytes.
pub(super) fn as_json(
    records: Vec<Record>,
    known: &Known,
    dead: &mut Vec<(Record, Reason)>,
) -> Vec<Record> {
    let mut kept = Vec::with_capacity(records.len());
    for mut record in records {
        match known.to_json(record.value.as_deref()) {
            Ok(json) => {
                record.value = Some(json.into());
                kept.push(record);
            }
            Err(e) => dead.push((record, refusal("encode", e.code(), e.to_string(), None))),
        }
    }
    kept
}

/// The message of a failed call, made once for all the records of the call (they share its
/// error) rather than once per record.
fn failed_message(
    last: &mut Option<(Arc<PluginError>, Arc<str>)>,
    error: &Arc<PluginError>,
) -> Arc<str> {
    match last {
        Some((seen, message)) if Arc::ptr_eq(seen, error) => message.clone(),
        _ => {
            let message = capped(&error.to_string());
            *last = Some((error.clone(), message.clone()));
            message
        }
    }
}

/// Adds counts by name to `total`.
pub(super) fn add_counts(total: &mut BTreeMap<String, u64>, counts: BTreeMap<String, u64>) {
    for (name, n) in counts {
        *total.entry(name).or_default() += n;
    }
}

/// Every stage before the one that stopped a record kept it.
fn count_kept(counts: &mut [StageCounts]) {
    for c in counts {
        c.events += 1;
        c.kept += 1;
    }
}

pub(super) fn refusal(stage: &str, code: &str, message: String, field: Option<String>) -> Reason {
    Reason {
        stage: stage.into(),
        digest: None,
        code: code.into(),
        message: capped(&message),
        field,
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

    use super::*;

    #[test]
    fn dead_letters_own_their_bytes() {
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::String),
            ))])
            .build()
            .unwrap();
        let encoder = Encoder::new(&schema, &[]).unwrap();
        let step = Step {
            stages: &[],
            shadows: &[],
            encoder: &encoder,
            event_time: None,
            chunk_size: 4,
            to_json: None,
            avro: None,
        };
        let topic: Arc<str> = "t".into();
        let records: Vec<Record> = (0..10)
            .map(|i| match i % 3 {
                0 => Record::with_value(topic.clone(), i, "not json"),
                _ => Record::with_value(topic.clone(), i, format!(r#"{{"id": "{i}"}}"#)),
            })
            .collect();
        let read_at: Vec<usize> = records
            .iter()
            .map(|r| r.value.as_ref().unwrap().as_ptr() as usize)
            .collect();
        let slice = step.run(records, 0).unwrap();
        let dead: Vec<i64> = slice.dead.iter().map(|(r, _)| r.offset).collect();
        assert_eq!(dead, [0, 3, 6, 9]);
        for (record, _) in &slice.dead {
            assert_eq!(record.value.as_deref(), Some(&b"not json"[..]));
            let at = record.value.as_ref().unwrap().as_ptr() as usize;
            assert_ne!(at, read_at[record.offset as usize], "{}", record.offset);
        }
    }
}
