//! Event time applied to a processed batch: late events leave the stream, duplicates are
//! dropped, windows take the rest. Runs on one thread, over the batch's records in
//! `(topic, partition, offset)` order, after the plugin stages and the encoder (which
//! read each event's fields on every core).

use arrow_array::RecordBatch;

use super::extract::format_micros;
use super::join::{RightFields, row_id};
use super::{Arrival, EventTime, EventTimeOutcome, Fields};
use crate::encode::{SchemaError, keep_rows};
use crate::record::TopicPartition;
use crate::record::{Reason, Record};
use crate::units::{Micros, Millis};

/// One processed slice of a batch: its table rows and, in the same order, the records of
/// those rows with their event-time fields.
#[derive(Debug)]
pub struct Timed {
    /// The rows for the table.
    pub batch: Option<RecordBatch>,
    /// The record of each row and its fields.
    pub records: Vec<(Record, Fields)>,
}

/// The records that leave the stream, with their reasons.
#[derive(Debug, Default)]
struct Sorted {
    late: Vec<(Record, Reason)>,
    future: Vec<(Record, Reason)>,
    kept: Vec<Record>,
}

/// What the operators leave of a batch.
#[derive(Debug)]
pub struct Applied {
    /// The table's rows: on time and not duplicates.
    pub batches: Vec<RecordBatch>,
    /// Late events, with their reason.
    pub late: Vec<(Record, Reason)>,
    /// Events too far in the future, with their reason (always dead letters).
    pub future: Vec<(Record, Reason)>,
    /// Records of a join's right topic whose fields cannot be read, with their reason
    /// (always dead letters).
    pub unreadable: Vec<(Record, Reason)>,
    /// What the operators did.
    pub outcome: EventTimeOutcome,
    /// The events on time (not late, not duplicates), in input order, when asked for
    /// ([`EventTime::keep_on_time`]); else empty.
    pub kept: Vec<Record>,
}

impl EventTime {
    /// Runs the operators over a batch's slices, in order, and the joins over the records
    /// of their right topics (`right`, in batch order). `assigned` are the partitions the
    /// batch read (each holds its side's watermark back from its assignment on).
    pub fn apply<'a>(
        &mut self,
        slices: Vec<Timed>,
        right: Vec<Record>,
        assigned: impl IntoIterator<Item = &'a TopicPartition>,
        now: Millis,
        flush: bool,
    ) -> Result<Applied, SchemaError> {
        self.register_assigned(assigned, now);
        let (per_join, mut unreadable) = self.read_right(right);
        let right_refs: Vec<Vec<(&str, &RightFields)>> = per_join
            .iter()
            .map(|records| records.iter().map(|(p, _, f)| (p.as_str(), f)).collect())
            .collect();
        let (names, which) = partition_keys(&slices, self.origins.is_some());
        let keys = which.iter().map(|&i| names[i].as_str());
        let fields = slices.iter().flat_map(|s| s.records.iter().map(|(_, f)| f));
        let outcome = self.process_joined(keys.zip(fields), &right_refs, now, flush);
        drop(right_refs);
        let horizon = now.as_micros().saturating_add(self.clock.max_future);
        let mut sorted = Sorted::default();
        self.sort_right(per_join, &outcome, horizon, &mut sorted);
        unreadable.sort_by(|a, b| {
            (&a.0.topic, a.0.partition, a.0.offset).cmp(&(&b.0.topic, b.0.partition, b.0.offset))
        });
        let batches = self.sort_main(slices, &outcome, horizon, &mut sorted)?;
        Ok(Applied {
            batches,
            late: sorted.late,
            future: sorted.future,
            unreadable,
            outcome,
            kept: sorted.kept,
        })
    }

    /// Registers the partitions a batch read, each with the side it feeds: a join's right
    /// topic, or the main stream.
    fn register_assigned<'a>(
        &mut self,
        assigned: impl IntoIterator<Item = &'a TopicPartition>,
        now: Millis,
    ) {
        let mut main = self.origins();
        let origins = !main.is_empty();
        for tp in assigned {
            match self.join_of_topic(&tp.topic) {
                Some(j) => {
                    if let Some(join) = self.join_mut(j) {
                        join.register(&tp.to_string(), now);
                    }
                }
                None if origins => {} // stage two: the origins hold the watermark
                None => main.push(tp.to_string()),
            }
        }
        self.register(main.iter().map(String::as_str), now);
    }

    /// Moves the late and future records of the joins' right topics out, with their reasons.
    fn sort_right(
        &self,
        per_join: Vec<Vec<(String, Record, RightFields)>>,
        outcome: &EventTimeOutcome,
        horizon: Micros,
        sorted: &mut Sorted,
    ) {
        let joins: Vec<_> = self.joins().collect();
        for (j, records) in per_join.into_iter().enumerate() {
            let join = joins[j].config();
            let verdicts = &outcome.right_verdicts[j];
            let before = outcome.right_watermarks_before[j];
            let field = &join.right_time_field;
            for ((_, record, fields), verdict) in records.into_iter().zip(verdicts) {
                match verdict {
                    Arrival::Late => {
                        let mut reason = late_reason(field, fields.time, before);
                        reason.message = format!(
                            "{} (the right side of join `{}`)",
                            reason.message, join.name
                        )
                        .into();
                        sorted.late.push((record, reason));
                    }
                    Arrival::Future => {
                        let reason = future_reason(field, fields.time, horizon);
                        sorted.future.push((record, reason));
                    }
                    Arrival::OnTime if self.keep_on_time => sorted.kept.push(record),
                    Arrival::OnTime | Arrival::Duplicate => {}
                }
            }
        }
    }

    /// Keeps the main stream's on-time rows of every slice; moves its late and future
    /// records out, with their reasons.
    fn sort_main(
        &self,
        slices: Vec<Timed>,
        outcome: &EventTimeOutcome,
        horizon: Micros,
        sorted: &mut Sorted,
    ) -> Result<Vec<RecordBatch>, SchemaError> {
        let mut arrivals = outcome.verdicts.iter();
        let mut batches = Vec::new();
        let field = &self.config.field;
        for slice in slices {
            let mut on_time = Vec::with_capacity(slice.records.len());
            for (record, fields) in slice.records {
                let arrival = *arrivals.next().expect("one arrival per event");
                on_time.push(arrival == Arrival::OnTime);
                match arrival {
                    Arrival::Late => {
                        let reason = late_reason(field, fields.time, outcome.watermark_before);
                        sorted.late.push((record, reason));
                    }
                    Arrival::Future => {
                        let reason = future_reason(field, fields.time, horizon);
                        sorted.future.push((record, reason));
                    }
                    Arrival::OnTime if self.keep_on_time => sorted.kept.push(record),
                    Arrival::OnTime | Arrival::Duplicate => {}
                }
            }
            if let Some(batch) = slice.batch
                && let Some(kept) = keep_rows(batch, on_time)?
            {
                batches.push(kept);
            }
        }
        Ok(batches)
    }

    /// The fields of the right records, per join, with their partition key; the records
    /// that cannot be read, with their reason.
    #[allow(clippy::type_complexity)]
    fn read_right(
        &self,
        right: Vec<Record>,
    ) -> (
        Vec<Vec<(String, Record, RightFields)>>,
        Vec<(Record, Reason)>,
    ) {
        let mut per_join: Vec<Vec<_>> = self.joins().map(|_| Vec::new()).collect();
        let mut unreadable = Vec::new();
        for record in right {
            let Some(j) = self.join_of_topic(&record.topic) else {
                let reason = Reason {
                    stage: "event-time".into(),
                    digest: None,
                    code: "no_join".into(),
                    message: format!("no join reads topic `{}`", record.topic).into(),
                    field: None,
                };
                unreadable.push((record, reason));
                continue;
            };
            match self.right_fields(j, record.value.as_deref()) {
                Ok(mut fields) => {
                    fields.id = row_id(&record.topic, record.partition, record.offset);
                    let partition = format!("{}/{}", record.topic, record.partition);
                    per_join[j].push((partition, record, fields));
                }
                Err(e) => {
                    let join = self.joins().nth(j).map(|op| op.config());
                    let name = join.map_or("", |c| c.name.as_str());
                    let reason = Reason {
                        stage: format!("join `{name}`"),
                        digest: None,
                        code: e.code.into(),
                        message: e.message.into(),
                        field: e.field,
                    };
                    unreadable.push((record, reason));
                }
            }
        }
        (per_join, unreadable)
    }
}

/// The `topic/partition` key of every record: records come sorted by partition, so one
/// key is made per run of a partition, not per record. Returns the keys and, per record,
/// the index of its key. `by_origin` (stage two of a repartition topic): the partition
/// each record was read from by stage one (a run is then of one origin).
fn partition_keys(slices: &[Timed], by_origin: bool) -> (Vec<String>, Vec<usize>) {
    let mut names: Vec<String> = Vec::new();
    let mut which = Vec::new();
    let mut last: Option<(&str, i32)> = None;
    for (record, _) in slices.iter().flat_map(|s| s.records.iter()) {
        if by_origin {
            let origin = super::repartition::origin_partition(&record.headers);
            let origin = origin.unwrap_or_else(|| format!("{}/{}", record.topic, record.partition));
            if names.last() != Some(&origin) {
                names.push(origin);
            }
            which.push(names.len() - 1);
            continue;
        }
        let here = (&*record.topic, record.partition);
        if last != Some(here) {
            names.push(format!("{}/{}", here.0, here.1));
            last = Some(here);
        }
        which.push(names.len() - 1);
    }
    (names, which)
}

/// Why an event too far in the future left the stream.
fn future_reason(field: &str, time: Micros, horizon: Micros) -> Reason {
    Reason {
        stage: "event-time".into(),
        digest: None,
        code: "event_time_in_future".into(),
        message: format!(
            "event time {} is past {} (processing time plus event-time.max-future)",
            format_micros(time),
            format_micros(horizon)
        )
        .into(),
        field: Some(field.to_string()),
    }
}

/// Why a late event left the stream.
fn late_reason(field: &str, time: Micros, watermark: Option<Micros>) -> Reason {
    Reason {
        stage: "event-time".into(),
        digest: None,
        code: "late_event".into(),
        message: format!(
            "event time {} is behind the watermark {}",
            format_micros(time),
            watermark.map_or_else(|| "(none)".into(), format_micros)
        )
        .into(),
        field: Some(field.to_string()),
    }
}
