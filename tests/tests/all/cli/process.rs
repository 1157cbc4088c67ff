//! `sluice` as a process: exit codes, logs, `run --check`, `show`, secrets kept out of
//! errors, the production example, and plugins' logs.

use super::*;

/// `sluice ARGS…` as a process, with `RUST_LOG` set to `rust_log`.
fn sluice_process(args: &[&str], rust_log: &str) -> std::process::Output {
    std::process::Command::new(sluice_tests::fixture::sluice_binary())
        .args(args)
        .env("RUST_LOG", rust_log)
        .output()
        .unwrap()
}

/// A configuration error exits with 78 (`EX_CONFIG`), other failures with 1: a supervisor
/// can tell a file to fix from an outage to wait out.
#[test]
fn a_configuration_error_exits_with_ex_config() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[pipeline]\nname = \"x\"\nunknown-key = 1\n").unwrap();
    let out = sluice_process(&["run", "--check", "--config", bad.to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let missing = dir.join("missing.toml");
    let out = sluice_process(
        &["run", "--check", "--config", missing.to_str().unwrap()],
        "",
    );
    assert_eq!(out.status.code(), Some(78), "a missing file too: {out:?}");
    let events = events_file();
    let out = sluice_process(
        &["try", "--plugin", "/nonexistent.wasm", "--input", &events],
        "",
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--log` wins over `RUST_LOG`; `--log-format json` writes one JSON object per line.
#[test]
fn the_log_flag_wins_over_rust_log_and_logs_can_be_json() {
    let events = events_file();
    let args = [
        "try",
        "--plugin",
        plugins::CLICKSTREAM_VALIDATOR,
        "--input",
        &events,
    ];
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).to_string();
    let quiet = sluice_process(&args, "error");
    assert!(
        !stderr(&quiet).contains("Loaded plugin"),
        "{}",
        stderr(&quiet)
    );
    let told = sluice_process(&[&["--log", "info"], &args[..]].concat(), "error");
    assert!(stderr(&told).contains("Loaded plugin"), "{}", stderr(&told));
    let json = sluice_process(&[&["--log-format", "json"], &args[..]].concat(), "info");
    let lines: Vec<Value> = stderr(&json)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["level"] == "INFO" && l["fields"]["message"] == "Loaded plugin."),
        "{lines:?}"
    );
}

/// `sluice ARGS…` as a process with the example's variables and `env` added.
pub(crate) fn sluice_with_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let plugins_dir = std::path::Path::new(plugins::CLICKSTREAM_VALIDATOR)
        .parent()
        .unwrap();
    std::process::Command::new(sluice_tests::fixture::sluice_binary())
        .args(args)
        .env("SLUICE_PLUGINS", plugins_dir)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// `run --check` loads every plugin and runs its samples: a file that parses but names a
/// plugin that is not one, or whose samples fail, is a configuration error.
#[test]
fn run_check_loads_and_checks_the_plugins() {
    let example = repo_root().join("examples/retail-clickstream/pipeline.toml");
    let config = example.to_str().unwrap();
    let out = sluice_with_env(&["run", "--check", "--config", config], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("2 stages loaded and checked"), "{stdout}");

    let dir = std::env::temp_dir().join(format!("sluice-cli-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("clickstream_validator.wasm"), b"not a component").unwrap();
    let out = sluice_with_env(
        &["run", "--check", "--config", config],
        &[("SLUICE_PLUGINS", dir.to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("validate"), "the stage is named: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sluice show` creates nothing: with no warehouse yet, it says so and leaves none behind.
#[test]
fn show_is_read_only() {
    let example = repo_root().join("examples/retail-clickstream/pipeline.toml");
    let warehouse = std::env::temp_dir().join(format!("sluice-cli-show-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&warehouse);
    let out = sluice_with_env(
        &["show", "--config", example.to_str().unwrap()],
        &[
            ("SLUICE_WAREHOUSE", warehouse.to_str().unwrap()),
            ("KAFKA_BOOTSTRAP", "127.0.0.1:9"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!warehouse.exists(), "show created the warehouse");
}

/// A value from the environment is never echoed in an error, even where the parser would
/// quote it.
#[test]
fn configuration_errors_do_not_echo_values_from_the_environment() {
    let example = repo_root().join("examples/clickstream-analytics/pipeline.toml");
    let secret = "s3cr3t-\t\"\\-value";
    let out = sluice_with_env(
        &["run", "--check", "--config", example.to_str().unwrap()],
        &[("SLUICE_TRIGGER", secret)],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("trigger.mode"), "{stderr}");
    assert!(!stderr.contains("s3cr3t"), "{stderr}");
}

/// The production example (SASL_SSL Kafka, an S3 warehouse, an https REST catalog with
/// OAuth2) passes `run --check`, secrets and all taken from the environment.
#[test]
fn the_production_example_checks() {
    let example = repo_root().join("examples/production/pipeline.toml");
    let env = [
        ("KAFKA_USER", "svc-sluice"),
        ("KAFKA_PASSWORD", "p\"a\\ss\tword"),
        ("CATALOG_CLIENT_ID", "sluice"),
        ("CATALOG_CLIENT_SECRET", "s3cr3t"),
    ];
    let out = sluice_with_env(
        &["run", "--check", "--config", example.to_str().unwrap()],
        &env,
    );
    assert!(out.status.success(), "{out:?}");
    let config = sluice::pipeline::config::PipelineConfig::parse(
        &std::fs::read_to_string(&example).unwrap(),
        &example,
    );
    // Without the secrets, the file names the first one missing.
    let error = config.unwrap_err().to_string();
    assert!(error.contains("KAFKA_USER"), "{error}");
}

/// `host.log` is rate-limited and escaped: 1 000 messages holding a line break that
/// imitates sluice's audit log give at most a second's budget of lines, none of them forged.
#[test]
fn plugin_logs_are_rate_limited_and_cannot_forge_lines() {
    let events = events_file();
    let out = sluice_process(
        &[
            "try",
            "--plugin",
            plugins::MISBEHAVE,
            "--param",
            "mode=log-forge",
            "--input",
            &events,
        ],
        "info",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let forged = stderr.lines().filter(|l| l.contains("forged ")).count();
    assert!((1..=100).contains(&forged), "{forged} lines: {stderr}");
    assert!(
        !stderr.lines().any(|l| l.starts_with("2026-01-01T00:00:00")),
        "{stderr}"
    );
    assert!(stderr.contains("were dropped"), "{stderr}");
}
