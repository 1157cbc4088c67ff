//! `sluice plugin new`: a plugin crate that builds for `wasm32-wasip2` as it is, with one
//! rule, its native unit tests, a samples file for `sluice plugin test` and a README.

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

/// Arguments of `sluice plugin new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The crate's name (lower-case letters, digits, `-` and `_`); also its folder's.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// What the plugin does.
    #[arg(long, value_enum, default_value = "validator")]
    pub kind: Kind,
    /// The folder to create the crate's folder in.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Build against the SDK of a local sluice checkout (its `guest-sdk` folder) instead of
    /// the published one: written as a `[patch.crates-io]` entry in `Cargo.toml`.
    #[arg(long, value_name = "PATH")]
    pub sdk_path: Option<PathBuf>,
}

const CARGO_TOML: &str = include_str!("template/Cargo.toml.in");
const CARGO_CONFIG: &str = include_str!("template/cargo-config.toml.in");
const README: &str = include_str!("template/README.md.in");
const VALIDATOR: &str = include_str!("template/validator.rs.in");
const ENRICHER: &str = include_str!("template/enricher.rs.in");
const VALIDATOR_SAMPLES: &str = include_str!("template/validator-samples.jsonl");
const ENRICHER_SAMPLES: &str = include_str!("template/enricher-samples.jsonl");

/// Creates the crate; returns its folder.
pub fn run(args: &NewArgs, out: &mut dyn Write) -> anyhow::Result<PathBuf> {
    check_name(&args.name)?;
    let root = args.dir.join(&args.name);
    if root.exists() {
        bail!("{} already exists", root.display());
    }
    let (what, lib, samples) = match args.kind {
        Kind::Validator => (
            "rejects events without a user_id",
            VALIDATOR,
            VALIDATOR_SAMPLES,
        ),
        Kind::Enricher => ("adds event_date to events", ENRICHER, ENRICHER_SAMPLES),
    };
    let patch = match &args.sdk_path {
        Some(path) => {
            let path = std::path::absolute(path)
                .with_context(|| format!("cannot resolve {}", path.display()))?;
            format!(
                "[patch.crates-io]\nsluice-guest = {{ path = {:?} }}",
                path.display().to_string()
            )
        }
        None => {
            "# [patch.crates-io]\n# sluice-guest = { path = \"/path/to/sluice/guest-sdk\" }".into()
        }
    };
    let fill = |template: &str| {
        template
            .replace("{{name}}", &args.name)
            .replace("{{crate}}", &args.name.replace('-', "_"))
            .replace("{{what}}", what)
            .replace("{{sdk_version}}", sdk_requirement())
            .replace("{{patch}}", &patch)
    };
    let files: [(&str, String); 5] = [
        ("Cargo.toml", fill(CARGO_TOML)),
        (".cargo/config.toml", CARGO_CONFIG.to_string()),
        ("README.md", fill(README)),
        ("src/lib.rs", fill(lib)),
        ("samples.jsonl", samples.to_string()),
    ];
    for (path, text) in &files {
        write(&root.join(path), text)?;
    }
    writeln!(out, "created {} ({:?}): ", root.display(), args.kind)?;
    writeln!(out, "  cd {} && cargo build --release", root.display())?;
    writeln!(
        out,
        "  sluice plugin test target/wasm32-wasip2/release/{}.wasm --samples samples.jsonl",
        args.name.replace('-', "_")
    )?;
    Ok(root)
}

/// The SDK version this host's plugins are written against, as a Cargo requirement
/// (`major.minor`: the host loads every plugin of the same WIT minor version).
fn sdk_requirement() -> &'static str {
    let version = env!("CARGO_PKG_VERSION");
    let end = version
        .match_indices('.')
        .nth(1)
        .map_or(version.len(), |(i, _)| i);
    &version[..end]
}

/// Refuses a name Cargo would refuse, before anything is written.
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

    #[test]
    fn the_sdk_requirement_is_major_and_minor() {
        assert_eq!(sdk_requirement().matches('.').count(), 1);
        assert!(env!("CARGO_PKG_VERSION").starts_with(sdk_requirement()));
    }
}
