//! The `sluice` command line.

pub mod maintain;
pub mod plugin;
pub mod produce;
#[cfg(test)]
mod produce_avro_tests;
mod produce_format;
pub mod run;
pub mod show;
pub mod r#try;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// sluice: Kafka → WebAssembly plugins → Apache Iceberg.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
pub struct Cli {
    /// Log filter, e.g. `info`, `warn`, `sluice=debug`. Given, it wins over `RUST_LOG`;
    /// otherwise `RUST_LOG` applies, or `info`.
    #[arg(long, global = true, value_name = "FILTER")]
    pub log: Option<String>,
    /// Log lines as `text` (for people) or `json` (one object per line, for collectors).
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run plugins over a JSON-lines file and print each event's verdict: what a plugin
    /// author runs before deploying.
    Try(r#try::TryArgs),
    /// Send realistic retail clickstream events to a Kafka topic (a load generator), with
    /// chosen shares of invalid, late and duplicate events.
    Produce(produce::ProduceArgs),
    /// Run a pipeline: Kafka → plugins → Iceberg, exactly once, with a dead-letter topic.
    Run(run::RunArgs),
    /// Print what a pipeline's table and dead-letter topic hold.
    Show(show::ShowArgs),
    /// Expire old snapshots and delete orphan files of a pipeline's tables, keeping every
    /// pipeline's checkpoint.
    Maintain(maintain::MaintainArgs),
    /// Tools for plugin authors: create a plugin crate, check a plugin against its samples.
    Plugin(plugin::PluginArgs),
}

/// The folder that a pipeline file's relative paths are relative to: the file's own.
pub(crate) fn base_folder(config: &std::path::Path) -> std::path::PathBuf {
    config
        .parent()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("."))
}

/// Parses `KEY=VALUE`.
pub(crate) fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// A parsed command line, with what clap's derive cannot express: which `--param` belongs
/// to which `--plugin`.
#[derive(Debug)]
pub struct Invocation {
    /// The parsed arguments.
    pub cli: Cli,
    /// For `try`: the parameters of each `--plugin`, in order.
    pub plugin_params: Vec<Vec<(String, String)>>,
}

/// Parses a command line (the first item is the program name).
pub fn parse<I, T>(args: I) -> Result<Invocation, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut command = Cli::command();
    let matches = command.try_get_matches_from_mut(args)?;
    let cli = Cli::from_arg_matches(&matches)?;
    let plugin_params = match matches.subcommand() {
        Some(("try", sub)) => r#try::params_per_plugin(sub)
            .map_err(|message| command.error(clap::error::ErrorKind::ArgumentConflict, message))?,
        _ => Vec::new(),
    };
    Ok(Invocation { cli, plugin_params })
}

/// Exit code when some events made a plugin fail (trap, limit) in `sluice try`.
const EXIT_PLUGIN_FAILED: u8 = 3;

/// Runs the `sluice` command line with the process's arguments: what the binary does.
pub fn main() -> ExitCode {
    let invocation = match parse(std::env::args_os()) {
        Ok(invocation) => invocation,
        Err(e) => e.exit(),
    };
    init_logs(&invocation.cli);
    if matches!(invocation.cli.command, Command::Run(_)) {
        raise_open_files_limit();
    }
    match run(invocation) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", message(&error));
            exit_code_of(&error)
        }
    }
}

/// An error and its causes on one line, `outer: inner: …`, leaving out a cause that the
/// message so far already says (most errors print the one they wrap).
fn message(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Exit code of a configuration error (`EX_CONFIG` of sysexits.h), so that a supervisor
/// tells a file to fix from an outage to wait out.
pub const EXIT_CONFIG: u8 = 78;

/// [`EXIT_CONFIG`] when the pipeline file is at fault, 1 otherwise.
fn exit_code_of(error: &anyhow::Error) -> ExitCode {
    let config = error.chain().any(|e| {
        e.downcast_ref::<crate::pipeline::config::ConfigError>()
            .is_some()
    });
    if config {
        ExitCode::from(EXIT_CONFIG)
    } else {
        ExitCode::FAILURE
    }
}

/// Logs to standard error: the filter of `--log`, else `RUST_LOG`, else `info`, with the
/// admin API's audit always let through ([`crate::admin::with_audit`]); text or JSON lines.
/// Progress bars ([`crate::bar`]) are drawn only with text logs on a terminal.
fn init_logs(cli: &Cli) {
    let filter = match &cli.log {
        Some(log) => Some(log.clone()),
        None => std::env::var(EnvFilter::DEFAULT_ENV).ok(),
    }
    .and_then(|spec| EnvFilter::try_new(crate::admin::with_audit(&spec)).ok())
    .unwrap_or_else(|| EnvFilter::new(crate::admin::with_audit("info")));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => {
            let terminal = std::io::stderr().is_terminal();
            if terminal {
                crate::bar::enable();
            }
            logs.with_ansi(terminal).init()
        }
        LogFormat::Json => logs.json().init(),
    }
}

/// Raises the soft limit of open files to the hard one, as many servers do at start: the
/// pipeline's files and sockets and the admin API's connections share it, and the usual
/// soft limit (1024) is low for a busy process.
fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let (Some(current), Some(maximum)) = (limit.current, limit.maximum) else {
        return;
    };
    if current >= maximum {
        return;
    }
    let raised = Rlimit {
        current: Some(maximum),
        maximum: Some(maximum),
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::info!("Raised the limit of open files from {current} to {maximum}."),
        Err(error) => {
            tracing::warn!(%error, "Cannot raise the limit of open files from {current} to {maximum}.");
        }
    }
}

fn run(invocation: Invocation) -> anyhow::Result<ExitCode> {
    match &invocation.cli.command {
        Command::Try(args) => run_try(args, &invocation.plugin_params),
        Command::Produce(args) => run_produce(args),
        Command::Run(args) => {
            let stop = stop_flag()?;
            let summary = run::run(args, &stop)?;
            if !args.check {
                println!(
                    "{} batches: {} records read, {} rows written, {} dead-lettered{}",
                    summary.batches,
                    summary.input_rows,
                    summary.rows_written,
                    summary.rows_dead_lettered,
                    if summary.stopped { " (stopped)" } else { "" }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Show(args) => {
            show::run(args, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Maintain(args) => {
            maintain::run(args, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Plugin(args) => match &args.command {
            plugin::PluginCommand::Test(args) => {
                let outcome = plugin::test::run(args, &mut std::io::stdout().lock())
                    .context("sluice plugin test failed")?;
                Ok(if outcome.mismatches.is_empty() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                })
            }
            plugin::PluginCommand::New(args) => {
                plugin::new::run(args, &mut std::io::stdout().lock())
                    .context("sluice plugin new failed")?;
                Ok(ExitCode::SUCCESS)
            }
        },
    }
}

/// `sluice try`: exit code [`EXIT_PLUGIN_FAILED`] when the plugin failed on an event.
fn run_try(args: &r#try::TryArgs, params: &[Vec<(String, String)>]) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let summary = r#try::run(args, params, &mut stdout.lock(), &mut stderr.lock())
        .context("sluice try failed")?;
    if summary.failed_total() > 0 {
        return Ok(ExitCode::from(EXIT_PLUGIN_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

/// `sluice produce`, stopped by SIGINT or SIGTERM; prints what was produced.
fn run_produce(args: &produce::ProduceArgs) -> anyhow::Result<ExitCode> {
    let stop = stop_flag()?;
    let summary = produce::run(args, &|| stop.load(std::sync::atomic::Ordering::Relaxed))
        .context("sluice produce failed")?;
    match &args.input {
        Some(file) => println!(
            "produced {} records from {} to {}",
            summary.delivered,
            file.display(),
            args.topic
        ),
        None => println!(
            "produced {} events to {} ({} valid, {} late, {} invalid, {} duplicates{})",
            summary.delivered,
            args.topic,
            summary.valid,
            summary.late,
            summary.invalid,
            summary.duplicates,
            if args.format != crate::format::Format::Json {
                format!(", {} as undecodable values", summary.truncated)
            } else {
                String::new()
            }
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// A flag set by SIGINT or SIGTERM, so that long-running commands stop cleanly.
fn stop_flag() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, flag.clone())
            .context("cannot install a signal handler")?;
    }
    Ok(flag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("inner failed")]
    struct Inner;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Outer(#[source] Inner);

    #[test]
    fn a_cause_already_said_is_not_repeated() {
        let error = anyhow::Error::new(Outer(Inner)).context("cannot start");
        assert_eq!(
            format!("{error:#}"),
            "cannot start: outer: inner failed: inner failed"
        );
        assert_eq!(message(&error), "cannot start: outer: inner failed");
    }
}
