//! Event time: the watermark, windows emitted, state sizes per operator, the state file and
//! join rows evicted.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Unit;

use super::{Families, FloatGauge, gauge_of, raise_to};
use crate::progress::EventTimeProgress;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WindowLabel {
    window: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperatorLabel {
    operator: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JoinSideLabel {
    join: String,
    side: &'static str,
}

/// What the event-time operators report.
pub(super) struct EventTimeMetrics {
    rows_late: Counter,
    rows_deduplicated: Counter,
    watermark: FloatGauge,
    windows_emitted: Family<WindowLabel, Counter>,
    state_rows: Family<OperatorLabel, Gauge>,
    state_bytes: Family<OperatorLabel, Gauge>,
    state_file_bytes: Gauge,
    join_rows_evicted: Family<JoinSideLabel, Counter>,
}

impl EventTimeMetrics {
    pub(super) fn register(f: &mut Families) -> Self {
        EventTimeMetrics {
            rows_late: f.add(
                "rows_late",
                "Events behind the watermark",
                Counter::default(),
            ),
            rows_deduplicated: f.add(
                "rows_deduplicated",
                "Duplicates dropped",
                Counter::default(),
            ),
            watermark: f.with_unit(
                "watermark",
                Unit::Seconds,
                "The event-time watermark after the last batch (0 without one)",
                FloatGauge::default(),
            ),
            windows_emitted: f.add(
                "windows_emitted",
                "Window results emitted, by window",
                Family::default(),
            ),
            state_rows: f.add(
                "state_rows",
                "Keys (dedup) or open pairs (window) in the state, by operator",
                Family::default(),
            ),
            state_bytes: f.with_unit(
                "state",
                Unit::Bytes,
                "Estimated bytes of the state in memory, by operator",
                Family::default(),
            ),
            state_file_bytes: f.with_unit(
                "state_file",
                Unit::Bytes,
                "Size of the last saved state file",
                Gauge::default(),
            ),
            join_rows_evicted: f.add(
                "join_rows_evicted",
                "Join rows that left before the other side's watermark, by [[joins]] max-rows",
                Family::default(),
            ),
        }
    }

    pub(super) fn record(&self, et: &EventTimeProgress) {
        self.rows_late.inc_by(et.rows_late);
        self.rows_deduplicated.inc_by(et.rows_deduplicated);
        if let Some(micros) = et.watermark {
            self.watermark.set(micros.0 as f64 / 1e6);
        }
        for (window, n) in &et.windows_emitted {
            let window = window.clone();
            self.windows_emitted
                .get_or_create(&WindowLabel { window })
                .inc_by(*n);
        }
        for (operator, size) in &et.state {
            let label = OperatorLabel {
                operator: operator.clone(),
            };
            self.state_rows
                .get_or_create(&label)
                .set(gauge_of(size.rows));
            self.state_bytes
                .get_or_create(&label)
                .set(gauge_of(size.bytes));
        }
        self.state_file_bytes.set(gauge_of(et.state_file_bytes));
        for (join, &(left, right)) in &et.join_rows_evicted {
            for (side, total) in [("left", left), ("right", right)] {
                let join = join.clone();
                let counter = self
                    .join_rows_evicted
                    .get_or_create(&JoinSideLabel { join, side });
                raise_to(&counter, total);
            }
        }
    }
}
