//! The pipeline file read by `sluice run --config FILE`: source, trigger, stages, sink,
//! dead-letter output. See `examples/retail-clickstream/pipeline.toml`.

mod names;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::env::{SubstError, substitute_env};
use crate::admin::AdminConfig;
use crate::batch::TriggerConfig;
use crate::event_time::config::{DedupConfig, EventTimeConfig, LateData, WindowConfig};
use crate::event_time::join::config::JoinConfig;
use crate::iceberg::IcebergSinkConfig;
use crate::lookup::config::LookupConfig;
use crate::plugin::config::{RuntimeConfig, StageConfig};
use crate::sink::deadletter::DeadLetterConfig;
use crate::source::kafka::{KafkaSourceConfig, SourceMode};

/// What happens to an event that a plugin rejects, that fails in a plugin, or that does
/// not fit the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnInvalid {
    /// Send it to the dead-letter topic with the reason, and go on.
    DeadLetter,
    /// Stop the pipeline without committing the batch (Spark's FAILFAST). A restart
    /// meets the same event again.
    Fail,
}

/// The `[pipeline]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PipelineSection {
    /// Name of the pipeline. It keys the offsets stored in the table, so two pipelines
    /// writing one table must have different names; renaming a pipeline starts it anew.
    pub name: String,
    /// `dead-letter` (default) or `fail`.
    #[serde(default = "default_on_invalid")]
    pub on_invalid: OnInvalid,
    /// Threads that run plugins and encoding; default: the machine's cores.
    #[serde(default)]
    pub threads: Option<usize>,
    /// How long a transient fault (broker unreachable, acknowledgement timeout, catalog
    /// busy, disk full) is retried, with backoff from 1 s doubling to 30 s, before the run
    /// ends with the error: the time since the first fault with no batch committed since.
    /// `"0s"` retries nothing. Default `"5m"`.
    #[serde(default = "default_fault_budget", with = "crate::units::duration")]
    pub fault_budget: std::time::Duration,
    /// Not in the file: set by `sluice run --new-pipeline`, which starts the pipeline as
    /// new on a table that has no mark of it even though the table's history was cut
    /// (where sluice cannot tell whether the pipeline committed before, and refuses).
    #[serde(skip)]
    pub assume_new: bool,
}

const fn default_fault_budget() -> std::time::Duration {
    std::time::Duration::from_secs(300)
}

const fn default_on_invalid() -> OnInvalid {
    OnInvalid::DeadLetter
}

/// A whole pipeline file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PipelineConfig {
    /// Name and behaviour of the pipeline.
    pub pipeline: PipelineSection,
    /// Where records come from.
    pub source: KafkaSourceConfig,
    /// When batches run and how large they may be.
    #[serde(default)]
    pub trigger: TriggerConfig,
    /// Engine-wide plugin settings.
    #[serde(default)]
    pub runtime: RuntimeConfig,
    /// Plugin stages, run in order on every batch.
    #[serde(default)]
    pub stages: Vec<StageConfig>,
    /// The Iceberg table.
    pub sink: IcebergSinkConfig,
    /// The dead-letter topic; required unless `pipeline.on-invalid = "fail"`.
    #[serde(default)]
    pub dead_letter: Option<DeadLetterConfig>,
    /// Event time: the watermark and what becomes of late events. Required by `[dedup]`
    /// and `[[windows]]`.
    #[serde(default)]
    pub event_time: Option<EventTimeConfig>,
    /// Drop repeated events within the watermark.
    #[serde(default)]
    pub dedup: Option<DedupConfig>,
    /// Windowed aggregates of the on-time, deduplicated events.
    #[serde(default)]
    pub windows: Vec<WindowConfig>,
    /// Stream-stream joins of the on-time, deduplicated events with the records of other
    /// topics. Each join's `right-topic` is added to the topics the source reads (after
    /// parsing: `source.topics` then lists it), its records going to the join alone.
    #[serde(default)]
    pub joins: Vec<JoinConfig>,
    /// The admin HTTP API (status, metrics, plugin uploads and swaps); off by default.
    #[serde(default)]
    pub admin: Option<AdminConfig>,
    /// Lookup tables plugins read by key, refreshed between batches (see
    /// [`crate::lookup`]).
    #[serde(default)]
    pub lookups: Vec<LookupConfig>,
}

/// A pipeline file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A `${VAR}` could not be substituted.
    #[error("{path}: {error}")]
    Env {
        /// The file.
        path: PathBuf,
        /// Why.
        error: SubstError,
    },
    /// The file is not valid TOML, or a key is unknown, missing or of the wrong type.
    #[error("{path}:{line}: {}{message}", if key.is_empty() { String::new() } else { format!("`{key}`: ") })]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line (after substitution, which never adds lines).
        line: usize,
        /// Dotted path of the key, when known.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The values do not make sense together.
    #[error("{path}: {message}")]
    Inconsistent {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Kafka client properties that this build cannot honour (`sluice run --check`).
    #[error("{path}: {error}")]
    Kafka {
        /// The file.
        path: PathBuf,
        /// Every problem found.
        error: crate::kafka::check::CheckError,
    },
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl PipelineConfig {
    /// Reads, substitutes and parses `path`; plugin paths become relative to its folder.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        let mut config = Self::parse(&text, path)?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.runtime.resolve_paths(base);
        for stage in &mut config.stages {
            if stage.plugin.is_relative() {
                stage.plugin = base.join(&stage.plugin);
            }
            for path in [&mut stage.samples, &mut stage.shadow]
                .into_iter()
                .flatten()
            {
                if path.is_relative() {
                    *path = base.join(&*path);
                }
            }
        }
        Ok(config)
    }

    /// Substitutes and parses `text`; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let substituted = substitute_env(text).map_err(|error| ConfigError::Env {
            path: path.to_owned(),
            error,
        })?;
        let text = substituted.text.as_str();
        // Messages never show a value that came from the environment (a secret), in any
        // form: see `Substituted::hide`.
        let invalid = |span: Option<std::ops::Range<usize>>, key: String, message: &str| {
            ConfigError::Invalid {
                path: path.to_owned(),
                line: span.as_ref().map_or(1, |s| line_of(text, s.start)),
                key: substituted.redact(&key),
                message: substituted.hide(message, span),
            }
        };
        let de = toml::Deserializer::parse(text)
            .map_err(|e| invalid(e.span(), String::new(), e.message()))?;
        let config: PipelineConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let key = if key == "." { String::new() } else { key };
            invalid(inner.span(), key, inner.message())
        })?;
        config
            .check()
            .map_err(|message| ConfigError::Inconsistent {
                path: path.to_owned(),
                message: substituted.redact(&message),
            })?;
        let mut config = config;
        for join in &config.joins {
            config.source.topics.push(join.right_topic.clone());
        }
        Ok(config)
    }

    /// The topics read for the joins' right sides: their records go to the joins alone.
    pub fn right_topics(&self) -> impl Iterator<Item = &str> {
        self.joins.iter().map(|j| j.right_topic.as_str())
    }

    fn check(&self) -> Result<(), String> {
        if self.pipeline.name.trim().is_empty() {
            return Err("pipeline.name must not be empty".into());
        }
        if self.source.topics.is_empty() {
            return Err("source.topics must name at least one topic".into());
        }
        names::check(self)?;
        let mut names = HashSet::new();
        for stage in &self.stages {
            if !names.insert(&stage.name) {
                return Err(format!("two stages are named `{}`", stage.name));
            }
        }
        if self.pipeline.on_invalid == OnInvalid::DeadLetter && self.dead_letter.is_none() {
            return Err(
                "no [dead-letter] topic: add one, or set pipeline.on-invalid = \"fail\"".into(),
            );
        }
        if let Some(dl) = &self.dead_letter
            && self.source.topics.contains(&dl.topic)
        {
            return Err(format!(
                "dead-letter topic `{}` is also a source topic",
                dl.topic
            ));
        }
        self.check_event_time()?;
        crate::lookup::config::check(&self.lookups, &self.source.topics)?;
        let declared = self.lookups.iter().map(|l| l.name.as_str()).collect();
        crate::plugin::lookup::check(&self.stages, &declared).map_err(|e| e.to_string())?;
        if self.sink.columns.is_empty() {
            return Ok(()); // the table must exist already
        }
        let schema = self.sink.schema()?;
        self.sink.partition_spec(&schema)?;
        if let Some(column) = &self.sink.ingestion_time_column
            && !self.sink.columns.iter().any(|c| &c.name == column)
        {
            return Err(format!(
                "sink.ingestion-time-column `{column}` is not one of sink.columns"
            ));
        }
        Ok(())
    }

    /// Whether processes share this pipeline as one active and standbys: an event-time
    /// pipeline (its windows and dedup need every partition in one place) in `mode =
    /// "group"`.
    pub fn active_standby(&self) -> bool {
        self.event_time.is_some() && self.source.mode == SourceMode::Group
    }

    fn check_event_time(&self) -> Result<(), String> {
        let Some(et) = &self.event_time else {
            if self.dedup.is_some() || !self.windows.is_empty() || !self.joins.is_empty() {
                return Err(
                    "[dedup], [[windows]] and [[joins]] need an [event-time] section (its watermark bounds their state)"
                        .into(),
                );
            }
            return Ok(());
        };
        if et.field.trim().is_empty() {
            return Err("event-time.field must not be empty".into());
        }
        match (et.late, &et.late_topic) {
            (LateData::Topic, None) => {
                return Err("event-time.late = \"topic\" needs event-time.late-topic".into());
            }
            (LateData::Topic, Some(topic)) if self.source.topics.contains(topic) => {
                return Err(format!("late topic `{topic}` is also a source topic"));
            }
            (LateData::DeadLetter, _) if self.dead_letter.is_none() => {
                return Err(
                    "event-time.late = \"dead-letter\" needs a [dead-letter] topic; or set late = \"topic\" or \"drop\""
                        .into(),
                );
            }
            (LateData::DeadLetter | LateData::Drop, Some(_)) => {
                return Err("event-time.late-topic is only used with late = \"topic\"".into());
            }
            (LateData::DeadLetter | LateData::Drop, _) if !et.late_topic_properties.is_empty() => {
                return Err(
                    "event-time.late-topic-properties is only used with late = \"topic\"".into(),
                );
            }
            _ => {}
        }
        if let Some(dedup) = &self.dedup
            && dedup.keys.is_empty()
        {
            return Err("dedup.keys must name at least one field".into());
        }
        let mut names = HashSet::new();
        let mut tables = HashSet::from([(self.sink.namespace.clone(), self.sink.table.clone())]);
        for window in &self.windows {
            window.check()?;
            if !names.insert(&window.name) {
                return Err(format!("two windows are named `{}`", window.name));
            }
            if let Some(kafka) = &window.kafka
                && self.source.topics.contains(&kafka.topic)
            {
                return Err(format!(
                    "windows `{}`: topic `{}` is also a source topic",
                    window.name, kafka.topic
                ));
            }
            if let Some(table) = &window.iceberg {
                let namespace = table
                    .namespace
                    .clone()
                    .unwrap_or(self.sink.namespace.clone());
                if !tables.insert((namespace, table.table.clone())) {
                    return Err(format!(
                        "windows `{}`: table `{}` is written by another output",
                        window.name, table.table
                    ));
                }
            }
        }
        self.check_joins(&mut tables)
    }

    fn check_joins(&self, tables: &mut HashSet<(String, String)>) -> Result<(), String> {
        let mut names = HashSet::new();
        let mut right_topics = HashSet::new();
        for join in &self.joins {
            join.check()?;
            let at = format!("joins `{}`", join.name);
            if !names.insert(&join.name) {
                return Err(format!("two joins are named `{}`", join.name));
            }
            if self.source.topics.contains(&join.right_topic) {
                return Err(format!(
                    "{at}: right-topic `{}` is also in source.topics; a join's right topic is read for the join alone (it is added to the topics read), do not list it",
                    join.right_topic
                ));
            }
            if !right_topics.insert(&join.right_topic) {
                return Err(format!(
                    "{at}: right-topic `{}` is the right topic of another join",
                    join.right_topic
                ));
            }
            let outputs = [
                self.dead_letter.as_ref().map(|d| &d.topic),
                self.event_time.as_ref().and_then(|e| e.late_topic.as_ref()),
            ];
            if outputs
                .into_iter()
                .flatten()
                .any(|t| t == &join.right_topic)
            {
                return Err(format!(
                    "{at}: right-topic `{}` is an output topic of the pipeline",
                    join.right_topic
                ));
            }
            if let Some(kafka) = &join.kafka
                && (self.source.topics.contains(&kafka.topic)
                    || self.right_topics().any(|t| t == kafka.topic))
            {
                return Err(format!(
                    "{at}: topic `{}` is also a source topic",
                    kafka.topic
                ));
            }
            if let Some(table) = &join.iceberg {
                let namespace = table
                    .namespace
                    .clone()
                    .unwrap_or(self.sink.namespace.clone());
                if !tables.insert((namespace, table.table.clone())) {
                    return Err(format!(
                        "{at}: table `{}` is written by another output",
                        table.table
                    ));
                }
            }
        }
        Ok(())
    }

    /// Threads for plugins and encoding.
    pub fn threads(&self) -> usize {
        self.pipeline
            .threads
            .unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
            })
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MINIMAL: &str = r#"
[pipeline]
name = "p"
on-invalid = "fail"

[source]
bootstrap-servers = "localhost:9092"
topics = ["t"]

[sink]
warehouse = "w"
namespace = "n"
table = "t"
columns = [{ name = "a", type = "string" }]
"#;

    #[test]
    fn minimal_parses_with_defaults() {
        let c = PipelineConfig::parse(MINIMAL, Path::new("p.toml")).unwrap();
        assert_eq!(c.pipeline.on_invalid, OnInvalid::Fail);
        assert_eq!(c.trigger, TriggerConfig::default());
        assert!(c.stages.is_empty());
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let text = MINIMAL.replace("topics = [\"t\"]", "topics = [\"t\"]\ntopicz = 1");
        let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
        let shown = err.to_string();
        assert!(shown.starts_with("p.toml:9: `source.topicz`: "), "{shown}");
        assert!(shown.contains("topicz"), "{shown}");
    }

    #[test]
    fn wrong_type_names_the_key() {
        let text = MINIMAL.replace("name = \"p\"", "name = 5");
        let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
        let ConfigError::Invalid { key, line, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!((key.as_str(), *line), ("pipeline.name", 3));
    }

    #[test]
    fn a_bad_snapshot_expiry_names_its_key() {
        let text = format!("{MINIMAL}\n[sink.expire-snapshots]\nretain-last = 0\n");
        let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
        let ConfigError::Invalid { key, message, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(key, "sink.expire-snapshots.retain-last");
        assert!(message.contains("at least 1"), "{err}");
        let text = format!("{MINIMAL}\n[sink.expire-snapshots]\nevery-commits = 2\n");
        let c = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap();
        assert_eq!(c.sink.expire_snapshots.map(|e| e.every_commits), Some(2));
    }

    #[test]
    fn group_mode_parses_and_makes_event_time_active_standby() {
        let group = MINIMAL.replace("topics = [\"t\"]", "topics = [\"t\"]\nmode = \"group\"");
        let c = PipelineConfig::parse(&group, Path::new("p.toml")).unwrap();
        assert_eq!(c.source.mode, SourceMode::Group);
        assert!(!c.active_standby());
        let c = PipelineConfig::parse(MINIMAL, Path::new("p.toml")).unwrap();
        assert_eq!(c.source.mode, SourceMode::Assign);
        let windows = format!("{group}{WINDOWS}");
        let c = PipelineConfig::parse(&windows, Path::new("p.toml")).unwrap();
        assert!(c.active_standby());
        let c = PipelineConfig::parse(&format!("{MINIMAL}{WINDOWS}"), Path::new("p.toml")).unwrap();
        assert!(!c.active_standby());
    }

    #[test]
    fn commit_cadence_defaults_and_works_with_event_time() {
        let c = PipelineConfig::parse(MINIMAL, Path::new("p.toml")).unwrap();
        assert_eq!(c.sink.cadence(), None);
        let rows = MINIMAL.replace("table = \"t\"", "table = \"t\"\nmin-commit-rows = 5000");
        let c = PipelineConfig::parse(&rows, Path::new("p.toml")).unwrap();
        assert_eq!(c.sink.cadence(), Some((Duration::from_secs(300), 5000)));
        let every = MINIMAL.replace("table = \"t\"", "table = \"t\"\ncommit-interval = \"30s\"");
        let c = PipelineConfig::parse(&every, Path::new("p.toml")).unwrap();
        assert_eq!(c.sink.cadence(), Some((Duration::from_secs(30), 500_000)));
        let c = PipelineConfig::parse(&format!("{every}{WINDOWS}"), Path::new("p.toml")).unwrap();
        assert_eq!(c.sink.cadence(), Some((Duration::from_secs(30), 500_000)));
        assert!(c.event_time.is_some());
    }

    #[test]
    fn inconsistencies_are_refused() {
        let text = MINIMAL.replace("on-invalid = \"fail\"", "");
        let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("[dead-letter]"), "{err}");
        let text = MINIMAL.replace("\"a\", type = \"string\"", "\"a\", type = \"varchar\"");
        let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("varchar"), "{err}");
    }

    const JOINS: &str = r#"
[event-time]
field = "ts"
max-delay = "2m"
late = "drop"

[[joins]]
name = "j"
right-topic = "profiles"
right-time-field = "updated_at"
right-max-delay = "1m"
on = ["user"]
kind = "left-outer"
before = "1h"
left-fields = ["a", "user"]
right-fields = ["tier", { field = "updated_at", name = "profile_time", type = "timestamptz" }]
iceberg = { table = "joined" }
"#;

    #[test]
    fn joins_parse_read_their_right_topic_and_are_checked() {
        use crate::event_time::join::config::JoinKind;
        let c = PipelineConfig::parse(&format!("{MINIMAL}{JOINS}"), Path::new("p.toml")).unwrap();
        let j = &c.joins[0];
        assert_eq!(
            (j.kind, j.after, j.right_on()),
            (
                JoinKind::LeftOuter,
                Duration::ZERO,
                &["user".to_string()][..]
            )
        );
        assert_eq!(c.source.topics, ["t", "profiles"]);
        let columns = j.columns(&c.sink.columns);
        let names: Vec<(&str, &str)> = columns
            .iter()
            .map(|c| (c.name.as_str(), c.ty.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("a", "string"),
                ("user", "string"),
                ("tier", "string"),
                ("profile_time", "timestamptz"),
                ("batch_id", "long")
            ]
        );
        let refused = |text: String, needle: &str| {
            let err = PipelineConfig::parse(&format!("{MINIMAL}{text}"), Path::new("p.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err}");
        };
        refused(
            JOINS.replace("right-topic = \"profiles\"", "right-topic = \"t\""),
            "also in source.topics",
        );
        refused(
            JOINS.replace("name = \"profile_time\"", "name = \"tier\""),
            "two output columns",
        );
        refused(
            JOINS.replace("kind = ", "max-rows = 0\nkind = "),
            "max-rows must be at least 1",
        );
        refused(
            JOINS.replace(
                "[event-time]\nfield = \"ts\"\nmax-delay = \"2m\"\nlate = \"drop\"",
                "",
            ),
            "need an [event-time]",
        );
        refused(
            JOINS.replace("iceberg = { table = \"joined\" }", ""),
            "give an output",
        );
        refused(
            JOINS.replace("table = \"joined\"", "table = \"t\""),
            "another output",
        );
        refused(
            JOINS.replace("kind = \"left-outer\"", "kind = \"full\""),
            "full",
        );
        refused(
            JOINS.replace("before = \"1h\"", "before = \"1h\"\nbefor = 1"),
            "befor",
        );
    }

    #[test]
    fn lookups_parse_and_grants_must_name_one() {
        let stage = "\n[[stages]]\nname = \"enrich\"\nplugin = \"e.wasm\"\n[stages.grants]\nlookups = [\"profiles\"]\n";
        let lookups = "\n[[lookups]]\nname = \"profiles\"\ntopic = \"user-profiles\"\n";
        let c = PipelineConfig::parse(&format!("{MINIMAL}{stage}{lookups}"), Path::new("p.toml"))
            .unwrap();
        assert_eq!(c.lookups[0].name, "profiles");
        let err = PipelineConfig::parse(&format!("{MINIMAL}{stage}"), Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("granted but not declared"), "{err}");
        let twice = format!("{MINIMAL}{lookups}{lookups}");
        let err = PipelineConfig::parse(&twice, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("two lookups"), "{err}");
    }

    const WINDOWS: &str = r#"
[event-time]
field = "ts"
max-delay = "2m"
late = "drop"

[dedup]
keys = ["id"]

[[windows]]
name = "w"
size = "1m"
slide = "30s"
group-by = ["type"]
aggregates = [{ name = "count", fn = "count" }, { name = "users", fn = "distinct-count", field = "user" }]
emit = "update"
kafka = { topic = "out" }
iceberg = { table = "counts", partition-by = ["day(window_start)"] }
"#;

    #[test]
    fn event_time_sections_parse_and_are_checked() {
        use crate::event_time::config::{EmitMode, Function};
        let c = PipelineConfig::parse(&format!("{MINIMAL}{WINDOWS}"), Path::new("p.toml")).unwrap();
        let et = c.event_time.as_ref().unwrap();
        assert_eq!(et.max_delay, std::time::Duration::from_secs(120));
        assert_eq!(et.idle_timeout, std::time::Duration::from_secs(30));
        let w = &c.windows[0];
        assert_eq!(w.slide, Some(std::time::Duration::from_secs(30)));
        assert_eq!(w.emit, EmitMode::Update);
        assert_eq!(w.aggregates[1].function, Function::DistinctCount);
        let refused = |text: String, needle: &str| {
            let err = PipelineConfig::parse(&format!("{MINIMAL}{text}"), Path::new("p.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err}");
        };
        refused(
            WINDOWS.replace(
                "[event-time]\nfield = \"ts\"\nmax-delay = \"2m\"\nlate = \"drop\"",
                "",
            ),
            "need an [event-time]",
        );
        refused(
            WINDOWS.replace("late = \"drop\"", ""),
            "needs a [dead-letter]",
        );
        refused(
            WINDOWS.replace("late = \"drop\"", "late = \"topic\""),
            "late-topic",
        );
        refused(
            WINDOWS.replace(
                "late = \"drop\"",
                "late = \"drop\"\nlate-topic-properties = { \"acks\" = \"1\" }",
            ),
            "late-topic-properties is only used",
        );
        refused(
            WINDOWS.replace("slide = \"30s\"", "slide = \"2m\""),
            "at most size",
        );
        refused(
            WINDOWS.replace("name = \"users\"", "name = \"count\""),
            "two output columns",
        );
        refused(
            WINDOWS.replace("name = \"users\"", "name = \"window_end\""),
            "reserved",
        );
        refused(WINDOWS.replace(", field = \"user\"", ""), "needs a field");
        refused(
            WINDOWS.replace("table = \"counts\"", "table = \"t\""),
            "another output",
        );
        refused(
            WINDOWS.replace("max-delay = \"2m\"", "max-delay = \"soon\""),
            "event-time.max-delay",
        );
        refused(
            WINDOWS.replace("fn = \"count\" }", "fn = \"median\" }"),
            "median",
        );
    }
}
