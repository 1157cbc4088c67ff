//! Building a pipeline from its parts: the plugins, the table, the outputs, the source
//! positioned where the table's last commit says, and the event-time state named by that
//! commit (with a batch to replay if one was planned but not committed).

use std::path::Path;
use std::time::Instant;

use super::clients;
use super::config::PipelineConfig;
use super::crash::Crash;
use super::stages::Stages;
use super::{Pipeline, PipelineError, RunSummary};
use crate::admin::Admin;
use crate::checkpoint::{CommitMark, LAST_RECORDS, STATE};
use crate::election::{Election, KafkaElection};
use crate::encode::{DroppedFields, Encoder, Evolving};
use crate::event_time::EventTime;
use crate::event_time::config::EventTimeConfig;
use crate::event_time::state::{self, Plan, StateStore};
use crate::format::Decoder;
use crate::iceberg::{IcebergCatalog, IcebergSinkConfig, IcebergTable};
use crate::kafka::{self, ClientKind, REACH_TIMEOUT};
use crate::lookup::refresh::LookupTables;
use crate::plugin::Runtime;
use crate::progress::Role;
use crate::sink::deadletter::{DeadLetterOutput, Route};
use crate::sink::join::JoinOutput;
use crate::sink::table::TableOutput;
use crate::sink::topic::{KafkaTopics, Topics};
use crate::sink::window::WindowOutput;
use crate::sink::{Output, OutputError, Outputs};
use crate::source::identity::Fingerprints;
use crate::source::kafka::{KafkaSource, OnDataLoss, SourceMode, StartingOffsets};
use crate::source::{Loss, Offsets, Source, SourceError};
use crate::units::Millis;
use iceberg::spec::{NestedFieldRef, Schema};

/// The parts a pipeline is built from. Production wires Kafka and the table's storage
/// ([`Parts::production`]); tests wire in-memory twins
/// ([`crate::source::memory::MemorySource`], [`crate::sink::memory::MemoryTopics`],
/// [`crate::event_time::state::MemoryStore`]).
pub struct Parts {
    /// Where records come from.
    pub source: Box<dyn Source>,
    /// Where the output topics are: dead letters, late data, window results.
    pub topics: Box<dyn Topics>,
    /// Where the event-time state is kept; `None`: beside the table's data.
    pub state: Option<Box<dyn StateStore>>,
    /// The plugin runtime; `None`: a new one, from `[runtime]`.
    pub runtime: Option<Runtime>,
    /// Crashes injected on purpose.
    pub crash: Crash,
    /// Who runs the pipeline when processes share it as active and standbys (`None`: this
    /// process does).
    pub election: Option<Box<dyn Election>>,
    /// The lookup tables' loaders; `None`: from `[[lookups]]` (topics on the source's
    /// cluster, tables in the sink's catalog).
    pub lookups: Option<LookupTables>,
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts")
            .field("crash", &self.crash)
            .finish_non_exhaustive()
    }
}

impl Parts {
    /// Kafka for the records and the topics, the table's storage for the state, and
    /// `SLUICE_CRASH_AT` for crashes. An event-time pipeline in `mode = "group"` joins its
    /// election, and reads every partition when active.
    pub fn production(config: &PipelineConfig) -> Result<Self, PipelineError> {
        let connection = config.source.connection();
        kafka::reach(&connection, ClientKind::Consumer, REACH_TIMEOUT)
            .map_err(SourceError::from)?;
        let group = clients::group(config);
        let source = config.source_client();
        let mut election: Option<Box<dyn Election>> = None;
        if config.active_standby() {
            election = Some(Box::new(KafkaElection::join(&config.source, &group)?));
        }
        Ok(Parts {
            source: Box::new(KafkaSource::new(source, &group, config.trigger.caps())?),
            topics: Box::new(KafkaTopics),
            state: None,
            runtime: None,
            crash: Crash::from_env(),
            election,
            lookups: None,
        })
    }
}

/// The admin API, when configured: it checks uploads against the stages and hands new
/// versions to them.
fn start_admin(
    config: &PipelineConfig,
    runtime: &Runtime,
    stages: &Stages,
) -> Result<Option<Admin>, PipelineError> {
    let Some(admin) = &config.admin else {
        return Ok(None);
    };
    let (name, checks) = (&config.pipeline.name, stages.checks());
    let admin = Admin::start(admin, name, runtime.clone(), checks, stages.sender())?;
    admin.set_topology(super::topology::topology(config));
    Ok(Some(admin))
}

/// The encoder of the rows of a table of `schema` (the host fills the ingestion-time
/// column, if any), doing with fields the table lacks what `[sink] unknown-fields` says.
pub(super) fn encoder_for(
    schema: &Schema,
    sink: &IcebergSinkConfig,
) -> Result<Encoder, PipelineError> {
    let generated: Vec<String> = sink.ingestion_time_column.iter().cloned().collect();
    let evolving = Evolving {
        max_depth: sink.max_nesting_depth,
        timestamps: sink.infer_timestamps,
        ..Evolving::default()
    };
    Ok(Encoder::new(schema, &generated)?
        .with_unknown_fields(sink.unknown_fields)
        .with_evolving(evolving))
}

/// The columns of a table created from the latest schema of `subject`; fields without an
/// Iceberg type are left out, with a warning.
fn columns_of(
    decoder: &Decoder,
    subject: &str,
    message: Option<&str>,
) -> Result<Vec<NestedFieldRef>, String> {
    let (fields, skipped) = decoder.columns(subject, message)?;
    if !skipped.is_empty() {
        tracing::warn!(
            ?skipped,
            "fields of the topic's schema without a column type are left out of the new table (counted as dropped)"
        );
    }
    tracing::info!(
        subject,
        columns = fields.len(),
        "creating the table from the topic's schema"
    );
    Ok(fields)
}

impl Pipeline {
    /// Opens a pipeline on Kafka and the configured table (see [`Parts::production`]).
    /// `base` is the folder relative paths are resolved against.
    pub fn open(config: PipelineConfig, base: &Path) -> Result<Self, PipelineError> {
        let parts = Parts::production(&config)?;
        Self::build(config, base, parts)
    }

    /// Loads the plugins, opens the table (creating it if absent) and the outputs, and
    /// positions the source where the table's last commit says (with an election, once
    /// this process becomes active).
    pub fn build(
        mut config: PipelineConfig,
        base: &Path,
        parts: Parts,
    ) -> Result<Self, PipelineError> {
        if parts.election.is_some() {
            // The active process reads every partition, as a single process does.
            config.source.mode = SourceMode::Assign;
        }
        let runtime = match parts.runtime {
            Some(runtime) => runtime,
            None => Runtime::new(config.runtime.clone())?,
        };
        let stages = Stages::load(&runtime, &config.stages)?;
        let admin = start_admin(&config, &runtime, &stages)?;
        let catalog = IcebergCatalog::open(&config.sink, base)?;
        let source = &config.source;
        let decoder = Decoder::new(
            source.format,
            source.schema_registry.as_ref(),
            source.schema_file.as_deref(),
            source.message.as_deref(),
        )
        .map_err(PipelineError::Format)?;
        let table = match &decoder {
            Some(decoder) => {
                let subject = source.value_subject();
                let columns = || columns_of(decoder, &subject, source.message.as_deref());
                IcebergTable::open_or_create_from(&catalog, config.sink.clone(), &columns)?
            }
            None => IcebergTable::open(&catalog, config.sink.clone())?,
        };
        let encoder = encoder_for(table.schema(), &config.sink)?;
        let state = parts.state.unwrap_or_else(|| Box::new(table.files()));
        let lookups = match parts.lookups {
            Some(lookups) => lookups,
            None => {
                let source = &config.source;
                let (connection, loss) = (source.connection(), source.on_data_loss);
                let registry = source.schema_registry.as_ref();
                crate::lookup::loaders(&config.lookups, &connection, loss, &catalog, registry)?
            }
        };
        let others = open_outputs(&config, parts.topics.as_ref(), &catalog)?;
        let alone = parts.election.is_none() && config.source.mode == SourceMode::Assign;
        let compactor = start_compactor(&config, &catalog, alone)?;
        let config_mode = config.source.mode;
        let mut pipeline = Pipeline {
            event_time: config.event_time.as_ref().map(|et| operators(et, &config)),
            outputs: Outputs::new(others, TableOutput::new(table)),
            config,
            stages,
            encoder,
            source: parts.source,
            state,
            positions: Default::default(),
            last_batch: 0,
            last_end: Instant::now(),
            crash: parts.crash,
            run: crate::checkpoint::run_id(),
            replay: None,
            health: admin.as_ref().map(|a| a.health().clone()),
            admin,
            summary: RunSummary::default(),
            role: match (&parts.election, config_mode) {
                (Some(_), _) => Role::Standby,
                (None, SourceMode::Group) => Role::Member,
                (None, SourceMode::Assign) => Role::Single,
            },
            election: parts.election,
            election_changes: 0,
            last_records: Fingerprints::default(),
            batch_records: Fingerprints::default(),
            losses: Vec::new(),
            faults_seen_at: 0,
            catalog_looked: Instant::now(),
            committed: Offsets::default(),
            held: None,
            commits_since_expiry: 0,
            dropped_fields: DroppedFields::default(),
            planned: None,
            lookups,
            current: runtime.lookups().clone(),
            decoder,
            known: None,
            compactor,
            key_checks: Default::default(),
            tasks: None,
            unfinished: Vec::new(),
            replaying: None,
            fence_streak: Default::default(),
            fenced_key: None,
            outlets: Default::default(),
            inlet: Default::default(),
        };
        if let Some(admin) = &pipeline.admin {
            admin.set_role(pipeline.role);
        }
        if pipeline.election.is_none() {
            pipeline.resume()?;
        }
        Ok(pipeline)
    }

    /// Positions the source where the table's last commit says, and recovers the
    /// event-time state. A new pipeline reading from `latest` first anchors there (see
    /// [`Pipeline::anchor`]).
    pub(super) fn resume(&mut self) -> Result<(), PipelineError> {
        self.held = None; // held triggers are read again from the table's offsets
        self.planned = None; // and their schema change planned again
        self.outputs.refresh()?;
        let name = self.config.pipeline.name.clone();
        let mut mark = self.outputs.table().last_mark(&name)?;
        if mark.is_none() {
            self.refuse_unknown_history()?;
        }
        let resume = self.verified_resume(mark.as_ref())?;
        self.positions = self.source.start(resume.as_ref())?;
        if mark.is_none() && self.anchors() {
            mark = self.anchor()?;
        }
        let table = self.outputs.table().table().name();
        match &mark {
            Some(m) => {
                tracing::info!(pipeline = %name, %table, batch_id = m.batch_id, offsets = %self.positions, "resuming from the table's last commit")
            }
            None => {
                tracing::info!(pipeline = %name, %table, offsets = %self.positions, "new pipeline: starting at {:?} offsets", self.config.source.starting_offsets)
            }
        }
        self.last_batch = mark.as_ref().map_or(0, |m| m.batch_id);
        self.committed = mark.as_ref().map(|m| m.offsets.clone()).unwrap_or_default();
        self.replay = self.recover_state(self.last_batch > 0)?;
        self.count_partitions()?;
        self.check_outputs()
    }

    /// The offsets to resume from: the mark's, after checking that each partition still
    /// holds the last record the pipeline read there (see [`crate::source::identity`]). A
    /// partition that holds another is refused, or with `on-data-loss = "continue"` read
    /// from its earliest offset (left out of the offsets), the loss recorded.
    fn verified_resume(
        &mut self,
        mark: Option<&CommitMark>,
    ) -> Result<Option<Offsets>, PipelineError> {
        let Some(mark) = mark else {
            self.last_records = Fingerprints::default();
            return Ok(None);
        };
        let name = &self.config.pipeline.name;
        let recorded = self.outputs.table().table().last_mark_properties(name)?;
        let text = recorded.as_ref().and_then(|p| p.get(LAST_RECORDS));
        self.last_records = match text {
            Some(t) => Fingerprints::from_json(t).map_err(PipelineError::Checkpoint)?,
            None => Fingerprints::default(),
        };
        let mut offsets = mark.offsets.clone();
        for m in self.source.verify(&self.last_records)? {
            let error = SourceError::NotTheSameTopic {
                partition: m.partition.to_string(),
                found: m.found,
            };
            if self.config.source.on_data_loss == OnDataLoss::Fail {
                return Err(error.into());
            }
            tracing::warn!(%error, "data loss accepted (on-data-loss = \"continue\"): reading the partition from its earliest offset");
            offsets.0.remove(&m.partition);
            self.last_records.0.remove(&m.partition);
            self.losses.push(Loss {
                partition: m.partition,
                records: None,
                why: error.to_string(),
            });
        }
        Ok(Some(offsets))
    }

    /// A table with no mark of the pipeline whose history was cut (expired snapshots)
    /// cannot say whether the pipeline committed before: starting as new there would read
    /// the topics again from the start. Refused unless `--new-pipeline` says it is new.
    fn refuse_unknown_history(&self) -> Result<(), PipelineError> {
        let table = self.outputs.table().table();
        match table.truncated_history() {
            Some(snapshot) if !self.config.pipeline.assume_new => {
                Err(PipelineError::Checkpoint(format!(
                    "table {} has no commit mark of pipeline `{}`, and its history before snapshot {snapshot} was expired, so sluice cannot tell whether this pipeline committed to it before (starting anew would read every record again). If the pipeline is new, start it once with `sluice run --new-pipeline`",
                    table.name(),
                    self.config.pipeline.name
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether a new pipeline anchors its starting positions: with `starting-offsets =
    /// "latest"`, where sluice assigns the partitions itself.
    fn anchors(&self) -> bool {
        self.config.source.starting_offsets == StartingOffsets::Latest
            && self.config.source.mode == SourceMode::Assign
    }

    /// Commits an empty snapshot holding the positions `latest` resolved to (batch 0), so
    /// that records produced while a never-committed pipeline is down are read when it
    /// starts again, instead of being skipped by resolving `latest` anew. If another process
    /// anchored first, its positions win.
    fn anchor(&mut self) -> Result<Option<CommitMark>, PipelineError> {
        let mark = CommitMark {
            pipeline: self.config.pipeline.name.clone(),
            batch_id: 0,
            offsets: self.positions.clone(),
        };
        self.outputs.anchor(&mark, &self.run)?;
        self.outputs.refresh()?;
        let anchored = self.outputs.table().last_mark(&mark.pipeline)?;
        if let Some(theirs) = anchored.as_ref().filter(|m| m.offsets != mark.offsets) {
            self.positions = self.source.start(Some(&theirs.offsets))?;
        }
        tracing::info!(pipeline = %mark.pipeline, offsets = %self.positions, "anchored the starting offsets in the table");
        Ok(anchored)
    }

    /// Restores the event-time state named by the table's last commit; returns the plan of
    /// a batch that was planned but not committed (with event time or lookup tables).
    fn recover_state(&mut self, resumed: bool) -> Result<Option<Plan>, PipelineError> {
        let Some(et) = &mut self.event_time else {
            if self.lookups.is_empty() {
                return Ok(None);
            }
            let location = self.outputs.table().table().location();
            let next = state::path(location, &self.config.pipeline.name, self.last_batch + 1);
            let positions = self.positions.to_json();
            return Ok(state::planned(self.state.as_ref(), &next, &positions));
        };
        let config = &self.config;
        let mut fresh = operators(et.config(), config);
        fresh.take_roles(et);
        *et = fresh;
        et.set_session_start(Millis::now());
        if config.partitioned_state() {
            return self.recover_tasks();
        }
        let name = &self.config.pipeline.name;
        let table = self.outputs.table().table();
        let saved = table
            .last_mark_properties(name)?
            .and_then(|mut p| p.remove(STATE));
        let next = state::path(table.location(), name, self.last_batch + 1);
        let positions = self.positions.to_json();
        let store = self.state.as_ref();
        Ok(et.recover(store, saved.as_deref(), resumed, &next, &positions)?)
    }

    /// Refuses to start when an output holds a batch the table does not and no plan can
    /// replay it.
    fn check_outputs(&self) -> Result<(), PipelineError> {
        if self.tasks.is_some() {
            return Ok(()); // members number batches each their own way: see `partitioned`
        }
        let name = &self.config.pipeline.name;
        for output in self.outputs.others() {
            if let Some(held) = output.held_batch(name)?
                && held > self.last_batch
                && self.replay.as_ref().is_none_or(|p| p.batch_id != held)
            {
                return Err(PipelineError::State(format!(
                    "{} holds batch {held} but the main table is at batch {} and there is no plan to replay it",
                    output.name(),
                    self.last_batch
                )));
            }
        }
        Ok(())
    }
}

/// The outputs other than the table, in the order of [`crate::sink`]: dead letters, late
/// topic, windows, joins; each topic where [`clients`] says.
fn open_outputs(
    config: &PipelineConfig,
    topics: &dyn Topics,
    catalog: &IcebergCatalog,
) -> Result<Vec<Box<dyn Output>>, PipelineError> {
    let mut outputs: Vec<Box<dyn Output>> = Vec::new();
    if let Some(target) = clients::dead_letter_target(config) {
        let topic = topics.open(&target).map_err(topic_error(&target.topic))?;
        let max = target.max_record_bytes();
        outputs.push(Box::new(DeadLetterOutput::new(
            topic,
            Route::DeadLetters,
            max,
        )));
    }
    if let Some(target) = clients::late_target(config) {
        let topic = topics.open(&target).map_err(topic_error(&target.topic))?;
        let max = target.max_record_bytes();
        outputs.push(Box::new(DeadLetterOutput::new(topic, Route::Late, max)));
    }
    let source = config.source.connection();
    for (i, window) in config.windows.iter().enumerate() {
        let output = WindowOutput::open(window, i, topics, &source, catalog, &config.sink)?;
        outputs.push(Box::new(output));
    }
    for (i, join) in config.joins.iter().enumerate() {
        let output = JoinOutput::open(join, i, topics, &source, catalog, &config.sink)?;
        outputs.push(Box::new(output));
    }
    Ok(outputs)
}

fn topic_error(topic: &str) -> impl FnOnce(crate::sink::topic::TopicError) -> OutputError {
    let output = format!("topic `{topic}`");
    move |error| OutputError::Topic {
        output,
        error: Box::new(error),
    }
}

/// Fresh event-time operators for `config`, sharded over its threads.
fn operators(event_time: &EventTimeConfig, config: &PipelineConfig) -> EventTime {
    let operators = EventTime::new(event_time, config.dedup.as_ref(), &config.windows)
        .with_threads(config.threads())
        .with_joins(&config.joins);
    match &config.source.keyed_by {
        Some(field) => operators.with_keyed_by(field),
        None => operators,
    }
}

/// The compaction thread, with `[sink.compact]` and `enabled`; a process alone compacts
/// from the start, others once a batch shows they are the one (see [`super::compactor`]).
fn start_compactor(
    config: &PipelineConfig,
    catalog: &IcebergCatalog,
    alone: bool,
) -> Result<Option<super::compactor::Compactor>, PipelineError> {
    let Some(compact) = config.sink.compact.clone().filter(|c| c.enabled) else {
        return Ok(None);
    };
    let compactor = super::compactor::Compactor::start(catalog.clone(), config.tables(), compact)
        .map_err(|e| {
        PipelineError::Checkpoint(format!("cannot start the compaction thread: {e}"))
    })?;
    compactor.set_active(alone);
    Ok(Some(compactor))
}
