//! `sluice show`: what a pipeline's table and dead-letter topic hold.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use crate::pipeline::config::PipelineConfig;
use crate::sink::deadletter;
use crate::sink::iceberg::IcebergSink;

/// Arguments of `sluice show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The pipeline file (TOML), as given to `sluice run`.
    #[arg(long, short, env = "SLUICE_CONFIG", value_name = "FILE")]
    pub config: PathBuf,
    /// Rows and dead letters to print (0: all).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub limit: usize,
    /// Print one JSON document with every row and dead letter, for programs.
    #[arg(long)]
    pub json: bool,
}

/// Prints the table's rows and the dead-letter records to `out`.
pub fn run(args: &ShowArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let config = PipelineConfig::load(&args.config)?;
    let base = args
        .config
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let sink = IcebergSink::open(config.sink.clone(), &base).context("cannot open the table")?;
    let rows = sink.read_rows()?;
    let summary = sink
        .table()
        .metadata()
        .current_snapshot()
        .map(|s| s.summary().additional_properties.clone())
        .unwrap_or_default();
    let dead = match &config.dead_letter {
        Some(dl) => {
            let bootstrap = dl
                .bootstrap_servers
                .as_deref()
                .unwrap_or(&config.source.bootstrap_servers);
            Some((
                dl.topic.clone(),
                deadletter::read_all(bootstrap, &dl.topic, Duration::from_secs(30))?,
            ))
        }
        None => None,
    };
    if args.json {
        let columns: Vec<&str> = sink
            .schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        let document = json!({
            "table": sink.name(),
            "columns": columns,
            "rows": rows,
            "snapshot_summary": summary,
            "dead_letter_topic": dead.as_ref().map(|(t, _)| t),
            "dead_letters": dead.as_ref().map(|(_, d)| d),
        });
        writeln!(out, "{document}")?;
        return Ok(());
    }
    let limit = if args.limit == 0 {
        usize::MAX
    } else {
        args.limit
    };
    writeln!(out, "table {}: {} rows", sink.name(), rows.len())?;
    for row in rows.iter().take(limit) {
        writeln!(out, "  {}", serde_json::Value::Object(row.clone()))?;
    }
    if rows.len() > limit {
        writeln!(out, "  … {} more", rows.len() - limit)?;
    }
    if let Some((topic, records)) = dead {
        writeln!(out, "dead-letter topic {topic}: {} records", records.len())?;
        for d in records.iter().take(limit) {
            let h = |k: &str| d.headers.get(k).map(String::as_str).unwrap_or("-");
            writeln!(
                out,
                "  {}/{}@{} [{}] {} {}: {}",
                h("sluice.source.topic"),
                h("sluice.source.partition"),
                h("sluice.source.offset"),
                h("sluice.error.stage"),
                h("sluice.error.code"),
                h("sluice.error.field"),
                h("sluice.error.message"),
            )?;
        }
        if records.len() > limit {
            writeln!(out, "  … {} more", records.len() - limit)?;
        }
    }
    Ok(())
}
