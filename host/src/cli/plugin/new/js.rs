//! The JavaScript package of `sluice plugin new --lang js`: the rule in `index.js` on the
//! `sluice.js` helper, its unit tests for `node --test`, and what `npm run build` needs to
//! make the component without a checkout of sluice: componentize-js at the versions this
//! repository builds with (`udfs/js/package-lock.json`), and in `sluice/` the helper, the
//! build script and the WIT. Those are this repository's files, embedded when sluice is
//! compiled, so a project gets the helper and the contract of the sluice that created it.

use anyhow::Context;
use serde_json::{Value, json};

use super::{Kind, NewArgs, Project};

const HELPER: &str = include_str!("../../../../../udfs/js/sluice.js");
/// The helper's module of `judge`, which `sluice.js` exports.
const JUDGE: &str = include_str!("../../../../../udfs/js/sluice-judge.js");
const COMPONENTIZE: &str = include_str!("../../../../../udfs/js/componentize.mjs");
/// The contract `sluice.js` speaks: the current one.
const WIT: &str = include_str!("../../../../../wit/plugin.wit");
const TOOLS_MANIFEST: &str = include_str!("../../../../../udfs/js/package.json");
const TOOLS_LOCK: &str = include_str!("../../../../../udfs/js/package-lock.json");

const README: &str = include_str!("../template/js/README.md.in");
const GITIGNORE: &str = include_str!("../template/js/gitignore");
const VALIDATOR: &str = include_str!("../template/js/validator.js.in");
const VALIDATOR_TEST: &str = include_str!("../template/js/validator.test.js.in");
const ENRICHER: &str = include_str!("../template/js/enricher.js.in");
const ENRICHER_TEST: &str = include_str!("../template/js/enricher.test.js.in");

/// The version every new package starts at (what the component's `describe` answers).
const VERSION: &str = "0.1.0";

/// The package's files.
pub(super) fn project(args: &NewArgs) -> anyhow::Result<Project> {
    let (rule, test) = match args.kind {
        Kind::Validator => (VALIDATOR, VALIDATOR_TEST),
        Kind::Enricher => (ENRICHER, ENRICHER_TEST),
    };
    let fill = |template: &str| {
        template
            .replace("{{name}}", &args.name)
            .replace("{{what}}", args.kind.what())
    };
    Ok(Project {
        files: vec![
            ("package.json", manifest(&args.name, args.kind)?),
            ("package-lock.json", lock(&args.name)?),
            ("index.js", fill(rule)),
            ("index.test.js", fill(test)),
            ("samples.jsonl", args.kind.samples().to_string()),
            ("README.md", fill(README)),
            (".gitignore", GITIGNORE.to_string()),
            ("sluice/sluice.js", HELPER.to_string()),
            ("sluice/sluice-judge.js", JUDGE.to_string()),
            ("sluice/componentize.mjs", COMPONENTIZE.to_string()),
            ("sluice/wit/plugin.wit", WIT.to_string()),
        ],
        steps: vec![
            "npm install && npm test && npm run build".into(),
            format!(
                "sluice plugin test {}.wasm --samples samples.jsonl",
                args.name
            ),
        ],
    })
}

/// `package.json`: an ES module package whose `build` script writes `NAME.wasm`, with the
/// build tools of `udfs/js/package.json` as its development dependencies.
fn manifest(name: &str, kind: Kind) -> anyhow::Result<String> {
    let tools: Value = serde_json::from_str(TOOLS_MANIFEST).context("udfs/js/package.json")?;
    let manifest = json!({
        "name": name,
        "version": VERSION,
        "private": true,
        "description": format!("A sluice plugin: {}.", kind.what()),
        "type": "module",
        "main": "index.js",
        "scripts": {
            "build": format!("node sluice/componentize.mjs . {name}.wasm sluice/wit"),
            "test": "node --test",
        },
        "devDependencies": tools["devDependencies"],
    });
    Ok(serde_json::to_string_pretty(&manifest)? + "\n")
}

/// `package-lock.json`: `udfs/js/package-lock.json` as the lock of this package, so that
/// `npm install` installs exactly the versions sluice's own JavaScript plugins are built with.
fn lock(name: &str) -> anyhow::Result<String> {
    let mut lock: Value = serde_json::from_str(TOOLS_LOCK).context("udfs/js/package-lock.json")?;
    lock["name"] = json!(name);
    lock["version"] = json!(VERSION);
    let root = lock["packages"][""]
        .as_object_mut()
        .context("udfs/js/package-lock.json has no root package")?;
    root.insert("name".into(), json!(name));
    root.insert("version".into(), json!(VERSION));
    root.remove("license");
    Ok(serde_json::to_string_pretty(&lock)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// npm installs from a lock only when it agrees with the manifest: the same development
    /// dependencies, and the lock resolves componentize-js to the manifest's exact version.
    #[test]
    fn the_lock_pins_the_manifests_build_tools() {
        let manifest: Value =
            serde_json::from_str(&manifest("rule", Kind::Validator).unwrap()).unwrap();
        let lock: Value = serde_json::from_str(&lock("rule").unwrap()).unwrap();
        let root = &lock["packages"][""];
        assert_eq!(root["devDependencies"], manifest["devDependencies"]);
        assert_eq!(
            (&root["name"], &root["version"]),
            (&manifest["name"], &manifest["version"])
        );
        let componentize = "@bytecodealliance/componentize-js";
        let pinned = &lock["packages"][format!("node_modules/{componentize}")]["version"];
        assert_eq!(&manifest["devDependencies"][componentize], pinned);
        assert!(
            pinned.as_str().is_some_and(|v| v.starts_with("0.")),
            "{pinned}"
        );
    }

    /// The helper the rule imports, the build script and the WIT are where the `build`
    /// script and `index.js` look for them.
    #[test]
    fn the_build_finds_what_the_project_holds() {
        let args = NewArgs {
            name: "rule".into(),
            kind: Kind::Enricher,
            lang: super::super::Lang::Js,
            dir: ".".into(),
            sdk_path: None,
        };
        let project = project(&args).unwrap();
        let file = |name: &str| &project.files.iter().find(|(p, _)| *p == name).unwrap().1;
        let manifest: Value = serde_json::from_str(file("package.json")).unwrap();
        let build = manifest["scripts"]["build"].as_str().unwrap();
        let words: Vec<&str> = build.split(' ').collect();
        assert_eq!(words[..2], ["node", "sluice/componentize.mjs"]);
        assert_eq!(words[3], "rule.wasm");
        assert!(file(words[1]).contains("componentize"));
        assert!(file(&format!("{}/plugin.wit", words[4])).contains("package sluice:plugin@"));
        assert!(file("index.js").contains(r#"from "./sluice/sluice.js""#));
        let helper = file("sluice/sluice.js");
        assert!(helper.contains(r#"export { judge } from "./sluice-judge.js";"#));
        assert!(file("sluice/sluice-judge.js").contains("export function judge("));
    }
}
