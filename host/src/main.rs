//! The `sluice` binary.

use std::process::ExitCode;

use std::io::IsTerminal;

use anyhow::Context;
use sluice::cli::{self, Command};
use tracing_subscriber::EnvFilter;

/// Exit code when some events made a plugin fail (trap, limit) in `sluice try`.
const EXIT_PLUGIN_FAILED: u8 = 3;

fn main() -> ExitCode {
    let invocation = match cli::parse(std::env::args_os()) {
        Ok(invocation) => invocation,
        Err(e) => e.exit(),
    };
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&invocation.cli.log))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();

    match run(invocation) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(invocation: cli::Invocation) -> anyhow::Result<ExitCode> {
    match &invocation.cli.command {
        Command::Try(args) => {
            let stdout = std::io::stdout();
            let stderr = std::io::stderr();
            let summary = cli::r#try::run(
                args,
                &invocation.plugin_params,
                &mut stdout.lock(),
                &mut stderr.lock(),
            )
            .context("sluice try failed")?;
            if summary.failed_total() > 0 {
                return Ok(ExitCode::from(EXIT_PLUGIN_FAILED));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Produce(args) => {
            let stop = stop_flag()?;
            let summary =
                cli::produce::run(args, &|| stop.load(std::sync::atomic::Ordering::Relaxed))
                    .context("sluice produce failed")?;
            println!(
                "produced {} events to {} ({} valid, {} late, {} invalid, {} duplicates)",
                summary.delivered,
                args.topic,
                summary.valid,
                summary.late,
                summary.invalid,
                summary.duplicates
            );
            Ok(ExitCode::SUCCESS)
        }
    }
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
