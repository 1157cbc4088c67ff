//! `sluice show`: what a pipeline's table and dead-letter topic hold, or what a window
//! emitted.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use crate::iceberg::{IcebergCatalog, IcebergTable};
use crate::pipeline::config::PipelineConfig;
use crate::sink::topic::TopicRecord;
use crate::sink::{join, topic, window};

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
    /// Show the results of this `[[windows]]` or `[[joins]]` entry (its table and topic)
    /// instead.
    #[arg(long, value_name = "NAME")]
    pub window: Option<String>,
}

impl ShowArgs {
    /// How many rows and records to print.
    fn shown(&self) -> usize {
        if self.limit == 0 {
            usize::MAX
        } else {
            self.limit
        }
    }
}

/// Prints the table's rows and the dead-letter records to `out`.
pub fn run(args: &ShowArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let config = PipelineConfig::load(&args.config)?;
    let base = super::base_folder(&args.config);
    // Read-only: nothing is created, neither the warehouse, the catalog, nor a table.
    let catalog =
        IcebergCatalog::open_read_only(&config.sink, &base).context("cannot open the catalog")?;
    if let Some(name) = &args.window {
        return show_window(&config, name, &catalog, args, out);
    }
    let sink = IcebergTable::open_existing(&catalog, config.sink.clone())
        .context("cannot open the table")?;
    let rows = sink.read_rows()?;
    let summary = sink
        .table()
        .metadata()
        .current_snapshot()
        .map(|s| s.summary().additional_properties.clone())
        .unwrap_or_default();
    let dead = match &config.dead_letter {
        Some(dl) => {
            let target = dl.target(&config.source.connection());
            Some((
                dl.topic.clone(),
                topic::read_all(&target.connection, &dl.topic, Duration::from_secs(30))?,
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
    let limit = args.shown();
    writeln!(out, "table {}: {} rows", sink.name(), rows.len())?;
    for row in rows.iter().take(limit) {
        writeln!(out, "  {}", serde_json::Value::Object(row.clone()))?;
    }
    if rows.len() > limit {
        writeln!(out, "  … {} more", rows.len() - limit)?;
    }
    if let Some((topic, records)) = dead {
        print_dead_letters(&topic, &records, limit, out)?;
    }
    Ok(())
}

/// Prints dead letters, a line each: where from, the stage, the code, the field, why.
fn print_dead_letters(
    topic: &str,
    records: &[TopicRecord],
    limit: usize,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    writeln!(out, "dead-letter topic {topic}: {} records", records.len())?;
    {
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

/// Prints a window's or a join's results: its table's rows and its topic's records.
fn show_window(
    config: &PipelineConfig,
    name: &str,
    catalog: &IcebergCatalog,
    args: &ShowArgs,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let window = config.windows.iter().find(|w| w.name == name);
    let join = config.joins.iter().find(|j| j.name == name);
    let (table_config, kafka) = match (window, join) {
        (Some(w), _) => (window::table_config(w, &config.sink), &w.kafka),
        (None, Some(j)) => (join::table_config(j, &config.sink), &j.kafka),
        (None, None) => anyhow::bail!("the pipeline has no window or join named `{name}`"),
    };
    let (table, rows) = match table_config {
        Some(table_config) => {
            let sink = IcebergTable::open_existing(catalog, table_config)
                .context("cannot open the table")?;
            let rows = sink.read_rows()?;
            (Some(sink.name()), Some(rows))
        }
        None => (None, None),
    };
    let messages = match kafka {
        Some(k) => {
            let target = k.target(&config.source.connection());
            Some(topic::read_all(
                &target.connection,
                &k.topic,
                Duration::from_secs(30),
            )?)
        }
        None => None,
    };
    if args.json {
        let document = json!({
            "window": name,
            "table": table,
            "rows": rows,
            "topic": kafka.as_ref().map(|k| &k.topic),
            "messages": messages,
        });
        writeln!(out, "{document}")?;
        return Ok(());
    }
    let limit = args.shown();
    if let (Some(table), Some(rows)) = (table, rows) {
        writeln!(out, "window {name}, table {table}: {} rows", rows.len())?;
        for row in rows.iter().take(limit) {
            writeln!(out, "  {}", serde_json::Value::Object(row.clone()))?;
        }
    }
    if let (Some(k), Some(messages)) = (kafka, messages) {
        writeln!(
            out,
            "window {name}, topic {}: {} records",
            k.topic,
            messages.len()
        )?;
        for m in messages.iter().take(limit) {
            writeln!(out, "  {}", m.value.as_deref().unwrap_or("null"))?;
        }
    }
    Ok(())
}
