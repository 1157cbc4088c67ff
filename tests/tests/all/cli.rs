//! `sluice try`, driven through its command-line parser.

use serde_json::Value;
use sluice::cli::r#try::Summary;
use sluice::cli::{self, Command};
use sluice::plugin::config::StagesFile;
use sluice_tests::{plugins, repo_root};

fn events_file() -> String {
    repo_root()
        .join("examples/plugins/events.jsonl")
        .display()
        .to_string()
}

/// Runs `sluice ARGS…`; returns the summary, standard output and the JSON-mode summary.
fn sluice_try(args: &[&str]) -> anyhow::Result<(Summary, String, String)> {
    let invocation = cli::parse(std::iter::once("sluice").chain(args.iter().copied()))?;
    let Command::Try(try_args) = &invocation.cli.command else {
        panic!("not try")
    };
    let (mut out, mut summary_out) = (Vec::new(), Vec::new());
    let summary = cli::r#try::run(
        try_args,
        &invocation.plugin_params,
        &mut out,
        &mut summary_out,
    )?;
    Ok((
        summary,
        String::from_utf8(out)?,
        String::from_utf8(summary_out)?,
    ))
}

#[test]
fn text_verdicts_and_summary() {
    let events = events_file();
    let (summary, out, _) = sluice_try(&[
        "try",
        "--plugin",
        plugins::CLICKSTREAM_VALIDATOR,
        "--plugin",
        plugins::CLICKSTREAM_ENRICHER,
        "--input",
        &events,
    ])
    .unwrap();
    assert_eq!(
        (
            summary.events,
            summary.kept,
            summary.rewritten,
            summary.rejected_total()
        ),
        (10, 0, 5, 5)
    );
    assert_eq!(summary.rejected["invalid_quantity"], 1);
    assert_eq!(summary.failed_total(), 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("line 1: rewritten {"), "{out}");
    assert!(lines[0].contains(r#""funnel_step":1"#), "{out}");
    // Line 6 of the file is blank: skipped, but line numbers stay those of the file.
    assert_eq!(
        lines[5],
        "line 7: rejected by clickstream_validator: missing_required_field [user_id]: user_id is required"
    );
    assert!(
        lines[6]
            .starts_with("line 8: rejected by clickstream_validator: invalid_quantity [quantity]"),
        "{out}"
    );
    assert!(
        out.contains("line 10: rejected by clickstream_validator: invalid_price [price]"),
        "{out}"
    );
    assert!(
        out.contains("line 11: rejected by clickstream_validator: malformed_json: "),
        "{out}"
    );
    assert!(out.ends_with("10 events: 0 kept, 5 rewritten, 5 rejected, 0 failed\nrejected: invalid_event_time 1, invalid_price 1, invalid_quantity 1, malformed_json 1, missing_required_field 1\n"), "{out}");
}

#[test]
fn json_verdicts_one_object_per_line() {
    let events = events_file();
    let (_, out, summary) = sluice_try(&[
        "try",
        "--json",
        "--plugin",
        plugins::CLICKSTREAM_VALIDATOR,
        "--input",
        &events,
    ])
    .unwrap();
    let verdicts: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(verdicts.len(), 10);
    assert_eq!(
        verdicts[0],
        serde_json::json!({"line": 1, "verdict": "kept"})
    );
    assert_eq!(
        verdicts[6],
        serde_json::json!({
            "line": 8, "verdict": "rejected", "stage": "clickstream_validator", "code": "invalid_quantity",
            "field": "quantity", "message": "quantity \"several\" must be a JSON integer, not a string"
        })
    );
    assert!(
        summary.starts_with("10 events: 5 kept, 0 rewritten, 5 rejected, 0 failed"),
        "{summary}"
    );
}

#[test]
fn params_belong_to_the_plugin_they_follow() {
    let events = events_file();
    // The enricher takes no parameters and would refuse this one if it were given to it.
    let (summary, _, _) = sluice_try(&[
        "try",
        "--plugin",
        plugins::CLICKSTREAM_VALIDATOR,
        "--param",
        "allowed-event-types=search",
        "--plugin",
        plugins::CLICKSTREAM_ENRICHER,
        "--input",
        &events,
    ])
    .unwrap();
    assert_eq!(
        summary.rewritten, 1,
        "only the search event passes: {summary:?}"
    );
    // Four tutorial events, the add_to_cart of line 8 and the purchase of line 10.
    assert_eq!(summary.rejected["invalid_event_type"], 6);

    let error = sluice_try(&[
        "try",
        "--param",
        "a=b",
        "--plugin",
        plugins::KEEP_ALL,
        "--input",
        &events,
    ])
    .unwrap_err();
    assert!(
        error.to_string().contains("comes before any --plugin"),
        "{error}"
    );
    let error = sluice_try(&[
        "try",
        "--plugin",
        plugins::KEEP_ALL,
        "--param",
        "noequals",
        "--input",
        &events,
    ])
    .unwrap_err();
    assert!(error.to_string().contains("expected KEY=VALUE"), "{error}");
    let error = sluice_try(&[
        "try",
        "--plugin",
        plugins::KEEP_ALL,
        "--param",
        "a=b",
        "--input",
        &events,
    ])
    .unwrap_err();
    assert!(
        format!("{error:#}").contains("unknown parameter `a`"),
        "{error:#}"
    );
}

#[test]
fn failures_are_counted_not_fatal() {
    let events = events_file();
    let (summary, out, _) = sluice_try(&[
        "try",
        "--plugin",
        plugins::MISBEHAVE,
        "--param",
        "mode=trap",
        "--param",
        "trap-offset=2",
        "--input",
        &events,
    ])
    .unwrap();
    assert_eq!(summary.failed["plugin_trapped"], 1);
    assert_eq!(summary.kept, 9);
    assert!(
        out.contains("line 3: failed in misbehave: plugin_trapped: "),
        "{out}"
    );
    assert!(out.contains("deliberate trap at offset 2"), "{out}");

    let missing =
        sluice_try(&["try", "--plugin", "/nonexistent.wasm", "--input", &events]).unwrap_err();
    assert!(
        format!("{missing:#}").contains("cannot read plugin"),
        "{missing:#}"
    );
}

#[test]
fn the_example_stages_file_parses_and_runs() {
    let path = repo_root().join("examples/plugins/stages.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut stages: StagesFile = toml::from_str(&text).unwrap();
    assert_eq!(stages.stages.len(), 2);
    assert_eq!(stages.runtime.chunk_size, 512);
    // Point the example at the plugins this test build made, and run it.
    stages.stages[0].plugin = plugins::CLICKSTREAM_VALIDATOR.into();
    stages.stages[1].plugin = plugins::CLICKSTREAM_ENRICHER.into();
    let dir = std::env::temp_dir().join(format!("sluice-stages-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rewritten = text
        .replace(
            "../../udfs/target/wasm32-wasip2/release/clickstream_validator.wasm",
            plugins::CLICKSTREAM_VALIDATOR,
        )
        .replace(
            "../../udfs/target/wasm32-wasip2/release/clickstream_enricher.wasm",
            plugins::CLICKSTREAM_ENRICHER,
        );
    let file = dir.join("stages.toml");
    std::fs::write(&file, rewritten).unwrap();
    let events = events_file();
    let (summary, _, _) = sluice_try(&[
        "try",
        "--stages",
        file.to_str().unwrap(),
        "--input",
        &events,
    ])
    .unwrap();
    assert_eq!((summary.rewritten, summary.rejected_total()), (5, 5));
    std::fs::remove_dir_all(dir).unwrap();
}

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

/// Runs `sluice plugin test ARGS…`; returns the outcome and standard output.
fn plugin_test(args: &[&str]) -> anyhow::Result<(cli::plugin::test::Outcome, String)> {
    let all = ["sluice", "plugin", "test"]
        .into_iter()
        .chain(args.iter().copied());
    let invocation = cli::parse(all)?;
    let Command::Plugin(plugin) = &invocation.cli.command else {
        panic!("not plugin")
    };
    let cli::plugin::PluginCommand::Test(test_args) = &plugin.command else {
        panic!("not plugin test")
    };
    let mut out = Vec::new();
    let outcome = cli::plugin::test::run(test_args, &mut out)?;
    Ok((outcome, String::from_utf8(out)?))
}

/// `sluice plugin test` passes the validator's own samples, and lists every sample a plugin
/// judges otherwise (here the keep-all plugin, which rejects nothing), with its line, what
/// was expected, what came, and the event.
#[test]
fn plugin_test_lists_every_sample_judged_otherwise() {
    let samples = repo_root().join("udfs/clickstream-validator/samples.jsonl");
    let samples = samples.to_str().unwrap();
    let (outcome, out) =
        plugin_test(&[plugins::CLICKSTREAM_VALIDATOR, "--samples", samples]).unwrap();
    assert_eq!((outcome.samples, outcome.mismatches.len()), (6, 0), "{out}");
    assert!(out.contains("6 samples, 6 as expected, 0 differ"), "{out}");

    let (outcome, out) = plugin_test(&[plugins::KEEP_ALL, "--samples", samples]).unwrap();
    let lines: Vec<usize> = outcome.mismatches.iter().map(|m| m.line).collect();
    assert_eq!(lines, [3, 4, 5, 6], "{out}");
    assert!(
        out.contains(":3: expected rejected (invalid_event_type)\n")
            && out.contains(":3:      got kept\n"),
        "{out}"
    );
    assert!(out.contains("wishlist_add"), "the event is shown: {out}");
    assert!(out.contains("6 samples, 2 as expected, 4 differ"), "{out}");

    // A parameter changes the verdicts: with wishlist_add allowed, sample 3 is kept.
    let (outcome, _) = plugin_test(&[
        plugins::CLICKSTREAM_VALIDATOR,
        "--samples",
        samples,
        "--param",
        "allowed-event-types=page_view,add_to_cart,wishlist_add",
    ])
    .unwrap();
    assert_eq!(outcome.mismatches.len(), 1);
    assert!(outcome.mismatches[0].got.starts_with("kept"));

    // A samples file that is not one is an error, not a pass.
    let broken = std::env::temp_dir().join(format!("sluice-broken-samples-{}", std::process::id()));
    std::fs::write(&broken, "{\"event\": {}, \"verdict\": \"fine\"}\n").unwrap();
    let err = plugin_test(&[plugins::KEEP_ALL, "--samples", broken.to_str().unwrap()]).unwrap_err();
    assert!(
        err.to_string()
            .contains("verdict must be kept, rewritten or rejected"),
        "{err}"
    );
}

/// A lookup file written to a temporary folder, and its path.
fn lookup_file(dir: &std::path::Path, name: &str, lines: &[serde_json::Value]) -> String {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let path = dir.join(format!("{name}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `--lookup NAME=FILE.jsonl` loads a table (later lines win, `null` deletes) that every
/// `--plugin` may read; with `--stages`, the stages' grants apply and a grant of a table no
/// `--lookup` gives is refused before anything runs.
#[test]
fn lookup_tables_from_files() {
    use serde_json::json;
    let dir = temp_dir("lookup");
    let profiles = lookup_file(
        &dir,
        "profiles",
        &[
            json!({"key": "u1", "value": {"tier": "gold"}}),
            json!({"key": "u2", "value": {"tier": "silver"}}),
            json!({"key": "u2", "value": null}),
        ],
    );
    let input = lookup_file(
        &dir,
        "events",
        &[json!({"table": "profiles", "keys": ["u1", "u2"]})],
    );
    let lookup = format!("profiles={profiles}");
    let (summary, out, _) = sluice_try(&[
        "try",
        "--json",
        "--plugin",
        plugins::LOOKUP_PROBE,
        "--lookup",
        &lookup,
        "--input",
        &input,
    ])
    .unwrap();
    assert_eq!(summary.rewritten, 1, "{out}");
    let verdict: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(
        verdict["value"],
        json!({"values": [{"tier": "gold"}, null]})
    );

    let stages = dir.join("stages.toml");
    std::fs::write(
        &stages,
        format!(
            "[[stages]]\nname = \"probe\"\nplugin = {:?}\ngrants = {{ lookups = [\"profiles\", \"products\"] }}\n",
            plugins::LOOKUP_PROBE
        ),
    )
    .unwrap();
    let stages = stages.display().to_string();
    let error = sluice_try(&[
        "try", "--stages", &stages, "--lookup", &lookup, "--input", &input,
    ])
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "lookup tables granted but not declared in [[lookups]]: stage `probe` is granted `products`"
    );
}

/// Generated events of `shape`, as (key, JSON value).
fn generated(shape: sluice::generate::Shape, count: usize) -> Vec<(String, Value)> {
    let config = sluice::generate::GeneratorConfig {
        shape,
        invalid_share: 0.0,
        ..Default::default()
    };
    sluice::generate::Generator::new(config)
        .take(count)
        .map(|e| (e.key, serde_json::from_str(&e.value).unwrap()))
        .collect()
}

/// The retail enricher, run by `sluice try --lookup` on generated retail events with
/// tables of generated customers and products, adds each known user's tier and country
/// and each known product's list price, and leaves the fields of unknown keys absent; a
/// stage not granted `products` gets the lookup error, naming the table and the stage.
#[test]
fn the_retail_enricher_reads_profiles_and_products() {
    use serde_json::json;
    use sluice::generate::Shape;
    let dir = temp_dir("enrich");
    let events = generated(Shape::Retail, 40);
    let user = |e: &Value| e["user_id"].as_str().unwrap().to_string();
    let unknown_user = user(&events[0].1);
    let wanted: std::collections::HashSet<String> = events.iter().map(|e| user(&e.1)).collect();
    let customers: Vec<(String, Value)> = generated(Shape::Customers, 50_000)
        .into_iter()
        .filter(|(k, _)| wanted.contains(k) && *k != unknown_user)
        .collect();
    let entries = |table: &[(String, Value)]| -> Vec<Value> {
        table
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect()
    };
    let profiles = lookup_file(&dir, "profiles", &entries(&customers));
    // The catalog without its last product, P400.
    let products = lookup_file(&dir, "products", &entries(&generated(Shape::Products, 3)));
    let values: Vec<Value> = events.iter().map(|e| e.1.clone()).collect();
    let input = lookup_file(&dir, "events", &values);
    let (profiles, products) = (
        format!("profiles={profiles}"),
        format!("products={products}"),
    );
    let (summary, out, _) = sluice_try(&[
        "try",
        "--json",
        "--plugin",
        plugins::RETAIL_ENRICHER,
        "--lookup",
        &profiles,
        "--lookup",
        &products,
        "--input",
        &input,
    ])
    .unwrap();
    assert_eq!(
        (summary.rejected_total(), summary.failed_total()),
        (0, 0),
        "{out}"
    );
    let tier_of: std::collections::HashMap<&str, &Value> = customers
        .iter()
        .map(|(k, v)| (k.as_str(), &v["tier"]))
        .collect();
    let mut seen = (0, 0);
    for (line, event) in out.lines().zip(&values) {
        let verdict: Value = serde_json::from_str(line).unwrap();
        let value = verdict.get("value").unwrap_or(event);
        let user = user(event);
        assert_eq!(
            value.get("tier"),
            tier_of.get(user.as_str()).copied(),
            "{line}"
        );
        assert_eq!(
            value.get("country").is_some(),
            user != unknown_user,
            "{line}"
        );
        match event.get("product_id").and_then(Value::as_str) {
            Some("P400") => assert!(value.get("list_price").is_none(), "{line}"),
            Some(_) => {
                assert!(value["list_price"].is_number(), "{line}");
                seen.1 += 1;
            }
            None => {}
        }
        seen.0 += usize::from(user == unknown_user);
    }
    assert!(
        seen.0 >= 1 && seen.1 >= 3,
        "the events cover both cases: {seen:?}"
    );

    // A stage granted only `profiles`: every event with a product is rejected.
    let stages = dir.join("profiles-only.toml");
    std::fs::write(
        &stages,
        format!(
            "[[stages]]\nname = \"enrich\"\nplugin = {:?}\ngrants = {{ lookups = [\"profiles\"] }}\n",
            plugins::RETAIL_ENRICHER
        ),
    )
    .unwrap();
    let stages = stages.display().to_string();
    let (summary, out, _) = sluice_try(&[
        "try", "--stages", &stages, "--lookup", &profiles, "--lookup", &products, "--input", &input,
    ])
    .unwrap();
    let with_product = values
        .iter()
        .filter(|v| v.get("product_id").is_some())
        .count();
    assert_eq!(
        summary.rejected.get("lookup_failed"),
        Some(&with_product),
        "{out}"
    );
    assert!(
        out.contains(
            ": lookup_failed: not_granted: stage `enrich` is not granted lookup table `products`"
        ),
        "{out}"
    );
}
