//! Configuration of the event-time operators: `[event-time]`, `[dedup]` and `[[windows]]`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Deserialize;

use super::extract::{check_path, path_column};
use crate::kafka::Connection;
use crate::kafka::TopicTarget;

/// What happens to an event whose event time is behind the watermark.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LateData {
    /// Send it to the dead-letter topic with code `late_event` (default).
    DeadLetter,
    /// Send it to `event-time.late-topic`, with the same headers as a dead letter.
    Topic,
    /// Drop it; it is counted in progress (`rows_late`) and logged per batch.
    Drop,
}

/// What an `available-now` run does with windows still open when it has read everything.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum AtEnd {
    /// Keep them in the state; the next run goes on filling them (default).
    Keep,
    /// Close and emit them all, moving the watermark to the end of the last one. Events
    /// of those windows that arrive later are late.
    Flush,
}

/// The `[event-time]` section: where event time comes from and how the watermark moves.
///
/// ```toml
/// [event-time]
/// field = "timestamp"
/// max-delay = "2m"
/// idle-timeout = "30s"
/// late = "dead-letter"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct EventTimeConfig {
    /// JSON field holding the event time, a top-level key or a dotted path into nested
    /// objects (`meta.ts`; a top-level key spelled like the whole path wins): an RFC 3339
    /// string (`2026-07-29T10:05:00Z`), a `YYYY-MM-DD HH:MM:SS[.f]` string (read as UTC),
    /// or a number of milliseconds since 1970. An event without a readable event time is dead-lettered
    /// (`missing_event_time`, `invalid_event_time`).
    pub field: String,
    /// How far behind the newest event time of a partition the watermark stays (Spark's
    /// `withWatermark` delay), e.g. `"2m"`.
    #[serde(with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub max_delay: Duration,
    /// A partition that has sent nothing for this long (processing time) stops holding
    /// the watermark back. When every partition is idle, the watermark moves on with
    /// processing time from the highest partition watermark, so the last windows close
    /// even when input stops.
    #[serde(default = "default_idle_timeout", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub idle_timeout: Duration,
    /// How far past processing time an event time may be. An event further in the future
    /// (a producer with a wrong clock, a garbled time) is dead-lettered with code
    /// `event_time_in_future` and never moves the watermark, which would otherwise make
    /// every later event late. Default `"1h"`.
    #[serde(default = "default_max_future", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub max_future: Duration,
    /// Events behind the watermark: `dead-letter` (default), `topic` or `drop`.
    #[serde(default = "default_late")]
    pub late: LateData,
    /// The topic for `late = "topic"`; created (one partition, the broker's default
    /// replication factor) if absent.
    #[serde(default)]
    pub late_topic: Option<String>,
    /// librdkafka properties of the late topic's producer, over `[source] properties`:
    /// these win.
    #[serde(default)]
    pub late_topic_properties: BTreeMap<String, String>,
    /// At the end of an `available-now` run: `keep` open windows (default) or `flush`
    /// them.
    #[serde(default = "default_at_end")]
    pub at_end: AtEnd,
    /// With `[source] mode = "group"`: `standby` (default: one process runs the pipeline,
    /// the others stand by) or `partitions` (every process runs it on the partitions the
    /// group gives it, each partition's state kept apart and moved with it; the source
    /// must be declared keyed by the state's key, see the docs' "Scale-out").
    #[serde(default)]
    pub scale_out: ScaleOut,
}

/// How an event-time pipeline runs in a consumer group.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ScaleOut {
    /// One active process reads every partition; the others stand by (default).
    #[default]
    Standby,
    /// Every process runs the partitions it is given; each partition's state (its
    /// watermark, dedup keys, windows and join sides) is its own, saved and moved with it.
    Partitions,
}

const fn default_idle_timeout() -> Duration {
    Duration::from_secs(30)
}

const fn default_max_future() -> Duration {
    Duration::from_secs(3600)
}

const fn default_late() -> LateData {
    LateData::DeadLetter
}

const fn default_at_end() -> AtEnd {
    AtEnd::Keep
}

/// The `[dedup]` section: drop repeated events within the watermark.
///
/// ```toml
/// [dedup]
/// keys = ["event_id"]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DedupConfig {
    /// JSON fields that identify an event, top-level keys or dotted paths
    /// (`context.session_id`). A later event with the same values is dropped (and counted)
    /// while the first copy's event time is not behind the watermark. An event missing one
    /// of them is not deduplicated.
    pub keys: Vec<String>,
}

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Function {
    /// Events in the window (or, with `field`, events where it is not null). A `long`.
    Count,
    /// Sum of the field's numeric values. A `double`; null when there are none.
    Sum,
    /// Smallest numeric value. A `double`.
    Min,
    /// Largest numeric value. A `double`.
    Max,
    /// Mean of the numeric values. A `double`.
    Avg,
    /// Distinct non-null values of the field (compared by their JSON text). A `long`.
    DistinctCount,
}

impl Function {
    /// Whether the output column is a `long` (else a `double`).
    pub fn is_integer(self) -> bool {
        matches!(self, Function::Count | Function::DistinctCount)
    }
}

/// One aggregate of a window.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AggregateConfig {
    /// Output column name, e.g. `"count"`.
    pub name: String,
    /// `count`, `sum`, `min`, `max`, `avg` or `distinct-count`.
    #[serde(rename = "fn")]
    pub function: Function,
    /// The JSON field aggregated, a top-level key or a dotted path (`item.price`).
    /// Required except for `count`. Numbers and numeric strings count as numbers; other
    /// values are ignored like nulls.
    #[serde(default)]
    pub field: Option<String>,
}

/// When a window's result is emitted.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum EmitMode {
    /// Once, final, when the watermark passes the window's end (Spark's `append`).
    OnWindowClose,
    /// After every batch, each window that changed in it, with its running values
    /// (Spark's `update`). The latest `batch_id` of a window is its current value. A
    /// session window emits the merged session (from the earliest start) when sessions
    /// merge; the sessions merged into it are not emitted again.
    Update,
}

/// The Kafka output of a window.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct WindowKafkaConfig {
    /// The topic; created (one partition, the broker's default replication factor) if
    /// absent. Values are JSON objects (window_start, window_end, the group-by fields, the
    /// aggregates, batch_id); keys are JSON objects of window_start, window_end and the
    /// group-by fields.
    pub topic: String,
    /// librdkafka properties of the window topic's producer (and of `sluice show`'s
    /// reader), over `[source] properties`: these win.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// How long an output topic's producer waits for acknowledgements, where no setting says.
const ACK_TIMEOUT: Duration = Duration::from_secs(60);

impl WindowKafkaConfig {
    /// Where the window's topic is: on the `source`'s cluster, with the source's properties
    /// and these over them.
    pub fn target(&self, source: &Connection) -> TopicTarget {
        TopicTarget {
            topic: self.topic.clone(),
            connection: source.for_output(None, &self.properties),
            ack_timeout: ACK_TIMEOUT,
        }
    }
}

impl EventTimeConfig {
    /// Where late events go with `late = "topic"`: on the `source`'s cluster, with the
    /// source's properties and `late-topic-properties` over them.
    pub fn late_target(&self, source: &Connection) -> Option<TopicTarget> {
        match (self.late, &self.late_topic) {
            (LateData::Topic, Some(topic)) => Some(TopicTarget {
                topic: topic.clone(),
                connection: source.for_output(None, &self.late_topic_properties),
                ack_timeout: ACK_TIMEOUT,
            }),
            _ => None,
        }
    }
}

/// The Iceberg output of a window: a table in the sink's catalog and warehouse.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct WindowIcebergConfig {
    /// Table name; created if absent with columns window_start, window_end
    /// (`timestamptz`), the group-by fields (`string`, a path's column named by its last
    /// segment), the aggregates and batch_id.
    pub table: String,
    /// Namespace; default: the sink's.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Partition transforms of the table to create, e.g. `["day(window_start)"]`.
    #[serde(default)]
    pub partition_by: Vec<String>,
}

/// One `[[windows]]` entry: a windowed aggregate over the deduplicated, on-time events.
/// A window has either a `size` (tumbling or sliding windows) or a `gap` (session
/// windows), not both.
///
/// ```toml
/// [[windows]]
/// name = "counts_by_type"
/// size = "1m"
/// group-by = ["event_type"]
/// aggregates = [{ name = "count", fn = "count" }]
/// [windows.kafka]
/// topic = "clickstream-analytics"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct WindowConfig {
    /// Name, unique in the pipeline; it keys the window's state and progress.
    pub name: String,
    /// Window length, e.g. `"1m"`, for tumbling and sliding windows. Windows start at
    /// multiples of `slide` since 1970.
    #[serde(default, with = "crate::units::optional_duration")]
    #[schemars(with = "Option<crate::units::DurationText>")]
    pub size: Option<Duration>,
    /// Distance between window starts; default `size` (tumbling windows). A smaller
    /// slide makes sliding windows: each event counts in `size / slide` windows.
    #[serde(default, with = "crate::units::optional_duration")]
    #[schemars(with = "Option<crate::units::DurationText>")]
    pub slide: Option<Duration>,
    /// Session windows, e.g. `"30m"`, instead of `size`: per group, an event at `t` opens
    /// a session `[t, t + gap)`, an event within a session's span extends it, and an
    /// event whose span overlaps two sessions merges them. A session starts at its first
    /// event and ends at its last event plus the gap; it closes when the watermark
    /// passes its end.
    #[serde(default, with = "crate::units::optional_duration")]
    #[schemars(with = "Option<crate::units::DurationText>")]
    pub gap: Option<Duration>,
    /// JSON fields to group by, top-level keys or dotted paths (`context.device.os`);
    /// their values become string columns, each named by its last segment (`os`).
    #[serde(default)]
    pub group_by: Vec<String>,
    /// The aggregates, in output order.
    pub aggregates: Vec<AggregateConfig>,
    /// `on-window-close` (default) or `update`.
    #[serde(default = "default_emit")]
    pub emit: EmitMode,
    /// Send results to a Kafka topic.
    #[serde(default)]
    pub kafka: Option<WindowKafkaConfig>,
    /// Append results to an Iceberg table.
    #[serde(default)]
    pub iceberg: Option<WindowIcebergConfig>,
}

const fn default_emit() -> EmitMode {
    EmitMode::OnWindowClose
}

/// Column names a window output reserves.
pub const RESERVED: [&str; 3] = ["window_start", "window_end", "batch_id"];

impl WindowConfig {
    /// The slide in microseconds (0 for session windows).
    pub fn slide_micros(&self) -> i64 {
        self.slide.or(self.size).unwrap_or_default().as_micros() as i64
    }

    /// The size in microseconds (0 for session windows).
    pub fn size_micros(&self) -> i64 {
        self.size.unwrap_or_default().as_micros() as i64
    }

    /// The session gap in microseconds, for session windows.
    pub fn gap_micros(&self) -> Option<i64> {
        self.gap.map(|gap| gap.as_micros() as i64)
    }

    /// The group-by fields and the output column each makes (its last segment).
    pub fn group_by_columns(&self) -> impl Iterator<Item = (&str, &str)> {
        self.group_by.iter().map(|g| (g.as_str(), path_column(g)))
    }

    /// Checks the entry on its own.
    pub fn check(&self) -> Result<(), String> {
        let at = format!("windows `{}`", self.name);
        if self.name.trim().is_empty() {
            return Err("a window's name must not be empty".into());
        }
        self.check_length(&at)?;
        if self.aggregates.is_empty() {
            return Err(format!("{at}: list at least one aggregate"));
        }
        let fields = self
            .group_by
            .iter()
            .chain(self.aggregates.iter().flat_map(|a| &a.field));
        for field in fields {
            check_path(field).map_err(|e| format!("{at}: {e}"))?;
        }
        self.check_columns(&at)?;
        for aggregate in &self.aggregates {
            if aggregate.field.is_none() && aggregate.function != Function::Count {
                return Err(format!(
                    "{at}: aggregate `{}` needs a field",
                    aggregate.name
                ));
            }
        }
        if self.kafka.is_none() && self.iceberg.is_none() {
            return Err(format!(
                "{at}: give an output, [windows.kafka] and/or [windows.iceberg]"
            ));
        }
        Ok(())
    }

    /// Checks the output columns: none reserved, no two of the same name (naming both).
    fn check_columns(&self, at: &str) -> Result<(), String> {
        let mut names = HashMap::new();
        let outputs = self
            .group_by_columns()
            .map(|(field, column)| (column, format!("group-by `{field}`")));
        let aggregates = self
            .aggregates
            .iter()
            .map(|a| (a.name.as_str(), format!("aggregate `{}`", a.name)));
        for (name, from) in outputs.chain(aggregates) {
            if RESERVED.contains(&name) {
                return Err(format!("{at}: `{name}` ({from}) is a reserved column name"));
            }
            if let Some(first) = names.insert(name, from.clone()) {
                return Err(format!(
                    "{at}: two output columns are named `{name}`: {first} and {from} (a path's column is its last segment)"
                ));
            }
        }
        Ok(())
    }

    /// Checks `size` and `slide`, or `gap`.
    fn check_length(&self, at: &str) -> Result<(), String> {
        let size = match (self.size, self.gap) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{at}: give either size (tumbling or sliding windows) or gap (session windows), not both"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "{at}: give size (tumbling or sliding windows) or gap (session windows)"
                ));
            }
            (None, Some(gap)) if gap.is_zero() => {
                return Err(format!("{at}: gap must be positive"));
            }
            (None, Some(_)) if self.slide.is_some() => {
                return Err(format!(
                    "{at}: slide applies to size, not to session windows"
                ));
            }
            (None, Some(_)) => return Ok(()),
            (Some(size), None) => size,
        };
        if size.is_zero() {
            return Err(format!("{at}: size must be positive"));
        }
        if let Some(slide) = self.slide {
            if slide.is_zero() || slide > size {
                return Err(format!(
                    "{at}: slide must be positive and at most size ({size:?})"
                ));
            }
            if size.as_micros() / slide.as_micros() > 1000 {
                return Err(format!("{at}: size / slide is over 1000 windows per event"));
            }
        }
        Ok(())
    }
}
