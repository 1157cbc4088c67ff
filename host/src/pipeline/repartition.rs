//! Stage one of repartition topics (issue 35, see [`crate::event_time::repartition`]):
//! after each batch, the events on time go on to each repartition topic, placed by the
//! value of the topic's key field, with the markers of the source partitions the batch
//! read. Sent at least once with the batch's other topics, before its commit.

use std::collections::{BTreeMap, BTreeSet};

use super::config::repartition::{RepartitionTopic, Stage};
use super::read::Input;
use super::{Pipeline, PipelineError};
use crate::batch::trigger::Batches;
use crate::event_time::extract::Extractor;
use crate::event_time::repartition::{Origin, Outlet, Repartitioned};
use crate::record::Record;
use crate::sink::OutputError;
use crate::sink::repartition::RepartitionOutput;
use crate::sink::topic::{TopicTarget, Topics};

/// How long a repartition topic's producer waits for acknowledgements.
const ACK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The repartition topics this process feeds, each with the reader of its key.
#[derive(Debug, Clone, Default)]
pub(super) struct Outlets {
    /// The topics.
    to: Vec<(Outlet, Extractor)>,
    /// Whether a later stage writes the table's rows (this one commits its marks alone).
    pub(super) rows_elsewhere: bool,
}

impl Outlets {
    /// Whether this process feeds a repartition topic.
    pub(super) fn feeds(&self) -> bool {
        !self.to.is_empty()
    }
}

impl Pipeline {
    /// At the end of an `available-now` run that flushes, feeding a repartition topic: the
    /// source partitions this process reads whose end it reached, as the brokers say now
    /// (their markers say so: see [`crate::event_time::repartition::ENDED_HEADER`]).
    pub(super) fn read_to_end(&mut self) -> Result<BTreeSet<String>, PipelineError> {
        let ends = Batches::end_offsets(self)?;
        let reached = (self.positions.0.iter())
            .filter(|&(tp, &at)| ends.get(tp).is_none_or(|end| at >= end))
            .map(|(tp, _)| tp.to_string());
        Ok(reached.collect())
    }

    /// Makes this pipeline `stage` of its plan (see
    /// [`super::config::PipelineConfig::plan`]): stage two of the topic it reads, with or
    /// without the table's rows, feeding the topics it feeds (opened by `topics`).
    pub fn take_stage(&mut self, topics: &dyn Topics, stage: &Stage) -> Result<(), PipelineError> {
        match &stage.reads {
            Some(origin) => {
                self.read_repartition(origin)?;
                if stage.rows {
                    self.inlet_writes_rows();
                }
            }
            None => self.outlets.rows_elsewhere = !stage.rows,
        }
        if !stage.feeds.is_empty() {
            self.repartition(topics, &stage.feeds)?;
        }
        Ok(())
    }

    /// Makes this pipeline stage one of `to`: each batch's events on time also go to each
    /// topic (created, if absent, with the source topic's partition count), opened by
    /// `topics` on the source's cluster.
    pub fn repartition(
        &mut self,
        topics: &dyn Topics,
        to: &[RepartitionTopic],
    ) -> Result<(), PipelineError> {
        let (source, count) = self.source_partitions()?;
        for (i, r) in to.iter().enumerate() {
            let fail = |why: String| PipelineError::Repartition {
                topic: r.topic.clone(),
                why,
            };
            let partitions = count
                .ok_or_else(|| fail(format!("the source topic `{source}` has no partitions")))?;
            let outlet = Outlet::placing(&r.topic, partitions, r.partitioner);
            let outlet = outlet.map_err(|e| fail(e.to_string()))?;
            let target = TopicTarget {
                topic: r.topic.clone(),
                connection: self.config.source.connection(),
                ack_timeout: ACK_TIMEOUT,
            };
            let topic = topics
                .open_partitioned(&target, partitions)
                .map_err(|error| OutputError::Topic {
                    output: format!("repartition topic \"{}\"", r.topic),
                    error: Box::new(error),
                })?;
            self.outputs.push(Box::new(RepartitionOutput::new(
                self.outlets.to.len(),
                topic,
            )));
            self.outlets
                .to
                .push((outlet, Extractor::new([r.key.as_str()])));
            tracing::info!(topic = %r.topic, partitions, key = %r.key, index = i, "events on time go on to a repartition topic");
        }
        if let Some(et) = &mut self.event_time {
            et.keep_on_time();
        }
        if let Some(tasks) = &mut self.tasks {
            tasks.keep_on_time();
        }
        Ok(())
    }

    /// The source topic and its partition count, if it has partitions.
    pub(super) fn source_partitions(&mut self) -> Result<(String, Option<i32>), PipelineError> {
        let topic = self.config.source.topics.first();
        let topic = topic.cloned().unwrap_or_default();
        let count = self.source.partition_counts()?.get(topic.as_str()).copied();
        Ok((topic, count))
    }

    /// The records of a batch (`input`) for each repartition topic: `kept` (its events on
    /// time), then the markers of the source partitions it read records of (from its start
    /// to its next offsets) as they stand at its processing time, and of those in `ended`
    /// (read to the end, at the end of an `available-now` run that flushes), ended.
    pub(super) fn repartitioned(
        &self,
        kept: &[Record],
        input: &Input,
        ended: Option<&BTreeSet<String>>,
    ) -> Vec<Vec<Repartitioned>> {
        let (start, next, now) = (&input.start, &input.next, input.now);
        if self.outlets.to.is_empty() {
            return Vec::new();
        }
        let newest = match (&self.tasks, &self.event_time) {
            (Some(tasks), _) => tasks.marker_times(now),
            (None, Some(et)) => et.newest_event_times(),
            (None, None) => BTreeMap::new(),
        };
        let source = self.config.source.topics.first();
        let read: BTreeMap<String, (i64, Option<_>)> = next
            .0
            .iter()
            .filter(|(tp, _)| source.is_some_and(|s| **s == *tp.topic))
            .filter(|&(tp, &to)| {
                ended.is_some_and(|e| e.contains(&tp.to_string()))
                    || start.get(tp).is_some_and(|from| from < to)
            })
            .map(|(tp, &to)| {
                let p = tp.to_string();
                let time = newest.get(&p).copied().flatten();
                (p, (to - 1, time))
            })
            .collect();
        self.outlets
            .to
            .iter()
            .map(|(outlet, key)| {
                let mut records: Vec<Repartitioned> = kept
                    .iter()
                    .map(|record| {
                        let value = record.value.as_deref().unwrap_or_default();
                        let key = key.read(Some(value)).ok();
                        let key = key
                            .and_then(|k| k.into_iter().next().flatten())
                            .map(|k| k.text().to_string())
                            .unwrap_or_default();
                        let origin = Origin {
                            partition: format!("{}/{}", record.topic, record.partition),
                            offset: record.offset,
                        };
                        outlet.event(&key, value, &origin)
                    })
                    .collect();
                records.extend(outlet.markers(&read, ended));
                records
            })
            .collect()
    }
}
