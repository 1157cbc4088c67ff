//! Plugins: sandboxed WebAssembly components that keep, rewrite or reject events.
//!
//! - [`Runtime`]: one per process. Owns the wasmtime engine (compiled code is shared), the
//!   linker with the host's imports, the epoch ticker that enforces call deadlines, and
//!   the [`cache`] of compiled components that spares a restart or a swap the compiling.
//! - [`Plugin`]: one loaded component: compiled once, checked against the WIT world,
//!   initialised once at load to refuse a plugin whose `init` fails. It is `Send + Sync`
//!   and cheap to clone; calls from several threads each get their own instance from a
//!   pool, so a stage runs on all cores.
//! - [`lookup`]: the `lookup` import: a plugin reads the batch's lookup tables it is
//!   granted, by key; and the load-time check of those grants.
//! - [`chain`]: runs several plugins in order over records, isolating the events that make
//!   a plugin fail.
//!
//! A plugin that traps, exceeds a limit or breaks the contract never takes the host down:
//! the call returns [`PluginError::Call`] naming the plugin, the [`Failure`] (and the limit)
//! and the events, the broken instance is thrown away, and the next call gets a fresh one.
//! Swapping a plugin is replacing one [`Plugin`] value with another between two batches.

mod bindings;
pub mod cache;
pub mod chain;
pub mod chunk;
pub mod config;
mod contract;
mod error;
pub mod lookup;
mod sandbox;
mod scan;
pub mod shadow;
pub mod swap;

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, Store, Trap};

pub use self::bindings::WIT_VERSION;
use self::bindings::sluice::plugin::scan::ChunkFields;
pub use self::cache::{CompileCache, Origin};
pub use self::chunk::{Chunk, Rejection, Verdict};
use self::config::{Grants, Limits, RuntimeConfig};
use self::contract::{Pre, Processor};
pub use self::error::{EventSpan, Failure, PluginError};
use self::sandbox::{Sandbox, StoreState};
use crate::lookup::Current;
use crate::record::Record;
use crate::units::ByteSize;

/// Set (to anything), the environment variable that makes the plugins' machine code
/// visible to `perf` (a perf map per process; see the development chapter).
pub const PERF_MAP: &str = "SLUICE_WASM_PERF_MAP";

/// Resolution of call deadlines.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The engine shared by all plugins of a process.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<StoreState>>,
    config: RuntimeConfig,
    /// The lookup tables plugin calls see; the pipeline sets them between batches.
    lookups: Current,
    /// Compiled components kept between runs.
    cache: Arc<CompileCache>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Sets up the engine, the host imports and (when call timeouts are enforced) the
    /// deadline ticker.
    pub fn new(config: RuntimeConfig) -> Result<Self, PluginError> {
        let engine_error = |e: wasmtime::Error| PluginError::Engine(format!("{e:#}"));
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(config.enforce_call_timeout)
            .max_wasm_stack(config.max_stack.as_usize())
            .cranelift_opt_level(wasmtime::OptLevel::Speed);
        if std::env::var_os(PERF_MAP).is_some() {
            // For `perf`: names the plugins' compiled functions in /tmp/perf-PID.map.
            wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&wasm).map_err(engine_error)?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(engine_error)?;
        sandbox::bound_sleeps(&mut linker).map_err(engine_error)?;
        contract::add_to_linker(&mut linker).map_err(engine_error)?;

        if config.enforce_call_timeout {
            let weak = engine.weak();
            std::thread::Builder::new()
                .name("sluice-epoch".into())
                .spawn(move || {
                    while let Some(engine) = weak.upgrade() {
                        engine.increment_epoch();
                        drop(engine);
                        std::thread::sleep(EPOCH_TICK);
                    }
                })
                .map_err(|e| {
                    PluginError::Engine(format!("cannot start the deadline ticker: {e}"))
                })?;
        } else {
            tracing::warn!(
                "Plugin call timeouts are not enforced ([runtime] enforce-call-timeout = false): \
                 a plugin stuck in a loop stops the pipeline."
            );
        }

        let cache = Arc::new(CompileCache::new(&engine, config.compile_cache.folder()));
        Ok(Runtime {
            engine,
            linker: Arc::new(linker),
            config,
            lookups: Current::default(),
            cache,
        })
    }

    /// The runtime's settings.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// The cache of compiled components, and how often it was used.
    pub fn compile_cache(&self) -> &CompileCache {
        &self.cache
    }

    /// The lookup tables plugin calls see: set between batches, never during one.
    pub fn lookups(&self) -> &Current {
        &self.lookups
    }

    /// Loads the plugin of a configured stage.
    pub fn load_stage(&self, stage: &config::StageConfig) -> Result<Plugin, PluginError> {
        let params = stage
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.load_file(
            &stage.name,
            &stage.plugin,
            params,
            stage.limits.clone(),
            stage.grants.clone(),
        )
    }

    /// Reads and loads a plugin file. See [`Runtime::load`].
    pub fn load_file(
        &self,
        name: &str,
        path: &Path,
        params: Vec<(String, String)>,
        limits: Limits,
        grants: Grants,
    ) -> Result<Plugin, PluginError> {
        let bytes = std::fs::read(path).map_err(|error| PluginError::Read {
            plugin: name.to_string(),
            path: path.display().to_string(),
            error,
        })?;
        self.load(name, &bytes, params, limits, grants)
    }

    /// Compiles a component (or finds it in the compile cache), checks that it implements
    /// this host's world, and initialises one instance with `params`. A plugin whose `init`
    /// fails is refused here, with its message.
    pub fn load(
        &self,
        name: &str,
        wasm: &[u8],
        params: Vec<(String, String)>,
        limits: Limits,
        grants: Grants,
    ) -> Result<Plugin, PluginError> {
        let digest = digest_of(wasm);
        let (component, origin) = self
            .cache
            .component(&self.engine, name, &digest, wasm)
            .map_err(|e| PluginError::Compile {
                plugin: name.to_string(),
                message: format!("{e:#}"),
            })?;
        let incompatible = |e: wasmtime::Error| PluginError::Incompatible {
            plugin: name.to_string(),
            version: WIT_VERSION,
            message: format!("{e:#}"),
        };
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(incompatible)?;
        let pre = Pre::new(pre).map_err(incompatible)?;

        let shared = Arc::new(Shared {
            name: name.into(),
            digest,
            origin,
            info: OnceLock::new(),
            pre,
            params,
            limits,
            grants,
            lookups: self.lookups.clone(),
            max_stack: self.config.max_stack,
            idle: Mutex::new(Vec::new()),
        });
        let plugin = Plugin { shared };
        let mut first = plugin.instantiate()?;
        let info = first.describe()?;
        tracing::info!(plugin = name, name = %info.0, version = %info.1, digest = %plugin.digest(), "Loaded plugin.");
        let _ = plugin.shared.info.set(info);
        plugin.release(first);
        Ok(plugin)
    }
}

/// A loaded plugin, ready to judge chunks from any thread.
#[derive(Clone)]
pub struct Plugin {
    shared: Arc<Shared>,
}

struct Shared {
    name: Arc<str>,
    digest: String,
    /// Whether the code was compiled at load or read from the cache.
    origin: Origin,
    /// Name and version the plugin declares, set once at load.
    info: OnceLock<(String, String)>,
    pre: Pre,
    params: Vec<(String, String)>,
    limits: Limits,
    grants: Grants,
    /// Where each `process` call reads the batch's lookup tables from.
    lookups: Current,
    max_stack: ByteSize,
    /// Initialised instances waiting for a call.
    idle: Mutex<Vec<Instance>>,
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.shared.name)
            .field("digest", &self.shared.digest)
            .finish_non_exhaustive()
    }
}

/// One instance of a plugin: its own store, memory and state.
struct Instance {
    store: Store<StoreState>,
    bindings: Processor,
}

impl Instance {
    fn describe(&mut self) -> Result<(String, String), PluginError> {
        let plugin = self.store.data().plugin.clone();
        self.bindings
            .describe(&mut self.store)
            .map_err(|e| PluginError::Init {
                plugin: plugin.to_string(),
                message: format!("describe failed: {e:#}"),
            })
    }
}

impl Plugin {
    /// The plugin (stage) name given at load.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The sha256 of the component's bytes, in hex: the plugin's identity.
    pub fn digest(&self) -> &str {
        &self.shared.digest
    }

    /// Whether the plugin's code was compiled at load or read from the compile cache.
    pub fn origin(&self) -> Origin {
        self.shared.origin
    }

    /// The name and version the plugin declares about itself.
    pub fn declared(&self) -> (String, String) {
        self.shared.info.get().cloned().unwrap_or_default()
    }

    /// Whether the plugin reads the host's reading of its events' fields (the `scan`
    /// import, contract `0.2.2`): then the host reads them once for all stages and the
    /// encoder ([`crate::encode::index_fields`]).
    pub fn scans(&self) -> bool {
        self.shared.pre.scans()
    }

    /// The plugin's limits.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// Judges records: one verdict per record, in order. Lays them out as a [`Chunk`] first;
    /// see [`Plugin::process`].
    /// The host's reading of their fields is laid out only for a plugin that reads it.
    pub fn process_records(&self, records: &[&Record]) -> Result<Vec<Verdict>, PluginError> {
        let (chunk, fields) = Chunk::laid_out(records.iter().copied(), self.scans());
        self.call(&chunk, fields)
    }

    /// Judges a chunk: one verdict per event, in order. On failure nothing is judged and the
    /// error says why and for which events.
    pub fn process(&self, chunk: &Chunk) -> Result<Vec<Verdict>, PluginError> {
        self.call(chunk, self.scans().then(|| chunk.fields()))
    }

    /// Judges a chunk, with the reading of its fields the `scan` import hands over.
    fn call(
        &self,
        chunk: &Chunk,
        fields: Option<ChunkFields>,
    ) -> Result<Vec<Verdict>, PluginError> {
        if chunk.is_empty() {
            return Ok(Vec::new());
        }
        let mut instance = self.checkout()?;
        let limits = &self.shared.limits;
        instance
            .store
            .set_epoch_deadline(deadline_ticks(limits.call_timeout));
        // The tables are read once per call: every lookup of the call sees one version.
        let lookups = self.shared.lookups.get();
        instance.store.data_mut().lookups.begin(lookups);
        // A refusal counts for the call it happened in, not for later ones.
        instance.store.data_mut().limiter.hit = false;
        let state = instance.store.data_mut();
        (state.fields, state.events) = (fields, chunk.len());
        let result = instance.bindings.process(&mut instance.store, &chunk.wire);
        let state = instance.store.data_mut();
        (state.fields, state.events) = (None, 0);
        instance.store.data_mut().lookups.end();
        let failure = match result {
            Ok(Ok(verdicts)) => match chunk::decode(verdicts, chunk.len(), limits.max_output) {
                Ok(verdicts) => {
                    self.release(instance);
                    return Ok(verdicts);
                }
                Err(failure) => failure,
            },
            Ok(Err(message)) => self.guest_error(&instance, message),
            Err(error) => self.classify(&mut instance, error),
        };
        let error = PluginError::Call {
            plugin: self.shared.name.to_string(),
            failure,
            events: chunk.span(),
        };
        tracing::debug!(%error, "Plugin call failed; its instance is discarded.");
        Err(error)
    }

    /// Creates and initialises a fresh instance.
    fn instantiate(&self) -> Result<Instance, PluginError> {
        let s = &self.shared;
        let init_error = |message: String| PluginError::Init {
            plugin: s.name.to_string(),
            message,
        };
        let state = StoreState::new(Sandbox {
            plugin: s.name.clone(),
            grants: &s.grants,
            memory: s.limits.memory,
            call_timeout: s.limits.call_timeout,
            seed: u64::from_str_radix(&s.digest[..16], 16).unwrap_or_default(),
        })
        .map_err(|e| init_error(e.to_string()))?;
        let mut store = Store::new(s.pre.engine(), state);
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(deadline_ticks(s.limits.call_timeout));
        let bindings = match s.pre.instantiate(&mut store) {
            Ok(b) => b,
            Err(_) if store.data().limiter.hit => {
                let failure = Failure::Memory {
                    limit: s.limits.memory,
                };
                return Err(init_error(format!("cannot instantiate: {failure}")));
            }
            Err(e) => return Err(init_error(format!("cannot instantiate: {e:#}"))),
        };
        let mut instance = Instance { store, bindings };
        instance
            .store
            .set_epoch_deadline(deadline_ticks(s.limits.call_timeout));
        match instance.bindings.init(&mut instance.store, &s.params) {
            Ok(Ok(())) => Ok(instance),
            Ok(Err(message)) => Err(init_error(match self.guest_error(&instance, message) {
                Failure::Plugin { message } => message,
                failure => failure.to_string(),
            })),
            Err(e) => {
                let failure = self.classify(&mut instance, e);
                Err(init_error(failure.to_string()))
            }
        }
    }

    fn checkout(&self) -> Result<Instance, PluginError> {
        let idle = self
            .shared
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        match idle {
            Some(instance) => Ok(instance),
            None => self.instantiate(),
        }
    }

    fn release(&self, instance: Instance) {
        self.shared
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(instance);
    }

    /// The failure of an error the plugin returned: the memory limit if a growth was
    /// refused during the call (a plugin that catches its failed allocation, as a
    /// JavaScript engine does, answers "out of memory" rather than trapping), else the
    /// plugin's own error.
    fn guest_error(&self, instance: &Instance, message: String) -> Failure {
        if instance.store.data().limiter.hit {
            tracing::debug!(plugin = %self.shared.name, %message, "The plugin's error follows a refused memory growth.");
            return Failure::Memory {
                limit: self.shared.limits.memory,
            };
        }
        Failure::Plugin { message }
    }

    /// Turns a trap into the failure it stands for.
    fn classify(&self, instance: &mut Instance, error: wasmtime::Error) -> Failure {
        let limits = &self.shared.limits;
        let stderr = instance.store.data().stderr.take();
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => Failure::Deadline {
                limit: limits.call_timeout,
            },
            Some(Trap::StackOverflow) => Failure::StackOverflow {
                limit: self.shared.max_stack,
            },
            _ if instance.store.data().limiter.hit => Failure::Memory {
                limit: limits.memory,
            },
            trap => {
                let what = trap.map_or_else(|| format!("{error:#}"), |t| t.to_string());
                let message = if stderr.is_empty() {
                    what
                } else {
                    format!("{what}; plugin stderr: {stderr}")
                };
                Failure::Trap { message }
            }
        }
    }
}

fn deadline_ticks(timeout: Duration) -> u64 {
    (timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64 + 1
}

/// The sha256 of a module, in hex: how sluice names a plugin version.
pub fn digest_of(wasm: &[u8]) -> String {
    hex::encode(Sha256::digest(wasm))
}
