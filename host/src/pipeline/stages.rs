//! The pipeline's plugin stages while it runs: the active version of each, new versions
//! swapped in between two batches, probation and automatic rollback, and what each batch
//! records about them.
//!
//! Each batch runs entirely on one version of each stage: new versions found by the
//! watcher ([`crate::plugin::swap`]) are activated only when a batch starts. A version
//! swapped in is on probation for its first `rollback.first-events` events. If, counted
//! from its activation, it fails on (traps, limits) or rejects more events than the
//! stage's `rollback` bounds allow, the pipeline goes back to the previous version and
//! processes the same batch again on it before anything of the batch leaves, so no event
//! is lost or judged twice.

use std::collections::{BTreeMap, HashMap};

use crate::plugin::shadow::ShadowReport;

use crate::plugin::config::StageConfig;
use std::sync::mpsc::{Receiver, Sender, channel};

use crate::plugin::swap::{self, Found, Samples, Watcher};
use crate::plugin::{Plugin, PluginError, Runtime};

pub use crate::progress::{StageCounts, StageProgress};

/// A stage's version history while running.
#[derive(Debug, Default)]
struct Slot {
    previous: Option<Plugin>,
    /// Counts of the active version since it became active.
    since_active: StageCounts,
    /// Rejection share of the version before it, over its life.
    previous_rejection_share: Option<f64>,
    on_probation: bool,
    swapped_in: Option<u64>,
    rolled_back: Option<String>,
    swaps: u64,
    rollbacks: u64,
    refused: u64,
}

impl Slot {
    /// Puts `previous` back as `active`; returns the version rolled back.
    fn roll_back(&mut self, active: &mut Plugin, previous: Plugin, reason: &str) -> Plugin {
        let bad = std::mem::replace(active, previous);
        self.on_probation = false;
        self.rollbacks += 1;
        self.rolled_back = Some(format!("{} {reason}", bad.digest()));
        self.since_active = StageCounts::default();
        bad
    }
}

/// The stages of a running pipeline.
#[derive(Debug)]
pub struct Stages {
    configs: Vec<StageConfig>,
    samples: Vec<Samples>,
    active: Vec<Plugin>,
    shadows: Vec<Option<Plugin>>,
    slots: Vec<Slot>,
    found: Receiver<Found>,
    sender: Sender<Found>,
    _watcher: Option<Watcher>,
}

/// A stage could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The plugin could not be loaded.
    #[error(transparent)]
    Udf(#[from] PluginError),
    /// The plugin failed a check.
    #[error("stage `{stage}`: {reason}")]
    Refused {
        /// The stage.
        stage: String,
        /// Why.
        reason: String,
    },
}

impl Stages {
    /// Loads and checks every stage's plugin, and starts watching the files of the stages
    /// that ask for it.
    pub fn load(runtime: &Runtime, configs: &[StageConfig]) -> Result<Self, StageError> {
        let mut active = Vec::new();
        let mut all_samples = Vec::new();
        let mut shadows = Vec::new();
        let mut watched = Vec::new();
        for (i, config) in configs.iter().enumerate() {
            let refused = |reason: String| StageError::Refused {
                stage: config.name.clone(),
                reason,
            };
            let samples = match &config.samples {
                Some(path) => swap::read_samples(path).map_err(refused)?,
                None => Vec::new(),
            };
            let bytes = std::fs::read(&config.plugin).map_err(|error| PluginError::Read {
                plugin: config.name.clone(),
                path: config.plugin.display().to_string(),
                error,
            })?;
            let plugin = swap::prepare(runtime, config, &bytes, &samples).map_err(refused)?;
            let (declared, version) = plugin.declared();
            tracing::info!(stage = plugin.name(), plugin = %declared, %version, digest = plugin.digest(), "loaded stage");
            if config.watch {
                watched.push((
                    i,
                    config.clone(),
                    plugin.digest().to_string(),
                    samples.clone(),
                ));
            }
            all_samples.push(samples);
            active.push(plugin);
            let shadow = match &config.shadow {
                Some(path) => {
                    let bytes = std::fs::read(path).map_err(|error| PluginError::Read {
                        plugin: config.name.clone(),
                        path: path.display().to_string(),
                        error,
                    })?;
                    let shadow = swap::prepare(runtime, config, &bytes, &[]).map_err(|reason| {
                        StageError::Refused {
                            stage: config.name.clone(),
                            reason: format!("shadow {}: {reason}", path.display()),
                        }
                    })?;
                    tracing::info!(stage = %config.name, digest = shadow.digest(), "running a shadow version beside the stage");
                    Some(shadow)
                }
                None => None,
            };
            shadows.push(shadow);
        }
        let (sender, found) = channel();
        let watcher = if watched.is_empty() {
            None
        } else {
            let interval = runtime.config().watch_interval;
            let watcher = Watcher::start(runtime.clone(), watched, interval, sender.clone())
                .map_err(|e| {
                    PluginError::Engine(format!("cannot start the plugin file watcher: {e}"))
                })?;
            Some(watcher)
        };
        Ok(Stages {
            slots: configs.iter().map(|_| Slot::default()).collect(),
            configs: configs.to_vec(),
            samples: all_samples,
            active,
            shadows,
            found,
            sender,
            _watcher: watcher,
        })
    }

    /// Where new versions and rollback requests are sent (the watcher, the admin API).
    pub fn sender(&self) -> Sender<Found> {
        self.sender.clone()
    }

    /// The shadow version of each stage, if any.
    pub fn shadows(&self) -> &[Option<Plugin>] {
        &self.shadows
    }

    /// Each stage's configuration with its samples, as read at start.
    pub fn checks(&self) -> Vec<(StageConfig, Samples)> {
        self.configs
            .iter()
            .cloned()
            .zip(self.samples.iter().cloned())
            .collect()
    }

    /// The active version of each stage, in order.
    pub fn active(&self) -> &[Plugin] {
        &self.active
    }

    /// Activates the new versions found since the last batch (call between batches).
    pub fn activate_new_versions(&mut self) {
        for slot in &mut self.slots {
            slot.swapped_in = None;
            slot.rolled_back = None;
        }
        let found: Vec<Found> = self.found.try_iter().collect();
        for found in found {
            match found {
                Found::Refused(r) => self.slots[r.stage].refused += 1,
                Found::Shadow { stage, plugin } => {
                    match &plugin {
                        Some(p) => {
                            tracing::info!(stage = %self.configs[stage].name, digest = p.digest(), "running a shadow version beside the stage")
                        }
                        None => tracing::info!(stage = %self.configs[stage].name, "shadow stopped"),
                    }
                    self.shadows[stage] = plugin;
                }
                Found::Rollback { stage, reason } => {
                    let slot = &mut self.slots[stage];
                    match slot.previous.take() {
                        Some(previous) => {
                            let bad = slot.roll_back(&mut self.active[stage], previous, &reason);
                            tracing::warn!(stage = %self.configs[stage].name, digest = bad.digest(), back_to = self.active[stage].digest(), %reason, "rolled back to the previous plugin version");
                            slot.previous = Some(bad);
                        }
                        None => {
                            tracing::warn!(stage = %self.configs[stage].name, %reason, "no previous plugin version to roll back to");
                        }
                    }
                }
                Found::Ready(candidate) => {
                    let i = candidate.stage;
                    let slot = &mut self.slots[i];
                    let swap_ms = candidate.detected.elapsed().as_millis() as u64;
                    let old = std::mem::replace(&mut self.active[i], candidate.plugin);
                    tracing::info!(
                        stage = %self.configs[i].name,
                        digest = self.active[i].digest(),
                        previous = old.digest(),
                        swap_ms,
                        prepared_ms = candidate.prepared_in.as_millis() as u64,
                        "activated a new plugin version"
                    );
                    let c = slot.since_active;
                    slot.previous_rejection_share =
                        (c.events > 0).then(|| StageCounts::share(c.rejected, c.events));
                    slot.previous = Some(old);
                    slot.since_active = StageCounts::default();
                    slot.on_probation = self.configs[i].rollback.first_events > 0;
                    slot.swapped_in = Some(swap_ms);
                    slot.swaps += 1;
                }
            }
        }
    }

    /// Whether a stage is on probation (the batch's records must be kept to re-process
    /// them if it is rolled back).
    pub fn on_probation(&self) -> bool {
        self.slots.iter().any(|s| s.on_probation)
    }

    /// Judges the versions on probation by what they did in this batch (`counts`, one per
    /// stage). Rolls back each one that broke its bounds and returns `true` if any was:
    /// the batch must then be processed again.
    pub fn judge(&mut self, counts: &[StageCounts]) -> bool {
        let mut rolled_back = false;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if !slot.on_probation {
                continue;
            }
            let bounds = &self.configs[i].rollback;
            let mut seen = slot.since_active;
            seen.add(&counts[i]);
            let failure = StageCounts::share(seen.failed, seen.events);
            let rejection = StageCounts::share(seen.rejected, seen.events);
            let mut why = None;
            if failure > bounds.max_failure_rate {
                why = Some(format!(
                    "failed on {} of its first {} events ({:.1}%, bound {:.1}%)",
                    seen.failed,
                    seen.events,
                    failure * 100.0,
                    bounds.max_failure_rate * 100.0
                ));
            } else if let Some(max) = bounds.max_rejection_rate
                && rejection > max
            {
                why = Some(format!(
                    "rejected {} of its first {} events ({:.1}%, bound {:.1}%)",
                    seen.rejected,
                    seen.events,
                    rejection * 100.0,
                    max * 100.0
                ));
            } else if let (Some(ratio), Some(before)) =
                (bounds.max_rejection_ratio, slot.previous_rejection_share)
                && rejection > before * ratio
                && seen.rejected > 0
            {
                why = Some(format!(
                    "rejected {:.1}% of its first {} events, over {ratio}× the previous version's {:.1}%",
                    rejection * 100.0,
                    seen.events,
                    before * 100.0
                ));
            }
            match (why, slot.previous.take()) {
                (Some(reason), Some(previous)) => {
                    let bad = slot.roll_back(&mut self.active[i], previous, &reason);
                    tracing::warn!(stage = %self.configs[i].name, digest = bad.digest(), back_to = self.active[i].digest(), %reason, "rolled back a new plugin version; the batch is processed again on the previous one");
                    rolled_back = true;
                }
                (_, previous) => {
                    slot.previous = previous;
                    if seen.events >= bounds.first_events {
                        tracing::info!(stage = %self.configs[i].name, digest = self.active[i].digest(), events = seen.events, "a new plugin version passed its probation");
                        slot.on_probation = false;
                    }
                }
            }
        }
        rolled_back
    }

    /// Records what a committed batch's stages did.
    pub fn committed(&mut self, counts: &[StageCounts]) {
        for (slot, c) in self.slots.iter_mut().zip(counts) {
            slot.since_active.add(c);
        }
    }

    /// Snapshot summary properties: per stage, the module's digest and the name and
    /// version it declares.
    pub fn summary_properties(&self) -> HashMap<String, String> {
        let mut props = HashMap::new();
        for plugin in &self.active {
            let (declared, version) = plugin.declared();
            let key = |what: &str| format!("sluice.stage.{}.{what}", plugin.name());
            props.insert(key("digest"), plugin.digest().to_string());
            props.insert(key("plugin"), declared);
            props.insert(key("version"), version);
        }
        props
    }

    /// Progress of each stage in a batch, with the shadow reports of the batch.
    pub fn progress(
        &self,
        counts: &[StageCounts],
        mut verdicts: Vec<BTreeMap<String, u64>>,
        mut shadows: Vec<Option<ShadowReport>>,
    ) -> BTreeMap<String, StageProgress> {
        shadows.resize(self.active.len(), None);
        verdicts.resize(self.active.len(), BTreeMap::new());
        self.active
            .iter()
            .zip(&self.slots)
            .zip(counts)
            .zip(shadows.into_iter().zip(verdicts))
            .map(|(((plugin, slot), c), (shadow, verdicts))| {
                let (declared, version) = plugin.declared();
                (
                    plugin.name().to_string(),
                    StageProgress {
                        digest: plugin.digest().to_string(),
                        plugin: declared,
                        version,
                        counts: *c,
                        verdicts,
                        micros_per_event: if c.events == 0 {
                            0.0
                        } else {
                            c.micros as f64 / c.events as f64
                        },
                        swapped_in: slot.swapped_in.is_some(),
                        swap_ms: slot.swapped_in,
                        shadow,
                        rolled_back: slot.rolled_back.clone(),
                        swaps: slot.swaps,
                        rollbacks: slot.rollbacks,
                        refused: slot.refused,
                    },
                )
            })
            .collect()
    }
}
