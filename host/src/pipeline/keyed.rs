//! The declared key of the source (`[source] keyed-by`), checked on every record: each
//! record's value of the field must sit in the partition its producer's partitioner gives
//! it (see [`crate::event_time::keyed`]). A topic found keyed otherwise stops the pipeline
//! before the batch that showed it commits, naming the first record out of place: state
//! split by partition would otherwise be split wrongly.
//!
//! The partitioner is the configured one (`[source] partitioner`), or else whichever has
//! placed every record read so far. Records without a value of the field are not checked.
//!
//! A join's right topic is checked the same way, by the field of the join's key that the
//! source's key matches; with state by partition it must also have the source topic's
//! partition count, and this process must own partition `p` of both or of neither.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{Pipeline, PipelineError};
use crate::event_time::apply::Timed;
use crate::event_time::keyed::{KeyCheck, Keyed};
use crate::record::{Offsets, Record};

/// What the records read so far say of each topic's key.
#[derive(Debug, Default)]
pub(super) struct KeyChecks {
    /// Per source topic.
    checks: BTreeMap<Arc<str>, KeyCheck>,
    /// Topics whose key was logged as found.
    said: BTreeSet<Arc<str>>,
}

impl Pipeline {
    /// Asks the source how many partitions each topic has, for the key check (with a
    /// declared key).
    pub(super) fn count_partitions(&mut self) -> Result<(), PipelineError> {
        let Some(keyed) = self.event_time.as_mut().and_then(|et| et.keyed_mut()) else {
            return Ok(());
        };
        keyed.set_counts(self.source.partition_counts()?);
        self.check_co_partitioned(None)
    }

    /// With state by partition and joins: each right topic has the source topic's
    /// partition count (when both are known) and, when `owned` is given (after an
    /// assignment), this process owns the same partitions of both.
    pub(super) fn check_co_partitioned(
        &self,
        owned: Option<&Offsets>,
    ) -> Result<(), PipelineError> {
        let (Some(_), Some(et)) = (&self.tasks, &self.event_time) else {
            return Ok(());
        };
        let Some(left) = self.config.source.topics.first() else {
            return Ok(());
        };
        let numbers = |topic: &str, owned: &Offsets| -> BTreeSet<i32> {
            owned
                .0
                .keys()
                .filter(|tp| &*tp.topic == topic)
                .map(|tp| tp.partition)
                .collect()
        };
        for join in et.joins() {
            let right = &join.config().right_topic;
            let fail = |why: String| PipelineError::NotCoPartitioned {
                left: left.clone(),
                right: right.clone(),
                why,
            };
            if let Some(keyed) = et.keyed()
                && let (Some(l), Some(r)) = (keyed.count(left), keyed.count(right))
                && l != r
            {
                return Err(fail(format!("{l} partitions against {r}")));
            }
            if let Some(owned) = owned
                && numbers(left, owned) != numbers(right, owned)
            {
                return Err(fail(format!(
                    "this process was given partitions {:?} of the source topic and {:?} of the right topic (the group's assignor must give partition p of both to one member: `partition.assignment.strategy = \"range\"`, the default here)",
                    numbers(left, owned),
                    numbers(right, owned)
                )));
            }
        }
        Ok(())
    }

    /// Checks each record of a processed batch against the declared key: an error names
    /// the first topic not keyed by it.
    pub(super) fn check_keys(
        &mut self,
        slices: &[Timed],
        right: &[Record],
    ) -> Result<(), PipelineError> {
        let Some(keyed) = self.event_time.as_ref().and_then(|et| et.keyed()) else {
            return Ok(());
        };
        let records = || slices.iter().flat_map(|s| &s.records);
        let unknown = records().map(|(r, _)| r).chain(right).any(|r| {
            keyed
                .count(&r.topic)
                .is_none_or(|count| r.partition >= count)
        });
        if unknown {
            self.count_partitions()?; // a topic that grew, or not seen yet
        }
        let Some(et) = self.event_time.as_ref() else {
            return Ok(());
        };
        if let Some(keyed) = et.keyed() {
            for record in right {
                let text = et.right_key_text(record);
                let Some((text, count)) = text.zip(keyed.count(&record.topic)) else {
                    continue;
                };
                let check = self.key_checks.checks.entry(record.topic.clone());
                check
                    .or_default()
                    .observe(text.as_bytes(), record.partition, count);
            }
        }
        for (record, fields) in records() {
            let Some(placed) = fields.placed else {
                continue;
            };
            let check = self.key_checks.checks.entry(record.topic.clone());
            check
                .or_default()
                .observe_placed(placed, record.partition, || {
                    et.key_text(record).unwrap_or_default()
                });
        }
        self.judge_keys()
    }

    /// The verdict on each topic: the first one not keyed by the declared field fails.
    fn judge_keys(&mut self) -> Result<(), PipelineError> {
        let Some(source_key) = self.config.source.keyed_by.clone() else {
            return Ok(());
        };
        let named = self.config.source.partitioner;
        for (topic, check) in &self.key_checks.checks {
            let verdict = match named {
                Some(partitioner) => check.verdict_of(partitioner),
                None => check.verdict(),
            };
            let (what, field, declared) = self.key_of(topic, &source_key);
            match verdict {
                Keyed::Unseen => {}
                Keyed::By(partitioner) => {
                    if self.key_checks.said.insert(topic.clone()) {
                        tracing::info!(%topic, %field, %partitioner, "{what} keyed by the declared field, as far as its records show");
                    }
                }
                not @ Keyed::Not { .. } => {
                    return Err(PipelineError::NotKeyed {
                        what,
                        topic: topic.to_string(),
                        field,
                        declared,
                        verdict: not.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// What `topic` is to the pipeline, the field it must be keyed by, and where that is
    /// declared: the source's key, or a join's right key field that matches it.
    fn key_of(&self, topic: &str, source_key: &str) -> (&'static str, String, String) {
        let joins = self.event_time.iter().flat_map(|et| et.joins());
        for join in joins.map(|j| j.config()) {
            if join.right_topic != topic {
                continue;
            }
            let i = join.on.iter().position(|f| f == source_key);
            if let Some(field) = i.and_then(|i| join.right_on().get(i)) {
                let declared = format!("join `{}`'s key, matching source.keyed-by", join.name);
                return ("join right topic", field.clone(), declared);
            }
        }
        (
            "source topic",
            source_key.to_string(),
            "source.keyed-by".into(),
        )
    }
}
