//! `sluice run`: the main job.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::Args;

use crate::batch::TriggerMode;
use crate::pipeline::config::{ConfigError, PipelineConfig};
use crate::pipeline::stages::Stages;
use crate::pipeline::{Pipeline, RunSummary};
use crate::plugin::Runtime;

/// The configuration reference printed by `sluice run --help`.
const REFERENCE: &str = "\
CONFIGURATION (TOML; `${VAR}` and `${VAR:-default}` are replaced from the environment
anywhere in the file; relative paths are relative to the file's folder)

[pipeline]      name (keys the offsets stored in the table)
                on-invalid = \"dead-letter\" | \"fail\"       threads = N (default: cores)
                fault-budget = \"5m\" (transient faults retried with backoff this long)
[source]        bootstrap-servers, topics = [..], group-id, mode = \"assign\" | \"group\"
                (group: several processes share the partitions; with [event-time]:
                one active process, standbys take over),
                starting-offsets = \"earliest\" | \"latest\" (brand-new pipelines only;
                latest is anchored in the table at the first start),
                on-data-loss = \"fail\" | \"continue\" (records deleted before they were
                read, a recreated topic, a replaced broker),
                fetch-timeout = \"60s\", properties = { librdkafka key = value } (every
                Kafka client gets them; an output's own properties win)
[trigger]       mode = \"interval\" | \"available-now\", interval = \"10s\",
                max-records = 100000, max-bytes = \"64MiB\"
[runtime]       chunk-size = 1024, max-stack = \"512KiB\", watch-interval = \"500ms\",
                enforce-call-timeout = true (false: faster plugins, no call-timeout; trusted only)
[[stages]]      name, plugin = \"x.wasm\", params = {..},
                limits = { memory, call-timeout, max-output }, grants = { clocks, env, read-only-dirs },
                watch = true (swap in a new version of the file between batches),
                samples = \"samples.jsonl\", allowed-digests = [..], shadow = \"candidate.wasm\",
                rollback = { first-events = 1000, max-failure-rate = 0.01,
                             max-rejection-rate, max-rejection-ratio }
[sink]          warehouse, namespace, table, columns = [{ name, type, required, doc }],
                partition-by = [\"day(event_time)\"], ingestion-time-column,
                target-file-size = \"128MiB\", zstd-level = 1
[sink.catalog]  type = \"sql\" | \"rest\", name = \"sluice\", uri (default: SQLite
                <warehouse>/catalog.db; or postgres://...; or the REST URL), properties = {..}
[sink.expire-snapshots]  older-than = \"1h\", retain-last = 10, every-commits = 10
                (expire old snapshots while running; absent: never)
[dead-letter]   topic, bootstrap-servers (default: the source's), ack-timeout = \"60s\",
                properties = {..}
[event-time]    field (the event time: RFC 3339, \"YYYY-MM-DD HH:MM:SS\" or epoch ms),
                max-delay = \"2m\", idle-timeout = \"30s\",
                late = \"dead-letter\" | \"topic\" | \"drop\", late-topic,
                late-topic-properties = {..},
                at-end = \"keep\" | \"flush\" (open windows after --available-now)
[dedup]         keys = [\"event_id\"]   (within the watermark)
[admin]         listen = \"127.0.0.1:9464\", token (default: $SLUICE_ADMIN_TOKEN),
                max-upload = \"32MiB\", recent-batches = 20   (HTTP: /healthz /status
                /metrics /stages, POST /stages/{name}/modules|activate|rollback)
[[windows]]     name, size = \"1m\", slide (default: size, tumbling), group-by = [..],
                aggregates = [{ name, fn = count | sum | min | max | avg | distinct-count,
                field }], emit = \"on-window-close\" | \"update\",
                kafka = { topic, properties }, iceberg = { table, namespace, partition-by }

Every field is documented in the README's configuration reference; full examples are
examples/retail-clickstream/pipeline.toml and examples/clickstream-analytics/pipeline.toml.";

/// Arguments of `sluice run`.
#[derive(Debug, Args)]
#[command(after_long_help = REFERENCE)]
pub struct RunArgs {
    /// The pipeline file (TOML). See below, or `examples/retail-clickstream/pipeline.toml`.
    #[arg(long, short, env = "SLUICE_CONFIG", value_name = "FILE")]
    pub config: PathBuf,
    /// Drain what the topics hold now, commit, and exit, whatever the file's trigger says.
    #[arg(long)]
    pub available_now: bool,
    /// Check the file (parse, substitute, validate), every Kafka client's properties
    /// against this build of librdkafka, and the plugins (load them, run their samples),
    /// and exit without connecting anywhere.
    #[arg(long)]
    pub check: bool,
    /// Start as a new pipeline on a table that has no mark of it, even if the table's
    /// history was cut by snapshot expiry (sluice otherwise refuses there, as it cannot
    /// tell whether the pipeline committed before). Needed once: the first commit leaves
    /// the pipeline's mark.
    #[arg(long)]
    pub new_pipeline: bool,
}

/// Loads every stage's plugin (and shadow) as `run` would, running its samples, without
/// connecting anywhere; a refusal is a configuration error. Returns the number of stages.
fn check_stages(config: &PipelineConfig, path: &std::path::Path) -> Result<usize, ConfigError> {
    let inconsistent = |message: String| ConfigError::Inconsistent {
        path: path.to_owned(),
        message,
    };
    let runtime =
        Runtime::new(config.runtime.clone()).map_err(|e| inconsistent(format!("runtime: {e}")))?;
    Stages::load(&runtime, &config.stages).map_err(|e| inconsistent(e.to_string()))?;
    Ok(config.stages.len())
}

/// Runs the pipeline until it ends (`available-now`) or `stop` is raised.
pub fn run(args: &RunArgs, stop: &AtomicBool) -> anyhow::Result<RunSummary> {
    let mut config = PipelineConfig::load(&args.config)?;
    if args.available_now {
        config.trigger.mode = TriggerMode::AvailableNow;
    }
    config.pipeline.assume_new = args.new_pipeline;
    if args.check {
        crate::pipeline::clients::check_pipeline(&config, &args.config)?;
        let stages = check_stages(&config, &args.config)?;
        println!(
            "{}: ok ({stages} stage{} loaded and checked)",
            args.config.display(),
            if stages == 1 { "" } else { "s" }
        );
        return Ok(RunSummary::default());
    }
    let base = super::base_folder(&args.config);
    let name = config.pipeline.name.clone();
    let mut pipeline =
        Pipeline::open(config, &base).with_context(|| format!("cannot start pipeline `{name}`"))?;
    let summary = pipeline
        .run(stop)
        .with_context(|| format!("pipeline `{name}` failed"))?;
    tracing::info!(
        pipeline = %name,
        batches = summary.batches,
        input_rows = summary.input_rows,
        rows_written = summary.rows_written,
        rows_dead_lettered = summary.rows_dead_lettered,
        rows_late = summary.rows_late,
        rows_deduplicated = summary.rows_deduplicated,
        window_rows = summary.window_rows,
        snapshots_expired = summary.snapshots_expired,
        snapshot_expiry_failures = summary.snapshot_expiry_failures,
        lookup_refresh_failures = summary.lookup_refresh_failures,
        stopped = summary.stopped,
        "pipeline finished"
    );
    Ok(summary)
}
