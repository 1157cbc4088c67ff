//! `sluice plugin test`: a plugin against its samples file, as a stage checks a new
//! version before it swaps it in.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::Args;

use crate::bar::Bar;
use crate::plugin::config::{Grants, Limits, RuntimeConfig};
use crate::plugin::swap::{self, Mismatch};
use crate::plugin::{Runtime, digest_of};
use crate::units::ByteSize;

/// Arguments of `sluice plugin test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// The plugin component (`.wasm`).
    #[arg(value_name = "PLUGIN.wasm")]
    pub plugin: PathBuf,
    /// The samples: one JSON object per line, `{"event": {...}, "verdict": "kept" |
    /// "rewritten" | "rejected", "code": "..."}` (the code is optional), the format of
    /// `[[stages]] samples`.
    #[arg(long, value_name = "FILE.jsonl")]
    pub samples: PathBuf,
    /// A parameter `KEY=VALUE` of the plugin, as in the stage's `params`. Repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = crate::cli::parse_key_value)]
    pub param: Vec<(String, String)>,
    /// Memory limit of the plugin instance.
    #[arg(long, value_name = "SIZE", default_value = "64MiB")]
    pub memory: ByteSize,
    /// Deadline of each call to the plugin, e.g. `5s`.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::units::parse_duration)]
    pub call_timeout: Duration,
}

/// What a samples run found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Samples in the file.
    pub samples: usize,
    /// Those judged otherwise than expected.
    pub mismatches: Vec<Mismatch>,
}

/// Runs `sluice plugin test`, writing each differing sample (with its event) and a summary
/// to `out`. Differing samples are a result; a plugin that cannot be loaded, a samples
/// file that cannot be read, or a plugin that fails on the samples are errors.
/// Samples judged in one call: a large samples file moves the progress bar as it goes.
const SAMPLES_AT_ONCE: usize = 4096;

pub fn run(args: &TestArgs, out: &mut dyn Write) -> anyhow::Result<Outcome> {
    let samples = swap::read_samples(&args.samples).map_err(|e| anyhow!(e))?;
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let limits = Limits {
        memory: args.memory,
        call_timeout: args.call_timeout,
        ..Limits::default()
    };
    let name = args
        .plugin
        .file_stem()
        .map_or_else(|| "plugin".into(), |s| s.to_string_lossy().into_owned());
    let plugin = runtime
        .load_file(
            &name,
            &args.plugin,
            args.param.clone(),
            limits,
            Grants::default(),
        )
        .with_context(|| format!("cannot load {}", args.plugin.display()))?;
    let bar = Bar::counting("samples", Some(samples.len() as u64));
    let mut mismatches = Vec::new();
    for part in samples.chunks(SAMPLES_AT_ONCE) {
        mismatches.extend(swap::compare_samples(&plugin, part).map_err(|e| anyhow!(e))?);
        bar.inc(part.len() as u64);
    }
    drop(bar);
    let file = args.samples.display();
    for m in &mismatches {
        let event = samples
            .iter()
            .find(|(r, _, _)| r.offset as usize + 1 == m.line)
            .map(|(r, _, _)| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()))
            .unwrap_or_default();
        writeln!(out, "{file}:{}: expected {}", m.line, m.expected)?;
        writeln!(out, "{file}:{}:      got {}", m.line, m.got)?;
        writeln!(out, "    event: {event}")?;
    }
    let digest = digest_of(&std::fs::read(&args.plugin)?);
    writeln!(
        out,
        "{} samples, {} as expected, {} differ ({} sha256 {})",
        samples.len(),
        samples.len() - mismatches.len(),
        mismatches.len(),
        args.plugin.display(),
        &digest[..12]
    )?;
    Ok(Outcome {
        samples: samples.len(),
        mismatches,
    })
}
