//! `sluice run`: the main job.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};

use anyhow::Context;
use clap::Args;

use crate::admin::health::Health;
use crate::batch::TriggerMode;
use crate::pipeline::config::repartition::Stage;
use crate::pipeline::config::{ConfigError, PipelineConfig};
use crate::pipeline::stages::Stages;
use crate::pipeline::{Pipeline, RunSummary};
use crate::plugin::Runtime;
use crate::sink::topic::KafkaTopics;

/// The summary of a pipeline file printed by `sluice run --help`: its sections and their
/// keys. What each key means, and its default, is in the book's configuration reference.
const REFERENCE: &str = "\
PIPELINE FILE (TOML; `${VAR}` and `${VAR:-default}` are replaced from the environment;
relative paths are relative to the file's folder). Sections and their keys:

[pipeline]              name, on-invalid, threads, fault-budget
[source]                bootstrap-servers, topics, group-id, mode, starting-offsets,
                        on-data-loss, fetch-timeout, properties, format,
                        schema-file, message, keyed-by, partitioner
[source.schema-registry] url, username, password, token, ca-cert, timeout,
                        cache-capacity
[trigger]               mode, interval, max-records, max-bytes
[runtime]               chunk-size, max-stack, watch-interval, enforce-call-timeout,
                        compile-cache
[[stages]]              name, plugin, params, limits (memory, call-timeout, max-output),
                        grants (clocks, random, env, read-only-dirs, lookups), watch,
                        samples, allowed-digests, shadow, rollback (first-events,
                        max-failure-rate, max-rejection-rate, max-rejection-ratio)
[sink]                  warehouse, namespace, table, columns, partition-by,
                        ingestion-time-column, unknown-fields, max-columns,
                        max-nesting-depth, infer-timestamps, target-file-size,
                        zstd-level, commit-interval, min-commit-rows
[sink.s3]               endpoint, region, path-style, access-key-id, secret-access-key,
                        session-token
[sink.catalog]          type, name, uri, token, credential, oauth2-server-uri, scope,
                        ca-cert, properties
[sink.expire-snapshots] older-than, retain-last, every-commits
[sink.compact]          enabled, every, target-file-size, min-input-files,
                        max-bytes-per-run, sort-by
[dead-letter]           topic, bootstrap-servers, ack-timeout, properties
[event-time]            field, max-delay, idle-timeout, max-future, late, late-topic,
                        late-topic-properties, at-end, scale-out
[dedup]                 keys
[[windows]]             name, size, slide, gap, group-by, aggregates (count, sum, min,
                        max, avg, distinct-count), emit (on-window-close, update), kafka,
                        iceberg
[[joins]]               name, right-topic, right-time-field, right-max-delay, on, right-on,
                        kind, before, after, left-fields, right-fields, max-rows, kafka,
                        iceberg
[[lookups]]             name, topic, or table with key-column; max-bytes,
                        refresh-interval
[admin]                 listen, token, max-upload, recent-batches, max-connections,
                        idle-timeout, state-dir, stuck-after

Every key, its default and its meaning: the book's configuration reference,
docs/src/reference/configuration.md (built with `mdbook build docs`); how the file is read
and checked: docs/src/reference/pipeline-files.md. Full examples:
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
    let plan = config.plan();
    let summary = if plan.len() == 1 {
        let mut pipeline = Pipeline::open(config, &base)
            .with_context(|| format!("cannot start pipeline `{name}`"))?;
        pipeline
            .run(stop)
            .with_context(|| format!("pipeline `{name}` failed"))?
    } else {
        run_staged(&config, plan, &base, stop)?
    };
    tracing::info!(
        pipeline = %name,
        batches = summary.batches,
        input_rows = summary.input_rows,
        rows_written = summary.rows_written,
        rows_dead_lettered = summary.rows_dead_lettered,
        fields_dropped = summary.fields_dropped,
        columns_added = summary.columns_added,
        schema_retries = summary.schema_retries,
        rows_late = summary.rows_late,
        rows_deduplicated = summary.rows_deduplicated,
        window_rows = summary.window_rows,
        repartition_events_sent = summary.repartition.sent,
        repartition_events_taken = summary.repartition.taken,
        repartition_events_sent_again = summary.repartition.again,
        snapshots_expired = summary.snapshots_expired,
        snapshot_expiry_failures = summary.snapshot_expiry_failures,
        compactions = summary.compaction.runs,
        compaction_files_rewritten = summary.compaction.files_rewritten,
        compaction_failures = summary.compaction.failures,
        lookup_refresh_failures = summary.lookup_refresh_failures,
        stopped = summary.stopped,
        "pipeline finished"
    );
    Ok(summary)
}

/// A pipeline whose operators cross repartition topics (see
/// [`crate::pipeline::config::repartition`]): each stage of its `plan` on a thread of its
/// own, running as soon as it is open (it opens once the stage before it is, which creates
/// the topic it reads); the first to fail stops the others. With `--available-now`, the
/// stages run one after the other, each draining what the one before sent. Returns stage
/// one's summary, with what the later stages wrote.
fn run_staged(
    config: &PipelineConfig,
    plan: Vec<Stage>,
    base: &std::path::Path,
    stop: &AtomicBool,
) -> anyhow::Result<RunSummary> {
    let open = |stage: &Stage| {
        let name = &stage.config.pipeline.name;
        Pipeline::open(stage.config.clone(), base)
            .and_then(|mut p| p.take_stage(&KafkaTopics, stage).map(|()| p))
            .with_context(|| format!("cannot start pipeline `{name}`"))
    };
    let summaries = if config.trigger.mode == TriggerMode::AvailableNow {
        let mut pipelines = Vec::new();
        for stage in &plan {
            pipelines.push((stage.config.pipeline.name.clone(), open(stage)?));
        }
        let each = pipelines.into_iter().map(|(name, mut pipeline)| {
            let summary = pipeline.run(stop);
            summary.with_context(|| format!("pipeline `{name}` failed"))
        });
        each.collect::<anyhow::Result<Vec<_>>>()?
    } else {
        concurrently(&plan, &open, stop)?
    };
    let mut summaries = summaries.into_iter();
    let mut summary = summaries.next().unwrap_or_default();
    for later in summaries {
        summary.window_rows += later.window_rows;
        summary.rows_written += later.rows_written;
        summary.rows_deduplicated += later.rows_deduplicated;
        summary.rows_late += later.rows_late;
        summary.rows_dead_lettered += later.rows_dead_lettered;
        summary.repartition.add(&later.repartition);
    }
    Ok(summary)
}

/// What each stage hands the next once open: where stage one's admin API watches the
/// later stages (the first is the next one's), if it has one.
type Watched = Option<Vec<Arc<Health>>>;

/// Stage `i` of `plan`, on its thread: opened once the stage before it is (`after` says
/// so), then tells the next (`opened`), then runs until `halt`. Stage one's admin API
/// answers for the later stages' health.
fn run_stage(
    plan: &[Stage],
    i: usize,
    after: Option<Receiver<Watched>>,
    opened: Sender<Watched>,
    open: &(dyn Fn(&Stage) -> anyhow::Result<Pipeline> + Sync),
    halt: &AtomicBool,
) -> anyhow::Result<RunSummary> {
    let name = &plan[i].config.pipeline.name;
    let mut watched = match after {
        Some(after) => after
            .recv()
            .map_err(|_| anyhow::anyhow!("pipeline `{name}`: an earlier stage did not start"))?,
        None => None,
    };
    let mut pipeline = open(&plan[i])?;
    if i == 0 {
        let later = plan[1..].iter().map(|s| &s.config.pipeline.name);
        watched = pipeline
            .admin()
            .map(|admin| later.map(|n| admin.watch_stage(n)).collect());
    } else if let Some(health) = watched
        .as_mut()
        .filter(|w| !w.is_empty())
        .map(|w| w.remove(0))
    {
        pipeline.report_health(health);
    }
    let _ = opened.send(watched);
    let ran = pipeline.run(halt);
    ran.with_context(|| format!("pipeline `{name}` failed"))
}

/// Runs the stages of `plan` on threads of their own until `stop` is raised or one fails
/// (which stops the others); their summaries, in order. Each stage is opened (`open`) on
/// its thread once the stage before it is open, and runs at once: a stage does not wait
/// for the later ones to join their groups.
fn concurrently(
    plan: &[Stage],
    open: &(dyn Fn(&Stage) -> anyhow::Result<Pipeline> + Sync),
    stop: &AtomicBool,
) -> anyhow::Result<Vec<RunSummary>> {
    let halt = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if stop.load(Ordering::Relaxed) {
                    halt.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
        let mut before: Option<Receiver<Watched>> = None;
        let mut handles = Vec::new();
        for i in 0..plan.len() {
            let (opened, next) = std::sync::mpsc::channel();
            let after = before.replace(next);
            let halt = &halt;
            handles.push(scope.spawn(move || {
                let result = run_stage(plan, i, after, opened, open, halt);
                if result.is_err() {
                    halt.store(true, Ordering::Relaxed);
                }
                result
            }));
        }
        let joined = |h: std::thread::ScopedJoinHandle<'_, anyhow::Result<RunSummary>>| {
            h.join()
                .map_err(|_| anyhow::anyhow!("a pipeline's thread panicked"))?
        };
        let summaries: Vec<_> = handles.into_iter().map(joined).collect();
        done.store(true, Ordering::Relaxed);
        summaries.into_iter().collect()
    })
}

#[cfg(test)]
mod tests {
    use super::REFERENCE;
    use crate::pipeline::config::reference;

    /// Whether `word` stands in `text` as a whole key (not inside a longer one).
    fn names(text: &str, word: &str) -> bool {
        let key = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
        text.match_indices(word).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + word.len()..].chars().next();
            !before.is_some_and(key) && !after.is_some_and(key)
        })
    }

    /// `run --help` cannot go stale: every section of the generated reference, every key
    /// of a top-level section and the name of every sub-table are in its summary.
    #[test]
    fn the_help_summary_names_every_section_and_key_of_the_config_types() {
        let mut missing = Vec::new();
        let mut section = String::new();
        for line in reference::render().lines() {
            if let Some(header) = line.strip_prefix("## `").and_then(|h| h.strip_suffix('`')) {
                section = header.to_string();
                let name = header.trim_matches(|c| c == '[' || c == ']');
                let shown = match name.split_once('.') {
                    None => REFERENCE.contains(&format!("\n{header}")),
                    Some((_, table)) => names(REFERENCE, table),
                };
                if !shown {
                    missing.push(header.to_string());
                }
            } else if let Some(row) = line.strip_prefix("| `") {
                let key = row.split('`').next().unwrap_or_default();
                if !section.contains('.') && !names(REFERENCE, key) {
                    missing.push(format!("{section} {key}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "`sluice run --help` does not name: {missing:?}"
        );
    }
}
