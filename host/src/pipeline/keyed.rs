//! The declared key of the source (`[source] keyed-by`), checked on every record: each
//! record's value of the field must sit in the partition its producer's partitioner gives
//! it (see [`crate::event_time::keyed`]). A topic found keyed otherwise stops the pipeline
//! before the batch that showed it commits, naming the first record out of place: state
//! split by partition would otherwise be split wrongly.
//!
//! The partitioner is the configured one (`[source] partitioner`), or else whichever has
//! placed every record read so far. Records without a value of the field are not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{Pipeline, PipelineError};
use crate::event_time::apply::Timed;
use crate::event_time::keyed::{KeyCheck, Keyed};

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
        Ok(())
    }

    /// Checks each record of a processed batch against the declared key: an error names
    /// the first topic not keyed by it.
    pub(super) fn check_keys(&mut self, slices: &[Timed]) -> Result<(), PipelineError> {
        let Some(keyed) = self.event_time.as_ref().and_then(|et| et.keyed()) else {
            return Ok(());
        };
        let records = || slices.iter().flat_map(|s| &s.records);
        let unknown = records().any(|(r, _)| {
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
        let Some(field) = self.config.source.keyed_by.clone() else {
            return Ok(());
        };
        let declared = self.config.source.partitioner;
        for (topic, check) in &self.key_checks.checks {
            let verdict = match declared {
                Some(partitioner) => check.verdict_of(partitioner),
                None => check.verdict(),
            };
            match verdict {
                Keyed::Unseen => {}
                Keyed::By(partitioner) => {
                    if self.key_checks.said.insert(topic.clone()) {
                        tracing::info!(%topic, %field, %partitioner, "source topic keyed by the declared field, as far as its records show");
                    }
                }
                not @ Keyed::Not { .. } => {
                    return Err(PipelineError::NotKeyed {
                        topic: topic.to_string(),
                        field,
                        verdict: not.to_string(),
                    });
                }
            }
        }
        Ok(())
    }
}
