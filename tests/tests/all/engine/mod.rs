//! The engine in-process, in milliseconds: the real pipeline loop, the real Iceberg table
//! (SQL catalog on SQLite in a temporary warehouse), and in-memory twins of Kafka (a
//! [`MemoryLog`] source and [`MemoryTopics`] outputs). The tansu suite stays as the
//! end-to-end layer.

mod batching;
mod connections;
mod crash;
mod dedup_topic;
mod event_time;
mod fence;
mod join;
mod keyed;
mod lookups;
mod partitions;
mod partitions_chaos;
mod partitions_join;
mod partitions_left;
mod partitions_race;
mod poison;
mod probation;
mod repartition;
mod repartition_chaos;
mod session;
mod standby;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};
use sluice::election::Election;
use sluice::iceberg::{IcebergCatalog, IcebergTable};
use sluice::lookup::load::{Loader, MemoryLookup};
use sluice::lookup::refresh::LookupTables;
use sluice::pipeline::config::PipelineConfig;
use sluice::pipeline::crash::Crash;
use sluice::pipeline::{Parts, Pipeline, PipelineError, RunSummary};
use sluice::sink::memory::MemoryTopics;
use sluice::sink::topic::TopicRecord;
use sluice::sink::window::table_config;
use sluice::source::memory::{Assignment, MemoryLog, MemorySource};

/// The source topic of every engine test.
pub(crate) const TOPIC: &str = "clicks";

/// The pipeline's name, its source (the topic `clicks`) and its trigger (available-now,
/// batches of at most 4 records), then the rest of the file.
macro_rules! pipeline_file {
    ($name:literal, $rest:literal) => {
        concat!(
            "[pipeline]\nname = \"",
            $name,
            "\"\nthreads = 2\n\n[source]\nbootstrap-servers = \"memory\"\ntopics = [\"clicks\"]\n\n",
            "[trigger]\nmode = \"available-now\"\nmax-records = 4\n",
            $rest
        )
    };
}
pub(crate) use pipeline_file;

/// A stateless pipeline: a table of `id`, `kind`, `n`, and dead letters.
pub(crate) const PLAIN: &str = pipeline_file!(
    "engine",
    r#"
[sink]
warehouse = "warehouse"
namespace = "engine"
table = "clicks"
columns = [
  { name = "id", type = "string", required = true },
  { name = "kind", type = "string" },
  { name = "n", type = "int" },
]

[dead-letter]
topic = "dead"
"#
);

/// One pipeline under test: a temporary warehouse, a log, topics.
pub(crate) struct Engine {
    pub(crate) dir: PathBuf,
    pub(crate) log: MemoryLog,
    pub(crate) topics: MemoryTopics,
    pub(crate) config: PipelineConfig,
    /// The compacted topic of each lookup table (`[[lookups]]`), in memory.
    pub(crate) lookups: BTreeMap<String, MemoryLookup>,
}

impl Engine {
    /// A pipeline of `toml` (see [`PLAIN`]) in a fresh warehouse.
    pub(crate) fn new(name: &str, toml: &str) -> Engine {
        let dir = std::env::temp_dir().join(format!("sluice-engine-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = PipelineConfig::parse(toml, Path::new("engine.toml")).unwrap();
        let log = MemoryLog::default();
        log.create(TOPIC, 1);
        let lookups = config
            .lookups
            .iter()
            .map(|l| (l.name.clone(), MemoryLookup::default()))
            .collect();
        Engine {
            dir,
            log,
            topics: MemoryTopics::default(),
            config,
            lookups,
        }
    }

    /// Appends values to partition 0 of the source topic.
    pub(crate) fn append<S: AsRef<str>>(&self, values: &[S]) {
        for v in values {
            self.log.append(TOPIC, 0, None, v.as_ref().as_bytes());
        }
    }

    /// A new engine (`name`, `toml`) over `values`, run until it crashes at `point` of
    /// batch `batch` (which the test asserts), for the test to run it again.
    pub(crate) fn crashed<S: AsRef<str>>(
        name: &str,
        toml: &str,
        values: &[S],
        point: sluice::pipeline::crash::CrashPoint,
        batch: u64,
    ) -> Engine {
        let engine = Engine::new(name, toml);
        engine.append(values);
        let error = engine
            .open(Crash::Fail(point, batch))
            .unwrap()
            .run(&Default::default());
        assert!(
            matches!(error, Err(PipelineError::Crashed { point: p, batch_id }) if p == point && batch_id == batch),
            "{name}: {error:?}"
        );
        engine
    }

    /// Opens the pipeline over the log and topics, as a new process would.
    pub(crate) fn open(&self, crash: Crash) -> Result<Pipeline, PipelineError> {
        self.open_as(&self.config, crash)
    }

    /// Opens another pipeline (`config`) over the same warehouse, log and topics.
    pub(crate) fn open_as(
        &self,
        config: &PipelineConfig,
        crash: Crash,
    ) -> Result<Pipeline, PipelineError> {
        self.open_elected(config, crash, None)
    }

    /// Opens another pipeline (`config`) over the same warehouse, log and topics, run as
    /// `election` says.
    pub(crate) fn open_elected(
        &self,
        config: &PipelineConfig,
        crash: Crash,
        election: Option<Box<dyn Election>>,
    ) -> Result<Pipeline, PipelineError> {
        let lookups = self.lookup_tables(config);
        self.open_with(config, crash, election, lookups)
    }

    /// Opens another pipeline (`config`) over the same warehouse, log and topics, run as
    /// `election` says, with `lookups`.
    pub(crate) fn open_with(
        &self,
        config: &PipelineConfig,
        crash: Crash,
        election: Option<Box<dyn Election>>,
        lookups: Option<LookupTables>,
    ) -> Result<Pipeline, PipelineError> {
        let topics: Vec<&str> = config.source.topics.iter().map(String::as_str).collect();
        let parts = Parts {
            source: Box::new(MemorySource::new(
                &self.log,
                &topics,
                config.source.starting_offsets,
            )),
            topics: Box::new(self.topics.clone()),
            state: None,
            // Lookup tables are set on the runtime: a pipeline with some gets its own.
            runtime: config
                .lookups
                .is_empty()
                .then(|| sluice_tests::runtime().clone()),
            crash,
            election,
            lookups,
        };
        Pipeline::build(config.clone(), &self.dir, parts)
    }

    /// Opens a member of the pipeline's group over the same warehouse, log and topics,
    /// owning the partitions `assignment` says (changed by the test: a rebalance).
    pub(crate) fn open_member(
        &self,
        assignment: &Assignment,
        crash: Crash,
    ) -> Result<Pipeline, PipelineError> {
        self.open_member_as(&self.config, assignment, crash)
    }

    /// Opens a member of `config`'s group over the same warehouse, log and topics, owning
    /// the partitions `assignment` says.
    pub(crate) fn open_member_as(
        &self,
        config: &PipelineConfig,
        assignment: &Assignment,
        crash: Crash,
    ) -> Result<Pipeline, PipelineError> {
        let topics: Vec<&str> = config.source.topics.iter().map(String::as_str).collect();
        let source = MemorySource::new(&self.log, &topics, config.source.starting_offsets);
        let parts = Parts {
            source: Box::new(source.member(assignment)),
            topics: Box::new(self.topics.clone()),
            state: None,
            runtime: Some(sluice_tests::runtime().clone()),
            crash,
            election: None,
            lookups: None,
        };
        Pipeline::build(config.clone(), &self.dir, parts)
    }

    /// The loaders of `config`'s lookup tables, over [`Engine::lookups`].
    pub(crate) fn lookup_tables(&self, config: &PipelineConfig) -> Option<LookupTables> {
        let loaders = config.lookups.iter().map(|l| {
            let log = &self.lookups[&l.name];
            let loader: Box<dyn Loader> = Box::new(log.loader(&l.name, l.max_bytes.0));
            (l.name.clone(), l.refresh_interval, loader)
        });
        Some(LookupTables::new(loaders.collect()))
    }

    /// Opens the pipeline and runs it to its end.
    pub(crate) fn run(&self) -> Result<RunSummary, PipelineError> {
        self.open(Crash::Never)?.run(&AtomicBool::new(false))
    }

    /// The rows of the main table, or of a window's table.
    pub(crate) fn rows(&self, window: Option<&str>) -> Vec<Map<String, Value>> {
        self.table(window).read_rows().unwrap()
    }

    /// The main table's values of the text column `column`, sorted.
    pub(crate) fn sorted_column(&self, column: &str) -> Vec<String> {
        let rows = self.rows(None);
        let mut values: Vec<String> = rows
            .iter()
            .map(|r| r[column].as_str().unwrap().to_string())
            .collect();
        values.sort();
        values
    }

    /// The latest batch the main table, or a window's table, holds.
    pub(crate) fn table_batch(&self, window: Option<&str>) -> Option<u64> {
        let mark = self
            .table(window)
            .last_mark(&self.config.pipeline.name)
            .unwrap();
        mark.map(|m| m.batch_id)
    }

    /// The summary properties of the pipeline's last commit of the main table.
    pub(crate) fn mark_properties(&self) -> std::collections::HashMap<String, String> {
        let name = &self.config.pipeline.name;
        self.table(None)
            .last_mark_properties(name)
            .unwrap()
            .unwrap()
    }

    fn table(&self, window: Option<&str>) -> IcebergTable {
        let sink = &self.config.sink;
        let catalog = IcebergCatalog::open(sink, &self.dir).unwrap();
        let config = match window {
            None => sink.clone(),
            Some(name) => {
                let window = self.config.windows.iter().find(|w| w.name == name).unwrap();
                table_config(window, sink).unwrap()
            }
        };
        IcebergTable::open(&catalog, config).unwrap()
    }

    /// What a topic received.
    pub(crate) fn topic(&self, topic: &str) -> Vec<TopicRecord> {
        self.topics.records(topic)
    }

    /// Everything the pipeline's outputs hold, in a form two runs can be compared by.
    pub(crate) fn outputs(&self) -> Outputs {
        let rows = sorted_json(self.rows(None));
        let mut dead = BTreeSet::new();
        for d in self.topic("dead") {
            let h = |k: &str| d.headers.get(k).cloned().unwrap_or_default();
            dead.insert(format!(
                "{}@{} {} {}",
                h("sluice.source.partition"),
                h("sluice.source.offset"),
                h("sluice.error.code"),
                h("sluice.error.message")
            ));
        }
        let mut windows = BTreeMap::new();
        for w in &self.config.windows {
            let table = w
                .iceberg
                .as_ref()
                .map(|_| sorted_json(self.rows(Some(&w.name))));
            let topic = w.kafka.as_ref().map(|k| by_key(&self.topic(&k.topic)));
            windows.insert(w.name.clone(), (table, topic));
        }
        Outputs {
            rows,
            dead,
            windows,
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a pipeline's outputs hold. The table and window tables are exactly once (rows as
/// a sorted list: a repeat shows); dead letters and window topics are at least once (a
/// set by source position; the last value by key, every repeat checked to be identical).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Outputs {
    pub(crate) rows: Vec<String>,
    pub(crate) dead: BTreeSet<String>,
    pub(crate) windows: BTreeMap<String, WindowOutputs>,
}

/// A window's table rows and topic records by key.
pub(crate) type WindowOutputs = (Option<Vec<String>>, Option<BTreeMap<String, String>>);

pub(crate) fn sorted_json(rows: Vec<Map<String, Value>>) -> Vec<String> {
    let mut rows: Vec<String> = rows
        .into_iter()
        .map(|r| Value::Object(r).to_string())
        .collect();
    rows.sort();
    rows
}

/// The records of a keyed topic by key; a key sent twice must carry the same value.
pub(crate) fn by_key(records: &[TopicRecord]) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for r in records {
        let (key, value) = (r.key.clone().unwrap(), r.value.clone().unwrap());
        if let Some(before) = map.insert(key.clone(), value.clone()) {
            assert_eq!(before, value, "key {key} was sent with two values");
        }
    }
    map
}

/// A plain event.
pub(crate) fn plain(id: usize) -> String {
    format!(r#"{{"id":"e{id}","kind":"view","n":{id}}}"#)
}
