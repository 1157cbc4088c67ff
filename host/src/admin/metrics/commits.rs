//! Commits: retries, fenced batches, expired snapshots, rebalances, the partitions held and
//! whether this process is the active one.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::Families;

/// Commits that met other commits, and what the consumer group gave this process.
pub(super) struct CommitMetrics {
    pub(super) retries: Counter,
    pub(super) snapshots_expired: Counter,
    pub(super) expiry_failures: Counter,
    pub(super) fenced: Counter,
    pub(super) rebalances: Counter,
    pub(super) partitions: Gauge,
    pub(super) active: Gauge,
}

impl CommitMetrics {
    pub(super) fn register(f: &mut Families) -> Self {
        CommitMetrics {
            retries: f.add(
                "commit_retries",
                "Table commits retried after a conflict with a commit that left the fence standing",
                Counter::default(),
            ),
            snapshots_expired: f.add(
                "snapshots_expired",
                "Snapshots expired from the tables between commits ([sink.expire-snapshots])",
                Counter::default(),
            ),
            expiry_failures: f.add(
                "snapshot_expiry_failures",
                "Snapshot expiries between commits that failed (logged; the pipeline went on)",
                Counter::default(),
            ),
            fenced: f.add(
                "batches_fenced",
                "Batches abandoned because another commit took their partitions first",
                Counter::default(),
            ),
            rebalances: f.add(
                "rebalances",
                "Consumer-group rebalances this process saw",
                Counter::default(),
            ),
            partitions: f.add(
                "partitions",
                "Partitions the last batch read (in a consumer group, those this process owns)",
                Gauge::default(),
            ),
            active: f.add(
                "active",
                "1 while this process runs the pipeline, 0 while it stands by for another",
                Gauge::default(),
            ),
        }
    }
}
