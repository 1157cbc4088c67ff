//! `sluice plugin new`: a plugin project that builds as it is, with one rule, its native
//! unit tests, a samples file for `sluice plugin test` and a README: a Rust crate for
//! `wasm32-wasip2` ([`rust`]) or a JavaScript package built with componentize-js ([`js`]).

mod js;
mod rust;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};

/// What the new plugin does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Keeps or rejects events (the rule: a `user_id` is required).
    Validator,
    /// Rewrites events (the rule: adds `event_date` from `event_time`).
    Enricher,
}

impl Kind {
    /// The rule, as the README and the manifest describe it.
    fn what(self) -> &'static str {
        match self {
            Kind::Validator => "rejects events without a user_id",
            Kind::Enricher => "adds event_date to events",
        }
    }

    /// The samples the rule passes, the same in every language.
    fn samples(self) -> &'static str {
        match self {
            Kind::Validator => include_str!("template/validator-samples.jsonl"),
            Kind::Enricher => include_str!("template/enricher-samples.jsonl"),
        }
    }
}

/// The language the plugin is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// A Rust crate on the `sluice-guest` SDK, built by cargo for `wasm32-wasip2`.
    Rust,
    /// A JavaScript module on the `sluice.js` helper, built by componentize-js (npm).
    Js,
}

/// Arguments of `sluice plugin new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's name (lower-case letters, digits, `-` and `_`); also its folder's.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// What the plugin does.
    #[arg(long, value_enum, default_value = "validator")]
    pub kind: Kind,
    /// The language it is written in.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
    /// The folder to create the plugin's folder in.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Build against the SDK of a local sluice checkout (its `guest-sdk` folder) instead of
    /// the published one: written as a `[patch.crates-io]` entry in `Cargo.toml` (Rust only).
    #[arg(long, value_name = "PATH")]
    pub sdk_path: Option<PathBuf>,
}

/// A project to write: its files (path in the project, text) and the commands that test
/// and build it, in its folder.
struct Project {
    files: Vec<(&'static str, String)>,
    steps: Vec<String>,
}

/// Creates the project; returns its folder.
pub fn run(args: &NewArgs, out: &mut dyn Write) -> anyhow::Result<PathBuf> {
    check_name(&args.name)?;
    let root = args.dir.join(&args.name);
    if root.exists() {
        bail!("{} already exists", root.display());
    }
    let project = match args.lang {
        Lang::Rust => rust::project(args)?,
        Lang::Js => {
            if args.sdk_path.is_some() {
                bail!("--sdk-path is for Rust plugins: a JavaScript plugin carries its helper");
            }
            js::project(args)?
        }
    };
    for (path, text) in &project.files {
        write(&root.join(path), text)?;
    }
    writeln!(
        out,
        "created {} ({:?}, {:?}):",
        root.display(),
        args.kind,
        args.lang
    )?;
    writeln!(out, "  cd {}", root.display())?;
    for step in &project.steps {
        writeln!(out, "  {step}")?;
    }
    Ok(root)
}

/// Refuses a name Cargo or npm would refuse, before anything is written.
fn check_name(name: &str) -> anyhow::Result<()> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid {
        bail!(
            "{name:?} is not a plugin name: use lower-case letters, digits, `-` and `_`, \
             starting with a letter"
        );
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cargo_refuses_are_refused() {
        for bad in ["", "My-Rule", "1rule", "rule!", "rule name"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["rule", "user-rule", "rule_2"] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
    }
}
