//! The book's plugin chapters work as written. "Writing a plugin in Rust"
//! (`docs/src/plugins/rust.md`): `sluice plugin new`, then its src/lib.rs and samples build
//! into a component that passes `sluice plugin test`, and `sluice try` prints the verdicts
//! the chapter shows. "Plugins in JavaScript" (`docs/src/plugins/javascript.md`): its steps
//! and its rule.

use std::path::{Path, PathBuf};
use std::process::Command;

use sluice::cli;
use sluice_tests::{plugins, repo_root};

/// The chapter of the book at `docs/src/<path>`.
fn chapter(path: &str) -> String {
    std::fs::read_to_string(repo_root().join("docs/src").join(path)).unwrap()
}

/// The fenced block that follows `<!-- readme-plugin: NAME -->`.
fn block(readme: &str, name: &str) -> String {
    let marker = format!("<!-- readme-plugin: {name} -->");
    let after = &readme[readme
        .find(&marker)
        .unwrap_or_else(|| panic!("no {marker}"))
        + marker.len()..];
    let fence = after.find("```").unwrap();
    let body = &after[fence..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("```").unwrap()].to_string()
}

#[test]
fn the_readme_plugin_builds_and_gives_the_readme_verdicts() {
    let root = repo_root();
    let readme = chapter("plugins/rust.md");
    let parent = std::env::temp_dir().join(format!("sluice-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&parent);
    // `sluice plugin new no-bots --sdk-path SLUICE/guest-sdk`, then the chapter's rule.
    let sdk = root.join("guest-sdk");
    let new = [
        "sluice",
        "plugin",
        "new",
        "no-bots",
        "--dir",
        parent.to_str().unwrap(),
        "--sdk-path",
        sdk.to_str().unwrap(),
    ];
    let dir = plugin_new(new);
    std::fs::write(dir.join("src/lib.rs"), block(&readme, "src/lib.rs")).unwrap();
    std::fs::write(dir.join("samples.jsonl"), block(&readme, "samples.jsonl")).unwrap();
    // Start from the udfs lock file so the build uses the versions already downloaded.
    std::fs::copy(root.join("udfs/Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    // Share the build cache of the plugins built by build.rs.
    let udfs_target: PathBuf = Path::new(plugins::KEEP_ALL)
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf();
    let status = Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .current_dir(&dir)
        .args(["build", "--release", "--offline", "--target-dir"])
        .arg(&udfs_target)
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .unwrap();
    assert!(status.success(), "the book's plugin does not build");
    let wasm = udfs_target.join("wasm32-wasip2/release/no_bots.wasm");
    let samples = dir.join("samples.jsonl");
    let test = [
        "sluice",
        "plugin",
        "test",
        wasm.to_str().unwrap(),
        "--samples",
        samples.to_str().unwrap(),
    ];
    let invocation = cli::parse(test).unwrap();
    let cli::Command::Plugin(plugin) = &invocation.cli.command else {
        panic!("not plugin")
    };
    let cli::plugin::PluginCommand::Test(test_args) = &plugin.command else {
        panic!("not plugin test")
    };
    let mut out = Vec::new();
    let outcome = cli::plugin::test::run(test_args, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(outcome.mismatches.is_empty(), "{out}");
    assert!(
        out.starts_with(block(&readme, "plugin test").trim()),
        "{out}"
    );

    // The input is the chapter's printf line.
    let printf = readme
        .lines()
        .find(|l| l.starts_with("printf '%s\\n' "))
        .unwrap();
    let inputs: Vec<&str> = printf
        .split('\'')
        .skip(3)
        .step_by(2)
        .take_while(|s| s.starts_with('{'))
        .collect();
    assert_eq!(inputs.len(), 3, "{printf}");
    let input = dir.join("events.jsonl");
    std::fs::write(&input, inputs.join("\n") + "\n").unwrap();

    let args = [
        "sluice",
        "try",
        "--plugin",
        wasm.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ];
    let invocation = cli::parse(args).unwrap();
    let cli::Command::Try(try_args) = &invocation.cli.command else {
        panic!("not try")
    };
    let mut out = Vec::new();
    cli::r#try::run(
        try_args,
        &invocation.plugin_params,
        &mut out,
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), block(&readme, "output"));
    std::fs::remove_dir_all(parent).unwrap();
}

/// The book's "Plugins in JavaScript" steps as written: `sluice plugin new` with the
/// chapter's arguments, npm scripts by the names the chapter runs, a build that writes the
/// component the chapter's `sluice plugin test` reads; and the chapter's rule in JavaScript,
/// judged in Node.js by the project's helper, gives the verdicts of the samples of "Writing
/// a plugin in Rust" (those of the Rust rule). Building the component is
/// `plugin_author.rs`'s part.
#[test]
fn the_readme_js_steps_work_and_its_rule_gives_the_samples_verdicts() {
    if crate::js::js_validator().is_none() {
        return;
    }
    let readme = chapter("plugins/javascript.md");
    let steps = block(&readme, "js steps");
    let commands: Vec<Vec<&str>> = steps
        .lines()
        .map(|l| l.split('#').next().unwrap().split_whitespace().collect())
        .collect();
    let parent = std::env::temp_dir().join(format!("sluice-readme-js-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&parent);
    let mut new = commands[0].clone();
    new.extend(["--dir", parent.to_str().unwrap()]);
    let dir = plugin_new(new);
    assert_eq!(
        commands[1],
        ["cd", dir.file_name().unwrap().to_str().unwrap()]
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    assert_eq!(commands[2], ["npm", "install"]);
    assert_eq!(commands[3], ["npm", "test"]);
    assert!(manifest["scripts"]["test"].is_string(), "{manifest}");
    assert_eq!(commands[4], ["npm", "run", "build"]);
    let build = manifest["scripts"]["build"].as_str().unwrap();
    let test = cli::parse(commands[5].clone()).unwrap();
    let cli::Command::Plugin(plugin) = &test.cli.command else {
        panic!("not plugin")
    };
    let cli::plugin::PluginCommand::Test(test_args) = &plugin.command else {
        panic!("not plugin test")
    };
    let wasm = test_args.plugin.to_str().unwrap();
    assert!(
        build.split(' ').any(|word| word == wasm),
        "{build} does not write {wasm}"
    );
    assert!(dir.join(&test_args.samples).exists());

    std::fs::write(dir.join("index.js"), block(&readme, "index.js")).unwrap();
    let samples = block(&chapter("plugins/rust.md"), "samples.jsonl");
    std::fs::write(dir.join("samples.jsonl"), &samples).unwrap();
    let expected: Vec<serde_json::Value> = samples
        .lines()
        .map(|line| {
            let sample: serde_json::Value = serde_json::from_str(line).unwrap();
            serde_json::json!([sample["verdict"], sample["code"]])
        })
        .collect();
    assert_eq!(judge_samples(&dir), serde_json::Value::Array(expected));
    std::fs::remove_dir_all(parent).unwrap();
}

/// The verdicts (`[verdict, code]`) the project in `dir` gives its `samples.jsonl`, judged
/// in Node.js by the helper's `judge`.
fn judge_samples(dir: &Path) -> serde_json::Value {
    const SCRIPT: &str = r#"
        import { readFileSync } from "node:fs";
        import * as plugin from "./index.js";
        import { judge } from "./sluice/sluice.js";
        const samples = readFileSync("samples.jsonl", "utf8").split("\n").filter((l) => l.trim());
        const verdicts = judge(plugin, samples.map((l) => JSON.parse(l).event));
        const names = { keep: "kept", rewrite: "rewritten", reject: "rejected" };
        console.log(JSON.stringify(verdicts.map((v) => [names[v.action], v.code ?? null])));
    "#;
    let output = Command::new("node")
        .current_dir(dir)
        .args(["--input-type=module", "--eval", SCRIPT])
        .output()
        .expect("cannot run node");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Runs the book's `sluice plugin new …` command line; returns the plugin's folder.
fn plugin_new<'a>(command: impl IntoIterator<Item = &'a str>) -> PathBuf {
    let invocation = cli::parse(command).unwrap();
    let cli::Command::Plugin(plugin) = &invocation.cli.command else {
        panic!("not plugin")
    };
    let cli::plugin::PluginCommand::New(new_args) = &plugin.command else {
        panic!("not plugin new")
    };
    cli::plugin::new::run(new_args, &mut Vec::new()).unwrap()
}
