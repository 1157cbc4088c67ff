//! The `sluice` command line.

pub mod produce;
pub mod r#try;

use std::ffi::OsString;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// sluice: Kafka → WebAssembly plugins → Apache Iceberg.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
pub struct Cli {
    /// Log filter, e.g. `info`, `warn`, `sluice=debug` (overridden by `RUST_LOG`).
    #[arg(long, global = true, default_value = "info", value_name = "FILTER")]
    pub log: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
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
