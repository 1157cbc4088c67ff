//! `sluice plugin`: tools for plugin authors.
//!
//! - `sluice plugin new NAME [--kind validator|enricher] [--lang rust|js]`: a Rust crate or a
//!   JavaScript package that builds as it is, with one rule, its unit tests and samples;
//! - `sluice plugin test PLUGIN.wasm --samples FILE.jsonl`: the samples check that a stage
//!   runs before it takes a new version ([`crate::plugin::swap::check_samples`]), as a command
//!   for an author's CI: every sample judged otherwise is listed, and the exit code says so.

pub mod new;
pub mod test;

use clap::{Args, Subcommand};

/// Arguments of `sluice plugin`.
#[derive(Debug, Args)]
pub struct PluginArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: PluginCommand,
}

/// The `sluice plugin` subcommands.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Run a plugin over a samples file (event, expected verdict, code) and list every
    /// sample it judges otherwise; exits with 1 when one differs.
    Test(test::TestArgs),
    /// Create a plugin: one rule with its unit tests, samples and a README, ready to build,
    /// as a Rust crate (for `wasm32-wasip2`) or a JavaScript package (`--lang js`).
    New(new::NewArgs),
}
