//! Configuration of plugin stages: which module, its parameters, its limits and what it may
//! reach.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::units::ByteSize;

/// One plugin stage of a pipeline.
///
/// ```toml
/// [[stages]]
/// name = "validate"
/// plugin = "udfs/target/wasm32-wasip2/release/clickstream_validator.wasm"
/// params = { allowed-event-types = "page_view,search,purchase" }
/// limits = { memory = "64MiB", call-timeout = "2s" }
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StageConfig {
    /// Name of the stage, used in logs, metrics and dead-letter headers. Unique in a pipeline.
    pub name: String,
    /// Path of the plugin's WebAssembly component (`.wasm`), relative to the configuration
    /// file's folder.
    pub plugin: PathBuf,
    /// Parameters passed to the plugin's `init`, as string keys and values.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Resource limits of each instance of the plugin.
    #[serde(default)]
    pub limits: Limits,
    /// What the plugin may reach outside its sandbox. Nothing by default.
    #[serde(default)]
    pub grants: Grants,
    /// Watch the plugin file while `sluice run` runs, and swap in a new version between two
    /// batches when it changes (after it is checked; see `samples`, `allowed-digests`).
    #[serde(default = "default_watch")]
    pub watch: bool,
    /// A JSON-lines file of sample events with the verdict each must get, relative to the
    /// configuration file: `{"event": {..}, "verdict": "kept" | "rewritten" | "rejected",
    /// "code": "..."}` (`code` only for `rejected`, optional). A new version that judges
    /// one differently is refused.
    #[serde(default)]
    pub samples: Option<PathBuf>,
    /// sha256 digests (hex) of the modules this stage may run; empty: any. A module not in
    /// the list is refused, at start and when swapped in.
    #[serde(default)]
    pub allowed_digests: Vec<String>,
    /// When a new version swapped in is rolled back by itself.
    #[serde(default)]
    pub rollback: RollbackConfig,
    /// A candidate module run beside `plugin` on the same events, in shadow mode: its
    /// verdicts are only compared and reported, never used. Relative to the configuration
    /// file.
    #[serde(default)]
    pub shadow: Option<PathBuf>,
}

const fn default_watch() -> bool {
    true
}

/// Automatic rollback of a version swapped in while running: over its first
/// `first-events` events, if it fails on (traps, limits) or rejects too many, sluice goes
/// back to the previous version and re-processes that batch on it.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RollbackConfig {
    /// Events a new version is on probation for; `0` turns automatic rollback off.
    #[serde(default = "default_first_events")]
    pub first_events: u64,
    /// Highest share of its events a new version may fail on (0 to 1).
    #[serde(default = "default_max_failure_rate")]
    pub max_failure_rate: f64,
    /// Highest share of its events a new version may reject (0 to 1); default: no bound.
    #[serde(default)]
    pub max_rejection_rate: Option<f64>,
    /// Highest rejection share as a multiple of the previous version's (e.g. `2.0`);
    /// default: no bound.
    #[serde(default)]
    pub max_rejection_ratio: Option<f64>,
}

const fn default_first_events() -> u64 {
    1000
}

const fn default_max_failure_rate() -> f64 {
    0.01
}

impl Default for RollbackConfig {
    fn default() -> Self {
        RollbackConfig {
            first_events: default_first_events(),
            max_failure_rate: default_max_failure_rate(),
            max_rejection_rate: None,
            max_rejection_ratio: None,
        }
    }
}

/// Limits on one plugin instance. Exceeding one fails the call with an error naming the
/// limit; the host goes on.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Limits {
    /// Most linear memory one instance may use, e.g. `"64MiB"`.
    #[serde(default = "default_memory")]
    pub memory: ByteSize,
    /// Longest one call (one chunk of events) may run before it is interrupted, e.g. `"5s"`.
    /// Measured in wall-clock time with a resolution of 10 ms.
    #[serde(default = "default_call_timeout", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub call_timeout: Duration,
    /// Most bytes of rewritten values and rejection messages that one call may return.
    #[serde(default = "default_max_output")]
    pub max_output: ByteSize,
}

const fn default_memory() -> ByteSize {
    ByteSize::mib(64)
}

const fn default_call_timeout() -> Duration {
    Duration::from_secs(5)
}

const fn default_max_output() -> ByteSize {
    ByteSize::mib(64)
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: default_memory(),
            call_timeout: default_call_timeout(),
            max_output: default_max_output(),
        }
    }
}

/// Capabilities a plugin may be given. A plugin never has network access.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Grants {
    /// Give the plugin the real wall and monotonic clocks. Without this grant both clocks
    /// read zero (the Unix epoch), so plugins stay deterministic on replay, and a sleep
    /// (`wasi:clocks` subscribe, then poll) returns at once. With it, one sleep lasts at
    /// most the stage's `call-timeout`, so the call's deadline still holds.
    #[serde(default)]
    pub clocks: bool,
    /// Give the plugin real randomness (`wasi:random`). Without this grant it reads a
    /// stream seeded from the module's digest: the same module gives the same numbers from
    /// a fresh instance, so replays stay exact.
    #[serde(default)]
    pub random: bool,
    /// Environment variables the plugin sees (none by default; the host's own environment
    /// is never passed through).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Host folders the plugin may read, mounted read-only at the same path inside the
    /// sandbox (for example reference data).
    #[serde(default)]
    pub read_only_dirs: Vec<PathBuf>,
    /// Lookup tables (`[[lookups]]` names) the plugin may read by key. A lookup of any
    /// other table gets a `not_granted` error naming the table and the stage. A stage
    /// granted a table that no `[[lookups]]` declares is refused at load
    /// ([`crate::plugin::lookup::check`]).
    #[serde(default)]
    pub lookups: Vec<String>,
}

/// Engine-wide settings shared by every plugin of a process.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RuntimeConfig {
    /// Deepest a plugin's WebAssembly stack may grow before the call fails with a stack
    /// overflow, e.g. `"512KiB"`.
    #[serde(default = "default_max_stack")]
    pub max_stack: ByteSize,
    /// Number of events sent to a plugin in one call.
    #[serde(default = "default_chunk_size")]
    pub chunk_size: usize,
    /// How often `sluice run` looks at the stages' plugin files for a new version.
    #[serde(default = "default_watch_interval", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub watch_interval: Duration,
    /// Whether the stages' `call-timeout` is enforced. Enforcing it compiles a deadline
    /// check into every loop and every function of every plugin (wasmtime's epoch
    /// interruption), about 15% of a plugin's time. Switch it off only when every
    /// plugin is trusted: a plugin stuck in a loop then stops the pipeline.
    #[serde(default = "default_enforce_call_timeout")]
    pub enforce_call_timeout: bool,
    /// Where compiled plugins are kept, so that a restart or a swap back to a version
    /// loads its machine code in milliseconds instead of compiling it again (seconds; a
    /// minute for a JavaScript plugin). A folder (relative to the configuration file), or
    /// `true` (the default: `$XDG_CACHE_HOME/sluice/compiled`, else
    /// `~/.cache/sluice/compiled`), or `false` (compile at every load). A folder that
    /// cannot be written only costs the compile time, with a warning.
    #[serde(default)]
    pub compile_cache: CompileCacheDir,
}

/// The `compile-cache` setting: on (the default folder), off, or a folder.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(
    untagged,
    expecting = "a folder, or true (the default folder), or false (no cache)"
)]
pub enum CompileCacheDir {
    /// `true`: the default folder; `false`: no cache.
    Default(bool),
    /// This folder.
    At(PathBuf),
}

impl Default for CompileCacheDir {
    fn default() -> Self {
        CompileCacheDir::Default(true)
    }
}

impl CompileCacheDir {
    /// The folder, if the cache is on: `$XDG_CACHE_HOME/sluice/compiled` (an absolute
    /// `XDG_CACHE_HOME`), else `$HOME/.cache/sluice/compiled`, for the default.
    pub fn folder(&self) -> Option<PathBuf> {
        match self {
            CompileCacheDir::Default(false) => None,
            CompileCacheDir::At(dir) => Some(dir.clone()),
            CompileCacheDir::Default(true) => {
                let absolute = |var: &str| {
                    std::env::var_os(var)
                        .map(PathBuf::from)
                        .filter(|p| p.is_absolute())
                };
                let cache_home = absolute("XDG_CACHE_HOME")
                    .or_else(|| absolute("HOME").map(|home| home.join(".cache")))?;
                Some(cache_home.join("sluice").join("compiled"))
            }
        }
    }
}

impl RuntimeConfig {
    /// Makes a relative `compile-cache` folder relative to `base` (the configuration
    /// file's folder).
    pub fn resolve_paths(&mut self, base: &Path) {
        if let CompileCacheDir::At(dir) = &mut self.compile_cache
            && dir.is_relative()
        {
            *dir = base.join(&*dir);
        }
    }
}

const fn default_enforce_call_timeout() -> bool {
    true
}

const fn default_watch_interval() -> Duration {
    Duration::from_millis(500)
}

const fn default_max_stack() -> ByteSize {
    ByteSize::kib(512)
}

const fn default_chunk_size() -> usize {
    1024
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            max_stack: default_max_stack(),
            chunk_size: default_chunk_size(),
            watch_interval: default_watch_interval(),
            enforce_call_timeout: default_enforce_call_timeout(),
            compile_cache: CompileCacheDir::default(),
        }
    }
}

/// A file of stages, as read by `sluice try --stages FILE`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StagesFile {
    /// Engine-wide plugin settings.
    #[serde(default)]
    pub runtime: RuntimeConfig,
    /// The stages, run in order: an event rejected by one stage is not seen by the next.
    pub stages: Vec<StageConfig>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_units() {
        let stage: StageConfig = toml::from_str(
            r#"
            name = "v"
            plugin = "v.wasm"
            limits = { memory = "16MiB", call-timeout = "250ms" }
            grants = { env = { REGION = "eu" } }
            "#,
        )
        .unwrap();
        assert_eq!(stage.limits.memory, ByteSize::mib(16));
        assert_eq!(stage.limits.call_timeout, Duration::from_millis(250));
        assert_eq!(stage.limits.max_output, default_max_output());
        assert!(!stage.grants.clocks);
        assert_eq!(stage.grants.env["REGION"], "eu");
    }

    #[test]
    fn the_compile_cache_is_a_folder_or_a_switch() {
        let parse = |text: &str| toml::from_str::<RuntimeConfig>(text);
        assert_eq!(
            parse("").unwrap().compile_cache,
            CompileCacheDir::Default(true)
        );
        assert_eq!(
            parse("compile-cache = false")
                .unwrap()
                .compile_cache
                .folder(),
            None
        );
        let mut config = parse("compile-cache = \"cache\"").unwrap();
        config.resolve_paths(Path::new("/etc/sluice"));
        assert_eq!(
            config.compile_cache.folder(),
            Some(PathBuf::from("/etc/sluice/cache"))
        );
        let err = parse("compile-cache = 3").unwrap_err();
        assert!(err.to_string().contains("a folder, or true"), "{err}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = toml::from_str::<StageConfig>("name = \"v\"\nplugin = \"v.wasm\"\nparam = {}\n")
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `param`"), "{err}");
        let err = toml::from_str::<StageConfig>(
            "name = \"v\"\nplugin = \"v.wasm\"\nlimits = { call-timeout = \"5 sec\" }\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown unit"), "{err}");
    }
}
