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

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry, Unit};

use crate::pipeline::progress::{Durations, EventTimeProgress, Progress};
use crate::pipeline::stages::StageProgress;

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabel {
    stage: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    stage: String,
    digest: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    stage: String,
    digest: String,
    verdict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LookupLabel {
    lookup: String,
}

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
        Metrics {
            registry,
            rows,
            commits,
            time,
            plugins,
            event_time,
            lookups,
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
        for (stage, s) in &progress.stages {
            self.plugins.record(stage, s);
        }
        if let Some(et) = &progress.event_time {
            self.event_time.record(et);
        }
        self.lookups.record(progress);
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

/// What every batch read and wrote.
struct RowMetrics {
    batches: Counter,
    input_rows: Counter,
    rows_written: Counter,
    rows_dead_lettered: Counter,
    dead_lettered: Family<CodeLabel, Counter>,
    codes: BoundedCodes,
    files_written: Counter,
    written_bytes: Counter,
}

impl RowMetrics {
    fn register(f: &mut Families) -> Self {
        RowMetrics {
            batches: f.add("batches", "Batches committed", Counter::default()),
            input_rows: f.add("input_rows", "Records read", Counter::default()),
            rows_written: f.add(
                "rows_written",
                "Rows appended to the table",
                Counter::default(),
            ),
            rows_dead_lettered: f.add(
                "rows_dead_lettered",
                "Records sent to the dead-letter topic",
                Counter::default(),
            ),
            dead_lettered: f.add(
                "dead_lettered",
                "Records sent to the dead-letter topic, by code",
                Family::default(),
            ),
            codes: BoundedCodes::default(),
            files_written: f.add("files_written", "Data files added", Counter::default()),
            written_bytes: f.with_unit(
                "written",
                Unit::Bytes,
                "Bytes of data files added",
                Counter::default(),
            ),
        }
    }

    fn record(&self, p: &Progress) {
        self.batches.inc();
        self.input_rows.inc_by(p.input_rows);
        self.rows_written.inc_by(p.rows_written);
        self.rows_dead_lettered.inc_by(p.rows_dead_lettered);
        for (code, n) in &p.dead_lettered_by_code {
            let code = self.codes.label(code);
            self.dead_lettered
                .get_or_create(&CodeLabel { code })
                .inc_by(*n);
        }
        self.files_written.inc_by(p.files_written);
        self.written_bytes.inc_by(p.bytes_written);
    }
}

/// Commits that met other commits, and what the consumer group gave this process.
struct CommitMetrics {
    retries: Counter,
    snapshots_expired: Counter,
    expiry_failures: Counter,
    fenced: Counter,
    rebalances: Counter,
    partitions: Gauge,
    active: Gauge,
}

impl CommitMetrics {
    fn register(f: &mut Families) -> Self {
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

/// How long batches take, how far behind they are, when the last one committed.
struct TimeMetrics {
    duration: Histogram,
    phases: Family<PhaseLabel, Seconds>,
    last_batch_id: Gauge,
    lag: Gauge,
    last_commit: FloatGauge,
}

impl TimeMetrics {
    fn register(f: &mut Families) -> Self {
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

    fn record(&self, p: &Progress) {
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

/// What each plugin stage reports, by stage and by the digest of the version that ran.
struct PluginMetrics {
    events: Family<VersionLabels, Counter>,
    kept: Family<VersionLabels, Counter>,
    rejected: Family<VersionLabels, Counter>,
    failed: Family<VersionLabels, Counter>,
    rewritten: Family<VersionLabels, Counter>,
    calls: Family<VersionLabels, Counter>,
    seconds: Family<VersionLabels, Seconds>,
    verdicts: Family<VerdictLabels, Counter>,
    codes: BoundedCodes,
    swaps: Family<StageLabel, Counter>,
    rollbacks: Family<StageLabel, Counter>,
    refused: Family<StageLabel, Counter>,
}

impl PluginMetrics {
    fn register(f: &mut Families) -> Self {
        let verdicts = "Rejections by code (rejected:<code>), failures by kind (failed:<kind>)";
        PluginMetrics {
            events: f.add(
                "plugin_events",
                "Events that reached a stage",
                Family::default(),
            ),
            kept: f.add(
                "plugin_kept",
                "Events kept (or rewritten)",
                Family::default(),
            ),
            rejected: f.add("plugin_rejected", "Events rejected", Family::default()),
            failed: f.add(
                "plugin_failed",
                "Events failed on (trap, limit)",
                Family::default(),
            ),
            rewritten: f.add("plugin_rewritten", "Events rewritten", Family::default()),
            calls: f.add("plugin_calls", "Plugin calls made", Family::default()),
            seconds: f.with_unit(
                "plugin_stage",
                Unit::Seconds,
                "Time spent in a stage's calls (the slowest thread's share)",
                Family::default(),
            ),
            verdicts: f.add("plugin_verdicts", verdicts, Family::default()),
            codes: BoundedCodes::default(),
            swaps: f.add("plugin_swaps", "Versions swapped in", Family::default()),
            rollbacks: f.add(
                "plugin_rollbacks",
                "Versions rolled back",
                Family::default(),
            ),
            refused: f.add("plugin_refused", "New versions refused", Family::default()),
        }
    }

    /// Creates a stage's counts since the start, at zero.
    fn touch(&self, stage: &str) {
        let label = StageLabel {
            stage: stage.to_string(),
        };
        for family in [&self.swaps, &self.rollbacks, &self.refused] {
            let _ = family.get_or_create(&label);
        }
    }

    fn record(&self, stage: &str, s: &StageProgress) {
        let version = VersionLabels {
            stage: stage.to_string(),
            digest: s.digest.clone(),
        };
        let c = &s.counts;
        for (family, n) in [
            (&self.events, c.events),
            (&self.kept, c.kept),
            (&self.rejected, c.rejected),
            (&self.failed, c.failed),
            (&self.rewritten, c.rewritten),
            (&self.calls, c.calls),
        ] {
            family.get_or_create(&version).inc_by(n);
        }
        let seconds = c.micros as f64 / 1e6;
        self.seconds.get_or_create(&version).inc_by(seconds);
        for (verdict, n) in &s.verdicts {
            let labels = VerdictLabels {
                stage: version.stage.clone(),
                digest: version.digest.clone(),
                verdict: self.codes.verdict(verdict),
            };
            self.verdicts.get_or_create(&labels).inc_by(*n);
        }
        let label = StageLabel {
            stage: stage.to_string(),
        };
        raise_to(&self.swaps.get_or_create(&label), s.swaps);
        raise_to(&self.rollbacks.get_or_create(&label), s.rollbacks);
        raise_to(&self.refused.get_or_create(&label), s.refused);
    }
}

/// What the event-time operators report.
struct EventTimeMetrics {
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
    fn register(f: &mut Families) -> Self {
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

    fn record(&self, et: &EventTimeProgress) {
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

/// The lookup tables (`[[lookups]]`).
struct LookupMetrics {
    keys: Family<LookupLabel, Gauge>,
    bytes: Family<LookupLabel, Gauge>,
    skipped: Family<LookupLabel, Counter>,
    refresh_failures: Counter,
}

impl LookupMetrics {
    fn register(f: &mut Families) -> Self {
        LookupMetrics {
            keys: f.add(
                "lookup_keys",
                "Keys of each lookup table the last batch saw",
                Family::default(),
            ),
            bytes: f.with_unit(
                "lookup",
                Unit::Bytes,
                "Bytes of keys and values of each lookup table the last batch saw",
                Family::default(),
            ),
            skipped: f.add(
                "lookup_skipped_records",
                "Records of each lookup table's source skipped: without a key, or with a value that is not a JSON object (its key deleted)",
                Family::default(),
            ),
            refresh_failures: f.add(
                "lookup_refresh_failures",
                "Lookup-table refreshes that failed (each a transient fault, retried)",
                Counter::default(),
            ),
        }
    }

    fn record(&self, p: &Progress) {
        for (lookup, size) in &p.lookups {
            let label = LookupLabel {
                lookup: lookup.clone(),
            };
            self.keys.get_or_create(&label).set(gauge_of(size.keys));
            self.bytes.get_or_create(&label).set(gauge_of(size.bytes));
            raise_to(&self.skipped.get_or_create(&label), size.skipped);
        }
        raise_to(&self.refresh_failures, p.lookup_refresh_failures);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::admin::tests::progress;

    /// Every family served, with its type: the list in the book's metrics chapter
    /// (`docs/src/operations/metrics.md`).
    const FAMILIES: [(&str, &str); 42] = [
        ("sluice_batches", "counter"),
        ("sluice_input_rows", "counter"),
        ("sluice_rows_written", "counter"),
        ("sluice_rows_dead_lettered", "counter"),
        ("sluice_dead_lettered", "counter"),
        ("sluice_files_written", "counter"),
        ("sluice_written_bytes", "counter"),
        ("sluice_commit_retries", "counter"),
        ("sluice_snapshots_expired", "counter"),
        ("sluice_snapshot_expiry_failures", "counter"),
        ("sluice_batches_fenced", "counter"),
        ("sluice_rebalances", "counter"),
        ("sluice_partitions", "gauge"),
        ("sluice_active", "gauge"),
        ("sluice_batch_duration_seconds", "histogram"),
        ("sluice_batch_phase_seconds", "counter"),
        ("sluice_last_batch_id", "gauge"),
        ("sluice_lag_records", "gauge"),
        ("sluice_last_commit_timestamp_seconds", "gauge"),
        ("sluice_plugin_events", "counter"),
        ("sluice_plugin_kept", "counter"),
        ("sluice_plugin_rejected", "counter"),
        ("sluice_plugin_failed", "counter"),
        ("sluice_plugin_rewritten", "counter"),
        ("sluice_plugin_calls", "counter"),
        ("sluice_plugin_stage_seconds", "counter"),
        ("sluice_plugin_verdicts", "counter"),
        ("sluice_plugin_swaps", "counter"),
        ("sluice_plugin_rollbacks", "counter"),
        ("sluice_plugin_refused", "counter"),
        ("sluice_rows_late", "counter"),
        ("sluice_rows_deduplicated", "counter"),
        ("sluice_watermark_seconds", "gauge"),
        ("sluice_windows_emitted", "counter"),
        ("sluice_state_rows", "gauge"),
        ("sluice_state_bytes", "gauge"),
        ("sluice_state_file_bytes", "gauge"),
        ("sluice_join_rows_evicted", "counter"),
        ("sluice_lookup_keys", "gauge"),
        ("sluice_lookup_bytes", "gauge"),
        ("sluice_lookup_skipped_records", "counter"),
        ("sluice_lookup_refresh_failures", "counter"),
    ];

    /// The families whose series are labelled by what a batch reports: they appear with
    /// their first series.
    const LABELLED_LATER: [&str; 16] = [
        "sluice_dead_lettered",
        "sluice_plugin_events",
        "sluice_plugin_kept",
        "sluice_plugin_rejected",
        "sluice_plugin_failed",
        "sluice_plugin_rewritten",
        "sluice_plugin_calls",
        "sluice_plugin_stage_seconds",
        "sluice_plugin_verdicts",
        "sluice_windows_emitted",
        "sluice_state_rows",
        "sluice_state_bytes",
        "sluice_join_rows_evicted",
        "sluice_lookup_keys",
        "sluice_lookup_bytes",
        "sluice_lookup_skipped_records",
    ];

    fn has(text: &str, line: &str) {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }

    /// The families in `text` with their types; checks each has its `HELP`.
    fn families(text: &str) -> Vec<(&str, &str)> {
        let typed: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' '))
            .collect();
        for (name, _) in &typed {
            assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
        }
        typed
    }

    #[test]
    fn every_family_is_there_before_the_first_batch() {
        let text = Metrics::new(["rules"]).render(Format::OpenMetrics).unwrap();
        let present: Vec<_> = FAMILIES
            .into_iter()
            .filter(|(name, _)| !LABELLED_LATER.contains(name))
            .collect();
        assert_eq!(families(&text), present, "{text}");
        has(&text, "sluice_batches_total 0");
        has(&text, "sluice_lag_records 0");
        has(&text, "sluice_last_commit_timestamp_seconds 0.0");
        has(&text, "sluice_batch_duration_seconds_count 0");
        has(
            &text,
            "sluice_batch_phase_seconds_total{phase=\"dead_letter\"} 0.0",
        );
        has(&text, "sluice_plugin_rollbacks_total{stage=\"rules\"} 0");
        has(&text, "# UNIT sluice_written_bytes bytes");
        has(&text, "# EOF");
    }

    #[test]
    fn metrics_render_a_real_progress_with_event_time() {
        let metrics = Metrics::new(["rules"]);
        metrics.record(&progress(1));
        let mut second = progress(2);
        let rules = second.stages.get_mut("rules").unwrap();
        rules.rollbacks = 1;
        rules.digest = "cd34".into();
        metrics.record(&second);
        metrics.fenced();
        let text = metrics.render(Format::OpenMetrics).unwrap();
        assert_eq!(families(&text), FAMILIES, "{text}");
        has(&text, "sluice_batches_fenced_total 1");
        has(&text, "sluice_rebalances_total 2");
        has(&text, "sluice_partitions 2");
        has(&text, "# TYPE sluice_batches counter");
        has(&text, "# HELP sluice_batches Batches committed.");

        // Counters add up over the two batches; counts since the start are taken as they are.
        has(&text, "sluice_batches_total 2");
        has(&text, "sluice_input_rows_total 20");
        has(&text, "sluice_commit_retries_total 2");
        has(&text, "sluice_snapshots_expired_total 6");
        has(&text, "sluice_snapshot_expiry_failures_total 0");
        has(&text, "sluice_lookup_keys{lookup=\"profiles\"} 3");
        has(&text, "sluice_lookup_bytes{lookup=\"profiles\"} 120");
        has(&text, "sluice_lookup_refresh_failures_total 2");
        has(
            &text,
            "sluice_lookup_skipped_records_total{lookup=\"profiles\"} 2",
        );
        has(&text, "sluice_written_bytes_total 2000");
        has(&text, "sluice_rows_late_total 2");
        // Counts since the start: the last one, not the sum.
        has(
            &text,
            "sluice_join_rows_evicted_total{join=\"with_profiles\",side=\"right\"} 2",
        );
        has(
            &text,
            "sluice_join_rows_evicted_total{join=\"with_profiles\",side=\"left\"} 3",
        );
        has(
            &text,
            "sluice_windows_emitted_total{window=\"per_minute\"} 6",
        );
        has(
            &text,
            "sluice_batch_phase_seconds_total{phase=\"plugins\"} 1.0",
        );
        has(&text, "sluice_plugin_swaps_total{stage=\"rules\"} 1");
        has(&text, "sluice_plugin_rollbacks_total{stage=\"rules\"} 1");
        // Per version: each digest its own series.
        has(
            &text,
            "sluice_plugin_rejected_total{stage=\"rules\",digest=\"ab12\"} 2",
        );
        has(
            &text,
            "sluice_plugin_rejected_total{stage=\"rules\",digest=\"cd34\"} 2",
        );
        has(
            &text,
            "sluice_plugin_stage_seconds_total{stage=\"rules\",digest=\"ab12\"} 0.25",
        );
        has(
            &text,
            "sluice_plugin_verdicts_total{stage=\"rules\",digest=\"cd34\",verdict=\"rejected:invalid_price\"} 2",
        );
        // Label values are escaped.
        has(
            &text,
            r#"sluice_dead_lettered_total{code="bad \"x\"\\ and\nmore"} 4"#,
        );
        // Gauges hold the last batch's value.
        has(&text, "sluice_last_batch_id 2");
        has(&text, "sluice_lag_records 40");
        has(&text, "sluice_state_rows{operator=\"dedup\"} 200");
        has(&text, "sluice_state_file_bytes 4096");
        has(&text, "sluice_watermark_seconds 1785319620.0");
        // Freshness: the wall-clock time of the last commit.
        has(&text, "sluice_last_commit_timestamp_seconds 1785320120.25");
        // The batch durations, a second each.
        has(&text, "sluice_batch_duration_seconds_count 2");
        has(&text, "sluice_batch_duration_seconds_sum 2.0");
        has(&text, "sluice_batch_duration_seconds_bucket{le=\"0.5\"} 0");
        has(&text, "sluice_batch_duration_seconds_bucket{le=\"1.0\"} 2");
    }

    #[test]
    fn the_prometheus_text_format_names_a_counter_with_its_total() {
        let metrics = Metrics::new(["rules"]);
        metrics.record(&progress(1));
        let mut second = progress(2);
        second.stages.get_mut("rules").unwrap().rollbacks = 1;
        metrics.record(&second);
        let text = metrics.render(Format::Prometheus).unwrap();
        for (name, kind) in FAMILIES {
            let name = match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_string(),
            };
            has(&text, &format!("# TYPE {name} {kind}"));
        }
        has(&text, "# TYPE sluice_batches_total counter");
        has(&text, "sluice_batches_total 2");
        has(&text, "sluice_plugin_rollbacks_total{stage=\"rules\"} 1");
        has(&text, "# TYPE sluice_batch_duration_seconds histogram");
        has(&text, "sluice_last_commit_timestamp_seconds 1785320120.25");
    }

    /// The value of every series of `family` in `text`, by its labels.
    fn series<'a>(text: &'a str, family: &str) -> Vec<(&'a str, u64)> {
        text.lines()
            .filter_map(|l| l.strip_prefix(family)?.strip_prefix('{'))
            .filter_map(|l| l.rsplit_once("} "))
            .map(|(labels, n)| (labels, n.parse().unwrap()))
            .collect()
    }

    #[test]
    fn plugin_chosen_codes_get_at_most_a_bounded_number_of_series() {
        let metrics = Metrics::new(["rules"]);
        for batch in 0..10u64 {
            let mut p = progress(batch + 1);
            // 100 new codes a batch, 1000 in all, each seen twice, plus a failure kind.
            let codes: BTreeMap<String, u64> = (0..100)
                .map(|i| (format!("code_{}", batch * 100 + i), 2))
                .collect();
            p.dead_lettered_by_code = codes.clone();
            let rules = p.stages.get_mut("rules").unwrap();
            rules.verdicts = codes
                .iter()
                .map(|(c, n)| (format!("rejected:{c}"), *n))
                .collect();
            rules.verdicts.insert("failed:plugin_trapped".into(), 1);
            metrics.record(&p);
        }
        let text = metrics.render(Format::Prometheus).unwrap();
        let dead = series(&text, "sluice_dead_lettered_total");
        assert_eq!(dead.len(), MAX_CODE_LABELS + 1, "{dead:?}");
        assert_eq!(dead.iter().map(|(_, n)| n).sum::<u64>(), 2000);
        assert!(dead.contains(&("code=\"code_0\"", 2)), "{dead:?}");
        let other = (2000 - 2 * MAX_CODE_LABELS) as u64;
        assert!(dead.contains(&("code=\"other\"", other)), "{dead:?}");

        let verdicts = series(&text, "sluice_plugin_verdicts_total");
        // The bounded codes, `rejected:other`, and the failure kind.
        assert_eq!(verdicts.len(), MAX_CODE_LABELS + 2, "{verdicts:?}");
        assert_eq!(verdicts.iter().map(|(_, n)| n).sum::<u64>(), 2010);
        let labels = |v: &str| format!("stage=\"rules\",digest=\"ab12\",verdict=\"{v}\"");
        let rejected_other = labels("rejected:other");
        assert!(
            verdicts.contains(&(rejected_other.as_str(), other)),
            "{verdicts:?}"
        );
        let trapped = labels("failed:plugin_trapped");
        assert!(verdicts.contains(&(trapped.as_str(), 10)), "{verdicts:?}");
    }

    #[test]
    fn scrapers_get_the_format_they_ask_for() {
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(Format::accepted(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::accepted(Some("text/plain")), Format::Prometheus);
        assert_eq!(Format::accepted(None), Format::Prometheus);
    }
}
