//! `sluice try`: runs plugins (one or a chain) over a JSON-lines file and prints each
//! event's verdict and a summary.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::lookup::{Lookups, Table, Version};

use crate::plugin::chain::{self, Fate, Judged};
use crate::plugin::config::{Grants, Limits, RuntimeConfig, StageConfig, StagesFile};
use crate::plugin::{Plugin, Runtime};
use crate::record::Record;
use crate::units::ByteSize;

/// Arguments of `sluice try`.
#[derive(Debug, Args)]
pub struct TryArgs {
    /// A plugin component (`.wasm`). Repeat to run a chain, in order: an event rejected by
    /// one plugin is not seen by the next.
    #[arg(long, value_name = "FILE.wasm", required_unless_present = "stages")]
    pub plugin: Vec<PathBuf>,
    /// A parameter `KEY=VALUE` for the `--plugin` it follows. Repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = super::parse_key_value)]
    pub param: Vec<(String, String)>,
    /// A TOML file of `[[stages]]` (name, plugin, params, limits, grants) instead of
    /// `--plugin` and `--param`; see `examples/plugins/stages.toml`.
    #[arg(long, value_name = "FILE.toml", conflicts_with_all = ["plugin", "param"])]
    pub stages: Option<PathBuf>,
    /// Events, one JSON value per line (each line becomes one event's value); `-` reads
    /// standard input. Blank lines are skipped but counted.
    #[arg(long, value_name = "FILE.jsonl")]
    pub input: PathBuf,
    /// Print one JSON object per input line (line, verdict, stage, code, field, message,
    /// value) instead of text; the summary goes to standard error.
    #[arg(long)]
    pub json: bool,
    /// Memory limit of each plugin instance (with `--plugin`).
    #[arg(long, value_name = "SIZE", default_value = "64MiB")]
    pub memory: ByteSize,
    /// Deadline of each call to a plugin (with `--plugin`), e.g. `5s`.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::units::parse_duration)]
    pub call_timeout: Duration,
    /// Events sent to a plugin in one call.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub chunk_size: usize,
    /// Topic name the events appear to come from.
    #[arg(long, value_name = "NAME", default_value = "try")]
    pub topic: String,
    /// A lookup table plugins may read, `NAME=FILE.jsonl`: one `{"key": "...", "value":
    /// {...}}` per line, as a compacted topic's records (a later line wins; `"value": null`
    /// deletes the key). Its version is the file's sha256. Repeatable. Every `--plugin` is
    /// granted every table; with `--stages`, the stages' `grants.lookups` apply.
    #[arg(long, value_name = "NAME=FILE.jsonl", value_parser = super::parse_key_value)]
    pub lookup: Vec<(String, String)>,
}

/// Assigns each `--param` to the `--plugin` before it.
pub(crate) fn params_per_plugin(
    matches: &clap::ArgMatches,
) -> Result<Vec<Vec<(String, String)>>, String> {
    let plugins: Vec<usize> = matches
        .indices_of("plugin")
        .map(Iterator::collect)
        .unwrap_or_default();
    let mut per_plugin = vec![Vec::new(); plugins.len()];
    let params = matches
        .get_many::<(String, String)>("param")
        .into_iter()
        .flatten();
    let indices = matches.indices_of("param").into_iter().flatten();
    for (param, index) in params.zip(indices) {
        let owner = plugins.iter().rposition(|&p| p < index).ok_or_else(|| {
            format!(
                "--param {}={} comes before any --plugin; put it after the plugin it is for",
                param.0, param.1
            )
        })?;
        per_plugin[owner].push(param.clone());
    }
    Ok(per_plugin)
}

/// Counts of one `try` run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Events read.
    pub events: usize,
    /// Events kept unchanged.
    pub kept: usize,
    /// Events kept with a rewritten value.
    pub rewritten: usize,
    /// Events rejected, by code.
    pub rejected: BTreeMap<String, usize>,
    /// Events on which a plugin failed (trap, limit), by failure code.
    pub failed: BTreeMap<String, usize>,
}

impl Summary {
    /// Total rejected events.
    pub fn rejected_total(&self) -> usize {
        self.rejected.values().sum()
    }

    /// Total failed events.
    pub fn failed_total(&self) -> usize {
        self.failed.values().sum()
    }
}

/// Runs `sluice try`, writing verdicts to `out` and the summary to `out` (text) or
/// `summary_out` (`--json`). Rejections are results, not errors; loading or reading
/// failures are errors.
pub fn run(
    args: &TryArgs,
    plugin_params: &[Vec<(String, String)>],
    out: &mut dyn Write,
    summary_out: &mut dyn Write,
) -> anyhow::Result<Summary> {
    let (runtime_config, stages) = match &args.stages {
        Some(file) => read_stages(file)?,
        None => stages_from_args(args, plugin_params),
    };
    let lookups = read_lookups(&args.lookup)?;
    let declared = lookups.tables().keys().map(String::as_str).collect();
    crate::plugin::lookup::check(&stages, &declared)?;
    let runtime = Runtime::new(runtime_config.clone())?;
    runtime.lookups().set(lookups);
    let plugins = stages
        .iter()
        .map(|s| runtime.load_stage(s))
        .collect::<Result<Vec<Plugin>, _>>()?;

    let (lines, records) = read_events(&args.input, &args.topic)?;
    let outcomes = chain::run(&plugins, records, runtime_config.chunk_size);

    let summary = write_verdicts(args.json, &lines, &outcomes, &plugins, out)?;
    let text = summary_text(&summary);
    if args.json {
        summary_out.write_all(text.as_bytes())?;
    } else {
        writeln!(out, "---")?;
        out.write_all(text.as_bytes())?;
    }
    Ok(summary)
}

/// The stages of `--plugin` and `--param`, each with the `--memory` and `--call-timeout`
/// limits, and a runtime with `--chunk-size`.
fn stages_from_args(
    args: &TryArgs,
    plugin_params: &[Vec<(String, String)>],
) -> (RuntimeConfig, Vec<StageConfig>) {
    let limits = Limits {
        memory: args.memory,
        call_timeout: args.call_timeout,
        ..Limits::default()
    };
    let stages = args
        .plugin
        .iter()
        .enumerate()
        .map(|(i, path)| StageConfig {
            name: stage_name(path),
            plugin: path.clone(),
            params: plugin_params
                .get(i)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .collect(),
            limits: limits.clone(),
            grants: Grants {
                lookups: args.lookup.iter().map(|(name, _)| name.clone()).collect(),
                ..Grants::default()
            },
            watch: false,
            samples: None,
            allowed_digests: Vec::new(),
            rollback: Default::default(),
            shadow: None,
        })
        .collect();
    let runtime = RuntimeConfig {
        chunk_size: args.chunk_size,
        ..RuntimeConfig::default()
    };
    (runtime, stages)
}

/// Writes each event's verdict (text or JSON) and counts them.
fn write_verdicts(
    json: bool,
    lines: &[usize],
    outcomes: &[Judged],
    plugins: &[Plugin],
    out: &mut dyn Write,
) -> anyhow::Result<Summary> {
    let mut summary = Summary {
        events: outcomes.len(),
        ..Summary::default()
    };
    for (line, outcome) in lines.iter().zip(outcomes) {
        tally(&mut summary, &outcome.fate);
        if json {
            writeln!(out, "{}", verdict_json(*line, outcome, plugins))?;
        } else {
            writeln!(out, "{}", verdict_text(*line, outcome, plugins))?;
        }
    }
    Ok(summary)
}

fn stage_name(path: &Path) -> String {
    path.file_stem()
        .map_or_else(|| "plugin".into(), |s| s.to_string_lossy().into_owned())
}

fn read_stages(file: &Path) -> anyhow::Result<(RuntimeConfig, Vec<StageConfig>)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let parsed: StagesFile =
        toml::from_str(&text).with_context(|| format!("invalid stages file {}", file.display()))?;
    if parsed.stages.is_empty() {
        bail!("{} has no [[stages]]", file.display());
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let mut runtime = parsed.runtime;
    runtime.resolve_paths(base);
    let stages = parsed
        .stages
        .into_iter()
        .map(|mut s| {
            s.plugin = base.join(&s.plugin);
            s
        })
        .collect();
    Ok((runtime, stages))
}

/// Reads the `--lookup NAME=FILE.jsonl` tables.
fn read_lookups(given: &[(String, String)]) -> anyhow::Result<Lookups> {
    let mut tables = BTreeMap::new();
    for (name, file) in given {
        let table = read_lookup(Path::new(file))
            .with_context(|| format!("cannot read lookup table {name} from {file}"))?;
        tracing::info!(table = %name, keys = table.len(), version = ?table.version(), "Loaded lookup table.");
        if tables.insert(name.clone(), Arc::new(table)).is_some() {
            bail!("--lookup {name} is given twice");
        }
    }
    Ok(Lookups::new(tables))
}

/// One line of a `--lookup` file: a compacted topic's record.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LookupLine {
    /// The key.
    key: String,
    /// The value, a JSON object; `null` deletes the key.
    value: Option<serde_json::Map<String, Value>>,
}

/// A table from a JSON-lines file, at the version of the file's digest.
fn read_lookup(file: &Path) -> anyhow::Result<Table> {
    let bytes = std::fs::read(file)?;
    let mut table = Table::new(Version::File {
        digest: crate::plugin::digest_of(&bytes),
    });
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let entry: LookupLine = serde_json::from_slice(line).with_context(|| {
            format!(
                "line {}: expected {{\"key\": \"...\", \"value\": {{...}} or null}}",
                i + 1
            )
        })?;
        match entry.value {
            Some(value) => table.insert(entry.key.as_bytes(), &serde_json::to_vec(&value)?),
            None => table.remove(entry.key.as_bytes()),
        }
    }
    Ok(table)
}

/// Reads non-blank lines as event values; returns their 1-based line numbers and records.
fn read_events(input: &Path, topic: &str) -> anyhow::Result<(Vec<usize>, Vec<Record>)> {
    let reader: Box<dyn BufRead> = if input == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(input)
            .with_context(|| format!("cannot open {}", input.display()))?;
        Box::new(std::io::BufReader::new(file))
    };
    let topic: Arc<str> = topic.into();
    let mut lines = Vec::new();
    let mut records = Vec::new();
    for (i, line) in reader.split(b'\n').enumerate() {
        let mut line = line.with_context(|| format!("cannot read {}", input.display()))?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        lines.push(i + 1);
        records.push(Record::with_value(topic.clone(), i as i64, line));
    }
    Ok((lines, records))
}

fn tally(summary: &mut Summary, fate: &Fate) {
    match fate {
        Fate::Kept => summary.kept += 1,
        Fate::Rewritten => summary.rewritten += 1,
        Fate::Rejected { rejection, .. } => {
            *summary.rejected.entry(rejection.code.clone()).or_default() += 1
        }
        Fate::Failed { error, .. } => {
            let code = error.failure().map_or("plugin_error", |f| f.code());
            *summary.failed.entry(code.to_string()).or_default() += 1;
        }
    }
}

fn value_text(outcome: &Judged) -> String {
    outcome
        .record
        .value
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default()
        .into_owned()
}

fn verdict_text(line: usize, outcome: &Judged, plugins: &[Plugin]) -> String {
    match &outcome.fate {
        Fate::Kept => format!("line {line}: kept"),
        Fate::Rewritten => format!("line {line}: rewritten {}", value_text(outcome)),
        Fate::Rejected { stage, rejection } => {
            let field = rejection
                .field
                .as_ref()
                .map(|f| format!(" [{f}]"))
                .unwrap_or_default();
            format!(
                "line {line}: rejected by {}: {}{field}: {}",
                plugins[*stage].name(),
                rejection.code,
                rejection.message
            )
        }
        Fate::Failed { stage, error } => {
            let code = error.failure().map_or("plugin_error", |f| f.code());
            format!(
                "line {line}: failed in {}: {code}: {error}",
                plugins[*stage].name()
            )
        }
    }
}

fn verdict_json(line: usize, outcome: &Judged, plugins: &[Plugin]) -> Value {
    match &outcome.fate {
        Fate::Kept => json!({ "line": line, "verdict": "kept" }),
        Fate::Rewritten => {
            let bytes = outcome.record.value.as_deref().unwrap_or_default();
            let value = serde_json::from_slice::<Value>(bytes)
                .unwrap_or_else(|_| Value::String(value_text(outcome)));
            json!({ "line": line, "verdict": "rewritten", "value": value })
        }
        Fate::Rejected { stage, rejection } => json!({
            "line": line,
            "verdict": "rejected",
            "stage": plugins[*stage].name(),
            "code": rejection.code,
            "field": rejection.field,
            "message": rejection.message,
        }),
        Fate::Failed { stage, error } => json!({
            "line": line,
            "verdict": "failed",
            "stage": plugins[*stage].name(),
            "code": error.failure().map_or("plugin_error", |f| f.code()),
            "limit": error.failure().and_then(|f| f.limit()),
            "message": error.to_string(),
        }),
    }
}

fn summary_text(s: &Summary) -> String {
    let mut text = format!(
        "{} events: {} kept, {} rewritten, {} rejected, {} failed\n",
        s.events,
        s.kept,
        s.rewritten,
        s.rejected_total(),
        s.failed_total()
    );
    for (title, counts) in [("rejected", &s.rejected), ("failed", &s.failed)] {
        if !counts.is_empty() {
            let list: Vec<String> = counts
                .iter()
                .map(|(code, n)| format!("{code} {n}"))
                .collect();
            text.push_str(&format!("{title}: {}\n", list.join(", ")));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A file in the system's temporary folder, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(text: &str) -> Self {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let name = format!("sluice-try-lookup-{}-{n}.jsonl", std::process::id());
            let path = std::env::temp_dir().join(name);
            std::fs::write(&path, text).unwrap();
            TempFile(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn lookup_files_are_compacted_topics_versioned_by_digest() {
        let text = "{\"key\":\"u1\",\"value\":{\"tier\":\"gold\"}}\n\n\
                    {\"key\":\"u2\",\"value\":{\"tier\":\"silver\"}}\n\
                    {\"key\":\"u1\",\"value\":null}\n\
                    {\"key\":\"u2\",\"value\":{\"tier\": \"bronze\"}}\n";
        let f = TempFile::new(text);
        let table = read_lookup(&f.0).unwrap();
        assert_eq!(table.get(b"u1"), None, "a null value deletes the key");
        assert_eq!(table.get(b"u2"), Some(&br#"{"tier":"bronze"}"#[..]));
        assert_eq!(
            table.version(),
            &Version::File {
                digest: crate::plugin::digest_of(text.as_bytes())
            }
        );
    }

    #[test]
    fn bad_lookup_lines_and_repeated_names_are_refused() {
        let bad = TempFile::new("{\"key\":\"u1\",\"value\":{}}\n{\"key\":\"u2\",\"value\":[1]}\n");
        let error = format!("{:#}", read_lookup(&bad.0).unwrap_err());
        assert!(error.starts_with("line 2: expected"), "{error}");
        let good = TempFile::new("{\"key\":\"u1\",\"value\":{}}\n");
        let path = good.0.display().to_string();
        let twice = [("p".to_string(), path.clone()), ("p".to_string(), path)];
        let error = read_lookups(&twice).unwrap_err().to_string();
        assert_eq!(error, "--lookup p is given twice");
    }
}
