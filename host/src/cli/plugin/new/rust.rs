//! The Rust crate of `sluice plugin new`: the rule in `src/lib.rs` on the `sluice-guest`
//! SDK, with its unit tests, built by cargo for `wasm32-wasip2`.

use anyhow::Context;

use super::{Kind, NewArgs, Project};

const CARGO_TOML: &str = include_str!("../template/Cargo.toml.in");
const CARGO_CONFIG: &str = include_str!("../template/cargo-config.toml.in");
const README: &str = include_str!("../template/README.md.in");
const VALIDATOR: &str = include_str!("../template/validator.rs.in");
const ENRICHER: &str = include_str!("../template/enricher.rs.in");

/// The crate's files, with the SDK at the published version or at `--sdk-path`.
pub(super) fn project(args: &NewArgs) -> anyhow::Result<Project> {
    let lib = match args.kind {
        Kind::Validator => VALIDATOR,
        Kind::Enricher => ENRICHER,
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
            .replace("{{what}}", args.kind.what())
            .replace("{{sdk_version}}", sdk_requirement())
            .replace("{{patch}}", &patch)
    };
    Ok(Project {
        files: vec![
            ("Cargo.toml", fill(CARGO_TOML)),
            (".cargo/config.toml", CARGO_CONFIG.to_string()),
            ("README.md", fill(README)),
            ("src/lib.rs", fill(lib)),
            ("samples.jsonl", args.kind.samples().to_string()),
        ],
        steps: vec![
            "cargo build --release".into(),
            format!(
                "sluice plugin test target/wasm32-wasip2/release/{}.wasm --samples samples.jsonl",
                args.name.replace('-', "_")
            ),
        ],
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdk_requirement_is_major_and_minor() {
        assert_eq!(sdk_requirement().matches('.').count(), 1);
        assert!(env!("CARGO_PKG_VERSION").starts_with(sdk_requirement()));
    }
}
