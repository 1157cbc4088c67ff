//! Helpers for sluice's integration tests and benchmarks. The plugins they use are built
//! from `udfs/` by `build.rs`; their paths are in [`plugins`]. A pipeline under test, run
//! as a `sluice` process against a real broker, is a [`fixture::Setup`]; the services it
//! needs are in [`broker`], [`postgres`], [`registry`] (a Schema Registry) and [`pyiceberg`]
//! (and [`spark`], a third reader).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sluice::cli::produce::ProduceSummary;
use sluice::cli::{self, Command};
use sluice::plugin::config::{CompileCacheDir, Grants, Limits, RuntimeConfig};
use sluice::plugin::{Chunk, Plugin, PluginError, Runtime};
use sluice::record::Record;

pub mod broker;
pub mod fixture;
pub mod measure;
pub mod mock;
pub mod postgres;
pub mod pyiceberg;
pub mod registry;
pub mod s3;
/// Spark (Java Iceberg) as a reader of the tables the tests write, beside pyiceberg.
pub mod spark;
pub mod stunnel;
pub mod tls;

/// Paths of the plugin components built from source.
pub mod plugins {
    include!(concat!(env!("OUT_DIR"), "/plugins.rs"));
}

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A TCP port on the loopback interface that was free a moment ago, for a server the test
/// starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One runtime shared by a test binary (the engine and its compiled code are shared), on
/// the suite's compile cache ([`compile_cache`]).
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        Runtime::new(RuntimeConfig {
            compile_cache: CompileCacheDir::At(compile_cache()),
            ..RuntimeConfig::default()
        })
        .expect("runtime")
    })
}

/// The `XDG_CACHE_HOME` of the `sluice` processes the tests start:
/// `target/<profile>/test-cache`, beside the binary under test, so that `cargo clean`
/// clears it and nothing is written to the home folder.
pub fn cache_home() -> PathBuf {
    fixture::sluice_binary()
        .parent()
        .expect("the binary's folder")
        .join("test-cache")
}

/// The compile cache the suite shares, in-process runtimes and `sluice` processes alike
/// (the default folder under [`cache_home`]): each plugin is compiled once per build of
/// it, not once per test (a JavaScript plugin takes a minute).
pub fn compile_cache() -> PathBuf {
    cache_home().join("sluice").join("compiled")
}

/// Loads a plugin with default limits and no grants.
pub fn load(path: &str, params: &[(&str, &str)]) -> Result<Plugin, PluginError> {
    load_with(path, params, Limits::default(), Grants::default())
}

/// Loads a plugin with the given limits and grants.
pub fn load_with(
    path: &str,
    params: &[(&str, &str)],
    limits: Limits,
    grants: Grants,
) -> Result<Plugin, PluginError> {
    let name = Path::new(path)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let params = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    runtime().load_file(&name, Path::new(path), params, limits, grants)
}

/// Records with these values, at offsets 0, 1, 2… of partition 0 of topic `clicks`.
pub fn records<S: AsRef<[u8]>>(values: &[S]) -> Vec<Record> {
    let topic: Arc<str> = "clicks".into();
    values
        .iter()
        .enumerate()
        .map(|(i, v)| Record::with_value(topic.clone(), i as i64, v.as_ref().to_vec()))
        .collect()
}

/// [`records`] with these values laid out as chunks of at most `size` events, as a
/// pipeline's batch crosses into a plugin. As in a pipeline whose stages read the host's reading of the fields (contract `0.2.2`),
/// each value's fields are read once first ([`sluice::encode::index_fields`]).
pub fn chunks<S: AsRef<[u8]>>(values: &[S], size: usize) -> Vec<Chunk> {
    let mut records = records(values);
    sluice::encode::index_fields(&mut records);
    let refs: Vec<&Record> = records.iter().collect();
    refs.chunks(size.max(1))
        .map(|c| Chunk::from_records(c.iter().copied()))
        .collect()
}

/// Runs `sluice produce --bootstrap-servers BOOTSTRAP --topic TOPIC --create-topic EXTRA…`
/// in this process, through the command-line parser; panics if it fails.
pub fn produce(bootstrap: &str, topic: &str, extra: &[&str]) -> ProduceSummary {
    let mut args = vec![
        "sluice",
        "produce",
        "--bootstrap-servers",
        bootstrap,
        "--topic",
        topic,
        "--create-topic",
    ];
    args.extend_from_slice(extra);
    let invocation = cli::parse(args).unwrap();
    let Command::Produce(produce) = &invocation.cli.command else {
        unreachable!("parsed as produce")
    };
    cli::produce::run(produce, &|| false).unwrap()
}

/// The retail tutorial's pipeline, `examples/retail-clickstream/pipeline.toml`.
pub fn example_config() -> PathBuf {
    repo_root().join("examples/retail-clickstream/pipeline.toml")
}

/// The retail tutorial's five events and five invalid ones, as JSON lines.
pub fn retail_events_file() -> PathBuf {
    repo_root().join("examples/retail-clickstream/events.jsonl")
}

/// The five events of the retail tutorial, as JSON lines (the first five lines of
/// `examples/plugins/events.jsonl`).
pub fn seed_events() -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join("examples/plugins/events.jsonl")).unwrap();
    text.lines().take(5).map(str::to_string).collect()
}

/// The `[sink] columns` of a table of the generator's retail events (those of the retail
/// example), for tests and benchmarks whose pipeline files declare them.
pub const RETAIL_COLUMNS: &str = r#"columns = [
  { name = "event_id", type = "string" },
  { name = "event_time", type = "timestamptz" },
  { name = "user_id", type = "string" },
  { name = "session_id", type = "string" },
  { name = "event_type", type = "string" },
  { name = "page_url", type = "string" },
  { name = "referrer_url", type = "string" },
  { name = "search_query", type = "string" },
  { name = "product_id", type = "string" },
  { name = "product_name", type = "string" },
  { name = "category", type = "string" },
  { name = "cart_id", type = "string" },
  { name = "order_id", type = "string" },
  { name = "quantity", type = "int" },
  { name = "price", type = "decimal(10,2)" },
  { name = "device_type", type = "string" },
  { name = "browser", type = "string" },
  { name = "traffic_source", type = "string" },
]"#;
