//! Lag per partition: `sluice_partition_lag_records{partition="topic/3"}` for each partition
//! the last batch read (in a consumer group, those this process owns), at most
//! [`MAX_PARTITION_LABELS`] of them in name order; the lag of the rest is summed under
//! `partition="other"`. A partition no longer read (moved to another member, or every one
//! on a standby) loses its series.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::{Families, OTHER_CODE};
use crate::progress::Progress;

/// Partitions that keep a series of their own; past them, [`OTHER_CODE`].
pub(super) const MAX_PARTITION_LABELS: usize = 256;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabel {
    partition: String,
}

/// How far behind each partition is.
pub(super) struct PartitionMetrics {
    lag: Family<PartitionLabel, Gauge>,
    /// The labels set by the last batch.
    shown: Mutex<BTreeSet<String>>,
}

impl PartitionMetrics {
    pub(super) fn register(f: &mut Families) -> Self {
        PartitionMetrics {
            lag: f.add(
                "partition_lag_records",
                "Records known to remain behind the last batch, per partition it read (at most 256 partitions; the rest summed as `other`)",
                Family::default(),
            ),
            shown: Mutex::new(BTreeSet::new()),
        }
    }

    pub(super) fn record(&self, p: &Progress) {
        let mut lags: BTreeMap<String, i64> = BTreeMap::new();
        let mut read: Vec<&String> = p.partitions.iter().collect();
        read.sort();
        for (i, partition) in read.into_iter().enumerate() {
            let lag = p.lag_by_partition.get(partition).copied().unwrap_or(0);
            let label = if i < MAX_PARTITION_LABELS {
                partition.clone()
            } else {
                OTHER_CODE.to_string()
            };
            *lags.entry(label).or_default() += lag;
        }
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        for gone in shown.iter().filter(|s| !lags.contains_key(*s)) {
            self.lag.remove(&PartitionLabel {
                partition: gone.clone(),
            });
        }
        for (partition, lag) in &lags {
            let label = PartitionLabel {
                partition: partition.clone(),
            };
            self.lag.get_or_create(&label).set(*lag);
        }
        *shown = lags.into_keys().collect();
    }
}
