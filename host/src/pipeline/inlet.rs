//! Stage two of a repartition topic (issue 35, see [`crate::event_time::repartition`]):
//! a pipeline whose source is the topic. Each record read is sorted before anything else:
//! an event taken for the first time goes on, without the plugin stages (stage one ran
//! them), and without a row for the table unless this stage writes the rows (the dedup's
//! stage: its events are then encoded as stage one's would be); an event sent again is
//! dropped (counted in the log); a marker moves its origin's clock in the task of the partition it
//! came to; a record that is not stage one's is a dead letter. What each partition took
//! from each source partition is committed with the batch ([`REPARTITION_SEEN`]) and read
//! back with the tasks.

use std::collections::BTreeMap;

use super::process::{Dead, ProcessStats};
use super::step::refusal;
use super::{Pipeline, PipelineError};
use crate::checkpoint::REPARTITION_SEEN;
use crate::event_time::apply::Timed;
use crate::event_time::repartition::{Arrival, Seen};
use crate::event_time::tasks::Flush;
use crate::progress::RepartitionProgress;
use crate::record::{Record, TopicPartition};
use crate::units::{Micros, Millis};

/// What stage two knows of the partitions of its topic.
#[derive(Debug, Clone, Default)]
pub(super) struct Inlet {
    /// Whether this pipeline is stage two.
    on: bool,
    /// Whether it writes the table's rows of the events it takes.
    rows: bool,
    /// As the table's last commit records it, by partition (`topic/partition`).
    committed: BTreeMap<String, Seen>,
    /// With the batch (or the held triggers) in hand.
    working: BTreeMap<String, Seen>,
    /// The markers of the batch in hand: the partition each came to, its origin and time.
    markers: Vec<(TopicPartition, String, Option<Micros>)>,
    /// The source partitions (`topic/partition`) stage one reads.
    origins: Vec<String>,
}

impl Pipeline {
    /// Makes this pipeline stage two of its source topic, a repartition topic fed from
    /// the partitions of `origin` (the source topic of stage one; the repartition topic
    /// has as many).
    pub fn read_repartition(&mut self, origin: &str) -> Result<(), PipelineError> {
        let (topic, count) = self.source_partitions()?;
        let count = count.ok_or_else(|| PipelineError::Repartition {
            topic: topic.clone(),
            why: "it has no partitions (stage one creates it)".into(),
        })?;
        self.inlet.on = true;
        self.inlet.origins = (0..count).map(|p| format!("{origin}/{p}")).collect();
        if let Some(et) = &mut self.event_time {
            et.read_origins(origin, count);
        }
        if let Some(tasks) = &mut self.tasks {
            tasks.read_origins(origin, count);
        }
        self.load_seen()
    }

    /// Whether this pipeline is stage two of a repartition topic.
    pub(super) fn is_stage_two(&self) -> bool {
        self.inlet.on
    }

    /// Reads back what each partition took, as the table's last commit records it.
    pub(super) fn load_seen(&mut self) -> Result<(), PipelineError> {
        if !self.inlet.on {
            return Ok(());
        }
        let name = &self.config.pipeline.name;
        let props = self.outputs.table().table().last_mark_properties(name)?;
        let recorded = props.as_ref().and_then(|p| p.get(REPARTITION_SEEN));
        let by_partition: BTreeMap<String, String> = recorded
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or_default();
        self.inlet.committed = by_partition
            .into_iter()
            .filter_map(|(p, text)| Seen::from_json(&text).map(|s| (p, s)))
            .collect();
        self.inlet.working = self.inlet.committed.clone();
        Ok(())
    }

    /// Makes this stage two write the table's rows of the events it takes.
    pub(super) fn inlet_writes_rows(&mut self) {
        self.inlet.rows = true;
    }

    /// Takes a batch's records in (see the module): the events taken, with their rows if
    /// this stage writes them, and the records refused.
    pub(super) fn take_in(
        &mut self,
        records: Vec<Record>,
        now: Millis,
    ) -> Result<(Vec<Timed>, Dead, ProcessStats), PipelineError> {
        let (taken, mut dead, read) = self.admit(records);
        if self.inlet.rows {
            let mut processed = self.process(taken, now)?;
            dead.extend(processed.dead);
            processed.stats.repartition = read;
            return Ok((processed.slices, dead, processed.stats));
        }
        let mut records = Vec::with_capacity(taken.len());
        if let Some(et) = &self.event_time {
            for record in taken {
                match et.record_fields(&record) {
                    Ok(fields) => records.push((record, fields)),
                    Err(e) => {
                        let reason = refusal("event-time", e.code, e.message, e.field);
                        dead.push((record, reason));
                    }
                }
            }
        }
        let slice = Timed {
            batch: None,
            records,
        };
        let mut stats = ProcessStats::none(self.stages.active().len());
        stats.repartition = read;
        Ok((vec![slice], dead, stats))
    }

    /// Sorts a batch's records: the events taken, the records refused, and how many of
    /// each kind it read.
    fn admit(&mut self, records: Vec<Record>) -> (Vec<Record>, Dead, RepartitionProgress) {
        let mut taken = Vec::new();
        let mut dead = Vec::new();
        let mut read = RepartitionProgress::default();
        for record in records {
            let partition = TopicPartition {
                topic: record.topic.clone(),
                partition: record.partition,
            };
            let seen = self.inlet.working.entry(partition.to_string()).or_default();
            match seen.admit(&record.headers) {
                Arrival::Event(_) => taken.push(record),
                Arrival::Again(_) => read.again += 1,
                Arrival::Marker { origin, time, .. } => {
                    read.markers += 1;
                    self.inlet.markers.push((partition, origin.partition, time));
                }
                Arrival::Foreign(why) => {
                    let why = format!("not a record of a repartition topic: {why}");
                    dead.push((
                        record,
                        refusal("repartition", "not_from_stage_one", why, None),
                    ));
                }
            }
        }
        read.taken = taken.len() as u64;
        if read.again > 0 {
            tracing::info!(
                events = read.again,
                "dropped events stage one sent again (a replayed batch, or a member frozen meanwhile): each was taken before"
            );
        }
        (taken, dead, read)
    }

    /// After the batch's events: its markers move their origins' clocks in the tasks of
    /// the partitions they came to. (A marker follows the events of its origin's batch,
    /// some of which may be in this batch: taken first, it would make them late.)
    pub(super) fn observe_markers(&mut self, now: Millis) {
        for (partition, origin, time) in std::mem::take(&mut self.inlet.markers) {
            if let Some(tasks) = &mut self.tasks {
                tasks.observe_marker(&partition, &origin, time, now);
            } else if let Some(et) = &mut self.event_time {
                et.observe_marker(&origin, time, now);
            }
        }
    }

    /// Which tasks flush at the end of a batch that ends a run that flushes (`flush`):
    /// with stage two, the partitions every source partition ended for, as far as the
    /// batches before this one took their markers.
    pub(super) fn flushing(&self, flush: bool) -> Flush {
        if !flush {
            return Flush::None;
        }
        if !self.inlet.on {
            return Flush::All;
        }
        let origins = || self.inlet.origins.iter().map(String::as_str);
        let ended = (self.inlet.working.iter()).filter(|(_, seen)| seen.all_ended(origins()));
        Flush::Only(ended.map(|(p, _)| p.clone()).collect())
    }

    /// Whether every partition this process reads flushes (`flush`, see
    /// [`Pipeline::flushing`]).
    pub(super) fn flushing_all(&self, flush: &Flush) -> bool {
        match flush {
            Flush::None => false,
            Flush::All => true,
            Flush::Only(_) => (self.positions.0.keys()).all(|tp| flush.of(&tp.to_string())),
        }
    }

    /// What each partition of this process took, as the batch's commit records it.
    pub(super) fn seen_property(&self) -> Option<(String, String)> {
        if !self.inlet.on {
            return None;
        }
        let owned = self.tasks.as_ref()?;
        let mine: BTreeMap<&str, String> = owned
            .partitions()
            .filter_map(|p| self.inlet.working.get(p).map(|s| (p, s.to_json())))
            .collect();
        let json = serde_json::to_string(&mine).ok()?;
        Some((REPARTITION_SEEN.to_string(), json))
    }

    /// After a commit: what the batch took is the table's now.
    pub(super) fn seen_committed(&mut self) {
        if self.inlet.on {
            self.inlet.committed = self.inlet.working.clone();
        }
    }
}
