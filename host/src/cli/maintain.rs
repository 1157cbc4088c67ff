//! `sluice maintain`: compaction, snapshot expiry and orphan-file cleanup for a pipeline's
//! tables (the main table, the window and join tables), keeping every pipeline's checkpoint
//! (see [`crate::iceberg::maintain`] and [`crate::iceberg::compact`]). Run it instead of,
//! or beside, an engine's own maintenance, and beside running pipelines; both keep
//! sluice's marks, which also live in a table property.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Args;

use crate::bar::Bar;
use crate::event_time::state::files::old_state_files;
use crate::iceberg::compact::CompactConfig;
use crate::iceberg::maintain::cutoff_ms;
use crate::iceberg::{IcebergCatalog, IcebergSinkConfig, IcebergTable};
use crate::pipeline::config::PipelineConfig;
use crate::units::parse_duration;

/// Arguments of `sluice maintain`.
#[derive(Debug, Args)]
pub struct MaintainArgs {
    /// The pipeline file (TOML), as given to `sluice run`.
    #[arg(long, short, env = "SLUICE_CONFIG", value_name = "FILE")]
    pub config: PathBuf,
    /// Expire snapshots older than this (Iceberg's default snapshot age is 5 days).
    #[arg(long, default_value = "5d", value_parser = parse_duration, value_name = "AGE")]
    pub older_than: Duration,
    /// Keep at least this many of the newest snapshots of the current history.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub retain_last: usize,
    /// Delete files that nothing references once they are older than this (a writer's
    /// files are unreferenced until it commits; Spark's default is 3 days).
    #[arg(long, default_value = "3d", value_parser = parse_duration, value_name = "AGE")]
    pub orphans_older_than: Duration,
    /// Expire snapshots only; delete no files.
    #[arg(long)]
    pub no_orphans: bool,
    /// First compact each table: rewrite the small data files of each partition into
    /// files of about the target size, with `[sink.compact]`'s settings (or its
    /// defaults), as one replace snapshot. Safe beside running pipelines.
    #[arg(long)]
    pub compact: bool,
    /// Compact only: no snapshot expiry, no orphan cleanup.
    #[arg(long)]
    pub compact_only: bool,
    /// Say what would be compacted, expired and deleted; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Maintains every table of the pipeline, printing what was done to `out`.
pub fn run(args: &MaintainArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let config = PipelineConfig::load(&args.config)?;
    let base = super::base_folder(&args.config);
    // Opened read-only first: a warehouse or catalog that does not exist is an error, not
    // something to create. Then for writing (expiry commits).
    IcebergCatalog::open_read_only(&config.sink, &base).context("cannot open the catalog")?;
    let catalog = IcebergCatalog::open(&config.sink, &base).context("cannot open the catalog")?;
    for table in config.tables() {
        maintain(&catalog, table, args, out)?;
    }
    Ok(())
}

fn maintain(
    catalog: &IcebergCatalog,
    config: IcebergSinkConfig,
    args: &MaintainArgs,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let compact = config.compact.clone().unwrap_or_default();
    let bar = Bar::spinner(&format!("opening {}", config.table));
    let mut table =
        IcebergTable::open_existing(catalog, config).context("cannot open the table")?;
    if args.compact || args.compact_only {
        bar.say(&format!("{}: compacting", table.name()));
        compact_table(&mut table, &compact, args.dry_run, out)?;
    }
    if args.compact_only {
        return Ok(());
    }
    let now = SystemTime::now();
    bar.say(&format!("{}: expiring snapshots", table.name()));
    let expired = expire(&mut table, now, args, out)?;
    if args.no_orphans {
        return Ok(());
    }
    bar.say(&format!("{}: looking for orphan files", table.name()));
    let orphan_cutoff = now
        .checked_sub(args.orphans_older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut orphans = table.orphan_files(orphan_cutoff)?;
    orphans
        .extend(old_state_files(&table, orphan_cutoff).context("cannot list the old state files")?);
    orphans.sort();
    let deleted = if args.dry_run {
        0
    } else {
        table.delete_files(&orphans)?
    };
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    writeln!(
        out,
        "{}: {verb} {} orphan files",
        table.name(),
        orphans.len()
    )?;
    for file in &orphans {
        writeln!(out, "  {file}")?;
    }
    tracing::info!(table = %table.name(), expired, orphans_deleted = deleted, dry_run = args.dry_run, "maintained");
    Ok(())
}

/// Expires `table`'s snapshots older than `--older-than`; returns how many.
fn expire(
    table: &mut IcebergTable,
    now: SystemTime,
    args: &MaintainArgs,
    out: &mut dyn Write,
) -> anyhow::Result<usize> {
    let cutoff_ms = cutoff_ms(now, args.older_than);
    let expiry = table.expire_snapshots(cutoff_ms, args.retain_last, args.dry_run)?;
    let verb = if args.dry_run {
        "would expire"
    } else {
        "expired"
    };
    writeln!(
        out,
        "{}: {verb} {} snapshots, {} kept",
        table.name(),
        expiry.removed.len(),
        expiry.kept
    )?;
    for (pipeline, snapshot) in &expiry.marks {
        writeln!(
            out,
            "  kept snapshot {snapshot}: pipeline `{pipeline}`'s last commit"
        )?;
    }
    Ok(expiry.removed.len())
}

/// Compacts `table` once (or says what would be rewritten).
fn compact_table(
    table: &mut IcebergTable,
    config: &CompactConfig,
    dry_run: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if dry_run {
        let plan = table.plan_compaction(config)?;
        let files: usize = plan.groups.iter().map(|g| g.files.len()).sum();
        let bytes: u64 = plan.groups.iter().map(|g| g.bytes()).sum();
        writeln!(
            out,
            "{}: would rewrite {files} small files ({bytes} bytes) in {} partitions{}",
            table.name(),
            plan.groups.len(),
            plan.skipped
                .map(|why| format!(" ({why})"))
                .unwrap_or_default()
        )?;
        return Ok(());
    }
    let compacted = table
        .compact(config, &AtomicBool::new(false))
        .with_context(|| format!("cannot compact {}", table.name()))?;
    let c = &compacted.counts;
    match (&compacted.abandoned, &compacted.plan.skipped) {
        (Some(why), _) => writeln!(out, "{}: compaction abandoned: {why}", table.name())?,
        (None, Some(why)) => writeln!(out, "{}: not compacted: {why}", table.name())?,
        (None, None) if compacted.plan.groups.is_empty() => writeln!(
            out,
            "{}: nothing to compact (no partition has {} files under three quarters of the target size)",
            table.name(),
            config.min_input_files
        )?,
        (None, None) => writeln!(
            out,
            "{}: compacted {} small files ({} bytes) into {} ({} bytes) in {} partitions, {} conflicts",
            table.name(),
            c.files_rewritten,
            c.bytes_rewritten,
            c.files_written,
            c.bytes_written,
            compacted.plan.groups.len(),
            c.conflicts
        )?,
    }
    Ok(())
}
