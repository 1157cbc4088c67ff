//! The web console in a real browser: headless chromium (Debian's), driven by playwright-core
//! (`tests/browser/`), loads the console of a pipeline while events flow, sees its graph and
//! its numbers move, is refused dead letters' values and a rollback without the token, and
//! with it shows the values, swaps a new version in and rolls it back.
//! Screenshots of each step are kept in `target/tmp/console-screenshots/`.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sluice_tests::fixture::{Setup, text};
use sluice_tests::{plugins, repo_root};

use crate::hot_swap::{CONFIG, install, load_continuously};

#[test]
fn the_console_shows_the_pipeline_and_rolls_back_with_the_token() {
    let mut s = Setup::new("console");
    let addr = format!("127.0.0.1:{}", sluice_tests::free_port());
    s.write_config(
        "console.toml",
        &format!("{CONFIG}\n[admin]\nlisten = \"{addr}\"\ntoken = \"${{SLUICE_ADMIN_TOKEN}}\"\n"),
    );
    s.extra_env
        .push(("SLUICE_ADMIN_TOKEN".into(), "s3cret".into()));
    install(plugins::KEEP_ALL, &s.warehouse.join("rules.wasm"));
    let producer = load_continuously(&s, 40000);
    // A record the encoder refuses: a dead letter whose value the console shows with the token.
    let garbage = s.warehouse.join("garbage.jsonl");
    std::fs::write(&garbage, "this is not JSON\n").unwrap();
    sluice_tests::produce(
        &s.broker.bootstrap,
        &s.topic,
        &["--input", garbage.to_str().unwrap()],
    );
    let running = s.start(&["run"], &[]);
    let mut progress: Vec<Value> = Vec::new();
    running.follow(&mut progress, "sluice::progress", Duration::from_secs(60));

    // Kept after the test, in cargo's folder for integration tests' files (target/tmp).
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    let driver = repo_root().join("tests/browser/run");
    let url = format!("http://{addr}/console");
    let out = Command::new(driver)
        .args([
            url.as_str(),
            "s3cret",
            "rules",
            plugins::CLICKSTREAM_ENRICHER,
        ])
        .arg(&shots)
        .output()
        .unwrap();
    let (_, _, log) = running.terminate();
    drop(producer);
    let said = text(&out);
    assert!(out.status.success(), "{said}\n{log}");
    assert!(said.contains("ok: refused without the token"), "{said}");
    assert!(
        said.contains("ok: the rollback in the plugin history"),
        "{said}"
    );
    assert!(said.contains("ok: swapped with the token"), "{said}");
    for shot in [
        "1-graph",
        "2-moving",
        "3-refused",
        "4-swapped",
        "5-rolled-back",
    ] {
        let png = std::fs::read(shots.join(format!("{shot}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{shot}");
    }
}
