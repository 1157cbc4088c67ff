//! Time: the batch duration histogram, seconds per phase, the last batch and its commit.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Unit;

use super::{BATCH_SECONDS, Families, FloatGauge, Seconds, gauge_of, seconds_of_ms};
use crate::progress::{Durations, Progress};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: &'static str,
}

/// How long batches take, how far behind they are, when the last one committed.
pub(super) struct TimeMetrics {
    duration: Histogram,
    phases: Family<PhaseLabel, Seconds>,
    last_batch_id: Gauge,
    lag: Gauge,
    last_commit: FloatGauge,
}

impl TimeMetrics {
    pub(super) fn register(f: &mut Families) -> Self {
        let metrics = TimeMetrics {
            duration: f.with_unit(
                "batch_duration",
                Unit::Seconds,
                "Duration of each batch, from its start to its commit",
                Histogram::new(BATCH_SECONDS),
            ),
            phases: f.with_unit(
                "batch_phase",
                Unit::Seconds,
                "Time spent in each phase of the batches (write and state overlap)",
                Family::default(),
            ),
            last_batch_id: f.add("last_batch_id", "Id of the last batch", Gauge::default()),
            lag: f.add(
                "lag_records",
                "Records known to remain behind the last batch",
                Gauge::default(),
            ),
            last_commit: f.with_unit(
                "last_commit_timestamp",
                Unit::Seconds,
                "Wall-clock time of the last table commit (0 before the first)",
                FloatGauge::default(),
            ),
        };
        for phase in Durations::PHASES {
            let _ = metrics.phases.get_or_create(&PhaseLabel { phase });
        }
        metrics
    }

    pub(super) fn record(&self, p: &Progress) {
        self.duration.observe(seconds_of_ms(p.durations_ms.total));
        for (phase, ms) in p.durations_ms.phases() {
            let phase = PhaseLabel { phase };
            self.phases.get_or_create(&phase).inc_by(seconds_of_ms(ms));
        }
        self.last_batch_id.set(gauge_of(p.batch_id));
        self.lag.set(p.lag);
        let committed = p.committed_at.timestamp_micros() as f64 / 1e6;
        self.last_commit.set(committed);
    }
}
