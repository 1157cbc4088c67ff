//! The Prometheus metrics, built from each committed batch's [`Progress`] and served in the
//! Prometheus text format, or in OpenMetrics to a scraper that asks for it.
//!
//! Every family is registered at start, with its `HELP`, `TYPE` and (where it has one)
//! `UNIT`; a family without labels starts at zero, so a scrape before the first batch
//! already shows it. Counts since the start are counters (`_total`), sizes and positions
//! are gauges. Time spent is a counter of seconds per phase
//! (`sluice_batch_phase_seconds_total{phase}`: `rate()` of it is the share of wall time
//! each phase takes, as Spark's `durationMs` per trigger shows) and a histogram of whole
//! batch durations (`sluice_batch_duration_seconds`, for percentiles, as Flink's
//! checkpoint duration). The phases `write` and `state` overlap, so phases do not add up to
//! the batch.
//!
//! Rejection codes are chosen by plugins, so a label made of them is bounded
//! ([`MAX_CODE_LABELS`]): the first codes seen keep a series of their own, later ones are
//! counted under `other`, and a plugin that puts an id in its codes cannot make the
//! scrape grow without end.
//!
//! One file per group of families: `rows`, `commits`, `time`, `partitions`, `plugins`,
//! `event_time`, `lookups`, `compaction`; this file registers them and renders the scrape.

mod commits;
mod compaction;
mod event_time;
mod lookups;
mod partitions;
mod plugins;
mod rows;
#[cfg(test)]
mod tests;
mod time;

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry, Unit};

use self::commits::CommitMetrics;
use self::compaction::CompactionMetrics;
use self::event_time::EventTimeMetrics;
use self::lookups::LookupMetrics;
use self::partitions::PartitionMetrics;
use self::plugins::PluginMetrics;
use self::rows::RowMetrics;
use self::time::TimeMetrics;
use crate::progress::Progress;

/// A text format of the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// The Prometheus text format, version 0.0.4: what every scraper reads.
    Prometheus,
    /// OpenMetrics 1.0 text, with `# UNIT` and `# EOF`: what Prometheus asks for first.
    OpenMetrics,
}

impl Format {
    /// The format a scraper asks for in its `Accept` header: OpenMetrics if it names it,
    /// else the Prometheus text format.
    pub(super) fn accepted(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// Its `Content-Type`.
    pub(super) fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Seconds, counted.
type Seconds = Counter<f64, AtomicU64>;
/// A gauge of a fractional value (a time in seconds since 1970).
type FloatGauge = Gauge<f64, AtomicU64>;

/// Bounds of the batch duration histogram's buckets, seconds: batches take from a few
/// milliseconds (small, frequent) to minutes (large backlogs).
const BATCH_SECONDS: [f64; 14] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Distinct codes that keep a series of their own, in `sluice_dead_lettered_total{code}`
/// and among the rejections of `sluice_plugin_verdicts_total{verdict}`; later codes are
/// counted under [`OTHER_CODE`].
pub(super) const MAX_CODE_LABELS: usize = 32;

/// The label of the codes past the first [`MAX_CODE_LABELS`].
pub(super) const OTHER_CODE: &str = "other";

/// The label values admitted so far for codes, at most [`MAX_CODE_LABELS`].
#[derive(Debug, Default)]
struct BoundedCodes(Mutex<HashSet<String>>);

impl BoundedCodes {
    /// `code` if it has (or can still get) a series of its own, else [`OTHER_CODE`].
    fn label(&self, code: &str) -> String {
        let mut admitted = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if admitted.contains(code) {
            return code.to_string();
        }
        if admitted.len() < MAX_CODE_LABELS {
            admitted.insert(code.to_string());
            return code.to_string();
        }
        OTHER_CODE.to_string()
    }

    /// A verdict label: a rejection's plugin-chosen code is bounded (`rejected:other`);
    /// failure kinds are the host's own and few.
    fn verdict(&self, verdict: &str) -> String {
        match verdict.strip_prefix("rejected:") {
            Some(code) => format!("rejected:{}", self.label(code)),
            None => verdict.to_string(),
        }
    }
}

/// Registers families under `sluice_`, each with its help text.
struct Families<'a>(&'a mut Registry);

impl Families<'_> {
    /// Registers `metric` as `sluice_<name>` and hands it back.
    fn add<M: Metric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.0.register(name, help, metric.clone());
        metric
    }

    /// Registers `metric` as `sluice_<name>_<unit>` and hands it back.
    fn with_unit<M: Metric + Clone>(&mut self, name: &str, unit: Unit, help: &str, metric: M) -> M {
        self.0.register_with_unit(name, help, unit, metric.clone());
        metric
    }
}

/// Raises a counter to `total`, a count since the start that the progress carries.
fn raise_to(counter: &Counter, total: u64) {
    let now = counter.get();
    if total > now {
        counter.inc_by(total - now);
    }
}

fn gauge_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn seconds_of_ms(ms: u64) -> f64 {
    ms as f64 / 1e3
}

/// The metrics of a pipeline.
pub(super) struct Metrics {
    registry: Registry,
    rows: RowMetrics,
    commits: CommitMetrics,
    time: TimeMetrics,
    plugins: PluginMetrics,
    event_time: EventTimeMetrics,
    lookups: LookupMetrics,
    compaction: CompactionMetrics,
    partitions: PartitionMetrics,
}

impl Metrics {
    /// Registers every family; the counters of the stages named start at zero.
    pub(super) fn new<'a>(stages: impl IntoIterator<Item = &'a str>) -> Self {
        let mut registry = Registry::with_prefix("sluice");
        let mut families = Families(&mut registry);
        let rows = RowMetrics::register(&mut families);
        let commits = CommitMetrics::register(&mut families);
        let time = TimeMetrics::register(&mut families);
        let plugins = PluginMetrics::register(&mut families);
        for stage in stages {
            plugins.touch(stage);
        }
        let event_time = EventTimeMetrics::register(&mut families);
        let lookups = LookupMetrics::register(&mut families);
        let compaction = CompactionMetrics::register(&mut families);
        let partitions = PartitionMetrics::register(&mut families);
        Metrics {
            registry,
            rows,
            commits,
            time,
            plugins,
            event_time,
            lookups,
            compaction,
            partitions,
        }
    }

    /// Counts a committed batch.
    pub(super) fn record(&self, progress: &Progress) {
        self.rows.record(progress);
        self.commits.retries.inc_by(progress.commit_retries);
        self.commits
            .snapshots_expired
            .inc_by(progress.snapshots_expired);
        self.commits
            .expiry_failures
            .inc_by(progress.snapshot_expiry_failures);
        raise_to(&self.commits.rebalances, progress.rebalances);
        self.commits
            .partitions
            .set(gauge_of(progress.partitions.len() as u64));
        self.time.record(progress);
        self.partitions.record(progress);
        for (stage, s) in &progress.stages {
            self.plugins.record(stage, s);
        }
        if let Some(et) = &progress.event_time {
            self.event_time.record(et);
        }
        self.lookups.record(progress);
        self.compaction.record(&progress.compaction);
    }

    /// Shows whether the process runs the pipeline (`sluice_active`).
    pub(super) fn set_active(&self, active: bool) {
        self.commits.active.set(i64::from(active));
    }

    /// Counts a batch fenced off the table (not committed).
    pub(super) fn fenced(&self) {
        self.commits.fenced.inc();
    }

    /// The metrics in `format`.
    pub(super) fn render(&self, format: Format) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        match format {
            Format::Prometheus => prometheus_text::encode(&mut text, &self.registry)?,
            Format::OpenMetrics => text::encode(&mut text, &self.registry)?,
        }
        Ok(text)
    }
}
