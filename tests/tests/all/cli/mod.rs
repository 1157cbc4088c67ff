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

mod plugin;
mod process;

pub(crate) use process::sluice_with_env;
